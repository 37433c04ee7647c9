"""Network sensitivity: hand-computed values of the analytic definition and of the network-model profile,
which matches what the simulator runs a lone job at."""

from __future__ import annotations

import pytest

from netlab.policies.base import PlacementPolicy
from netlab.sched import JobState, Placement
from netlab.sensitivity import job_sensitivity, profile_sensitivity, reference_split, sensitivity
from netlab.topology import load_topology
from netlab.workload.job import Job
from netlab.workload.zoo import JobModel, ModelZoo

# 8-GPU hosts, 100 Gbit/s NICs, 1200 Gbit/s NVLink.
LEAFSPINE = "leafspine,racks=2,hosts_per_rack=2,gpus_per_host=8,oversub=4,spines=1"
# Two 1-GPU hosts in two racks behind 2:1 uplinks: a cross-rack ring flow gets 50 of the NICs' 100 Gbit/s.
HALF = "leafspine,racks=2,hosts_per_rack=1,gpus_per_host=1,oversub=2,spines=1"
NIC_BPS = 100e9


@pytest.fixture(scope="module")
def topo():
    return load_topology(LEAFSPINE)


def model(grad_mb, compute_s=0.2, overlap=0.0, name=None):
    return JobModel(name or f"m{grad_mb}-{compute_s}-{overlap}", compute_s, grad_mb * 1e6, overlap=overlap)


def test_reference_split():
    assert reference_split(1, 8) == (1,)
    assert reference_split(2, 8) == (1, 1)
    assert reference_split(5, 8) == (3, 2)
    assert reference_split(8, 8) == (4, 4)
    assert reference_split(20, 8) == (8, 8, 4)


def test_zero_gradient_bytes_and_one_gpu_are_insensitive(topo):
    for g in (1, 2, 8, 16, 32):
        assert sensitivity(model(0.0), g, topo) == 0.0
    assert sensitivity(ModelZoo.default()["vgg16"], 1, topo) == 0.0  # one GPU: nothing crosses the network
    assert sensitivity(ModelZoo.default()["vgg16"], 2, topo) > 0.0


def test_hand_computed_value(topo):
    # 2 GPUs on two hosts (1 + 1): each ring hop carries 2 (n-1)/n S = S bytes at the NIC's 100 Gbit/s.
    m = model(100.0, compute_s=0.2)
    net = 100e6 * 8 / NIC_BPS  # 8 ms
    assert sensitivity(m, 2, topo) == pytest.approx(net / (0.2 + net), rel=1e-12)  # (0.2 + 2 net) / (0.2 + net) - 1
    # 8 GPUs split 4 + 4: hop bytes 2 x 7/8 x S; the ring's intra-host hops cap it at 1200 Gbit/s (no effect here).
    net8 = 2 * 7 / 8 * 100e6 * 8 / NIC_BPS
    assert sensitivity(m, 8, topo) == pytest.approx(net8 / (0.2 + net8), rel=1e-12)


def test_grows_with_comm_compute_ratio(topo):
    values = [sensitivity(model(mb, compute_s=0.2), 8, topo) for mb in (10, 100, 400, 1600)]
    assert values == sorted(values) and len(set(values)) == 4
    # Same bytes, less compute: a larger ratio, a larger sensitivity.
    assert sensitivity(model(100, compute_s=0.05), 8, topo) > sensitivity(model(100, compute_s=0.5), 8, topo)
    assert all(0 < v < 1 for v in values)


def test_overlap_hides_halved_bandwidth_when_comm_stays_short(topo):
    # overlap 1: iter = max(compute, comm). 2 x net = 16 ms < 200 ms compute: halving costs nothing.
    assert sensitivity(model(100, compute_s=0.2, overlap=1.0), 2, topo) == 0.0
    # 2 x net = 320 ms > 200 ms: iter goes from 200 ms to 320 ms.
    assert sensitivity(model(2000, compute_s=0.2, overlap=1.0), 2, topo) == pytest.approx(0.32 / 0.2 - 1, rel=1e-12)


def test_profile_agrees_with_analytic_on_half_bandwidth_placement():
    topo = load_topology(HALF)
    row = profile_sensitivity("vgg16", 2, topo)  # default: the reference split on hosts 0 and 1 (two racks)
    zoo = ModelZoo.default()
    net = 553e6 * 8 / NIC_BPS
    assert row["ideal_iter_s"] == pytest.approx(0.214 + net, rel=1e-9)
    assert row["placed_iter_s"] == pytest.approx(0.214 + 2 * net, rel=1e-9)
    assert row["slowdown"] == pytest.approx(row["sensitivity"], rel=1e-9)
    assert row["sensitivity"] == pytest.approx(sensitivity(zoo["vgg16"], 2, topo), rel=1e-12)
    assert row["ratio"] == pytest.approx(1 + net / (0.214 + net), rel=1e-9)


def test_profile_on_uncongested_placement_has_no_slowdown(topo):
    # 8 GPUs as 4 + 4 on two hosts of one rack: ideal (consolidated on one host) vs. a 100 Gbit/s ring.
    row = profile_sensitivity("vgg16", 8, topo, placement=Placement((0, 1), (4, 4)))
    net = 2 * 7 / 8 * 553e6 * 8 / NIC_BPS
    intra = 2 * 7 / 8 * 553e6 * 8 / 1200e9
    assert row["placed_iter_s"] == pytest.approx(0.214 + net, rel=1e-9)
    assert row["ideal_iter_s"] == pytest.approx(0.214 + intra, rel=1e-9)
    # Same rack, no oversubscribed hop: only the NIC-vs-NVLink gap.
    assert row["slowdown"] == pytest.approx((0.214 + net) / (0.214 + intra) - 1, rel=1e-9)


@pytest.mark.parametrize("pattern", ["ring", "ps", "hierarchical"])
def test_profile_is_what_the_simulator_runs_a_lone_job_at(pattern):
    """profile_sensitivity reads the network model; the simulator (ideal vs. fair network) agrees."""
    from netlab.sim import SimConfig, Simulator

    topo = load_topology("leafspine,racks=2,hosts_per_rack=2,gpus_per_host=4,oversub=4,spines=1")
    for placement in (Placement((0, 2), (2, 2)), Placement((0, 1, 3), (2, 1, 3))):
        row = profile_sensitivity("vgg16", placement.n_gpus, topo, placement=placement, pattern=pattern)

        class Fixed(PlacementPolicy):
            def place(self, job, view):
                return placement

        job = Job(0, 0.0, placement.n_gpus, "vgg16", 100.0, pattern)
        for network, key in (("ideal", "ideal_iter_s"), ("fair", "placed_iter_s")):
            res = Simulator(topo, [job], "fifo", Fixed(), "none", SimConfig(network=network)).run()
            assert res.jobs.iloc[0].end_s / 100.0 == pytest.approx(row[key], rel=1e-12)


def test_job_sensitivity_is_memoised(topo):
    js = JobState(Job(0, 0.0, 8, "vgg16", 10), 1.0)
    s = job_sensitivity(js, topo)
    assert js.extra["sensitivity"] == s == sensitivity("vgg16", 8, topo)
