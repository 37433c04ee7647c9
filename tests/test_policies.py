"""Baseline scheduling policies: hand-computed orderings, placements on hand-built free maps, and end-to-end runs."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from netlab.policies import ORDERING, PLACEMENT, PREEMPTION
from netlab.sched import ClusterView, JobState, Placement
from netlab.sim import Simulator, simulate
from netlab.sim.simulator import SimConfig
from netlab.topology import load_topology
from netlab.workload.job import Job, isolated_iter_s
from netlab.workload.zoo import ModelZoo

ZOO = ModelZoo.default()
ONE_GPU = "leafspine,racks=1,hosts_per_rack=1,gpus_per_host=1,oversub=1,spines=1"
TWO_RACKS = "leafspine,racks=2,hosts_per_rack=4,gpus_per_host=8,oversub=4,spines=1"
NO_RESTART = dict(checkpoint_s=0.0, restore_s=0.0)


@pytest.fixture(scope="module")
def one_gpu():
    return load_topology(ONE_GPU)


@pytest.fixture(scope="module")
def two_gpus():
    return load_topology("leafspine,racks=1,hosts_per_rack=1,gpus_per_host=2,oversub=1,spines=1")


@pytest.fixture(scope="module")
def two_racks():
    return load_topology(TWO_RACKS)


def job(topo, job_id, submit_s, duration_s, gpus=1, model="resnet50"):
    """A job lasting ``duration_s`` at isolated speed on ``topo``."""
    it = duration_s / isolated_iter_s(ZOO[model], "ring", gpus, topo)
    return Job(job_id, float(submit_s), gpus, model, it)


def by_id(result):
    return result.jobs.set_index("job_id")


def approx(x):
    return pytest.approx(x, rel=1e-9, abs=1e-6)


# ------------------------------------------------------------------ ordering
def test_fifo_starts_in_submit_order():
    topo = load_topology("leafspine,racks=1,hosts_per_rack=2,gpus_per_host=4,oversub=1,spines=1")
    # Every job needs all 8 GPUs; ids deliberately not in submit order, the longest first.
    jobs = [job(topo, 7, 0, 300, 8), job(topo, 3, 1, 100, 8), job(topo, 9, 2, 50, 8), job(topo, 1, 3, 200, 8)]
    r = by_id(simulate(topo, jobs, ordering="fifo", network="ideal"))
    assert list(r.sort_values("start_s").index) == [7, 3, 9, 1]
    assert r.start_s[3] == approx(300) and r.start_s[9] == approx(400) and r.start_s[1] == approx(450)
    assert r.end_s[1] == approx(650)


def test_fifo_is_strict_and_fjf_backfills():
    # 8 GPUs. A (6 GPUs, 1100 s) at 0; B (4 GPUs, 100 s) at 1 does not fit (2 free); C (1 GPU, 10 s) at 2 would.
    # Strict FIFO: C waits behind B (head-of-line blocking); both start when A ends. FJF: C starts at once.
    topo = load_topology("leafspine,racks=1,hosts_per_rack=1,gpus_per_host=8,oversub=1,spines=1")
    jobs = [job(topo, 0, 0, 1100, 6), job(topo, 1, 1, 100, 4), job(topo, 2, 2, 10, 1)]
    assert ORDERING.create("fifo").backfill is False and ORDERING.create("fjf").backfill is True
    f = simulate(topo, jobs, ordering="fifo", network="ideal")
    assert f.config["backfill"] is False
    f = by_id(f)
    assert f.start_s[1] == approx(1100) and f.start_s[2] == approx(1100) and f.end_s[2] == approx(1110)
    b = by_id(simulate(topo, jobs, ordering="fjf", network="ideal"))
    assert b.start_s[2] == approx(2) and b.end_s[2] == approx(12) and b.start_s[1] == approx(1100)
    # SimConfig.backfill overrides the policy's own choice both ways.
    assert by_id(simulate(topo, jobs, ordering="fifo", network="ideal", backfill=True)).start_s[2] == approx(2)
    assert by_id(simulate(topo, jobs, ordering="fjf", network="ideal", backfill=False)).start_s[2] == approx(1100)


def test_sjf_picks_shortest_waiting_job(one_gpu):
    jobs = [job(one_gpu, 0, 0, 100), job(one_gpu, 1, 1, 300), job(one_gpu, 2, 2, 50), job(one_gpu, 3, 3, 200)]
    r = by_id(simulate(one_gpu, jobs, ordering="sjf", network="ideal"))
    # 0 runs 0-100 (alone), then 2 (50 s) 100-150, 3 (200 s) 150-350, 1 (300 s) 350-650.
    assert [r.start_s[i] for i in (0, 2, 3, 1)] == [approx(0), approx(100), approx(150), approx(350)]
    assert r.end_s[1] == approx(650)
    assert r.preemptions.sum() == 0
    assert not ORDERING.get("sjf")().preemptive


@pytest.mark.parametrize("restart_s, a_end", [(0.0, 1100.0), (30.0, 1130.0)])
def test_srtf_preempts_long_job_for_short_arrival(one_gpu, restart_s, a_end):
    # A: 1000 s at t=0. B: 100 s at t=100 (A has 900 s left > 100: preempt). C: 2000 s at t=150 (never preempts).
    jobs = [job(one_gpu, 0, 0, 1000), job(one_gpu, 1, 100, 100), job(one_gpu, 2, 150, 2000)]
    r = by_id(simulate(one_gpu, jobs, ordering="srtf", network="ideal",
                       checkpoint_s=restart_s / 3, restore_s=2 * restart_s / 3))
    assert r.start_s[1] == approx(100) and r.end_s[1] == approx(200)
    assert r.jct_s[1] == approx(100)
    # A resumes at 200 (900 s left < C's 2000 s), pays the restart, then C runs.
    assert r.end_s[0] == approx(a_end) and r.jct_s[0] == approx(a_end)
    assert r.start_s[2] == approx(a_end) and r.end_s[2] == approx(a_end + 2000)
    assert list(r.preemptions) == [1, 0, 0]


def test_srtf_key_is_remaining_isolated_time(two_racks):
    js = JobState(Job(5, 3.0, 2, "resnet50", 100), iso_iter_s=2.0)
    pol = ORDERING.create("srtf")
    assert pol.key(js, 0.0) == (200.0, 3.0, 5)
    js.remaining = 40.0
    assert pol.key(js, 0.0) == (80.0, 3.0, 5)
    assert pol.preemptive and pol.dynamic_keys


@pytest.mark.parametrize("restart_s, a_end", [(0.0, 350.0), (30.0, 380.0)])
def test_tiresias_demotes_at_threshold_and_is_preempted(one_gpu, restart_s, a_end):
    # Threshold 100 GPU-s. A (1 GPU, 300 s) at t=0; B (50 s) arrives at t=10 into queue 0 behind A (FIFO:
    # no preemption). At t=100 A has 100 GPU-s: demoted to queue 1, so B preempts it exactly then.
    pol = ORDERING.create("tiresias", thresholds_gpu_s=(100.0,))
    jobs = [job(one_gpu, 0, 0, 300), job(one_gpu, 1, 10, 50)]
    r = by_id(simulate(one_gpu, jobs, ordering=pol, network="ideal",
                       checkpoint_s=restart_s / 3, restore_s=2 * restart_s / 3))
    assert r.start_s[1] == approx(100) and r.end_s[1] == approx(150)
    assert r.jct_s[1] == approx(140)
    assert r.end_s[0] == approx(a_end)
    assert list(r.preemptions) == [1, 0]
    # Same workload under FIFO: no preemption, B waits for A.
    f = by_id(simulate(one_gpu, jobs, ordering="fifo", network="ideal"))
    assert f.start_s[1] == approx(300)


def test_tiresias_key_changes_from_queue_0_to_1():
    pol = ORDERING.create("tiresias", thresholds_gpu_s=(100.0, 1000.0), within_queue="submit")
    js = JobState(Job(4, 7.0, 2, "resnet50", 1e6), iso_iter_s=1.0)
    js.status, js.last_update_s, js.attained_gpu_s = "running", 10.0, 20.0
    # 2 GPUs, 20 GPU-s attained at t=10: crosses 100 GPU-s at t = 10 + 80/2 = 50.
    assert pol.key(js, 10.0) == (0, 7.0, 4)
    assert pol.next_key_change(js, 10.0) == approx(50.0)
    assert pol.key(js, 49.9) == (0, 7.0, 4)
    assert pol.key(js, 50.0) == (1, 7.0, 4)
    # Next threshold 1000 GPU-s: 900 more at 2 GPUs -> t = 50 + 450.
    assert pol.next_key_change(js, 50.0) == approx(500.0)
    assert pol.key(js, 500.0) == (2, 7.0, 4)
    assert pol.next_key_change(js, 500.0) is None
    default = ORDERING.create("tiresias")
    assert default.thresholds_gpu_s == (3250.0, 7200.0) and default.within_queue == "running-first"


def test_tiresias_running_first_keys_follow_the_queue_line():
    # Tiresias' queue lists, as keys: (queue, tier, ...) with running jobs (tier 0) ahead of pending ones (tier 1).
    pol = ORDERING.create("tiresias", thresholds_gpu_s=(100.0,))
    a, b, c = (JobState(Job(i, float(i), 1, "resnet50", 1e6), iso_iter_s=1.0) for i in range(3))
    for js in (a, b, c):
        js.status = "waiting"
    ka, kb, kc = pol.key(a, 0.0), pol.key(b, 1.0), pol.key(c, 2.0)
    assert ka < kb < kc and ka[:2] == (0, 1)  # arrivals join the end of queue 0, in arrival order
    assert pol.key(b, 5.0) == kb  # nothing happened to it: same key (keys are recomputed freely)
    c.status, c.last_update_s = "running", 3.0  # c starts first (e.g. backfill): it joins the running jobs,
    kc = pol.key(c, 3.0)
    assert kc[:2] == (0, 0) and kc < ka  # ahead of every pending job of its queue
    a.status, a.last_update_s = "running", 4.0
    assert kc < pol.key(a, 4.0)  # running jobs in the order they started
    # c is preempted at t=10 (by a job of queue 0? no: only from a higher queue; here just the transition):
    c.status, c.attained_gpu_s = "waiting", 7.0
    kc = pol.key(c, 10.0)
    assert kc == (0, 1, -10.0, kc[3]) and kc < kb  # preempted: ahead of the older pending jobs
    # a runs on past 100 GPU-s: demoted at t=104 to the end of queue 1, behind its pending jobs, for that
    # instant's pass; an instant later it joins queue 1's running jobs.
    a.attained_gpu_s = 0.0
    assert pol.next_key_change(a, 4.0) == approx(104.0)
    k1 = pol.key(a, 104.0)
    assert k1[:3] == (1, 1, 1.0)
    t = pol.next_key_change(a, 104.0)
    assert 104.0 < t < 104.0 + 1e-9
    k2 = pol.key(a, t)
    assert k2[:2] == (1, 0) and pol.key(a, t + 1.0) == k2
    assert pol.next_key_change(a, t) is None  # last queue


def test_tiresias_running_jobs_stay_ahead_of_older_pending_jobs(two_gpus):
    # X (1 GPU, 300 s) at 0; P (2 GPUs, 100 s) at 1 waits (1 GPU free); R (1 GPU, 1000 s) at 2 fits and starts.
    # t=300, X ends: P, older, is pending behind the running R in queue 0: it waits for R (ends 1002) and
    # runs 1002-1102. Submit order inside a queue instead lets P preempt R at 300 (R resumes at 400, 702 s left).
    jobs = [job(two_gpus, 0, 0, 300), job(two_gpus, 1, 1, 100, gpus=2), job(two_gpus, 2, 2, 1000)]
    r = by_id(simulate(two_gpus, jobs, ordering="tiresias", network="ideal", **NO_RESTART))
    assert r.start_s[1] == approx(1002) and r.end_s[1] == approx(1102) and r.end_s[2] == approx(1002)
    assert r.preemptions.sum() == 0
    pol = ORDERING.create("tiresias", within_queue="submit")
    s = by_id(simulate(two_gpus, jobs, ordering=pol, network="ideal", **NO_RESTART))
    assert s.start_s[1] == approx(300) and s.end_s[1] == approx(400) and s.end_s[2] == approx(1102)
    assert list(s.preemptions) == [0, 0, 1]


def test_tiresias_demoted_job_goes_behind_pending_jobs_of_its_new_queue(two_gpus):
    # Threshold 100 GPU-s, 2 GPUs. Z (1 GPU, 100 s) at 0; D (2 GPUs, 1000 s) at 1 waits; P (1 GPU, 1000 s)
    # at 2 fits and starts. t=102: P reaches 100 GPU-s, moves to queue 1; D (queue 0) preempts it.
    # t=152: D reaches 100 GPU-s (2 GPUs x 50 s) and is appended to queue 1 behind the pending P, which
    # therefore preempts it (P needs 1 GPU, D frees 2): P runs 152-1052 (900 s left), D 1052-2002 (950 s left).
    jobs = [job(two_gpus, 0, 0, 100), job(two_gpus, 1, 1, 1000, gpus=2), job(two_gpus, 2, 2, 1000)]
    pol = ORDERING.create("tiresias", thresholds_gpu_s=(100.0,))
    r = by_id(simulate(two_gpus, jobs, ordering=pol, network="ideal", **NO_RESTART))
    assert r.start_s[1] == approx(102) and r.end_s[2] == approx(1052) and r.end_s[1] == approx(2002)
    assert list(r.preemptions) == [0, 1, 1]
    # In submit order D, submitted first, preempts P at 100 (Z ends); at 150 D moves down and P (queue 0)
    # takes one GPU back; at 152 P moves down too, behind D (older), which runs 152-1102; P ends at 2002.
    pol = ORDERING.create("tiresias", thresholds_gpu_s=(100.0,), within_queue="submit")
    s = by_id(simulate(two_gpus, jobs, ordering=pol, network="ideal", **NO_RESTART))
    assert s.start_s[1] == approx(100) and s.end_s[1] == approx(1102) and s.end_s[2] == approx(2002)
    assert list(s.preemptions) == [0, 1, 2]


def test_tiresias_starvation_guard_promotes_waiting_job():
    pol = ORDERING.create("tiresias", thresholds_gpu_s=(100.0,), starve_factor=2.0)
    assert pol.dynamic_keys and pol.round_s == 60.0
    js = JobState(Job(1, 0.0, 1, "resnet50", 1e6), iso_iter_s=1.0)
    js.status, js.attained_gpu_s, js.run_s, js.last_update_s = "waiting", 150.0, 150.0, 200.0
    assert pol.key(js, 400.0)[0] == 1  # waited 200 s <= 2 x 150 s
    assert pol.key(js, 500.1)[0] == 0  # waited 300.1 s > 300 s: promoted
    js.status, js.last_update_s = "running", 500.1
    assert pol.key(js, 550.0)[0] == 0  # attained counted afresh from the promotion (49.9 GPU-s)
    assert pol.next_key_change(js, 500.1) == approx(600.1)


def test_themis_highest_rho_first_at_lease_boundary(one_gpu):
    # Leases of 100 s. A (1000 s) at 0; C (500 s) at 5; B (100 s) at 10.
    # t=100: rho A = (100+900)/1000 = 1.0, C = (95+500)/500 = 1.19, B = (90+100)/100 = 1.9 -> B preempts A.
    # t=200: B done; rho A = 1.1, C = (195+500)/500 = 1.39 -> C (submitted before B, yet second).
    # t=500: A has 900 s left, rho A = (500+900)/1000 = 1.4 > C = (495+200)/500 = 1.39 -> A preempts C.
    # t=600: rho A = (600+800)/1000 = 1.4 < C = (595+200)/500 = 1.59 -> C back; C ends 800, A 800-1600.
    pol = ORDERING.create("themis", lease_s=100.0)
    assert pol.round_s == 100.0 and pol.preemptive and not pol.preempt_on_events and not pol.dynamic_keys
    jobs = [job(one_gpu, 0, 0, 1000), job(one_gpu, 2, 5, 500), job(one_gpu, 1, 10, 100)]
    r = by_id(simulate(one_gpu, jobs, ordering=pol, network="ideal", **NO_RESTART))
    assert r.start_s[1] == approx(100) and r.end_s[1] == approx(200)
    assert r.start_s[2] == approx(200) and r.end_s[2] == approx(800)
    assert r.end_s[0] == approx(1600)
    assert r.preemptions[0] == 2 and r.preemptions[2] == 1 and r.preemptions[1] == 0
    # Contrast: FIFO would have run C (submitted first) before B.
    f = by_id(simulate(one_gpu, jobs, ordering="fifo", network="ideal"))
    assert f.start_s[2] < f.start_s[1]


def test_themis_rho():
    pol = ORDERING.create("themis")
    assert pol.lease_s == 600.0 and pol.round_s == 600.0
    js = JobState(Job(3, 100.0, 1, "resnet50", 50), iso_iter_s=4.0)  # 200 s alone
    js.remaining = 25.0  # 100 s left
    assert pol.rho(js, 300.0) == approx((200.0 + 100.0) / 200.0)
    assert pol.key(js, 300.0) == (-1.5, 100.0, 3)


# ----------------------------------------------------------------- placement
def view_of(topo, free, running=()):
    free = np.asarray(free, dtype=np.int64)
    return ClusterView(topo, free, {js.job_id: js for js in running}, 0.0)


def pending(gpus, job_id=100):
    return JobState(Job(job_id, 0.0, gpus, "resnet50", 10), iso_iter_s=1.0)


def running_on(job_id, hosts, gpus):
    js = JobState(Job(job_id, 0.0, sum(gpus), "resnet50", 10), iso_iter_s=1.0)
    js.status, js.placement = "running", Placement(tuple(hosts), tuple(gpus))
    return js


def as_dict(p: Placement):
    return dict(zip(p.hosts, p.gpus))


def test_consolidated_fewest_hosts_one_rack(two_racks):
    pol = PLACEMENT.create("consolidated")
    # rack 0: hosts 0-3, rack 1: hosts 4-7.
    v = view_of(two_racks, [4, 4, 0, 0, 6, 3, 0, 0])
    # 9 GPUs: two hosts are needed; rack 1 gives them (6 + 3), rack 0 holds only 8.
    assert as_dict(pol.place(pending(9), v)) == {4: 6, 5: 3}
    # 4 GPUs fit on one host: best fit (fewest free that fit), lowest index on ties -> host 0.
    assert as_dict(pol.place(pending(4), v)) == {0: 4}
    assert as_dict(pol.place(pending(5), v)) == {4: 5}
    assert pol.place(pending(18), v) is None


def test_consolidated_across_racks_keeps_the_fewest_hosts():
    topo = load_topology("leafspine,racks=3,hosts_per_rack=2,gpus_per_host=8,oversub=1,spines=1")
    pol = PLACEMENT.create("consolidated")
    # Racks hold 5, 8 and 6 free GPUs; no rack holds 12. The fullest hosts: 5 (host 4) + 4 + 4 (hosts 2
    # and 3, rack 1), taken in that order until 12 are placed.
    assert as_dict(pol.place(pending(12), view_of(topo, [3, 2, 4, 4, 5, 1]))) == {4: 5, 2: 4, 3: 3}
    # Filling racks fullest-first would take hosts 0, 1 (rack 0) and then 4: three hosts where two do.
    # Among the 1-GPU hosts, 0 and 1 tie (rack 0 and rack 2 both hold 2): the lower index wins.
    assert as_dict(pol.place(pending(3), view_of(topo, [1, 1, 0, 0, 2, 0]))) == {0: 1, 4: 2}
    # Racks are added greedily: rack 0 first (all racks' 3 fullest hosts hold 3: the lower number),
    # then the rack that lets 3 hosts hold the most (rack 2: 2 + 1 + 3 = 6, rack 1 only 2 + 1 + 2).
    nine = load_topology("leafspine,racks=3,hosts_per_rack=3,gpus_per_host=4,oversub=1,spines=1")
    assert as_dict(pol.place(pending(6), view_of(nine, [2, 1, 0, 1, 0, 2, 0, 0, 3]))) == {0: 2, 1: 1, 8: 3}


@settings(max_examples=300, deadline=None)
@given(free=st.lists(st.integers(0, 4), min_size=9, max_size=9), n=st.integers(1, 20))
def test_consolidated_uses_the_fewest_hosts(free, n):
    topo = load_topology("leafspine,racks=3,hosts_per_rack=3,gpus_per_host=4,oversub=1,spines=1")
    p = PLACEMENT.create("consolidated").place(pending(n), view_of(topo, free))
    if sum(free) < n:
        assert p is None
        return
    got = as_dict(p)
    assert sum(got.values()) == n and all(0 < g <= free[h] for h, g in got.items())
    fewest = int(np.searchsorted(np.cumsum(sorted(free, reverse=True)), n)) + 1
    assert len(got) == fewest
    if fewest == 1:  # best fit: no host that fits has fewer free GPUs
        (h,) = got
        assert free[h] == min(f for f in free if f >= n)


def test_first_fit_takes_lowest_hosts(two_racks):
    pol = PLACEMENT.create("first-fit")
    v = view_of(two_racks, [0, 2, 3, 8, 0, 0, 0, 8])
    assert as_dict(pol.place(pending(4), v)) == {1: 2, 2: 2}
    assert as_dict(pol.place(pending(9), v)) == {1: 2, 2: 3, 3: 4}


def test_random_is_deterministic_per_seed_and_scatters(two_racks):
    free = np.full(8, 8)

    def placed(seed, gpus):
        pol = PLACEMENT.create("random")
        pol.reset(np.random.default_rng(seed))
        return pol.place(pending(gpus), view_of(two_racks, free))

    a, b = placed(1, 4), placed(1, 4)
    assert a == b
    assert len(a.hosts) == 4 and set(a.gpus) == {1}  # one GPU per host
    assert len({placed(s, 4).hosts for s in range(6)}) > 1  # the seed matters
    big = placed(2, 12)  # 8 hosts, round-robin: every host gets 1, four get a second
    assert len(big.hosts) == 8 and sorted(big.gpus) == [1, 1, 1, 1, 2, 2, 2, 2]
    # Hosts with few free GPUs: 6 GPUs over free [1, 0, 3, 0, 2, 0, 0, 0] -> all of it.
    pol = PLACEMENT.create("random")
    pol.reset(np.random.default_rng(0))
    assert as_dict(pol.place(pending(6), view_of(two_racks, [1, 0, 3, 0, 2, 0, 0, 0]))) == {0: 1, 2: 3, 4: 2}
    assert pol.place(pending(7), view_of(two_racks, [1, 0, 3, 0, 2, 0, 0, 0])) is None


def test_random_scatter_matches_round_robin_loop():
    from netlab.policies.placement.random_scatter import scatter

    rng = np.random.default_rng(3)
    for _ in range(200):
        free = rng.integers(0, 6, size=7)
        hosts = rng.permutation(np.flatnonzero(free > 0))
        n = int(rng.integers(1, free.sum() + 1)) if free.sum() else 0
        want, left, k = np.zeros(7, dtype=free.dtype), n, 0
        while left > 0:  # reference: deal one GPU per host, in order, round after round
            h = hosts[k % len(hosts)]
            if want[h] < free[h]:
                want[h] += 1
                left -= 1
            k += 1
        assert (scatter(free, hosts, n) == want).all()


def test_gandiva_prefers_same_size_hosts(two_racks):
    pol = PLACEMENT.create("gandiva")
    running = [running_on(1, [0], [2]), running_on(2, [1], [4]), running_on(3, [2], [2]), running_on(4, [2], [2]),
               running_on(5, [4, 5], [8, 8])]
    v = view_of(two_racks, [6, 4, 4, 8, 0, 0, 8, 8], running)
    # 2 GPUs: same-size hosts are 0 (6 free) and 2 (4 free): best fit -> 2 (consolidated would take host 1).
    assert as_dict(pol.place(pending(2), v)) == {2: 2}
    assert as_dict(PLACEMENT.create("consolidated").place(pending(2), v)) == {1: 2}
    assert as_dict(pol.place(pending(4), v)) == {1: 4}  # host 1 runs a 4-GPU job
    assert as_dict(pol.place(pending(1), v)) == {3: 1}  # no 1-GPU hosts: an empty host, not a partial one
    assert as_dict(pol.place(pending(8), v)) == {3: 8}
    # 16-GPU job affinity (the 16-GPU job 5 spans 4,5 with 0 free: no room) -> whole empty hosts 3, 6.
    assert as_dict(pol.place(pending(16), v)) == {3: 8, 6: 8}
    # 20 GPUs: empty hosts 3, 6, 7 (24 GPUs) suffice.
    assert as_dict(pol.place(pending(20), v)) == {3: 8, 6: 8, 7: 4}
    # No empty host fits 6 and no same-size host: any host, best fit.
    v2 = view_of(two_racks, [6, 7, 0, 0, 0, 0, 0, 0],
                 [running_on(1, [0], [2]), running_on(2, [1], [1])] + [running_on(10 + h, [h], [8]) for h in range(2, 8)])
    assert as_dict(pol.place(pending(6), v2)) == {0: 6}
    assert pol.place(pending(14), v2) is None


def test_k8s_netoverhead_one_host_then_one_rack(two_racks):
    pol = PLACEMENT.create("k8s-netoverhead")
    # A 4-GPU job fits on one host: the first pod lands on the least allocated host (7), the rest follow it.
    v = view_of(two_racks, [2, 3, 4, 0, 1, 0, 0, 8])
    assert as_dict(pol.place(pending(4), v)) == {7: 4}
    # 5 GPUs on [2, 3, 0, 0, 3, 1, 0, 0]: first pod on host 1 (3 free, lowest index among the emptiest),
    # then host 0 costs 3 x 1 (same rack) against 3 x 100 for hosts 4, 5 -> {1: 3, 0: 2}, one rack.
    v = view_of(two_racks, [2, 3, 0, 0, 3, 1, 0, 0])
    p = pol.place(pending(5), v)
    assert as_dict(p) == {1: 3, 0: 2} and p.hosts == (1, 0)
    assert len(set(two_racks.host_rack[list(p.hosts)])) == 1
    # 7 GPUs must cross racks: {1: 3, 0: 2}, then host 4 (cost 500, tie with host 5, more free) takes 2.
    assert as_dict(pol.place(pending(7), v)) == {1: 3, 0: 2, 4: 2}
    assert pol.place(pending(10), v) is None


def test_k8s_netoverhead_zone_cost_matters(two_racks):
    # 5 GPUs on [3, 1, 0, 0, 2, 0, 0, 0]: the first 3 pods fill host 0 (least allocated).
    v = view_of(two_racks, [3, 1, 0, 0, 2, 0, 0, 0])
    # zone_cost 100: host 1 costs 3 x 1 = 3, host 4 costs 3 x 100 -> host 1 (1 pod); then host 4 (cost 400).
    assert as_dict(PLACEMENT.create("k8s-netoverhead").place(pending(5), v)) == {0: 3, 1: 1, 4: 1}
    # zone_cost 1 (racks as close as a rack): hosts 1 and 4 both cost 3; host 4 is less allocated -> 2 pods.
    assert as_dict(PLACEMENT.create("k8s-netoverhead", zone_cost=1).place(pending(5), v)) == {0: 3, 4: 2}


# ---------------------------------------------------------------- end to end
def mixed_jobs(topo, n=30, seed=7):
    rng = np.random.default_rng(seed)
    models = ["resnet50", "vgg16", "bert-base", "resnet18", "gpt2"]
    sizes = [1, 2, 4, 8, 12, 16]
    jobs, t = [], 0.0
    for i in range(n):
        t += float(rng.exponential(60.0))
        gpus = int(rng.choice(sizes))
        jobs.append(job(topo, i, t, float(rng.uniform(100, 2000)), gpus, models[i % len(models)]))
    return jobs


def checked_run(topo, jobs, **kw):
    """Run a simulation, checking after every start and release that no host's GPUs are oversubscribed."""
    preemption = kw.pop("preemption", None)
    sim = Simulator(topo, jobs, kw.pop("ordering"), kw.pop("placement", None), preemption, SimConfig(**kw))
    checks = {"n": 0}

    def check():
        used = np.zeros_like(topo.host_gpus)
        for js in sim.running.values():
            np.add.at(used, list(js.placement.hosts), list(js.placement.gpus))
        assert (used <= topo.host_gpus).all()
        assert (used + sim.free_gpus == topo.host_gpus).all()
        checks["n"] += 1

    start, release = sim.start, sim._release

    def _start(js, p, now):
        start(js, p, now)
        check()

    def _release(js):
        release(js)
        check()

    sim.start, sim._release = _start, _release
    res = sim.run()
    assert checks["n"] >= 2 * len(jobs)
    return res


def assert_all_done(res, jobs):
    df = res.jobs
    assert len(df) == len(jobs)
    assert df.end_s.notna().all() and (df.end_s >= df.start_s).all()
    assert (df.start_s >= df.submit_s - 1e-9).all()
    assert res.summary["finished"] == len(jobs)


E2E = ([(o, "consolidated", None) for o in ORDERING.names()]
       + [("fifo", p, None) for p in PLACEMENT.names()]
       + [("tiresias", p, None) for p in ("random", "gandiva", "k8s-netoverhead")]
       + [("srtf", "consolidated", pre) for pre in PREEMPTION.names()])


@pytest.mark.parametrize("ordering, placement, preemption", E2E)
def test_every_policy_runs_to_completion(two_racks, ordering, placement, preemption):
    jobs = mixed_jobs(two_racks)
    kw = {"thresholds_gpu_s": (2000.0, 20000.0)} if ordering == "tiresias" else {}
    kw = {"lease_s": 300.0} if ordering == "themis" else kw
    res = checked_run(two_racks, jobs, ordering=ORDERING.create(ordering, **kw), placement=placement,
                      preemption=preemption, network="fair", seed=1)
    assert_all_done(res, jobs)
    if ordering in ("srtf", "tiresias", "themis") and preemption != "none":
        assert res.jobs.preemptions.sum() > 0  # the workload is busy enough to exercise preemption
