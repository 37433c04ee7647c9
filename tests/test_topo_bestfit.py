"""Topology-aware best fit on hand-built free maps and link loads."""

from __future__ import annotations


import numpy as np
import pytest

from netlab.policies import PLACEMENT
from netlab.policies.placement.topo_bestfit import cross_tier_cost, level_of
from netlab.topology.info import ANY, HOST, RACK, topo_info
from netlab.sched import ClusterView, JobState, Placement
from netlab.slowdown.samples import scatter
from netlab.topology import load_topology
from netlab.workload.job import Job

# 3 racks x 3 hosts x 4 GPUs, 2:1 uplinks, one spine: hosts 0-2 in rack 0, 3-5 in rack 1, 6-8 in rack 2.
THREE_RACKS = "leafspine,racks=3,hosts_per_rack=3,gpus_per_host=4,oversub=2,spines=1"


@pytest.fixture(scope="module")
def topo():
    return load_topology(THREE_RACKS)


def pending(gpus, model="vgg16", job_id=1):
    return JobState(Job(job_id, 0.0, gpus, model, 10), 1.0)


def view(topo, free, load=None):
    return ClusterView(topo, np.array(free, dtype=np.int64), {}, 0.0, load)


def as_dict(p):
    return dict(zip(p.hosts, p.gpus))


def uplink_load(topo, rack, gbps):
    """Link loads with both directions of ``rack``'s ToR-spine cable at ``gbps``."""
    load = np.zeros(topo.n_links)
    load[topo.link_id[(f"tor{rack}", "spine0")]] = gbps
    load[topo.link_id[("spine0", f"tor{rack}")]] = gbps
    return load


def place(topo, free, gpus, load=None):
    return PLACEMENT.create("topo-bestfit").place(pending(gpus), view(topo, free, load))


def test_one_host_best_fit(topo):
    free = [4, 2, 3, 0, 0, 0, 0, 0, 4]
    assert as_dict(place(topo, free, 2)) == {1: 2}  # fewest free GPUs that still fit
    assert as_dict(place(topo, free, 3)) == {2: 3}
    assert as_dict(place(topo, free, 4)) == {0: 4}  # lowest index on ties


def test_prefers_one_rack_over_fewer_hosts_across_racks(topo):
    # Rack 0 holds 6 GPUs on 3 hosts; hosts 3 and 6 (racks 1 and 2) would give 6 on only 2 hosts.
    free = [2, 2, 2, 4, 0, 0, 2, 0, 0]
    p = place(topo, free, 6)
    assert as_dict(p) == {0: 2, 1: 2, 2: 2}
    assert level_of(p, topo) == RACK


def test_one_rack_fewest_hosts_then_best_fit(topo):
    # Rack 0: 3 + 3 (2 hosts for 6); rack 1: 4 + 2 + 1 (2 hosts, 7 free); rack 2: 2 + 2 + 2 (3 hosts).
    free = [3, 3, 0, 4, 2, 1, 2, 2, 2]
    assert as_dict(place(topo, free, 6)) == {0: 3, 1: 3}  # 2 hosts, and fewer free GPUs than rack 1


def test_spans_racks_with_least_loaded_uplinks(topo):
    # No rack holds 10: rack 0 has 6, racks 1 and 2 have 4 each. Rack 0 + one of racks 1, 2.
    free = [4, 2, 0, 4, 0, 0, 4, 0, 0]
    idle = place(topo, free, 10)
    assert as_dict(idle) == {0: 4, 1: 2, 3: 4}  # tie: lower rack index
    loaded1 = place(topo, free, 10, uplink_load(topo, 1, 40.0))
    assert as_dict(loaded1) == {0: 4, 1: 2, 6: 4}  # rack 1's uplinks are busy: rack 2
    loaded2 = place(topo, free, 10, uplink_load(topo, 2, 40.0))
    assert as_dict(loaded2) == {0: 4, 1: 2, 3: 4}
    assert level_of(loaded1, topo) == ANY
    # The ring visits a rack's hosts together: it crosses the oversubscribed tier twice, not more.
    assert list(loaded1.hosts) == [0, 1, 6]


def test_cross_tier_cost_hand_computed(topo):
    # 2 GPUs, one on host 0 (rack 0) and one on host 3 (rack 1): ring flows 0->3 and 3->0, each S = 553 MB
    # (2 (n-1)/n S with n = 2). Each flow crosses a ToR uplink and a spine downlink: 4 tier links at weight 1.
    info = topo_info(topo)
    p = Placement((0, 3), (1, 1))
    s = 553e6
    job = pending(2)
    assert cross_tier_cost(job, p, view(topo, [4] * 9), info) == pytest.approx(4 * s)
    # Rack 0's uplink (3 hosts x 100 Gbit/s / 2:1 = 150 Gbit/s) carrying 75 Gbit/s: utilisation 0.5.
    load = np.zeros(topo.n_links)
    load[topo.link_id[("tor0", "spine0")]] = 75.0
    assert cross_tier_cost(job, p, view(topo, [4] * 9, load), info) == pytest.approx(4.5 * s)
    # Inside one rack nothing crosses an oversubscribed tier.
    assert cross_tier_cost(job, Placement((0, 1), (1, 1)), view(topo, [4] * 9, load), info) == 0.0


def test_levels_and_none(topo):
    info = topo_info(topo)
    assert [info.best_level(g) for g in (1, 4, 5, 12, 13)] == [HOST, HOST, RACK, RACK, ANY]
    assert place(topo, [1, 0, 0, 0, 0, 0, 0, 0, 1], 3) is None


def test_spans_racks_validly_on_a_large_fragmented_cluster():
    """A 64-GPU job on 10,240 GPUs with 1,000 scattered running jobs (speed: benchmarks/bench_core.py)."""
    topo = load_topology("leafspine,racks=40,hosts_per_rack=32,gpus_per_host=8,oversub=4,spines=8")
    rng = np.random.default_rng(0)
    free = topo.host_gpus.copy()
    for g in rng.choice([1, 2, 4, 8, 16, 32], size=1000, p=[0.4, 0.15, 0.15, 0.15, 0.1, 0.05]):
        scatter(free, int(g), rng)
    # Leave at most 40 free GPUs per rack so the job must span racks (the expensive case).
    for r in range(topo.n_racks):
        left = 40
        for h in np.flatnonzero(topo.host_rack == r):
            free[h] = min(free[h], left)
            left -= free[h]
    load = rng.uniform(0, 50, topo.n_links)
    v = ClusterView(topo, free, {}, 0.0, load)
    p = PLACEMENT.create("topo-bestfit").place(pending(64), v)
    assert p.n_gpus == 64 and level_of(p, topo) == ANY
    assert all(free[h] >= g for h, g in zip(p.hosts, p.gpus))
    assert len(set(topo.host_rack[list(p.hosts)].tolist())) == 2  # 40 + 24 GPUs: the fewest racks
