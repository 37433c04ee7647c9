"""A re-route in place (``TcpNetwork.relink``, ``slots.relink_row``, ``Fabric.reallocate`` with a demand).

The bar: the same state, bit for bit, as the job leaving and joining again (what the fabric does for a model
that does not relink), and hand-computed sums on a small leaf-spine.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from netlab.network.model import CommDemand
from netlab.network.tcp import TcpNetwork
from netlab.sched import NetAllocation
from netlab.sim.fabric import Fabric
from netlab.topology.builders import leafspine

GBIT_BYTES = 1.25e9  # 10 Gbit per flow per iteration


class LeaveJoin(TcpNetwork):
    """``tcp`` re-routing by leave + join (the fabric's way for a model that does not relink)."""

    capabilities = dataclasses.replace(TcpNetwork.capabilities, relinks=False)


def _topo():
    # 2 racks x 2 hosts, 2 spines, 2:1: each ToR-spine cable 5 Gbit/s, host links 10
    return leafspine(racks=2, hosts_per_rack=2, gpus_per_host=1, host_gbps=10.0, oversub=2.0, spines=2, ecmp="hash")


def _demand(topo, jid, pairs, path, flow_bytes=GBIT_BYTES, compute_s=1.0):
    links, weights = topo.route(tuple(pairs), 0, (path,))
    iso = float(np.min(topo.link_capacity_gbps[links] / weights))
    return CommDemand(jid, links, weights, flow_bytes, compute_s, iso_rate_gbps=iso,
                      allocation=NetAllocation(paths=(path,)))


def test_relink_moves_the_sums_hand_computed():
    topo = _topo()
    net = TcpNetwork(jitter=0.0)
    fabric = Fabric(topo, net, record_links=False)
    a = _demand(topo, 1, [(0, 2)], 0)
    b = _demand(topo, 2, [(1, 3)], 0)
    fabric.join(1, a, 0.0)
    fabric.join(2, b, 0.0)
    moved = dict(zip(*fabric.solve(0.0)[:2]))
    # both through spine 0: 2.5 Gbit/s each on its 5 Gbit/s cables, 4 s of traffic + 1 s of compute
    assert moved == pytest.approx({1: 5.0, 2: 5.0}, rel=1e-6)
    up0 = np.intersect1d(a.links, b.links)  # the cables they share (ToR 0 -> spine 0 -> ToR 1)
    assert len(up0) == 2 and net._offered[up0].tolist() == [10.0, 10.0] and net._binding[up0].all()
    b1 = _demand(topo, 2, [(1, 3)], 1)
    rate = fabric.reallocate(2, b1.allocation, 1.0, demand=b1)
    assert rate == 5.0  # alone on spine 1: its isolated rate at once
    assert net._offered[up0].tolist() == [5.0, 5.0] and not net._binding[up0].any()
    only_b = np.setdiff1d(b1.links, a.links)
    assert net._offered[only_b].tolist() == [5.0] * len(only_b) and net._flows[only_b].tolist() == [1.0] * len(only_b)
    assert fabric.links.jobs[up0].tolist() == [1, 1] and fabric.links.jobs[only_b].tolist() == [1] * len(only_b)
    moved = dict(zip(*fabric.solve(1.0)[:2]))
    assert moved == pytest.approx({1: 3.0}, rel=1e-6)  # A alone on spine 0: 5 Gbit/s, 2 s + 1 s


def _state(fabric):
    net, t = fabric.model, fabric.model._slots.rows
    links = fabric.links
    rows = [(jid, r, t.n_links[r], t.links[r, :t.n_links[r]].tolist(), t.weights[r, :t.n_links[r]].tolist(),
             t.link_load[r].tolist(), np.isnan(t.iter_s[r]) or t.iter_s[r], np.isnan(t.anchor_s[r]) or t.anchor_s[r])
            for jid, r in sorted(net._slots._row.items())]
    lists = []
    for g in range(len(t.link_head)):  # each link's list of rows, in order
        e, on = t.link_head[g], []
        while e >= 0:
            on.append(int(t.node_row[e]))
            e = t.node_next[e]
        lists.append(on)
    arrays = [net._offered, net._flows, net._active, net._binding, net._may_bind, links.jobs, links.load_gbps,
              links.overload_gbps, links.queue_frac, net._touched]
    return rows, lists, [a.tobytes() for a in arrays], sorted(net._new), net.pending


def test_relink_leaves_what_leave_and_join_leave():
    """Jobs on a leaf-spine re-routed back and forth (alone, onto a shared cable, onto a wider route than the row
    holds), solved between: every per-link sum, the rows, their lists and the solves' answers are identical."""
    topo = _topo()
    runs = []
    for model in (TcpNetwork(jitter=0.0), LeaveJoin(jitter=0.0)):
        fabric = Fabric(topo, model, record_links=False)
        out = []
        fabric.join(1, _demand(topo, 1, [(0, 2)], 0), 0.0)
        fabric.join(2, _demand(topo, 2, [(1, 3)], 0, flow_bytes=0.7 * GBIT_BYTES), 0.0)
        fabric.join(3, _demand(topo, 3, [(2, 0)], 1, compute_s=0.3), 0.0)
        out.append(fabric.solve(0.0))
        now = 1.0
        wide = [(s, d) for s in range(4) for d in range(4) if s // 2 != d // 2]  # 8 cross-rack flows
        for jid, pairs, path in ((2, [(1, 3)], 1), (1, [(0, 2)], 1), (2, [(1, 3)], 0), (3, [(2, 0)], 0),
                                 (1, wide, 0), (3, [(2, 0)], 1), (1, [(0, 2)], 0), (2, wide, 1)):
            d = _demand(topo, jid, pairs, path)
            out.append(fabric.reallocate(jid, d.allocation, now, demand=d))
            out.append(_state(fabric))
            if jid != 2:  # two re-routes in one instant now and then
                out.append(fabric.solve(now))
                out.append(_state(fabric))
            now += 1.0
        runs.append(out)
    relinked, left_joined = runs
    assert len(relinked) == len(left_joined)
    for x, y in zip(relinked, left_joined):
        assert x == y


def test_relink_refuses_a_job_without_flows():
    fabric = Fabric(_topo(), TcpNetwork(), record_links=False)
    d = _demand(fabric.topology, 1, [(0, 2)], 0)
    with pytest.raises(KeyError, match="no flows"):
        fabric.reallocate(1, d.allocation, 0.0, demand=d)
