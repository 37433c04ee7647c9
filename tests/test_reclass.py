"""A policy's class / weight / cap changes taken at once (``Fabric.reallocate_many``,
``TcpNetwork.change_allocations``, ``tcp/reclass.py``).

The bar: the same state, bit for bit, as the changes made one by one through ``change`` (what the fabric does for
a model without its own ``change_allocations``), and hand-computed sums on a small leaf-spine.
"""

from __future__ import annotations

import numpy as np
import pytest

from netlab.network.model import NetworkModel
from netlab.network.tcp import TcpNetwork
from netlab.sched import NetAllocation
from netlab.sim.fabric import Fabric
from test_relink import GBIT_BYTES, _demand, _state, _topo


class OneByOne(TcpNetwork):
    """``tcp`` taking a decision's changes one by one (``NetworkModel``'s way)."""

    change_allocations = NetworkModel.change_allocations


def _rows(fabric):
    t = fabric.model._slots.rows
    return [(jid, t.rate_cap_gbps[r], t.share[r], int(t.priority[r]), bool(t.own_queue[r]), t.iso_rate_gbps[r])
            for jid, r in sorted(fabric.model._slots._row.items())]


def _two_on_spine_0():
    """Jobs 1 (host 0 -> 2) and 2 (1 -> 3) both through spine 0, solved: the fabric, its model, their demands."""
    topo = _topo()
    fabric = Fabric(topo, TcpNetwork(jitter=0.0), record_links=False)
    demands = [_demand(topo, jid, [pair], 0) for jid, pair in ((1, (0, 2)), (2, (1, 3)))]
    for d in demands:
        fabric.join(d.job_id, d, 0.0)
    fabric.solve(0.0)
    return fabric, fabric.model, demands


def test_a_cap_a_class_and_a_weight_at_once_hand_computed():
    fabric, net, (a, b) = _two_on_spine_0()
    up0 = np.intersect1d(a.links, b.links)  # ToR 0 -> spine 0 -> ToR 1, 5 Gbit/s each; both jobs alone at 5
    assert net._offered[up0].tolist() == [10.0, 10.0] and net._binding[up0].all()
    fabric.reallocate_many([(1, NetAllocation(priority=3, weight=0.5, paths=(0,))),
                            (2, NetAllocation(rate_cap_gbps=2.0, paths=(0,)))], 1.0)
    # job 2 alone now offers its cap, 2 Gbit/s: 5 + 2 on the shared cables (still above 5: binding), 2 on its own
    assert net._offered[up0].tolist() == [7.0, 7.0] and net._binding[up0].all()
    only_b = np.setdiff1d(b.links, a.links)
    assert net._offered[only_b].tolist() == [2.0] * len(only_b)
    assert _rows(fabric) == [(1, np.inf, 0.5, 3, True, 5.0), (2, 2.0, 1.0, 0, False, 5.0)]
    assert net.pending and net._touched[a.links].all() and net._touched[b.links].all()
    # the cap lifted again, the class and weight kept: nothing to change for job 1, job 2 back to 5 on its links
    fabric.reallocate_many([(1, NetAllocation(priority=3, weight=0.5, paths=(0,))),
                            (2, NetAllocation(paths=(0,)))], 2.0)
    assert net._offered[up0].tolist() == [10.0, 10.0] and net._offered[only_b].tolist() == [5.0] * len(only_b)
    assert _rows(fabric)[1] == (2, np.inf, 1.0, 0, False, 5.0)


def test_a_decisions_changes_at_once_leave_what_they_leave_one_by_one():
    """Three jobs on a leaf-spine given classes, weights and caps in batches (one refused: nothing changes),
    solved between: every per-link sum, the rows, their lists and the solves' answers are identical."""
    topo = _topo()
    runs = []
    for model in (TcpNetwork(jitter=0.0), OneByOne(jitter=0.0)):
        fabric = Fabric(topo, model, record_links=False)
        for jid, pairs, kw in ((1, [(0, 2)], {}), (2, [(1, 3)], {"flow_bytes": 0.7 * GBIT_BYTES}),
                               (3, [(2, 0), (3, 1)], {"compute_s": 0.3})):
            fabric.join(jid, _demand(topo, jid, pairs, 0, **kw), 0.0)
        out = [fabric.solve(0.0)]
        batches = [
            [(1, NetAllocation(priority=1, paths=(0,))), (2, NetAllocation(weight=0.3, paths=(0,)))],
            [(3, NetAllocation(rate_cap_gbps=1.5, paths=(0,))), (1, NetAllocation(priority=1, paths=(0,)))],
            [(2, NetAllocation(priority=2, weight=2.0, rate_cap_gbps=0.7, paths=(0,))),
             (3, NetAllocation(paths=(0,))), (1, NetAllocation(weight=0.9, paths=(0,)))],
            [(1, NetAllocation(paths=(0,)))],
        ]
        for i, batch in enumerate(batches):
            now = 1.0 + i - (i >= 2)  # batches 1 and 2 in one instant
            fabric.reallocate_many(batch, now)
            out += [_state(fabric), _rows(fabric)]
            if i != 1:
                out += [fabric.solve(now), _state(fabric)]
        runs.append(out)
    assert runs[0] == runs[1]


def test_a_new_path_in_a_batch_is_refused_before_anything_changes():
    fabric, net, _ = _two_on_spine_0()
    before = _state(fabric), _rows(fabric)
    with pytest.raises(Exception, match="path choice"):
        fabric.reallocate_many([(1, NetAllocation(priority=2, paths=(0,))), (2, NetAllocation(paths=(1,)))], 1.0)
    assert (_state(fabric), _rows(fabric)) == before
