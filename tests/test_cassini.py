"""CASSINI: hand-computed compatibility scores, the affinity walk, the ranker and an end-to-end run."""

from __future__ import annotations

import networkx as nx
import numpy as np
import pytest

from netlab.network import NETWORKS
from netlab.network.demand import build_demand
from netlab.policies.base import PlacementPolicy
from netlab.network.circle import unified_circle
from netlab.policies.cassini import Cassini, Wave, affinity_graph, assign_phases, evaluate, optimise
from netlab.sched import ClusterView, JobState, Placement
from netlab.sim import simulate
from netlab.topology import load_topology
from netlab.workload.job import Job
from netlab.workload.zoo import JobModel, ModelZoo

C = 100.0  # link capacity, Gbit/s


def square(period_s=1.0, window_s=0.5, rate_gbps=C, start_s=0.0):
    return Wave(period_s, start_s, window_s, rate_gbps)


# -------------------------------------------------------------------- score
def test_two_square_waves_interleave_after_half_period_shift():
    a = square()
    # Aligned: both send C during the same half: excess C over half the circle -> 1 - (B/2 * C) / (B * C) = 0.5.
    assert evaluate([a, a], C, [0.0, 0.0]) == pytest.approx(0.5, abs=1e-12)
    # A quarter-period apart they overlap for a quarter: 1 - 0.25 = 0.75.
    assert evaluate([a, a], C, [0.0, 0.25]) == pytest.approx(0.75, abs=1e-12)
    res = optimise([a, a], C)
    assert res.score == 1.0
    assert res.phases == (0.0, 0.5)


def test_coordinate_descent_finds_zero_excess_for_three_jobs():
    # One job at full capacity half the time, two at half capacity half the time: the only zero-excess
    # arrangement puts the two small ones together, opposite the big one.
    big, small = square(rate_gbps=C), square(rate_gbps=C / 2)
    start = [0.0, 0.0, 0.0]  # all aligned: excess C over half the circle -> 1 - 0.5 = 0.5
    assert evaluate([big, small, small], C, start) == pytest.approx(0.5)
    res = optimise([big, small, small], C, start, fixed=[0])
    assert res.score == pytest.approx(1.0)
    assert res.phases == pytest.approx((0.0, 0.5, 0.5))
    # Three full-rate jobs each communicating a third of the time: one at each third.
    third = square(window_s=1 / 3)
    res = optimise([third] * 3, C, [0.0, 0.0, 0.0])
    assert res.score == pytest.approx(1.0)
    assert sorted(res.phases) == pytest.approx([0.0, 1 / 3, 2 / 3])


def test_coordinate_descent_moves_jobs_by_the_smallest_step():
    # Windows of a third after two thirds of compute: A (phase 0) on [2/3, 1), B (phase 1/2) on [1/6, 1/2),
    # C held at phase 1/4 on [11/12, 1/4): it overlaps each by 1/12. A can slide back to [7/12, 11/12) and
    # B forward to [1/4, 7/12): the smallest moves that clear C, which leave no overlap at all.
    third = square(window_s=1 / 3, start_s=2 / 3)
    assert evaluate([third] * 3, C, [0.0, 0.5, 0.25]) == pytest.approx(1 - 2 / 12)
    res = optimise([third] * 3, C, [0.0, 0.5, 0.25], fixed=[2])
    assert res.score == pytest.approx(1.0)
    assert res.phases == pytest.approx((11 / 12, 7 / 12, 0.25))


def test_different_periods_meet_on_the_lcm_circle():
    short, long = square(period_s=1.0, window_s=0.25), square(period_s=2.0, window_s=0.75)
    circle = unified_circle([1.0, 2.0])
    assert (circle.step_s, circle.counts.tolist(), circle.bins, circle.exact) == (2.0 / 72, [36, 72], 72, True)
    # At phase 0 the long job's window [0, 0.75) overlaps the short one's first window [0, 0.25):
    # excess C for 0.25 s of a 2 s circle -> 1 - 0.25 / 2 = 0.875.
    assert evaluate([short, long], C, [0.0, 0.0]) == pytest.approx(0.875)
    # The long window fits between the short job's windows at 0 and 1 s: [0.25, 1.0).
    res = optimise([short, long], C)
    assert res.score == pytest.approx(1.0)
    assert res.phases[1] == pytest.approx(0.125)  # 0.25 s of a 2 s period
    # 1 s and 1.5 s: quantised to 48 and 72 steps, the circle is their LCM, 144 steps = 3 s.
    assert unified_circle([1.0, 1.5]).bins == 144
    # 1 s and 0.7 s: LCM of 72 and 50 steps is 1800 > 4 x 72, so the circle is capped at 4 longest periods.
    capped = unified_circle([1.0, 0.7])
    assert (capped.counts.tolist(), capped.bins, capped.exact) == ([72, 50], 288, False)


# ----------------------------------------------------------------- affinity
def test_affinity_walk_assigns_one_phase_per_job_and_drops_the_closing_link():
    # Jobs 1, 2, 3 pairwise share links 10 (1, 2), 11 (2, 3), 12 (1, 3): a cycle.
    link_jobs = {10: (1, 2), 11: (2, 3), 12: (1, 3), 13: (3,)}
    g = affinity_graph(link_jobs)
    assert ("link", 13) not in g and len(nx.cycle_basis(g)) == 1
    a = square()
    asg = assign_phases(1, link_jobs, lambda l: [a] * len(link_jobs[l]), {l: C for l in link_jobs},
                        current={2: 0.0, 3: 0.0})
    # From job 1 (phase 0): link 10 places job 2 opposite it, link 12 places job 3 opposite it;
    # link 11 then joins two placed jobs and is dropped: first assignment wins.
    assert asg.order == [1, 2, 3]
    assert asg.phases == {1: 0.0, 2: 0.5, 3: 0.5}
    assert asg.closing == [11]
    assert asg.link_scores == {10: 1.0, 12: 1.0}
    assert evaluate([a, a], C, [asg.phases[2], asg.phases[3]]) == pytest.approx(0.5)  # the dropped link collides


def test_affinity_walk_freezes_jobs_beyond_max_jobs():
    link_jobs = {10: (1, 2, 3)}
    third = square(window_s=1 / 3)
    asg = assign_phases(1, link_jobs, lambda l: [third] * 3, {10: C}, current={2: 0.0, 3: 0.25}, max_jobs=2)
    assert asg.frozen == {3} and asg.phases[3] == 0.25 and asg.order == [1, 2]


# ------------------------------------------------------------------- ranker
class Fixed(PlacementPolicy):
    """Proposes one given placement (to hand-build the candidate set)."""

    name = "fixed"

    def __init__(self, hosts):
        self.hosts = tuple(hosts)

    def place(self, job, view):
        return Placement(self.hosts, (1,) * len(self.hosts))


def listed(*hosts, **kw):
    """A Cassini whose candidates are these placements (one GPU per host), in this order."""
    class Listed(Cassini):
        def propose(self, job, view):
            return [Fixed(h).place(job, view) for h in hosts]
    return Listed(**kw)


# 2-GPU ring on two hosts: one flow each way of grad bytes; on a 100 Gbit/s uplink the window is grad*8/1e11.
ZOO = ModelZoo({"half": JobModel("half", 0.010, 125e6),  # 10 ms compute, 10 ms window
                "heavy": JobModel("heavy", 0.005, 187.5e6),  # 5 ms compute, 15 ms window
                "third": JobModel("third", 0.020, 125e6),  # 20 ms compute, 10 ms window
                "quick": JobModel("quick", 0.005, 62.5e6)})  # 5 ms compute, 5 ms window


def running_job(topo, job_id, model, hosts, phase):
    demand, _ = build_demand(topo, ZOO[model], "ring", job_id, hosts, (1,) * len(hosts), 0.0, phase)
    js = JobState(Job(job_id, 0.0, len(hosts), model, 100), demand.iter_s(demand.iso_rate_gbps))
    js.status, js.placement, js.demand, js.phase = "running", Placement(tuple(hosts), (1,) * len(hosts)), demand, phase
    return js


def cluster(spec, running, network="phase"):
    topo = load_topology(spec)
    free = topo.host_gpus.copy()
    jobs = {}
    for job_id, model, hosts, phase in running:
        jobs[job_id] = running_job(topo, job_id, model, hosts, phase)
        free[list(hosts)] -= 1
    return topo, ClusterView(topo, free, jobs, 0.0, zoo=ZOO, network=NETWORKS.create(network))


FOUR_RACKS = "leafspine,racks=4,hosts_per_rack=2,gpus_per_host=1,oversub=2,spines=1"  # 100 Gbit/s uplinks


@pytest.mark.parametrize("network", ["phase", "fair"])
def test_ranker_prefers_the_candidate_that_interleaves(network):
    # R1 (half duty) on hosts 0, 2 (racks 0, 1); R2 (75% duty) on hosts 4, 6 (racks 2, 3).
    topo, view = cluster(FOUR_RACKS, [(1, "half", (0, 2), 0.25), (2, "heavy", (4, 6), 0.0)], network)
    assert topo.link_capacity_gbps.max() == C
    new = JobState(Job(9, 0.0, 2, "half", 100), 0.02)
    # Y collides with R2 (listed first, so only the score can put X ahead).
    policy = listed((5, 7), (1, 3))
    ranked = policy.rank(new, view)
    x, y = (ranked[0], ranked[1])
    assert x.placement.hosts == (1, 3) and y.placement.hosts == (5, 7)
    assert x.score == pytest.approx(1.0)
    # Y: its 10 ms window fits R2's 5 ms gap at best half way: 5 ms of 20 ms over capacity -> 0.75.
    assert y.score == pytest.approx(0.75)
    # X communicates while R1 computes: R1's window starts at (0.25 + 0.5) of its period, X's half a period later.
    assert x.phase == pytest.approx(0.75)
    p = policy.place(new, view)
    assert p.hosts == (1, 3) and p.shifts == ()
    assert p.phase == (pytest.approx(0.75) if network == "phase" else None)


def test_ranker_prefers_no_sharing_on_a_tie():
    topo, view = cluster(FOUR_RACKS, [(1, "half", (0, 2), 0.0)])
    new = JobState(Job(9, 0.0, 2, "half", 100), 0.02)
    policy = listed((1, 3), (4, 5))
    ranked = policy.rank(new, view)
    assert [s.score for s in ranked] == [1.0, 1.0]  # (1, 3) interleaves perfectly with R1
    assert ranked[0].placement.hosts == (4, 5) and ranked[0].shared_links == 0 and ranked[0].phase is None


def test_ranker_rephases_a_running_job_when_the_new_one_cannot_fit():
    # Uplinks of 100 Gbit/s shared by A (0, 3), B (1, 4) and the new job C (2, 5), each a third of the time
    # at full rate. A's window is [2/3, 1) of the period, B's (phase 1/2) [1/6, 1/2): two gaps of 1/6.
    spec = "leafspine,racks=2,hosts_per_rack=3,gpus_per_host=1,oversub=3,spines=1"
    topo, view = cluster(spec, [(1, "third", (0, 3), 0.0), (2, "third", (1, 4), 0.5)])
    new = JobState(Job(9, 0.0, 2, "third", 100), 0.03)
    alone = listed((2, 5), max_rephase=0).rank(new, view)[0]
    assert alone.score == pytest.approx(5 / 6) and alone.shifts == {}  # C's third overlaps by 1/6 at best
    policy = listed((2, 5))
    s = policy.rank(new, view)[0]
    assert s.score == pytest.approx(1.0) and s.shifts and set(s.shifts) <= {1, 2}
    phases = {1: 0.0, 2: 0.5, **s.shifts, 9: s.phase}
    cap = float(topo.link_capacity_gbps[view.running[1].demand.links].min())
    demand = view.demand_for(new, s.placement)
    waves = [Wave.from_demand(view.running[j].demand, 1.0, 0.03) for j in (1, 2)] + [Wave.from_demand(demand, 1, .03)]
    assert evaluate(waves, cap, [phases[j] for j in (1, 2, 9)]) == pytest.approx(1.0)
    p = policy.place(new, view)
    assert p.phase == pytest.approx(s.phase) and p.shifts == tuple(sorted(s.shifts.items()))


@pytest.mark.parametrize("model", ["quick", "half", "third"])  # period 10, 20, 30 ms; the running jobs' is 20 ms
def test_cached_link_layouts_match_the_direct_scores(model):
    from netlab.policies.cassini.score import scan, wave_row

    topo, view = cluster(FOUR_RACKS, [(1, "half", (0, 2), 0.3), (2, "heavy", (1, 3), 0.6)])
    policy = Cassini()
    dec = policy.decision(view)
    new = JobState(Job(9, 0.0, 2, model, 100), 0.02)
    demand = view.demand_for(new, Placement((4, 6), (1, 1)))
    row = wave_row(demand, demand.iter_s(demand.iso_rate_gbps))  # as if it shared the link with weight 1
    link = int(np.intersect1d(view.running[1].demand.links, view.running[2].demand.links)[0])
    waves = dec.waves(link, row)
    assert len(waves) == 3
    fast, count = dec.root_scan(link, row)
    direct, circle = scan(waves, C, [0.3, 0.6, None], 2)
    assert count == circle.counts[-1] and fast == pytest.approx(direct)
    assert dec.score_at(link, {2: 0.1}, row, 0.4) == pytest.approx(evaluate(waves, C, [0.3, 0.1, 0.4]))
    assert dec.score_at(link, {2: 0.1}) == pytest.approx(evaluate(waves[:2], C, [0.3, 0.1]))


# --------------------------------------------------------------- end to end
def test_cassini_interleaves_two_jobs_on_a_shared_uplink_in_the_simulator():
    # 3 racks of 2 one-GPU hosts: two 3-GPU jobs must both cross the same rack's 50 Gbit/s uplink
    # (4:1 oversubscribed). Both start at t=0, so any placement that keeps default phases aligns them.
    topo = load_topology("leafspine,racks=3,hosts_per_rack=2,gpus_per_host=1,oversub=4,spines=1")
    vgg = ModelZoo.default()["vgg16"]
    window_s = 2 * 2 / 3 * vgg.grad_bytes * 8 / 50e9  # ring of 3: 4/3 of the gradient per flow at 50 Gbit/s
    iters = 2000
    jobs = [Job(0, 0.0, 3, "vgg16", iters), Job(1, 0.0, 3, "vgg16", iters)]
    jct = {}
    for placement in ("cassini", "consolidated", "first-fit"):
        r = simulate(topo, jobs, ordering="tiresias", placement=placement, network="phase", seed=0)
        jct[placement] = r.summary["avg_jct_s"]
    # Interleaved: each job communicates while the other computes, at the full 50 Gbit/s.
    assert jct["cassini"] == pytest.approx(iters * (vgg.compute_s + window_s), rel=1e-6)
    # Aligned: they split the uplink during a common window, which doubles.
    assert jct["consolidated"] == pytest.approx(iters * (vgg.compute_s + 2 * window_s), rel=1e-6)
    assert jct["first-fit"] == pytest.approx(jct["consolidated"], rel=1e-6)
