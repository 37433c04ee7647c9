"""Phase-aware cores inside a large ``tcp`` component (``phase_cores``), hand-computed.

Two 100 Gbit/s links. Jobs 1 and 2 (0.1 s compute, 10 Gbit per flow per iteration: 0.1 s alone) share link 0;
job 2 also crosses link 1 with job 3, which moves almost nothing (bytes-weighted, it gets what job 2 leaves).
Link 1 can bind (both at 100 Gbit/s at once) and joins the three into one component, larger than
``max_exact_jobs = 2``: the mean field solves it. Link 1 limits job 3 only, link 0 limits jobs 1 and 2.
"""

import numpy as np
import pytest

from netlab.network import NETWORKS, CommDemand

CAP = np.array([100.0, 100.0])
BYTES = 1.25e9


def jobs(phase2=0.0):
    return [CommDemand(1, np.array([0]), np.array([1.0]), BYTES, 0.1, iso_rate_gbps=100.0),
            CommDemand(2, np.array([0, 1]), np.array([1.0, 1.0]), BYTES, 0.1, iso_rate_gbps=100.0, phase=phase2),
            CommDemand(3, np.array([1]), np.array([1.0]), 1.25e6, 1.0, iso_rate_gbps=100.0)]


def tcp(**kw):
    return NETWORKS.create("tcp", jitter=0.0, max_exact_jobs=2, **kw)


# The mean field on link 0: r + d r = 100 with duty d = (10 / r) / (0.1 + 10 / r), so r^2 + 100 r - 10^4 = 0,
# r = 50 (sqrt 5 - 1) = 61.8 Gbit/s and an iteration of 0.1 + 10 / r = 0.2618 s, whatever the phases.
MEAN_FIELD_S = 0.1 + 10 / (50 * (np.sqrt(5) - 1))


@pytest.mark.parametrize("phase2", [0.0, 0.5])
def test_the_mean_field_alone_cannot_see_the_phases(phase2):
    sol = tcp().solve(jobs(phase2), CAP)
    assert [sol.iter_s[1], sol.iter_s[2]] == pytest.approx([MEAN_FIELD_S] * 2, rel=1e-2)


def test_a_core_in_step_shares_its_link_equally():
    # jobs 1 and 2 in step on link 0 (nothing else on it): 50 Gbit/s each for 0.2 s, iterations of 0.3 s
    net = tcp(phase_cores=True)
    sol = net.solve(jobs(0.0), CAP)
    assert [sol.iter_s[1], sol.iter_s[2]] == pytest.approx([0.3, 0.3], rel=1e-6)
    assert net.mean_field_stats()["core_jobs"] == 2  # job 3's core is itself alone: the mean field's answer


def test_a_core_half_shifted_interleaves_without_slowdown():
    # communication is half of a 0.2 s iteration: shifted by half a period, 1 and 2 never overlap on link 0
    sol = tcp(phase_cores=True).solve(jobs(0.5), CAP)
    assert [sol.iter_s[1], sol.iter_s[2]] == pytest.approx([0.2, 0.2], rel=1e-6)
    # job 3 keeps the mean field's answer: slowed by job 2's duty-weighted traffic on link 1, never below alone
    assert sol.iter_s[3] > 1.0 + 1.25e6 * 8 / 1e9 / 100


def test_a_core_solved_again_on_the_same_inputs_is_looked_up_and_a_moved_one_simulated():
    net = tcp(phase_cores=True)
    first = net.solve(jobs(0.5), CAP, now_s=0.0)
    again = net.solve(jobs(0.5), CAP, now_s=1.05)  # the same core (1, 2) on the same link: kept periods
    stats = net.mean_field_stats()
    assert (stats["core_cache_misses"], stats["core_cache_hits"]) == (1, 1)
    assert [again.iter_s[1], again.iter_s[2]] == [first.iter_s[1], first.iter_s[2]] == pytest.approx([0.2, 0.2])
    # a policy moved job 2 (another phase): other inputs, simulated again, not looked up
    net.solve(jobs(0.25), CAP, now_s=2.0)
    stats = net.mean_field_stats()
    assert (stats["core_cache_misses"], stats["core_cache_hits"]) == (2, 1)


def test_a_core_larger_than_its_limit_stays_with_the_mean_field():
    sol = tcp(phase_cores=True, max_core_jobs=1).solve(jobs(0.5), CAP)
    assert [sol.iter_s[1], sol.iter_s[2]] == pytest.approx([MEAN_FIELD_S] * 2, rel=1e-2)


def dumbbell_run(submit_s: dict, **kw):
    """The run of :func:`test_a_run_counts_the_cores_jobs_as_phase_aware_and_the_rest_as_blind` (jobs submitted at
    ``submit_s``, by id), its job table by id."""
    from netlab.policies.base import PlacementPolicy
    from netlab.sched import Placement
    from netlab.sim import SimConfig, Simulator
    from netlab.topology import load_topology
    from netlab.workload.job import Job
    from netlab.workload.zoo import JobModel, ModelZoo

    topo = load_topology("dumbbell,hosts_per_side=4,gpus_per_host=2,host_gbps=100,bottleneck_gbps=100")
    zoo = ModelZoo.default().with_model(JobModel("half", compute_s=0.1, grad_bytes=1.25e9)) \
        .with_model(JobModel("tiny", compute_s=1.0, grad_bytes=1.25e6))
    h = topo.host_index
    where = {1: ((h["l0"], h["r0"]), (1, 1)), 2: ((h["l1"], h["r1"]), (1, 1)), 3: ((h["l1"], h["l2"]), (1, 1))}

    class Fixed(PlacementPolicy):
        name = "fixed"

        def place(self, job, view):
            return Placement(*where[job.job_id])

    jobs = [Job(1, submit_s[1], 2, "half", 200), Job(2, submit_s[2], 2, "half", 200),
            Job(3, submit_s[3], 2, "tiny", 100)]
    cfg = SimConfig(network="tcp", network_kwargs=dict(jitter=0.0, max_exact_jobs=2, **kw), progress=False)
    return Simulator(topo, jobs, "fifo", Fixed(), config=cfg, zoo=zoo).run().jobs.set_index("job_id")


def test_a_run_counts_the_cores_jobs_as_phase_aware_and_the_rest_as_blind():
    # The same shape in the simulator, on a dumbbell of 2-GPU hosts: jobs 1 and 2 cross the bottleneck; job 3
    # (tiny gradient) runs between l1 and l2, so it shares l1's host links with job 2. The three form one
    # component (over max_exact_jobs = 2), which the mean field solves; the bottleneck limits 1 and 2, l1's link
    # job 3 only. With phase cores, 1 and 2 are simulated with phase (never blind); job 3 stays blind.
    at = {1: 0.0, 2: 0.0, 3: 0.0}
    plain, cores = dumbbell_run(at).phase_blind_s, dumbbell_run(at, phase_cores=True).phase_blind_s
    assert (plain > 0).all()
    assert cores[1] == 0.0 and cores[2] == 0.0 and cores[3] > 0


def test_phase_cores_must_be_a_bool():
    with pytest.raises(ValueError, match="phase_cores True or False"):
        NETWORKS.create("tcp", phase_cores="false")


def unequal(phase2=0.0):
    """Jobs 1 and 2 in step on link 0, job 2 moving half of job 1's bytes (5 Gbit per flow, 0.05 s alone)."""
    return [CommDemand(1, np.array([0]), np.array([1.0]), BYTES, 0.1, iso_rate_gbps=100.0),
            CommDemand(2, np.array([0, 1]), np.array([1.0, 1.0]), BYTES / 2, 0.1, iso_rate_gbps=100.0, phase=phase2),
            CommDemand(3, np.array([1]), np.array([1.0]), 1.25e6, 1.0, iso_rate_gbps=100.0)]


def test_the_cores_byte_weighting_is_core_alpha_and_leaves_the_mean_field_alone():
    # In step, byte-weighted sharing (core_alpha 1) gives job 2 a third of link 0 and job 1 two thirds: both
    # transfers end together 10 / 66.7 = 0.15 s after the 0.1 s compute, iterations of 0.25 s, in step for ever.
    # Per-connection sharing (0) gives job 2 half: it ends first, so it is faster than 0.25 s. The mean field
    # does not read core_alpha.
    by_bytes = tcp(phase_cores=True, core_alpha=1.0, lead=0.0).solve(unequal(), CAP).iter_s
    per_flow = tcp(phase_cores=True, core_alpha=0.0, lead=0.0).solve(unequal(), CAP).iter_s
    assert [by_bytes[1], by_bytes[2]] == pytest.approx([0.25, 0.25], rel=1e-6)
    assert per_flow[2] < 0.2  # at most 0.1 + 5 / 50: its transfer never gets less than half the link
    blind = [tcp(core_alpha=a).solve(unequal(), CAP).iter_s for a in (0.0, 1.0)]
    assert blind[0] == blind[1]


def test_core_alpha_defaults_to_the_models_alpha_when_none_and_is_checked():
    assert NETWORKS.create("tcp", alpha=0.3, core_alpha=None).params.core_alpha == 0.3
    assert NETWORKS.create("tcp").params.core_alpha == 0.75
    assert NETWORKS.create("dcqcn").params.core_alpha == NETWORKS.create("dcqcn").params.alpha
    with pytest.raises(ValueError, match="core_alpha"):
        NETWORKS.create("tcp", core_alpha=-2.0)


def test_kept_periods_are_reused_while_the_capacity_left_stays_within_the_tolerance_of_the_simulated_one():
    from netlab.network.tcp.cores import CACHE_RTOL, CoreCache

    cache, period = CoreCache(), np.array([0.2, 0.3])
    left = np.array([40.0, 80.0])
    cache.put(b"core", left, period)
    inside = 1 + 0.9 * CACHE_RTOL
    assert cache.get(b"core", left * np.array([inside, 1 / inside])) is period  # both links moved, each within
    assert cache.get(b"core", left * np.array([1.0, 1 + 1.1 * CACHE_RTOL])) is None  # one link moved beyond
    assert cache.get(b"other", left) is None
    assert (cache.hits, cache.misses) == (1, 2)


def test_a_core_is_warm_when_its_jobs_sat_in_one_core_with_one_job_joined_or_left_at_most():
    from netlab.network.tcp.cores import CoreCache

    cache = CoreCache()
    cache.settled([1, 2, 3, 4, 5, 9], [[1, 2, 3], [4, 5]])
    assert cache.is_warm([1, 2, 3])
    assert cache.is_warm([1, 2, 3, 7])  # job 7 joined
    assert cache.is_warm([1, 2])  # job 3 left
    assert cache.is_warm([1, 2, 7])  # 3 left, 7 joined
    assert not cache.is_warm([1, 7, 8])  # two joined
    assert not cache.is_warm([1, 2, 3, 4, 5])  # two cores merged: a new pattern to settle
    assert not cache.is_warm([9, 7])  # 9 was solved by the mean field, not in a core
    cache.settled([1, 2, 3], [])  # solved again, in no core
    assert not cache.is_warm([1, 2, 3])


def test_a_warm_core_is_simulated_over_the_shorter_horizon():
    # Jobs 1 and 2 form a core on link 0. Solved once (cold), then on 10% less capacity (a miss: simulated again,
    # but warm: they sit in the pattern the first simulation settled into); a fresh model solves the second input
    # cold. Two jobs of equal periods make the same events per iteration, so the warm simulation runs about
    # (WARM_HORIZON + 1) / (CORE_HORIZON + 1) of the cold one's events.
    from netlab.network.tcp.cores import CORE_HORIZON, WARM_HORIZON

    net = tcp(phase_cores=True)
    net.solve(jobs(0.5), CAP, now_s=0.0)
    before = net.mean_field_stats()["core_events"]
    net.solve(jobs(0.5), CAP * 0.9, now_s=1.05)
    warm = net.mean_field_stats()["core_events"] - before
    cold_net = tcp(phase_cores=True)
    cold_net.solve(jobs(0.5), CAP * 0.9, now_s=1.05)
    cold = cold_net.mean_field_stats()["core_events"]
    assert net.mean_field_stats()["core_cache_misses"] == 2
    assert warm <= cold * (WARM_HORIZON + 2) / (CORE_HORIZON + 1)
    assert warm >= cold * (WARM_HORIZON - 1) / (CORE_HORIZON + 1)


def test_used_links_are_the_sorted_links_of_the_entries_and_each_entry_s_place_among_them():
    # entries on links 5, 2, 5, 7 of 9: used 2, 5, 7; the entries sit at places 1, 0, 1, 2 (np.unique's answer)
    from netlab.network.tcp.cores import used_links

    links, place = used_links(np.array([5, 2, 5, 7]), 9)
    assert links.tolist() == [2, 5, 7] and place.tolist() == [1, 0, 1, 2]
    links, place = used_links(np.zeros(0, np.int64), 3)
    assert links.tolist() == [] and place.tolist() == []
    rng = np.random.default_rng(3)
    for _ in range(20):
        x = rng.integers(0, 50, size=int(rng.integers(1, 200)))
        links, place = used_links(x, 50)
        want, inverse = np.unique(x, return_inverse=True)
        assert np.array_equal(links, want) and np.array_equal(place, inverse)


def test_the_binding_part_s_links_are_put_back_in_the_order_the_walk_over_every_link_meets_them():
    # Rows 10 and 11 (local jobs 0 and 1) on links 7, 3, 9 and 9, 4. The binding part holds links 9 and 3 (numbered
    # 0 and 1 in the order their kept places were met) and 4 (2). Over every link row by row the walk meets 7, 3, 9,
    # then 4: 3 first (row 0, place 1), then 9 (row 0, place 2), then 4 (row 1, place 1).
    from netlab.network.tcp.core_resolve import full_order

    t_links = np.zeros((12, 3), np.int64)
    t_links[10], t_links[11, :2] = [7, 3, 9], [9, 4]
    n_links = np.zeros(12, np.int64)
    n_links[10], n_links[11] = 3, 2
    job, link = np.array([0, 0, 1, 1]), np.array([0, 1, 0, 2])  # (0 on 9 and 3, 1 on 9 and 4)
    key = full_order(job, link, 3, np.array([10, 11]), np.array([9, 3, 4]), t_links, n_links)
    assert key.tolist() == [2, 1, 3 + 1]  # 9: row 0 place 2; 3: row 0 place 1; 4: row 1 (x 3 places) place 1
    assert np.argsort(key).tolist() == [1, 0, 2]


def test_cores_of_one_job_change_no_time_in_a_run():
    # max_core_jobs 1 simulates no core, so a run with phase cores takes the default re-solve's times, and its jobs
    # are as blind (the dumbbell run, job 2 submitted 5 s later: the re-solves come as jobs join)
    at = {1: 0.0, 2: 5.0, 3: 0.0}
    plain, one = dumbbell_run(at), dumbbell_run(at, phase_cores=True, max_core_jobs=1)
    assert plain.phase_blind_s[1] > 0 and plain.phase_blind_s[2] > 0  # (the mean field ran)
    assert plain.end_s.tolist() == one.end_s.tolist() and plain.phase_blind_s.tolist() == one.phase_blind_s.tolist()
