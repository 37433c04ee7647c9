"""The slot table's link -> rows index and the component walk over it (issue 28: a change costs in proportion to
its component, not to the table): the index by hand through joins, leaves and a reused row, and the walk against
the sweep over every row it replaced, on random tables."""

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from netlab.network.model import CommDemand
from netlab.network.slots import Component, Entries, SlotTable, component, component_at


def _demand(job_id: int, links, weights=None) -> CommDemand:
    links = np.asarray(links, dtype=np.int64)
    w = np.ones(len(links)) if weights is None else np.asarray(weights, dtype=float)
    return CommDemand(job_id, links, w, 1e9, 0.1)


def rows_on(table: SlotTable, g: int) -> list[int]:
    """The rows on link ``g``'s list, in list order (the index's walk), each node checked both ways: its row has
    ``g`` at the node's place in its block, and the node before it is the one the walk came from."""
    t = table.rows
    out, e, prev = [], (t.link_head[g] if g < len(t.link_head) else -1), -1
    while e >= 0:
        r = int(t.node_row[e])
        assert t.joined[r] and t.links[r, e - t.node_base[r]] == g and t.node_prev[e] == prev
        out.append(r)
        prev, e = e, t.node_next[e]
    return out


def scratch_clear(table: SlotTable) -> bool:
    t = table.rows
    return not t.member.any() and not t.link_seen.any() and (t.link_local == -1).all()


def test_joins_head_the_lists_of_their_links_and_leaves_unlink_them():
    table = SlotTable(rows=4, width=2)
    table.add(10, _demand(10, [0, 1]))  # row 0
    table.add(11, _demand(11, [1, 2]))  # row 1
    table.add(12, _demand(12, [1]))  # row 2
    # by hand: each join goes to the head of its links' lists
    assert rows_on(table, 0) == [0] and rows_on(table, 1) == [2, 1, 0] and rows_on(table, 2) == [1]
    assert rows_on(table, 3) == [] and rows_on(table, 99) == []  # no job ever there (99: beyond the index)
    table.remove(11)  # the middle of link 1's list and the only row of link 2
    assert rows_on(table, 1) == [2, 0] and rows_on(table, 2) == []
    table.remove(12)  # the head of link 1's list
    assert rows_on(table, 1) == [0] and rows_on(table, 0) == [0]
    t = table.rows  # the freed rows' nodes point nowhere; blocks of 2, 2 and 1 nodes (powers of two), in join order
    assert t.node_base[:3].tolist() == [0, 2, 4] and t.node_cap[:3].tolist() == [2, 2, 1]
    assert (t.node_next[2:5] == -1).all() and (t.node_prev[2:5] == -1).all() and (t.node_row[2:5] == -1).all()
    assert t.node_row.dtype == np.int32  # (half the memory of int64: a table never holds 2**31 nodes)


def test_a_freed_row_reused_is_listed_on_its_new_links_only():
    table = SlotTable(rows=4, width=2)
    table.add(1, _demand(1, [0, 1]))  # row 0
    table.add(2, _demand(2, [1, 2]))  # row 1
    table.remove(1)
    assert table.add(3, _demand(3, [2, 3])) == 0  # row 0 again, now on links 2 and 3, in its block of 2 nodes
    assert table.rows.node_base[0] == 0 and table._nodes_used == 4
    assert rows_on(table, 0) == [] and rows_on(table, 1) == [1]
    assert rows_on(table, 2) == [0, 1] and rows_on(table, 3) == [0]
    # a batch claim (not joined) is on no list
    table.claim([_demand(4, [0, 1])])
    assert rows_on(table, 0) == [] and rows_on(table, 1) == [1]
    table.remove(3)  # row 0 again with three links: a new block of 4 after the others
    assert table.add(5, _demand(5, [0, 1, 2])) == 0 and table.rows.node_base[0] == 4 and table._nodes_used == 8
    assert rows_on(table, 0) == [0] and rows_on(table, 1) == [0, 1] and rows_on(table, 3) == []
    # the block row 0 outgrew (2 nodes at 0) goes to the next row needing 2 nodes (row 3: job 4 claimed 2)
    assert table.add(6, _demand(6, [3, 4])) == 3 and table.rows.node_base[3] == 0 and table._nodes_used == 8
    assert rows_on(table, 3) == [3] and rows_on(table, 4) == [3] and rows_on(table, 1) == [0, 1]


def test_growth_keeps_the_index_wider_rows_more_rows_higher_link_ids_and_more_nodes():
    table = SlotTable(rows=2, width=2)
    table.rows = table.rows._replace(**{f: getattr(table.rows, f)[:4] for f in ("node_row", "node_next",
                                                                                 "node_prev")})  # 4 nodes
    table.add(1, _demand(1, [0, 5]))  # row 0
    table.add(2, _demand(2, [5]))  # row 1
    table.add(3, _demand(3, [5, 200]))  # row 2: more rows, a link id beyond the per-link columns
    table.add(4, _demand(4, [7, 6, 5, 4, 3]))  # row 3: wider than 2 (entries renumbered)
    assert len(table.rows.job_id) == 4 and table.rows.links.shape[1] == 5 and len(table.rows.link_head) >= 201
    assert len(table.rows.node_row) >= 2 + 1 + 2 + 8 and table._nodes_used == 13
    assert sorted(rows_on(table, 5)) == [0, 1, 2, 3] and rows_on(table, 200) == [2] and rows_on(table, 7) == [3]
    table.remove(2)
    assert sorted(rows_on(table, 5)) == [0, 2, 3]


def test_a_component_over_two_shared_links_by_hand():
    # Rows: 0 on links 0, 1; 1 on 1, 2; 2 on 2, 3; 3 on 4 alone; 4 on 3, 5 (left). Links 1 and 2 couple, 3 does
    # not. Touching link 0 reaches row 0, through link 1 row 1, through link 2 row 2; link 3 does not couple, so
    # row 4 (on 3) stays out even though row 2 is on 3 too; row 3 is elsewhere.
    table = SlotTable(rows=8, width=2)
    for j, links in enumerate([[0, 1], [1, 2], [2, 3], [4], [3, 5]]):
        table.add(j, _demand(j, links, [1.0 + j, 2.0 + j][:len(links)]))
    couple = np.array([False, True, True, False, False, False])
    touched = np.zeros(6, dtype=bool)
    touched[0] = True
    comp = component_at(np.array([0]), touched, table.rows, couple)
    assert comp.rows.tolist() == [0, 1, 2]
    assert comp.links.tolist() == [0, 1, 2, 3]  # in the order first met over rows 0, 1, 2
    assert comp.entries.job.tolist() == [0, 0, 1, 1, 2, 2]
    assert comp.entries.link.tolist() == [0, 1, 1, 2, 2, 3]
    assert comp.entries.weight.tolist() == [1.0, 2.0, 2.0, 3.0, 3.0, 4.0]
    assert touched.tolist() == [True, True, True, False, False, False]  # widened to the coupling links
    assert scratch_clear(table)
    # row 4 leaves, link 3 couples now: touching link 5 (only row 4 was there) reaches nothing
    table.remove(4)
    couple[3] = True
    touched[:] = False
    touched[5] = True
    assert component(touched, table.rows, couple).rows.tolist() == []
    # touching link 3 reaches row 2 and through the coupling links 3, 2, 1 rows 1 and 0
    touched[:] = False
    touched[3] = True
    assert component(touched, table.rows, couple).rows.tolist() == [0, 1, 2]
    assert scratch_clear(table)


def sweep_component(touched, t, couple) -> Component:
    """The component as found before the index (the code it replaced): sweeps over every row until one adds
    nothing, then the links numbered in the order first met."""
    n_rows = t.joined.shape[0]
    member = np.zeros(n_rows, dtype=bool)
    grew = True
    while grew:
        grew = False
        for r in range(n_rows):
            if not t.joined[r] or member[r]:
                continue
            if any(touched[t.links[r, k]] for k in range(t.n_links[r])):
                member[r] = grew = True
                for k in range(t.n_links[r]):
                    if couple[t.links[r, k]]:
                        touched[t.links[r, k]] = True
    rows = np.flatnonzero(member)
    job = [i for i, r in enumerate(rows) for _ in range(t.n_links[r])]
    glink = [int(t.links[r, k]) for r in rows for k in range(t.n_links[r])]
    weight = [float(t.weights[r, k]) for r in rows for k in range(t.n_links[r])]
    local: dict = {}
    link = [local.setdefault(g, len(local)) for g in glink]
    return Component(rows, np.array(list(local), dtype=np.int64), Entries(np.array(job), np.array(link),
                                                                           np.array(weight)))


@st.composite
def tables(draw):
    """A table after random joins and leaves (freed rows reused, rows and columns grown), a coupling mask, and
    the links a change touched."""
    n_links = draw(st.integers(1, 40))
    table = SlotTable(rows=2, width=2)
    alive, next_id = [], 0
    for _ in range(draw(st.integers(0, 40))):
        if alive and draw(st.booleans()) and draw(st.booleans()):
            table.remove(alive.pop(draw(st.integers(0, len(alive) - 1))))
        else:
            links = draw(st.lists(st.integers(0, n_links - 1), min_size=1, max_size=6, unique=True))
            weights = draw(st.lists(st.floats(0.5, 4.0), min_size=len(links), max_size=len(links)))
            table.add(next_id, _demand(next_id, links, weights))
            alive.append(next_id)
            next_id += 1
    couple = np.array(draw(st.lists(st.booleans(), min_size=n_links, max_size=n_links)))
    seeds = draw(st.lists(st.integers(0, n_links - 1), max_size=8))
    return table, couple, np.array(seeds, dtype=np.int64), n_links


def _same(a: Component, b: Component) -> None:
    assert a.rows.tolist() == b.rows.tolist()
    assert a.links.tolist() == b.links.tolist()
    assert a.entries.job.tolist() == b.entries.job.tolist()
    assert a.entries.link.tolist() == b.entries.link.tolist()
    assert a.entries.weight.tolist() == b.entries.weight.tolist()


@settings(max_examples=300, deadline=None)
@given(tables())
def test_the_walk_finds_what_the_sweep_over_every_row_found(case):
    table, couple, seeds, n_links = case
    touched = np.zeros(n_links, dtype=bool)
    touched[seeds] = True
    want_touched = touched.copy()
    want = sweep_component(want_touched, table.rows, couple)
    got = component_at(seeds, touched, table.rows, couple)
    _same(got, want)
    assert touched.tolist() == want_touched.tolist()
    assert scratch_clear(table)
    # called again on the widened links with the same seeds (the tcp model's exact path): the same component
    _same(component_at(seeds, touched, table.rows, couple), want)
    assert touched.tolist() == want_touched.tolist() and scratch_clear(table)


def test_the_walk_grows_its_rows_and_links_met_and_resumes_where_it_stopped():
    # The walk starts with room for 256 rows and 1,024 links beyond the seeds, grows where a new row finds no
    # room and resumes at that row. A chain of 300 rows (row j on links j and j + 1) has more rows than that;
    # row 300 has 1,100 links (1000-2099), more than the links' first room, and row 301 is on its last one and
    # on link 2100. Every link couples.
    table = SlotTable(rows=2, width=2)
    for j in range(300):
        table.add(j, _demand(j, [j, j + 1]))
    table.add(300, _demand(300, np.arange(1000, 2100)))
    table.add(301, _demand(301, [2099, 2100]))
    n = 2101
    couple = np.ones(n, dtype=bool)
    touched = np.zeros(n, dtype=bool)
    comp = component_at(np.array([0]), touched, table.rows, couple)
    assert comp.rows.tolist() == list(range(300))  # the whole chain, no more
    assert comp.links.tolist() == list(range(301))
    assert np.flatnonzero(touched).tolist() == list(range(301)) and scratch_clear(table)
    touched[:] = False
    comp = component_at(np.array([1000, 0]), touched, table.rows, couple)  # both at once
    assert comp.rows.tolist() == list(range(302))
    assert comp.links.tolist() == list(range(301)) + list(range(1000, 2101))  # first met over rows in order
    assert np.flatnonzero(touched).tolist() == list(range(301)) + list(range(1000, 2101)) and scratch_clear(table)
