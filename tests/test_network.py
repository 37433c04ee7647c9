"""Hand-checked network cases and property tests of the max-min solver."""

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from netlab.network import NETWORKS, CommDemand, max_min
from netlab.network.model import iteration_time
from netlab.policies.base import PlacementPolicy
from netlab.sched import Placement
from netlab.sim import simulate
from netlab.topology import load_topology
from netlab.workload.job import Job
from netlab.workload.zoo import ModelZoo

ZOO = ModelZoo.default()
GBIT = 1e9


class Fixed(PlacementPolicy):
    """Places job i exactly where the test says."""

    name = "fixed"

    def __init__(self, where):
        self.where = where

    def place(self, job, view):
        hosts, gpus = self.where[job.job_id]
        return Placement(tuple(hosts), tuple(gpus))


def ring_net_s(model, n_gpus, rate_gbps):
    """Ring all-reduce network time: 2(n-1)/n x S bytes at rate_gbps."""
    return 2 * (n_gpus - 1) / n_gpus * ZOO[model].grad_bytes * 8 / (rate_gbps * GBIT)


def test_two_ring_jobs_sharing_one_link_each_get_half():
    topo = load_topology("dumbbell,hosts_per_side=2,gpus_per_host=1,host_gbps=100,bottleneck_gbps=100")
    h = topo.host_index
    jobs = [Job(0, 0.0, 2, "vgg16", 100), Job(1, 0.0, 2, "vgg16", 100)]
    where = {0: ([h["l0"], h["r0"]], [1, 1]), 1: ([h["l1"], h["r1"]], [1, 1])}
    res = simulate(topo, jobs, "fifo", Fixed(where), network="fair")  # max-min: each flow gets half
    compute = ZOO["vgg16"].compute_s
    expected_iter = compute + ring_net_s("vgg16", 2, 50.0)  # each flow gets 100/2
    for _, row in res.jobs.iterrows():
        assert row.end_s == pytest.approx(100 * expected_iter, rel=1e-9)
    # The bottleneck (swL->swR) carries both jobs at 50 Gbit/s during communication.
    link = topo.link_id[("swL", "swR")]
    seg = res.links[res.links.link == link].iloc[0]
    duty = ring_net_s("vgg16", 2, 50.0) / expected_iter
    assert seg.load_gbps == pytest.approx(2 * 50.0 * duty, rel=1e-9)


def test_job_inside_one_host_is_unaffected_by_network_load():
    topo = load_topology("leafspine,racks=2,hosts_per_rack=2,gpus_per_host=4,host_gbps=10,oversub=4,spines=1")
    # Job 0: 4 GPUs inside host 0. Jobs 1-2: cross-rack rings that saturate the spine.
    jobs = [Job(0, 0.0, 4, "vgg16", 50), Job(1, 0.0, 2, "vgg16", 50), Job(2, 0.0, 2, "vgg16", 50)]
    where = {0: ([0], [4]), 1: ([1, 2], [1, 1]), 2: ([1, 3], [1, 1])}
    loaded = simulate(topo, jobs, "fifo", Fixed(where)).jobs.set_index("job_id")
    alone = simulate(topo, jobs[:1], "fifo", Fixed(where)).jobs.set_index("job_id")
    assert loaded.loc[0, "end_s"] == pytest.approx(alone.loc[0, "end_s"], rel=1e-12)
    intra = 2 * 3 / 4 * ZOO["vgg16"].grad_bytes * 8 / (1200 * GBIT)
    assert alone.loc[0, "end_s"] == pytest.approx(50 * (ZOO["vgg16"].compute_s + intra), rel=1e-9)
    assert loaded.loc[1, "slowdown"] > 1.5  # the network jobs do suffer


@pytest.mark.parametrize("oversub", [2, 4])
def test_oversubscribed_spine_slows_cross_rack_jobs_by_expected_factor(oversub):
    spec = "leafspine,racks=2,hosts_per_rack=2,gpus_per_host=1,host_gbps=100,spines=1,oversub={}"
    jobs = [Job(0, 0.0, 2, "bert-base", 40), Job(1, 0.0, 2, "bert-base", 40)]
    where = {0: ([0, 2], [1, 1]), 1: ([1, 3], [1, 1])}  # both cross the ToR uplinks
    res = {o: simulate(load_topology(spec.format(o)), jobs, "fifo", Fixed(where), network="fair").jobs
           for o in (1, oversub)}
    # Uplink capacity is 2 x 100 / oversub, shared by the two jobs' flows (one each per direction).
    rate_full = min(100.0, 200.0 / 1 / 2)
    rate_over = min(100.0, 200.0 / oversub / 2)
    net_full = ring_net_s("bert-base", 2, rate_full)
    net_over = ring_net_s("bert-base", 2, rate_over)
    c, overlap = ZOO["bert-base"].compute_s, ZOO["bert-base"].overlap  # the iteration-time rule hides a share
    assert res[1].end_s.iloc[0] == pytest.approx(40 * iteration_time(c, net_full, overlap), rel=1e-9)
    assert res[oversub].end_s.iloc[0] == pytest.approx(40 * iteration_time(c, net_over, overlap), rel=1e-9)
    # Two flows on an uplink of 200/oversub: the (exposed) communication time grows by exactly oversub.
    comm_full = res[1].end_s.iloc[0] / 40 - c
    comm_over = res[oversub].end_s.iloc[0] / 40 - c
    assert comm_over / comm_full == pytest.approx(oversub, rel=1e-9)


def test_ideal_mode_gives_isolated_speed():
    topo = load_topology("leafspine,racks=2,hosts_per_rack=2,gpus_per_host=2,host_gbps=25,oversub=8,spines=1")
    jobs = [Job(i, 0.0, g, m, 30) for i, (g, m) in enumerate([(4, "vgg16"), (4, "bert-base"), (2, "resnet50")])]
    where = {0: ([0, 2], [2, 2]), 1: ([1, 3], [2, 2])}
    res = simulate(topo, jobs[:2], "fifo", Fixed(where), network="ideal").jobs
    assert np.allclose(res.slowdown, 1.0)
    assert np.allclose(res.jct_s, res.isolated_s)
    # Isolated = consolidated on 2 hosts of 2 GPUs at NIC speed: ring of 4, 2 hops over 25 Gbit/s NICs.
    iso = ZOO["vgg16"].compute_s + ring_net_s("vgg16", 4, 25.0)
    assert res.iso_iter_s.iloc[0] == pytest.approx(iso, rel=1e-12)
    fair = simulate(topo, jobs[:2], "fifo", Fixed(where), network="fair").jobs
    assert (fair.jct_s > res.jct_s * 1.5).all()  # the 8:1 spine hurts in the fair model


def test_phase_offsets_let_two_jobs_interleave():
    cap = np.array([100.0])
    make = lambda phases: [CommDemand(i, np.array([0]), np.array([1.0]), 1.25e9, 1.0, iso_rate_gbps=100.0, phase=p)
                           for i, p in enumerate(phases)]
    fair = NETWORKS.create("fair").solve(make([0, 0]), cap)
    aligned = NETWORKS.create("phase").solve(make([0.0, 0.0]), cap)
    shifted = NETWORKS.create("phase").solve(make([0.0, 0.5]), cap)
    # 10 Gbit per iteration: 0.1 s alone at 100 Gbit/s, 0.2 s when the two collide.
    assert fair.iter_s[0] == pytest.approx(1.2)
    assert aligned.iter_s[0] == pytest.approx(1.2, rel=1e-3)
    assert shifted.iter_s[0] == pytest.approx(1.1, rel=1e-3)
    assert shifted.overload_gbps.sum() == pytest.approx(0.0, abs=1e-9)
    assert aligned.overload_gbps.sum() > 0


# ---------------------------------------------------------------- properties
@st.composite
def problems(draw):
    n_links = draw(st.integers(1, 8))
    n_jobs = draw(st.integers(1, 10))
    cap = draw(st.lists(st.floats(1.0, 400.0), min_size=n_links, max_size=n_links))
    job, link, weight = [], [], []
    for j in range(n_jobs):
        used = draw(st.lists(st.integers(0, n_links - 1), min_size=1, max_size=n_links, unique=True))
        for l in used:
            job.append(j)
            link.append(l)
            weight.append(draw(st.sampled_from([0.25, 0.5, 1.0, 2.0, 3.0])))
    caps = draw(st.lists(st.one_of(st.just(math.inf), st.floats(1.0, 500.0)), min_size=n_jobs, max_size=n_jobs))
    return np.array(cap), np.array(job), np.array(link), np.array(weight), n_jobs, np.array(caps)


@settings(max_examples=300, deadline=None)
@given(problems())
def test_max_min_properties(problem):
    cap, job, link, weight, n_jobs, rate_cap = problem
    res = max_min(cap, job, link, weight, n_jobs, rate_cap)
    rate = res.rate
    assert np.all(rate >= 0)
    load = np.bincount(link, weights=weight * rate[job], minlength=len(cap))
    assert np.all(load <= cap * (1 + 1e-7))
    saturated = load >= cap * (1 - 1e-7)
    for j in range(n_jobs):
        if rate[j] >= rate_cap[j] * (1 - 1e-7):
            continue  # limited by its own cap
        mine = link[job == j]
        # A saturated link where nobody has a higher per-flow rate: j's bottleneck.
        ok = False
        for l in mine:
            if saturated[l] and rate[j] >= rate[job[link == l]].max() * (1 - 1e-7):
                ok = True
        assert ok, f"job {j} has no bottleneck link"


def test_max_min_hand_example():
    # Link 0 (10) shared by jobs 0 and 1; job 1 also on link 1 (cap 3): job 1 gets 3, job 0 gets 7.
    res = max_min(np.array([10.0, 3.0]), np.array([0, 1, 1]), np.array([0, 0, 1]), np.ones(3), 2)
    assert res.rate.tolist() == pytest.approx([7.0, 3.0])
    assert res.bottleneck.tolist() == [True, False, True]


@pytest.mark.parametrize("pattern,flows,flow_bytes,intra", [
    # 2 hosts x 4 GPUs, S = 1: ring of 8 -> 2 hops of 2*7/8; hierarchical -> 2 flows of 2*1/2, intra 2*3/4;
    # PS on host 0 -> push and pull of S, intra 2*3/4.
    ("ring", ((0, 1), (1, 0)), 1.75, 0.0),
    ("hierarchical", ((0, 1), (1, 0)), 1.0, 1.5),
    ("ps", ((1, 0), (0, 1)), 1.0, 1.5),
])
def test_communication_patterns_bytes(pattern, flows, flow_bytes, intra):
    from netlab.workload.patterns import PATTERNS

    plan = PATTERNS.get(pattern)().plan((4, 4), 1.0)
    assert plan.flows == flows
    assert plan.flow_bytes == pytest.approx(flow_bytes) and plan.serial_intra_bytes == pytest.approx(intra)
