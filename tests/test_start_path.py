"""The start path's shortcuts: ``tcp``'s join and leave in one compiled call each (``tcp/joinleave.py``), checked
on per-link sums worked out by hand; and ``build_demand``'s memo of flattened plans, checked on placements that
differ only in what its key must see."""

import numpy as np
import pytest

from netlab.network import demand as demand_mod
from netlab.network.demand import build_demand
from netlab.network.links import LinkState
from netlab.network.model import CommDemand
from netlab.network.tcp.model import TcpNetwork
from netlab.topology import load_topology
from netlab.workload import llm
from netlab.workload.zoo import JobModel


def _demand(job_id, links, weights, iso_rate_gbps):
    # 10 Gbit per flow per iteration (1.25e9 bytes), 2 s of compute, no overlap
    return CommDemand(job_id, np.array(links, dtype=np.int64), np.array(weights, dtype=float), flow_bytes=1.25e9,
                      compute_s=2.0, iso_rate_gbps=iso_rate_gbps)


def test_join_and_leave_keep_the_per_link_sums_worked_out_by_hand():
    net = TcpNetwork()
    links = LinkState(np.full(3, 10.0))
    net.attach(links)
    a = _demand(1, [0, 1], [1.0, 2.0], 5.0)
    b = _demand(2, [1, 2], [1.0, 1.0], 4.0)
    links.jobs[a.links] += 1
    # A alone: offered 1 x 5 = 5 on link 0, 2 x 5 = 10 on link 1 (at capacity, not above): it runs at 5 Gbit/s,
    # 10 Gbit in 2 s + 2 s compute = 4 s an iteration; its load 1 x 10 / 4 = 2.5 and 2 x 10 / 4 = 5 Gbit/s
    assert net.join(1, a, 0.0) == 5.0
    np.testing.assert_array_equal(net._offered, [5.0, 10.0, 0.0])
    np.testing.assert_array_equal(net._flows, [1.0, 2.0, 0.0])
    np.testing.assert_array_equal(links.load_gbps, [2.5, 5.0, 0.0])
    assert not net._binding.any()
    t = net._slots.rows
    r = net._slots.row(1)
    assert t.iter_s[r] == 4.0 and t.rate_gbps[r] == 5.0
    assert t.joined[r] and t.link_head[0] == t.node_base[r] and t.link_head[1] == t.node_base[r] + 1
    # B: 10 + 1 x 4 = 14 > 10 on link 1: it waits for the re-solve, link 1 can bind
    links.jobs[b.links] += 1
    assert net.join(2, b, 0.0) is None
    np.testing.assert_array_equal(net._offered, [5.0, 14.0, 4.0])
    np.testing.assert_array_equal(net._flows, [1.0, 3.0, 1.0])
    np.testing.assert_array_equal(net._binding, [False, True, False])
    assert net._may_bind[1] and net._keep[1]
    net.resolve(0.0)
    # A leaves: link 1 could bind before (a re-solve is due); link 0 is left empty (exactly 0), link 1 has B's 4
    links.jobs[a.links] -= 1
    net.leave(1, 0.0)
    assert net.pending
    np.testing.assert_array_equal(net._offered, [0.0, 4.0, 4.0])
    np.testing.assert_array_equal(net._flows, [0.0, 1.0, 1.0])
    np.testing.assert_array_equal(net._active[0], 0.0)
    assert not net._binding.any() and not net._may_bind.any()
    assert not t.joined[r] and t.job_id[r] == -1 and t.link_head[0] == -1
    assert links.load_gbps[0] == 0.0
    net.resolve(0.0)
    links.jobs[b.links] -= 1
    net.leave(2, 0.0)
    np.testing.assert_array_equal(net._offered, [0.0, 0.0, 0.0])
    np.testing.assert_array_equal(links.load_gbps, [0.0, 0.0, 0.0])
    assert (net._slots.rows.link_head[:3] == -1).all()


SHAPE = llm.LlmShape(layers=4, hidden=1024, seq_len=1024, micro_batch=1, micro_batches=4, tp=2, pp=2)
LLM = JobModel("toy-llm", compute_s=1.0, grad_bytes=800e6, params_m=400.0, llm=SHAPE)


@pytest.fixture
def fresh_memo():
    demand_mod._FLAT_PLANS.clear()
    yield
    demand_mod._FLAT_PLANS.clear()


def test_the_flat_plan_memo_tells_apart_what_its_key_must_see(fresh_memo):
    topo = load_topology("leafspine,racks=2,hosts_per_rack=4,gpus_per_host=4,host_gbps=100,ecmp=hash")
    # ring over 2 hosts, 8 GPUs: 2 (8 - 1) / 8 x S = 1.75 S per flow, flows h0 -> h1 and h1 -> h0
    small = JobModel("m", compute_s=1.0, grad_bytes=1e9)
    large = JobModel("m", compute_s=1.0, grad_bytes=2e9)  # the same name: only the model itself tells them apart
    d1, _ = build_demand(topo, small, "ring", 1, (0, 4), (4, 4))
    d2, _ = build_demand(topo, large, "ring", 1, (0, 4), (4, 4))
    assert d1.flow_bytes == 1.75e9 and d2.flow_bytes == 3.5e9
    # the same GPUs on other hosts: the memo's flows are placement indices, the hosts are this placement's
    d3, _ = build_demand(topo, small, "ring", 1, (1, 5), (4, 4))
    np.testing.assert_array_equal(d3._pending[1], [[1, 5], [5, 1]])
    np.testing.assert_array_equal(d1._pending[1], [[0, 4], [4, 0]])
    # GPUs per host that differ only in their split over the same two hosts: the same links, but a 3d job's
    # flows carry other bytes (TP pairs stay inside a host either way; PP and DP cross differently)
    a, _ = build_demand(topo, LLM, "3d", 7, (0, 4), (4, 4))
    b, _ = build_demand(topo, LLM, "3d", 7, (0, 4), (6, 2))
    demand_mod._FLAT_PLANS.clear()
    b_fresh, _ = build_demand(topo, LLM, "3d", 7, (0, 4), (6, 2))
    a_fresh, _ = build_demand(topo, LLM, "3d", 7, (0, 4), (4, 4))
    for got, want in ((a, a_fresh), (b, b_fresh)):
        np.testing.assert_array_equal(got.links, want.links)
        np.testing.assert_array_equal(got.weights, want.weights)
        assert got.flow_bytes == want.flow_bytes
    assert a.flow_bytes != b.flow_bytes
    # a pattern is part of the key: hierarchical over the same placement sends 2 (2 - 1) / 2 x S = S per flow
    h, _ = build_demand(topo, small, "hierarchical", 1, (0, 4), (4, 4))
    assert h.flow_bytes == 1e9


@pytest.mark.parametrize("gpus", [(4, 4), (6, 2), (2, 2, 2, 2), (8,), (3, 1, 4), (1, 1, 1, 1, 1, 1, 1, 1)])
def test_a_3d_flat_plan_is_its_plan_bit_for_bit(gpus):
    from netlab.workload.patterns import PATTERNS

    three_d = PATTERNS.get("3d")()
    plan, flat = three_d.plan_for(gpus, LLM), three_d.flat_for(gpus, LLM)
    assert flat.flow_bytes == plan.flow_bytes and flat.serial_intra_bytes == plan.serial_intra_bytes
    assert flat.ring_intra_cap == plan.ring_intra_cap and flat.steps == plan.steps
    if not plan.flows:
        assert flat.flows is None and flat.flow_weights is None
        return
    assert tuple(map(tuple, flat.flows.tolist())) == plan.flows
    assert tuple(flat.flow_weights.tolist()) == plan.flow_weights  # the same doubles


def test_a_path_choice_routes_a_3d_job_with_the_plan_s_weights_as_a_tuple(fresh_memo):
    from netlab.workload.patterns import PATTERNS

    topo = load_topology("leafspine,racks=2,hosts_per_rack=4,gpus_per_host=4,host_gbps=100,spines=2")

    class Paths:  # a NetAllocation's path choice: every flow on path 1
        paths = (1,)

    d, _ = build_demand(topo, LLM, "3d", 7, (0, 4), (4, 4), allocation=Paths())
    weights = d._pending[3]
    assert type(weights) is tuple and weights == PATTERNS.get("3d")().plan_for((4, 4), LLM).flow_weights


def test_a_demands_isolated_rate_is_its_least_capacity_per_flow():
    from netlab.network.demand import _least_ratio

    # links 0, 1, 2 of capacities 100, 400, 25 Gbit/s carrying 2, 4 and 1 flows: 50, 100 and 25 per flow
    capacity = np.array([100.0, 400.0, 25.0, 1.0])
    assert _least_ratio(capacity, np.array([0, 1, 2]), np.array([2.0, 4.0, 1.0])) == 25.0
    assert _least_ratio(capacity, np.array([0, 1]), np.array([2.0, 4.0])) == 50.0
    rng = np.random.default_rng(3)  # the same least quotient as numpy's, to the bit
    for _ in range(50):
        cap = rng.uniform(1.0, 400.0, 30)
        links = rng.choice(30, size=8, replace=False)
        weights = rng.uniform(0.1, 9.0, 8)
        assert _least_ratio(cap, links, weights) == float(np.min(cap[links] / weights))
