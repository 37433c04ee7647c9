"""Network models honour per-job allocations (issue 27): priority, weights, caps, path choice. Hand-computed.

The common case: one 10 Gbit/s link, two jobs A (id 1) and B (id 2) with one flow each on it, 10 Gbit per
iteration, 1 s of compute, no overlap. Alone each sends at 10 Gbit/s: 1 s of communication, a 2 s iteration.
Sharing the link equally (``fair``: phases taken to coincide) each gets 5: 2 s of communication, 3 s.
"""

from __future__ import annotations

import numpy as np
import pytest

from netlab.errors import InputError
from netlab.network import NETWORKS, UnsupportedAllocation
from netlab.network.demand import build_demand
from netlab.network.model import CommDemand
from netlab.network.tcp import TcpNetwork
from netlab.network.tcp.fluid import fill_rates, job_links, rate_work
from netlab.sched import NetAllocation
from netlab.sim.fabric import Fabric
from netlab.topology.builders import leafspine

CAP = np.array([10.0])
GBIT_BYTES = 1.25e9  # 10 Gbit


def demand(job_id: int, allocation: NetAllocation | None = None, link: int = 0) -> CommDemand:
    return CommDemand(job_id, np.array([link]), np.array([1.0]), GBIT_BYTES, 1.0, iso_rate_gbps=10.0,
                      iso_iter_s=2.0, allocation=allocation)


def times(model, a: NetAllocation | None, b: NetAllocation | None) -> tuple[float, float]:
    sol = model.solve([demand(1, a), demand(2, b)], CAP)
    return sol.iter_s[1], sol.iter_s[2]


# ------------------------------------------------------------------- fair
def test_fair_default_allocation_is_plain_max_min():
    assert times(NETWORKS.create("fair"), None, NetAllocation()) == pytest.approx((3.0, 3.0), rel=1e-12)


def test_fair_priority_lower_class_gets_what_the_higher_leaves_on_average():
    # A (class 0) alone: 10 Gbit/s, 1 s of its 2 s iteration communicating, 5 Gbit/s on average;
    # B (class 1) gets the other 5: 2 s of communication, 3 s.
    a, b = times(NETWORKS.create("fair"), NetAllocation(priority=0), NetAllocation(priority=1))
    assert (a, b) == pytest.approx((2.0, 3.0), rel=1e-9)
    # the classes' order, not their numbers: 3 before 5
    a, b = times(NETWORKS.create("fair"), NetAllocation(priority=5), NetAllocation(priority=3))
    assert (a, b) == pytest.approx((3.0, 2.0), rel=1e-9)


def test_fair_weights_two_to_one():
    # rates 20/3 and 10/3: 1.5 s and 3 s of communication
    a, b = times(NETWORKS.create("fair"), NetAllocation(weight=2.0), NetAllocation(weight=1.0))
    assert (a, b) == pytest.approx((2.5, 4.0), rel=1e-9)


def test_fair_cap():
    # A capped at 2 Gbit/s: 5 s of communication; B takes the other 8: 1.25 s
    a, b = times(NETWORKS.create("fair"), NetAllocation(rate_cap_gbps=2.0), None)
    assert (a, b) == pytest.approx((6.0, 2.25), rel=1e-9)


def test_fair_incremental_change_matches_the_batch_solve():
    links_model = NETWORKS.create("fair")
    topo = _one_link_topology()
    fabric = Fabric(topo, links_model, record_links=False)
    link = int(np.flatnonzero(topo.link_capacity_gbps == 10.0)[0])
    fabric.join(1, demand(1, link=link), 0.0)
    fabric.join(2, demand(2, link=link), 0.0)
    moved = fabric.solve(0.0)
    assert dict(zip(moved.job_id, moved.iter_s)) == pytest.approx({1: 3.0, 2: 3.0})
    fabric.reallocate(2, NetAllocation(priority=1), 1.0)
    assert fabric.dirty
    moved = fabric.solve(1.0)
    assert dict(zip(moved.job_id, moved.iter_s)) == pytest.approx({1: 2.0})  # only A moved: B keeps its 3 s
    fabric.reallocate(1, NetAllocation(rate_cap_gbps=2.0), 2.0)  # A capped, still class 0
    moved = dict(zip(*fabric.solve(2.0)[:2]))
    # A at 2 Gbit/s: 5 of its 6 s communicating, 5/3 on average; B gets 10 - 5/3 = 25/3: 1.2 s, 2.2 s
    assert moved == pytest.approx({1: 6.0, 2: 2.2})


def _one_link_topology():
    """Two hosts on one switch, 10 Gbit/s each way: host 0 -> switch is the shared link."""
    from netlab.topology import Topology
    from netlab.topology.model import Host

    hosts = [Host("h0", 1, "sw"), Host("h1", 1, "sw")]
    return Topology("one", hosts, {"sw": "tor"}, [("h0", "sw", 10.0, "host"), ("h1", "sw", 10.0, "host")])


# -------------------------------------------------------------------- tcp
def test_tcp_fluid_rule_per_moment():
    # the instantaneous sharing rule of the fluid: A, B both communicating on one 10 Gbit/s link
    flows, cap_link, cap_job = np.ones((2, 1)), np.array([10.0]), np.array([10.0, 10.0])
    work = rate_work(2, 1)
    active, rate = np.ones(2, np.bool_), np.zeros(2)

    def fill(weight=(1.0, 1.0), prio=(0, 0), cap=cap_job):
        fill_rates(*job_links(flows), cap_link, np.asarray(cap, float), np.asarray(weight, float),
                   np.asarray(prio, np.int64), active, rate, work)
        return rate.tolist()

    assert fill() == pytest.approx([5.0, 5.0])
    assert fill(weight=(2.0, 1.0)) == pytest.approx([20 / 3, 10 / 3])
    assert fill(prio=(1, 0)) == pytest.approx([0.0, 10.0])
    assert fill(cap=(2.0, 10.0)) == pytest.approx([2.0, 8.0])


def test_tcp_priority_exact_fluid_interleaves_the_classes():
    # In step from phase 0: both compute 1 s; A (class 0) then sends alone 1 s while B waits; B sends while A
    # computes. From the second iteration on they take turns: both run at their alone period, 2 s.
    # Without classes they share the link in step: 3 s each.
    net = TcpNetwork(jitter=0.0, lead=0.0)
    assert times(net, None, None) == pytest.approx((3.0, 3.0), rel=1e-6)
    net = TcpNetwork(jitter=0.0, lead=0.0)
    assert times(net, NetAllocation(priority=0), NetAllocation(priority=1)) == pytest.approx((2.0, 2.0), rel=1e-6)


def test_tcp_mean_field_priority_and_cap():
    # max_exact_jobs=1: the mean field. Priority: A alone in class 0 (2 s, duty 1/2, 5 Gbit/s on average);
    # B in class 1 on the 5 left: 3 s.
    mf = dict(max_exact_jobs=1, jitter=0.0)
    assert times(TcpNetwork(**mf), NetAllocation(priority=0), NetAllocation(priority=1)) == \
        pytest.approx((2.0, 3.0), rel=1e-6)
    # Cap: A at 2 Gbit/s (6 s, communicating 5/6 of it); B's level l solves l + 5/6 x min(2, l) = 10: 25/3,
    # so 1.2 s of communication, 2.2 s.
    assert times(TcpNetwork(**mf), NetAllocation(rate_cap_gbps=2.0), None) == pytest.approx((6.0, 2.2), rel=1e-3)


def test_tcp_mean_field_weights_two_to_one():
    # The mean-field equations for A (weight 2) and B (weight 1), each on the one link (duty d = 10 / (r + 10)):
    # A: 2 lA + dB min(rB, lA) = 10, B: lB + dA min(rA, 2 lB) = 10, r = min(weight x level, 10). Solved here by
    # plain substitution, independently of the model's water-filling.
    ra, rb = 10.0, 10.0
    for _ in range(200):
        da, db = 10 / (ra + 10), 10 / (rb + 10)
        la = (10 - db * rb) / 2 if rb < (10 - db * rb) / 2 else 10 / (2 + db)
        lb = (10 - da * ra) if ra < 2 * (10 - da * ra) else 10 / (1 + 2 * da)
        ra, rb = min(2 * la, 10.0), min(lb, 10.0)
    expect = (1 + 10 / ra, 1 + 10 / rb)
    got = times(TcpNetwork(max_exact_jobs=1, jitter=0.0), NetAllocation(weight=2.0), NetAllocation(weight=1.0))
    assert got == pytest.approx(expect, rel=2e-3)
    assert got[0] < got[1]


def test_tcp_jobs_in_queues_of_their_own_have_no_leader_advantage():
    # A (weight 2) and B (weight 1), both always sending (no compute): 10 Gbit each an iteration. Each in a queue
    # of its own (A's weight implies one, B asks; the testbed's per-job HTB classes), weighted sharing alone decides: 20/3 and 10/3
    # Gbit/s throughout, so 1.5 s and 3 s, although the fluid's default leader advantage (lead 2) would let B,
    # further into its longer transfer, out-compete A's fresh ones in a shared FIFO.
    def sending(job_id, allocation):
        return CommDemand(job_id, np.array([0]), np.array([1.0]), GBIT_BYTES, 0.0, iso_rate_gbps=10.0,
                          iso_iter_s=1.0, allocation=allocation)

    net = TcpNetwork(jitter=0.0)
    assert net.params.lead > 0
    sol = net.solve([sending(1, NetAllocation(weight=2.0)), sending(2, NetAllocation(weight=1.0, own_queue=True))],
                    CAP)
    assert (sol.iter_s[1], sol.iter_s[2]) == pytest.approx((1.5, 3.0), rel=1e-6)
    # a weight needs a queue of the job's own; a class alone shares its class's queue (a switch's eight)
    assert sending(1, NetAllocation(weight=2.0)).own_queue and sending(1, NetAllocation(own_queue=True)).own_queue
    assert not sending(1, NetAllocation(priority=3)).own_queue and not sending(1, None).own_queue


def test_tcp_incremental_reallocation():
    net = TcpNetwork(jitter=0.0, max_exact_jobs=1)
    topo = _one_link_topology()
    fabric = Fabric(topo, net, record_links=False)
    link = int(np.flatnonzero(topo.link_capacity_gbps == 10.0)[0])
    fabric.join(1, demand(1, link=link), 0.0)
    fabric.join(2, demand(2, link=link), 0.0)
    fabric.solve(0.0)
    fabric.reallocate(1, NetAllocation(rate_cap_gbps=2.0), 1.0)
    moved = dict(zip(*fabric.solve(1.0)[:2]))
    assert moved == pytest.approx({1: 6.0, 2: 2.2}, rel=1e-3)
    fabric.reallocate(1, NetAllocation(), 2.0)  # back to the default: as before
    back = dict(zip(*fabric.solve(2.0)[:2]))
    batch = TcpNetwork(jitter=0.0, max_exact_jobs=1).solve([demand(1), demand(2)], CAP)
    assert back == pytest.approx(batch.iter_s, rel=1e-3)


# ------------------------------------------------------------ other models
def test_phase_honours_weight_and_cap_and_refuses_priority():
    phase = NETWORKS.create("phase")
    a, b = times(phase, NetAllocation(rate_cap_gbps=2.0), None)
    assert a == pytest.approx(6.0, rel=1e-6)
    with pytest.raises(UnsupportedAllocation, match=r"'phase'.*priority.*job 2"):
        times(phase, None, NetAllocation(priority=1))


def test_ideal_ignores_allocations():
    a, b = times(NETWORKS.create("ideal"), NetAllocation(priority=1, rate_cap_gbps=1.0), NetAllocation(weight=3.0))
    assert (a, b) == (2.0, 2.0)


def test_a_new_path_choice_is_not_a_change_in_place():
    fabric = Fabric(_one_link_topology(), NETWORKS.create("fair"), record_links=False)
    fabric.join(1, demand(1), 0.0)
    with pytest.raises(UnsupportedAllocation, match="path"):
        fabric.reallocate(1, NetAllocation(paths=(1,)), 1.0)
    assert not fabric.dirty  # nothing half-applied


# ------------------------------------------------------------- path choice
def test_path_choice_removes_a_hash_collision():
    # 2 racks x 2 hosts, 2 spines, 2:1 oversubscribed: each ToR-spine cable carries 5 Gbit/s. Flows h0->h2 and
    # h1->h3 cross racks; under hash ECMP two keys that pick the same spine put both on one 5 Gbit/s uplink
    # (2.5 each). Choosing paths 0 and 1 puts each on its own spine: 5 each.
    topo = leafspine(racks=2, hosts_per_rack=2, gpus_per_host=1, host_gbps=10.0, oversub=2.0, spines=2, ecmp="hash")
    assert len(topo.paths(0, 2)) == 2
    collide = next((k1, k2) for k1 in range(50) for k2 in range(50)
                   if set(topo.route(((0, 2),), key=k1)[0]) & set(topo.route(((1, 3),), key=k2)[0]))

    def rates(paths_a, paths_b):
        ds = []
        for jid, pair, key, paths in ((1, (0, 2), collide[0], paths_a), (2, (1, 3), collide[1], paths_b)):
            links, weights = topo.route((pair,), key=key) if paths is None else topo.route((pair,), key, paths)
            ds.append(CommDemand(jid, links, weights, GBIT_BYTES, 1.0, iso_rate_gbps=5.0))
        return NETWORKS.create("fair").solve(ds, topo.link_capacity_gbps).rate_gbps

    assert rates(None, None) == pytest.approx({1: 2.5, 2: 2.5})
    assert rates((0,), (1,)) == pytest.approx({1: 5.0, 2: 5.0})
    assert rates((1,), (1,)) == pytest.approx({1: 2.5, 2: 2.5})  # the same path chosen twice collides again


def test_build_demand_takes_the_allocation_paths():
    from netlab.workload.zoo import ModelZoo

    topo = leafspine(racks=2, hosts_per_rack=1, gpus_per_host=1, host_gbps=10.0, spines=2, ecmp="hash")
    model = ModelZoo.default()["resnet50"]
    on = {p: build_demand(topo, model, "ring", 7, [0, 1], [1, 1], allocation=NetAllocation(paths=(p,)))[0]
          for p in (0, 1)}
    for p in (0, 1):  # a ring of two: both flows (h0 -> h1, h1 -> h0) take their path p
        assert set(on[p].links.tolist()) == set(topo.paths(0, 1)[p]) | set(topo.paths(1, 0)[p])
    assert set(on[0].links.tolist()) != set(on[1].links.tolist())  # through different spines
    assert on[0].allocation.paths == (0,)
    with pytest.raises(InputError, match="3 path choices for its 2 flows"):
        build_demand(topo, model, "ring", 7, [0, 1], [1, 1], allocation=NetAllocation(paths=(0, 1, 0)))
