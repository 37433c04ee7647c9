"""The tcp model's solve reads only links that can bind (issue 28, result-neutral): the component walked and built
with entries on the links that may bind (its rows' kept places: :func:`component_rows` with ``kept``,
:func:`binding_entries`) against the full one, the links a solve may find binding (:func:`update_binding`'s
``may_bind``) and the binding part of a component (:func:`binding_entries`), by hand and on random tables."""

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from netlab.network.slots import Component, SlotTable, component_at, component_rows, keep_link
from netlab.network.tcp.incremental import binding_entries, update_binding

#: a capacity under which every link binds: :func:`binding_entries` then keeps every entry on a kept place
EVERY = -1.0


def _kept_component(seeds, touched, t, couple, capacity):
    """The component walked over the rows' kept places: (rows, its kept links, entries on those that bind under
    ``capacity`` (per link), which of the kept links they are)."""
    rows = component_rows(seeds, touched, t, couple, True)
    links, sub, kept = binding_entries(rows, t, capacity)
    return rows, links, sub, kept

from test_slots_index import _demand, scratch_clear


def _kept_view(full: Component, keep: np.ndarray):
    """What the kept component must be: the full one's entries on ``keep`` links, links renumbered in the order
    first met (the full one's order restricted to them)."""
    links = [g for g in full.links.tolist() if keep[g]]
    local = {g: i for i, g in enumerate(links)}
    sel = [x for x in range(len(full.entries.job)) if keep[full.links[full.entries.link[x]]]]
    return (links, [int(full.entries.job[x]) for x in sel], [local[int(full.links[full.entries.link[x]])] for x in sel],
            [float(full.entries.weight[x]) for x in sel])


def _kept(t, r) -> list:
    """Row ``r``'s kept places."""
    return t.node_kept[t.node_base[r]:t.node_base[r] + t.n_kept[r]].tolist()


def _kept_places_hold(table: SlotTable, keep) -> bool:
    """Every joined row's kept places are its places on ``keep`` links, ascending (what :func:`keep_link` keeps)."""
    t = table.rows
    return all(_kept(t, r) == [k for k in range(t.n_links[r]) if keep[t.links[r, k]]] for r in np.flatnonzero(t.joined))


@st.composite
def kept_tables(draw):
    """A table after random joins (each with the keep mask of its time), leaves and links joining or leaving the
    kept links (each through :func:`keep_link`, as the tcp model's ``may_bind`` flips), and the final mask."""
    n_links = draw(st.integers(1, 40))
    table, keep = SlotTable(rows=2, width=2), np.zeros(n_links, dtype=bool)
    alive, next_id = [], 0
    for _ in range(draw(st.integers(0, 60))):
        op = draw(st.integers(0, 3))
        if op == 0 and alive:
            table.remove(alive.pop(draw(st.integers(0, len(alive) - 1))))
        elif op == 1:
            g = draw(st.integers(0, n_links - 1))
            keep[g] = not keep[g]
            keep_link(g, keep[g], table.rows)
        else:
            links = draw(st.lists(st.integers(0, n_links - 1), min_size=1, max_size=6, unique=True))
            weights = draw(st.lists(st.floats(0.5, 4.0), min_size=len(links), max_size=len(links)))
            table.add(next_id, _demand(next_id, links, weights), keep=keep)
            alive.append(next_id)
            next_id += 1
    return table, keep


@settings(max_examples=300, deadline=None)
@given(kept_tables(), st.data())
def test_the_kept_component_is_the_full_one_on_the_kept_links(case, data):
    table, keep = case
    n_links = len(keep)
    assert _kept_places_hold(table, keep)
    couple = keep & np.array(data.draw(st.lists(st.booleans(), min_size=n_links, max_size=n_links)))
    seeds = np.array(data.draw(st.lists(st.integers(0, n_links - 1), max_size=8)), dtype=np.int64)
    touched = np.zeros(n_links, dtype=bool)
    touched[seeds] = True
    full_touched = touched.copy()
    full = component_at(seeds, full_touched, table.rows, couple)
    rows, got_links, sub, kept = _kept_component(seeds, touched, table.rows, couple, np.full(n_links, EVERY))
    assert touched.tolist() == full_touched.tolist() and scratch_clear(table)
    assert rows.tolist() == full.rows.tolist()
    links, job, link, weight = _kept_view(full, keep)
    assert got_links.tolist() == links and kept.tolist() == list(range(len(links)))
    assert sub.job.tolist() == job and sub.link.tolist() == link
    assert sub.weight.tolist() == weight


@settings(max_examples=300, deadline=None)
@given(kept_tables(), st.data())
def test_the_binding_part_is_the_kept_component_on_the_links_its_offered_sums_exceed(case, data):
    """Random rates and capacities: the entries :func:`binding_entries` keeps are those of the kept component on
    the links whose offered sum (weight x the row's least of cap and isolated rate, summed in the entries' order,
    here in Python) exceeds the capacity by more than 1e-9 of it, renumbered in the order first met."""
    table, keep = case
    n_links = len(keep)
    t = table.rows
    joined = np.flatnonzero(t.joined)
    t.rate_cap_gbps[joined] = data.draw(st.lists(st.sampled_from([1.0, 2.5, 4.0, np.inf]), min_size=len(joined),
                                                 max_size=len(joined)))
    t.iso_rate_gbps[joined] = data.draw(st.lists(st.floats(0.5, 5.0), min_size=len(joined), max_size=len(joined)))
    capacity = np.array(data.draw(st.lists(st.floats(0.5, 12.0), min_size=n_links, max_size=n_links)))
    seeds = np.array(data.draw(st.lists(st.integers(0, n_links - 1), max_size=8)), dtype=np.int64)
    touched = np.zeros(n_links, dtype=bool)
    rows, links, sub, kept = _kept_component(seeds, touched.copy(), t, keep, capacity)
    _, _, every, _ = _kept_component(seeds, touched.copy(), t, keep, np.full(n_links, EVERY))
    offered = [0.0] * len(links)
    for i, b, w in zip(every.job.tolist(), every.link.tolist(), every.weight.tolist()):
        r = rows[i]
        offered[b] += w * min(t.rate_cap_gbps[r], t.iso_rate_gbps[r])
    binds = [b for b in range(len(links)) if offered[b] > capacity[links[b]] * (1.0 + 1e-9)]
    assert kept.tolist() == binds and scratch_clear(table)
    local = {b: n for n, b in enumerate(binds)}
    sel = [x for x, b in enumerate(every.link.tolist()) if b in local]
    assert sub.job.tolist() == [int(every.job[x]) for x in sel]
    assert sub.link.tolist() == [local[int(every.link[x])] for x in sel]
    assert sub.weight.tolist() == [float(every.weight[x]) for x in sel]


def test_kept_places_by_hand():
    """Rows 0 (links 3, 1, 2) and 1 (links 2, 5); links 1 and 2 kept at their joins, then 3 joins the kept links
    and 2 leaves them, then 5 joins (row 1 only) and row 0 leaves."""
    table, keep = SlotTable(rows=2, width=2), np.zeros(6, dtype=bool)
    keep[[1, 2]] = True
    table.add(0, _demand(0, [3, 1, 2]), keep=keep)
    table.add(1, _demand(1, [2, 5]), keep=keep)
    t = table.rows
    assert _kept(t, 0) == [1, 2] and _kept(t, 1) == [0]
    keep_link(3, True, t)  # row 0's place 0: at the front
    keep_link(2, False, t)  # row 0's place 2 and row 1's place 0 go
    t = table.rows
    assert _kept(t, 0) == [0, 1] and t.n_kept[1] == 0
    keep_link(5, True, t)
    table.remove(0)
    assert t.n_kept[0] == 0 and _kept(t, 1) == [1]
    keep_link(40, True, t)  # a link beyond the index: no row on it, nothing to do


def test_may_bind_by_hand():
    # capacity 100 on each link; offered and running jobs per link:
    offered = np.array([100.0, 99.99995, 99.99995, 99.9, 250.0, 100.0 * (1 + 2e-9)])
    jobs = np.array([1, 2, 1, 5, 1, 3])
    cap = np.full(6, 100.0)
    binding, may = np.zeros(6, bool), np.zeros(6, bool)
    solved, keep = np.zeros(6, bool), np.zeros(6, bool)  # no link holds a solve's values: keep follows may
    t = SlotTable().rows  # no joined row: no kept places to keep
    update_binding(binding, may, np.arange(6), offered, cap, jobs, t, solved, keep)
    # 0: one job at exactly its capacity (its isolated rate's own link): neither
    # 1: two jobs, 5e-7 below capacity: may bind (a component's sum may round above), does not bind now
    # 2: the same load from one job: a job alone never binds
    # 3: 1e-3 below capacity: neither
    # 4: above capacity: binds (whatever the job count)
    # 5: 2e-9 above capacity, three jobs: binds
    assert binding.tolist() == [False, False, False, False, True, True]
    assert may.tolist() == [False, True, False, False, True, True] and keep.tolist() == may.tolist()
    # only the links named are updated
    binding[:], may[:], keep[:] = False, False, False
    update_binding(binding, may, np.array([4]), offered, cap, jobs, t, solved, keep)
    assert binding.tolist() == [False] * 4 + [True, False] and may.tolist() == binding.tolist()
    # a joined row on links 5, 0, 1, 4 keeps its places on the kept links as they flip
    table = SlotTable(rows=2, width=4)
    table.add(7, _demand(7, [5, 0, 1, 4]), keep=keep)  # may_bind now: link 4 only (its place 3)
    assert _kept(table.rows, 0) == [3]
    update_binding(binding, may, np.arange(6), offered, cap, jobs, table.rows, solved, keep)  # 1, 4, 5 may bind
    assert _kept(table.rows, 0) == [0, 2, 3]
    offered[4] = 0.0
    update_binding(binding, may, np.array([4, 4]), offered, cap, jobs, table.rows, solved, keep)  # (one flip)
    assert _kept(table.rows, 0) == [0, 2]
    # link 5 holds a solve's values: when it can no longer bind it stays kept (so a re-solve of the row finds and
    # clears it), and it may bind again without a flip of the places
    solved[5] = True
    offered[5] = 50.0
    update_binding(binding, may, np.array([5]), offered, cap, jobs, table.rows, solved, keep)
    assert not may[5] and keep[5] and _kept(table.rows, 0) == [0, 2]
    offered[5] = 250.0
    update_binding(binding, may, np.array([5]), offered, cap, jobs, table.rows, solved, keep)
    assert may[5] and keep[5] and _kept(table.rows, 0) == [0, 2]


def test_binding_part_by_hand():
    """Two jobs (rows 0 and 1) over three links of capacity 10: per-flow rate caps 4 and 6 (isolated 5 and 8:
    the smaller counts), weights as given. Offered per link: link 7: 1 x 4 + 1 x 6 = 10 (not above 10);
    link 8: 2 x 4 + 1 x 6 = 14 (binds); link 9: 1 x 6 = 6 (not)."""
    table, keep = SlotTable(rows=2, width=3), np.ones(10, bool)
    table.add(0, _demand(0, [7, 8], [1.0, 2.0]), keep=keep)
    table.add(1, _demand(1, [8, 7, 9], [1.0, 1.0, 1.0]), keep=keep)
    t = table.rows
    t.rate_cap_gbps[:2], t.iso_rate_gbps[:2] = [4.0, 9.0], [5.0, 6.0]
    rows = component_rows(np.array([8]), np.zeros(10, bool), t, keep, True)
    links, sub, kept = binding_entries(rows, t, np.full(10, 10.0))
    assert links.tolist() == [7, 8, 9]  # first met: row 0's links, then row 1's new one
    assert kept.tolist() == [1]  # link 8 only
    assert sub.job.tolist() == [0, 1] and sub.link.tolist() == [0, 0] and sub.weight.tolist() == [2.0, 1.0]
    # at capacity 14 exactly link 8 does not bind either (the test is offered > capacity x (1 + 1e-9))
    links, sub, kept = binding_entries(rows, t, np.full(10, 14.0))
    assert links.tolist() == [7, 8, 9] and kept.tolist() == [] and len(sub.job) == 0
    # at capacity 5 every link binds (10, 14 and 6 offered): every entry, row by row, links numbered as first met
    links, sub, kept = binding_entries(rows, t, np.full(10, 5.0))
    assert links.tolist() == [7, 8, 9] and kept.tolist() == [0, 1, 2]
    assert sub.job.tolist() == [0, 0, 1, 1, 1] and sub.link.tolist() == [0, 1, 1, 0, 2]
    assert sub.weight.tolist() == [1.0, 2.0, 1.0, 1.0, 1.0]
    assert scratch_clear(table)


def test_write_back_clears_only_links_a_solve_wrote_and_marks_those_it_writes():
    """Row 0 on links 0, 1, 2 (link 1 may bind and binds in the solve), seed link 3 (a leaving job's). Before: link 2
    holds an old solve's overload 5 and queue 0.5 (written: ``solved``; it can no longer bind, but the row keeps
    its place there: ``keep = may_bind | solved``), link 3 likewise (7, 0.7); link 0 was never written (0.0).
    After: links 2 and 3 cleared, no longer marked and no longer kept, link 1 holds the solve's 2.0 / 0.25 and is
    marked, link 0 untouched; the touched mask is cleared on the component's links (the caller clears the seeds)."""
    from netlab.network.links import LinkArrays
    from netlab.network.tcp.components import Solved
    from netlab.network.tcp.incremental import write_back

    may_bind = np.array([False, True, False, False])
    table, keep = SlotTable(rows=2, width=3), np.array([False, True, True, True])
    table.add(0, _demand(0, [0, 1, 2]), keep=keep)
    t = table.rows
    touched = np.array([False, True, False, True])
    rows, comp_links, _, _ = _kept_component(np.array([1]), touched, t, keep, np.full(4, EVERY))
    assert comp_links.tolist() == [1, 2]  # link 1 may bind, link 2 holds a solve's values
    n = 4
    links = LinkArrays(np.full(n, 10.0), np.ones(n, np.int64), np.zeros(n), np.array([0.0, 0.0, 5.0, 7.0]),
                       np.array([0.0, 0.0, 0.5, 0.7]))
    solved = np.array([False, False, True, True])
    t.iter_s[0] = 1.0
    out = Solved(np.array([1.0]), np.array([0.5]), np.array([12.0]), np.array([2.0]), np.array([0.25]))
    ids, it, comm, written = write_back(touched, np.array([3]), rows, comp_links, np.array([0]), out, 1e-3, t, links,
                                        solved, may_bind, keep)
    assert links.overload_gbps.tolist() == [0.0, 2.0, 0.0, 0.0] and links.queue_frac.tolist() == [0.0, 0.25, 0.0, 0.0]
    assert solved.tolist() == [False, True, False, False]
    assert keep.tolist() == [False, True, False, False] and _kept(t, 0) == [1]  # cleared links 2, 3 left the kept
    assert touched.tolist() == [False, False, False, True]
    assert ids.tolist() == []  # its time did not move (1.0 as before)
    # named as written: seed 3 and link 2 cleared, link 1 solved; not link 0 (row 0's load unchanged)
    assert written.tolist() == [3, 2, 1]
    # again, the row's time moving 1.0 -> 2.0: its loads change on all its links, named after the solved link
    # (link 1 no longer needs clearing first: written above, it is cleared and written again)
    t.iter_s[0] = 1.0
    out2 = Solved(np.array([2.0]), np.array([1.5]), np.array([6.0]), np.array([3.0]), np.array([0.5]))
    ids, it, comm, written = write_back(touched, np.array([3]), rows, comp_links, np.array([0]), out2, 1e-3, t,
                                        links, solved, may_bind, keep)
    assert ids.tolist() == [0] and it.tolist() == [2.0]
    assert written.tolist() == [1, 1, 0, 1, 2]
    assert links.overload_gbps.tolist() == [0.0, 3.0, 0.0, 0.0]


def test_a_relinked_row_keeps_its_places_on_the_links_that_may_bind():
    """Jobs re-routed in place (``TcpNetwork.relink``) back and forth on a small leaf-spine, solved between: after
    every step each joined row's kept places are its places on the kept links, those that may bind or hold a
    solve's values (the rows on the links whose ``keep`` flipped updated, the moved row's rebuilt on its new
    links)."""
    import test_relink as case
    from netlab.network.tcp import TcpNetwork
    from netlab.sim.fabric import Fabric

    topo = case._topo()
    net = TcpNetwork(jitter=0.0)
    fabric = Fabric(topo, net, record_links=False)
    fabric.join(1, case._demand(topo, 1, [(0, 2)], 0), 0.0)
    fabric.join(2, case._demand(topo, 2, [(1, 3)], 0, flow_bytes=0.7 * case.GBIT_BYTES), 0.0)
    fabric.join(3, case._demand(topo, 3, [(2, 0)], 1, compute_s=0.3), 0.0)
    fabric.solve(0.0)
    assert net._may_bind.any() and _kept_places_hold(net._slots, net._keep)
    assert (net._keep == (net._may_bind | net._solved)).all()
    wide = [(s, d) for s in range(4) for d in range(4) if s // 2 != d // 2]
    for now, (jid, pairs, path) in enumerate(((2, [(1, 3)], 1), (1, [(0, 2)], 1), (2, [(1, 3)], 0), (1, wide, 0),
                                              (3, [(2, 0)], 0), (2, wide, 1)), start=1):
        d = case._demand(topo, jid, pairs, path)
        fabric.reallocate(jid, d.allocation, float(now), demand=d)
        assert _kept_places_hold(net._slots, net._keep)
        fabric.solve(float(now))
        assert _kept_places_hold(net._slots, net._keep) and (net._keep == (net._may_bind | net._solved)).all()
