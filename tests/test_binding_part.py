"""The tcp model's solve reads only links that can bind (issue 28, result-neutral): the component built with
entries on the links that may bind (:func:`component_kept_at`) against the full one, the links a solve may find
binding (:func:`update_binding`'s ``may_bind``) and the binding part of a component (:func:`binding_part`), by
hand and on random tables."""

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from netlab.network.slots import Component, Entries, SlotTable, component_at, component_kept_at
from netlab.network.tcp.incremental import binding_part, update_binding

from test_slots_index import _demand, scratch_clear, tables


def _kept_view(full: Component, keep: np.ndarray):
    """What the kept component must be: the full one's entries on ``keep`` links, links renumbered in the order
    first met (the full one's order restricted to them)."""
    links = [g for g in full.links.tolist() if keep[g]]
    local = {g: i for i, g in enumerate(links)}
    sel = [x for x in range(len(full.entries.job)) if keep[full.links[full.entries.link[x]]]]
    return (links, [int(full.entries.job[x]) for x in sel], [local[int(full.links[full.entries.link[x]])] for x in sel],
            [float(full.entries.weight[x]) for x in sel])


@settings(max_examples=300, deadline=None)
@given(tables(), st.data())
def test_the_kept_component_is_the_full_one_on_the_kept_links(case, data):
    table, couple, seeds, n_links = case
    keep = np.array(data.draw(st.lists(st.booleans(), min_size=n_links, max_size=n_links))) | couple
    touched = np.zeros(n_links, dtype=bool)
    touched[seeds] = True
    full_touched = touched.copy()
    full = component_at(seeds, full_touched, table.rows, couple)
    got, all_links = component_kept_at(seeds, touched, table.rows, couple, keep)
    assert touched.tolist() == full_touched.tolist() and scratch_clear(table)
    assert got.rows.tolist() == full.rows.tolist()
    assert all_links.tolist() == full.links.tolist()  # every link of its rows, in the same order
    links, job, link, weight = _kept_view(full, keep)
    assert got.links.tolist() == links
    assert got.entries.job.tolist() == job and got.entries.link.tolist() == link
    assert got.entries.weight.tolist() == weight


def test_may_bind_by_hand():
    # capacity 100 on each link; offered and running jobs per link:
    offered = np.array([100.0, 99.99995, 99.99995, 99.9, 250.0, 100.0 * (1 + 2e-9)])
    jobs = np.array([1, 2, 1, 5, 1, 3])
    cap = np.full(6, 100.0)
    binding, may = np.zeros(6, bool), np.zeros(6, bool)
    update_binding(binding, may, np.arange(6), offered, cap, jobs)
    # 0: one job at exactly its capacity (its isolated rate's own link): neither
    # 1: two jobs, 5e-7 below capacity: may bind (a component's sum may round above), does not bind now
    # 2: the same load from one job: a job alone never binds
    # 3: 1e-3 below capacity: neither
    # 4: above capacity: binds (whatever the job count)
    # 5: 2e-9 above capacity, three jobs: binds
    assert binding.tolist() == [False, False, False, False, True, True]
    assert may.tolist() == [False, True, False, False, True, True]
    # only the links named are updated
    binding[:], may[:] = False, False
    update_binding(binding, may, np.array([4]), offered, cap, jobs)
    assert binding.tolist() == [False] * 4 + [True, False] and may.tolist() == binding.tolist()


def test_binding_part_by_hand():
    """Two jobs (rows 0 and 1) over three links of capacity 10: per-flow rate caps 4 and 6 (isolated 5 and 8:
    the smaller counts), weights as given. Offered per link: link 7: 1 x 4 + 1 x 6 = 10 (not above 10);
    link 8: 2 x 4 + 1 x 6 = 14 (binds); link 9: 1 x 6 = 6 (not)."""
    table = SlotTable(rows=2, width=3)
    table.add(0, _demand(0, [7, 8], [1.0, 2.0]))
    table.add(1, _demand(1, [8, 7, 9], [1.0, 1.0, 1.0]))
    t = table.rows
    t.rate_cap_gbps[:2], t.iso_rate_gbps[:2] = [4.0, 9.0], [5.0, 6.0]
    comp = component_at(np.array([8]), np.zeros(10, bool), t, np.ones(10, bool))
    assert comp.links.tolist() == [7, 8, 9]  # first met: row 0's links, then row 1's new one
    sub, kept = binding_part(comp, np.full(3, 10.0), t)
    assert kept.tolist() == [1]  # link 8 only
    assert sub.job.tolist() == [0, 1] and sub.link.tolist() == [0, 0] and sub.weight.tolist() == [2.0, 1.0]
    # at capacity 14 exactly link 8 does not bind either (the test is offered > capacity x (1 + 1e-9))
    sub, kept = binding_part(comp, np.full(3, 14.0), t)
    assert kept.tolist() == [] and len(sub.job) == 0
