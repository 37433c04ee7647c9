"""Dally: delay timers, bounded network-sensitive preemption, the auto-tuner, and every variant end to end."""

from __future__ import annotations

import numpy as np
import pytest

from netlab.policies import ORDERING, PLACEMENT
from netlab.policies.dally import VARIANTS, AutoTuner, DallyOrdering, DallyPlacement, NetworkPreemption
from netlab.policies.dally.placement import RETRY, WAIT
from netlab.sched import ClusterView, JobState, Placement
from netlab.sim import Simulator, simulate
from netlab.sim.simulator import SimConfig
from netlab.topology import load_topology
from netlab.workload.job import Job, isolated_iter_s
from netlab.workload.zoo import JobModel, ModelZoo

ZOO = ModelZoo.default()
ONE_RACK = "leafspine,racks=1,hosts_per_rack=2,gpus_per_host=4,oversub=1,spines=1"  # hosts 0, 1 in one rack
TWO_RACKS_1H = "leafspine,racks=2,hosts_per_rack=1,gpus_per_host=4,oversub=2,spines=1"  # one host per rack
ONE_HOST = "leafspine,racks=1,hosts_per_rack=1,gpus_per_host=4,oversub=1,spines=1"
MIXED = "leafspine,racks=2,hosts_per_rack=4,gpus_per_host=8,oversub=4,spines=1"
BASE_S = 600.0  # DallyPlacement's default timer per level
# vgg16 on 2 GPUs, reference split 1 + 1: a ring hop carries S = 553 MB at 100 Gbit/s.
VGG_NET_S = 553e6 * 8 / 100e9
VGG2_SENS = VGG_NET_S / (0.214 + VGG_NET_S)  # (0.214 + 2 net) / (0.214 + net) - 1 = 0.1713...


def job(topo, job_id, submit_s, duration_s, gpus, model="resnet50", zoo=ZOO):
    return Job(job_id, float(submit_s), gpus, model, duration_s / isolated_iter_s(zoo[model], "ring", gpus, topo))


def by_id(res):
    return res.jobs.set_index("job_id")


def approx(x):
    return pytest.approx(x, rel=1e-9, abs=1e-6)


# ------------------------------------------------------------------ delay
def split_cluster_jobs(topo, a_s=1000.0):
    """Jobs 0 and 1 take 3 GPUs on each host: job 2 (vgg16, 2 GPUs, t=10) finds only 1 + 1 free."""
    return [job(topo, 0, 0, a_s, 3), job(topo, 1, 0, 1000, 3), job(topo, 2, 10, 100, 2, "vgg16")]


def test_delay_waits_exactly_its_timer_then_takes_the_split():
    topo = load_topology(ONE_RACK)
    r = by_id(simulate(topo, split_cluster_jobs(topo), "dally-delay", network="ideal"))
    timer = BASE_S * VGG2_SENS  # 102.79 s: the host timer; the rack level (both hosts) is then available
    assert r.start_s[2] == approx(10 + timer)
    assert r.placement[2] == "r0h0:1,r0h1:1"
    assert r.start_s[0] == 0 and r.start_s[1] == 0


def test_delay_starts_earlier_when_a_host_frees_up():
    topo = load_topology(ONE_RACK)
    r = by_id(simulate(topo, split_cluster_jobs(topo, a_s=50.0), "dally-delay", network="ideal"))
    assert r.start_s[2] == approx(50.0)  # job 0 ends at 50 < 10 + 102.8: host 0 has 4 free
    assert r.placement[2] == "r0h0:2"


def test_without_delay_the_split_is_taken_at_once():
    topo = load_topology(ONE_RACK)
    r = by_id(simulate(topo, split_cluster_jobs(topo), "dally-base", network="ideal"))
    assert r.start_s[2] == approx(10.0) and r.hosts[2] == 2


def test_timer_widens_one_level_at_a_time():
    # One host per rack: the host timer expires, then the rack timer (rack = that one host) too.
    topo = load_topology(TWO_RACKS_1H)
    r = by_id(simulate(topo, split_cluster_jobs(topo), "dally-delay", network="ideal"))
    assert r.start_s[2] == approx(10 + 2 * BASE_S * VGG2_SENS)
    assert r.racks[2] == 2


def test_insensitive_job_does_not_wait():
    topo = load_topology(ONE_RACK)
    zoo = ZOO.with_model(JobModel("nograd", 0.2, 0.0))
    jobs = split_cluster_jobs(topo)[:2] + [job(topo, 2, 10, 100, 2, "nograd", zoo)]
    res = Simulator(topo, jobs, "dally-delay", config=SimConfig(network="ideal"), zoo=zoo).run()
    assert by_id(res).start_s[2] == approx(10.0)


def test_wait_state_and_retry_time_on_a_view():
    topo = load_topology(ONE_RACK)
    policy = PLACEMENT.create("dally-delay")
    policy.reset(np.random.default_rng(0))
    js = JobState(Job(5, 0.0, 2, "vgg16", 10), 1.0)
    js.status = "waiting"
    free = np.array([1, 1])
    assert policy.place(js, ClusterView(topo, free, {}, 7.0)) is None
    assert js.extra[WAIT] == 7.0
    assert policy.retry_at(js, ClusterView(topo, free, {}, 7.0)) == approx(7.0 + BASE_S * VGG2_SENS)
    assert policy.place(js, ClusterView(topo, free, {}, 50.0)) is None  # still waiting; first wait kept
    assert js.extra[WAIT] == 7.0
    p = policy.place(js, ClusterView(topo, free, {}, js.extra[RETRY]))
    assert p is not None and p.hosts == (0, 1)
    assert WAIT not in js.extra and js.extra["dally_level"] == 1


# ------------------------------------------------------------- preemption
def stream_jobs(topo, n=8):
    """Job 0: 4 GPUs (the whole host) for 3000 s. Then a 2-GPU vgg16 job every 300 s from t=100, 50 s each."""
    return [job(topo, 0, 0, 3000, 4)] + [job(topo, i, 100 + 300 * (i - 1), 50, 2, "vgg16") for i in range(1, n + 1)]


@pytest.mark.parametrize("bound", [1, 2, 3])
def test_gpus_short_preemption_is_tiresias_own_and_not_bounded(bound):
    # Every arrival finds no free GPU: Tiresias would displace job 0 (demoted past 150 GPU-s; an arrival attains 100) each time, and so
    # does Dally, whatever its locality bound. Before the fix the bound pinned job 0 after `bound` preemptions
    # (on Philly that froze scattered long jobs in place: 3.36 vs 2.30 hosts per 2-8 GPU job).
    topo = load_topology(ONE_HOST)
    jobs = stream_jobs(topo)
    ordering = DallyOrdering(thresholds_gpu_s=(150.0,), autotune=False, delay=False)
    r = by_id(Simulator(topo, jobs, ordering, None, NetworkPreemption(max_preemptions=bound),
                        SimConfig(network="ideal")).run())
    assert r.preemptions[0] == 8 and r.preemptions.drop(0).max() == 0
    for i in range(1, 9):
        assert r.start_s[i] == approx(100 + 300 * (i - 1))  # each arrival starts at once
    # Each restart costs job 0 (resnet50) R = 30 s launch + 2 x 307.2 MB at 20 Gbit/s = 30.24576 s.
    # Job 0 ran 100 s, then 250 s between restarts minus R (progress 250 - R) 7 times: 100 + 7 (250 - R)
    # done when arrival 8 displaces it at 2200; it restarts at 2250 and needs R + the rest: 3400 + 8 R.
    restart = 30 + 2 * 25.6e6 * 12 * 8 / 20e9
    assert r.end_s[0] == approx(2250 + restart + 3000 - (100 + 7 * (250 - restart)))
    t = by_id(simulate(topo, jobs, ORDERING.create("tiresias", thresholds_gpu_s=(150.0,)), "topo-bestfit", network="ideal"))
    assert (t.end_s == r.end_s).all()


def running(job_id, model, gpus, host, preemptions, zoo=ZOO):
    js = JobState(Job(job_id, 0.0, gpus, model, 10), 1.0)
    js.status, js.placement, js.last_start_s, js.preemptions = "running", Placement((host,), (gpus,)), 0.0, preemptions
    return js


@pytest.mark.parametrize("bound_on", [(), (1,), (1, 2)])
def test_locality_preemption_respects_the_bound(bound_on):
    # Hosts 0 and 1 have 2 free GPUs each; a 4-GPU vgg16 job fits only split. Jobs 1 (host 0) and 2 (host 1),
    # resnet50 on 2 GPUs each (less sensitive), are the candidates, worst first: displacing either frees a host
    # (2 GPUs displaced, one victim each): host 0 wins the tie. A candidate preempted 8 times is out.
    topo = load_topology(ONE_RACK)
    cands = [running(1, "resnet50", 2, 0, 8 if 1 in bound_on else 7),
             running(2, "resnet50", 2, 1, 8 if 2 in bound_on else 0)]
    waiting = JobState(Job(9, 0.0, 4, "vgg16", 10), 1.0)
    view = ClusterView(topo, np.array([2, 2]), {c.job_id: c for c in cands}, 100.0)
    got = [v.job_id for v in NetworkPreemption().victims(waiting, iter(cands), view)]
    assert got == {(): [1], (1,): [2], (1, 2): []}[tuple(bound_on)]


def test_ordering_keys_are_tiresias_keys_whatever_the_preemption_count():
    o, t = DallyOrdering(), ORDERING.create("tiresias")
    js = JobState(Job(0, 5.0, 4, "resnet50", 10), 1.0)
    js.status, js.preemptions = "running", 50  # was pinned (key (-1, 5.0, 0)) at the old bound of 8
    assert o.key(js, 0.0) == t.key(js, 0.0) and o.key(js, 0.0)[0] == 0


def test_sensitive_job_preempts_less_sensitive_one_for_a_host():
    topo = load_topology(ONE_RACK)
    jobs = split_cluster_jobs(topo)
    ordering = DallyOrdering(thresholds_gpu_s=(50.0,), autotune=False)
    r = by_id(Simulator(topo, jobs, ordering, None, NetworkPreemption(min_run_s=0.0),
                        SimConfig(network="ideal")).run())
    # At t=10 jobs 0 and 1 (resnet50, sensitivity 0.015) have attained 30 GPU-s: queue 0, like job 2 but earlier.
    # They are demoted at 50/3 s; then job 2 (sensitivity 0.17) displaces job 0 (tie on host cost: lower host).
    assert r.start_s[2] == approx(50.0 / 3)
    assert r.placement[2] == "r0h0:2" and r.preemptions[0] == 1 and r.preemptions[1] == 0
    # With the default 60 s minimum run, jobs 0 and 1 are protected at every pass before job 2's timer expires.
    r = by_id(simulate(topo, jobs, ordering, network="ideal"))
    assert r.preemptions.sum() == 0 and r.start_s[2] == approx(10 + BASE_S * VGG2_SENS)


def test_insensitive_job_does_not_preempt_for_locality():
    topo = load_topology(ONE_RACK)
    jobs = [job(topo, 0, 0, 1000, 3), job(topo, 1, 0, 1000, 3), job(topo, 2, 10, 100, 2, "resnet18")]
    ordering = DallyOrdering(thresholds_gpu_s=(50.0,), autotune=False)
    r = by_id(simulate(topo, jobs, ordering, network="ideal"))
    assert r.preemptions.sum() == 0  # resnet18 sensitivity 0.004 < min_sensitivity 0.05
    exposed = 47e6 * 8 / 100e9 * (1 - 0.34)  # its overlap (0.34) hides that share of the all-reduce
    s = exposed / (0.64 + exposed)
    assert r.start_s[2] == approx(10 + BASE_S * s)


# --------------------------------------------------------------- auto-tuner
def test_tuner_rule():
    t = AutoTuner(step=2.0, min_scale=0.25, max_scale=4.0)
    t.add_queue(100.0)
    t.add_slowdown(10.0)
    assert t.update() == 0.5  # waiting cost more: shorter timers
    t.add_slowdown(100.0)
    assert t.update() == 1.0  # slowdown cost more: longer
    assert t.update() == 1.0  # nothing observed: unchanged
    for _ in range(5):
        t.add_slowdown(1.0)
        t.update()
    assert t.scale == 4.0  # bounded


def tuner_setup():
    topo = load_topology(ONE_RACK)
    policy = DallyPlacement(autotune=True, tune_period_s=3600.0, tune_step=1.25)
    policy.reset(np.random.default_rng(0))
    waiter = JobState(Job(1, 0.0, 2, "vgg16", 10), 1.0)
    waiter.status = "waiting"
    return topo, policy, waiter


def test_autotuner_shortens_timers_when_queueing_costs_more():
    topo, policy, waiter = tuner_setup()
    split = np.array([1, 1])
    assert policy.place(waiter, ClusterView(topo, split, {}, 0.0)) is None  # starts waiting at 0
    before = policy.timer(waiter, 0, ClusterView(topo, split, {}, 0.0))
    # At 3600 s one tuning step runs: 3600 s of queueing, no slowdown.
    policy.place(JobState(Job(9, 0.0, 1, "vgg16", 10), 1.0), ClusterView(topo, np.array([4, 4]), {}, 3600.0))
    assert policy.scale == approx(1 / 1.25)
    assert policy.timer(waiter, 0, ClusterView(topo, split, {}, 3600.0)) == approx(before / 1.25)
    assert policy.tuner.history[-1][:2] == (3600.0, 0.0)


def test_autotuner_lengthens_timers_when_slowdown_costs_more():
    topo = load_topology(ONE_RACK)
    zoo = ZOO.with_model(JobModel("nograd", 0.2, 0.0))
    policy = DallyPlacement(autotune=True, tune_period_s=3600.0, tune_step=1.25)
    policy.reset(np.random.default_rng(0))
    # A zero-sensitivity job has no timer: it takes the 1 + 1 split at once (below its best level, host).
    degraded = JobState(Job(2, 0.0, 2, "nograd", 10), 1.0)
    degraded.status = "waiting"
    p = policy.place(degraded, ClusterView(topo, np.array([1, 1]), {}, 0.0, zoo=zoo))
    assert p.hosts == (0, 1)
    degraded.status, degraded.placement, degraded.iter_s = "running", p, 2.0  # twice its isolated 1.0 s
    probe = JobState(Job(1, 0.0, 2, "vgg16", 10), 1.0)
    before = policy.timer(probe, 0, ClusterView(topo, np.array([1, 1]), {}, 0.0, zoo=zoo))
    policy.place(JobState(Job(9, 0.0, 1, "vgg16", 10), 1.0),
                 ClusterView(topo, np.array([4, 4]), {2: degraded}, 3600.0, zoo=zoo))
    # Slowdown: 3600 s x (1 - 1.0 / 2.0) = 1800 s > 0 s of queueing: longer timers.
    assert policy.tuner.history[-1][:2] == (0.0, 1800.0)
    assert policy.scale == approx(1.25)
    assert policy.timer(probe, 0, ClusterView(topo, np.array([1, 1]), {}, 3600.0, zoo=zoo)) == approx(before * 1.25)


# ------------------------------------------------------------ the variants
def test_variant_flags_map_to_registered_parts():
    assert set(VARIANTS) <= set(ORDERING.names())
    d = ORDERING.create("dally")
    assert (d.default_placement, d.default_preemption, d.preemptive) == ("dally", "dally", True)
    assert ORDERING.create("dally-delay").default_placement == "dally-delay"
    assert ORDERING.create("dally-delay").default_preemption == "priority"
    assert ORDERING.create("dally-preempt").default_placement == "topo-bestfit"
    assert ORDERING.create("dally-base").default_preemption == "priority"
    assert ORDERING.create("dally-autotune").name == "dally-autotune"
    with pytest.raises(ValueError):
        DallyOrdering(delay=False, autotune=True)
    with pytest.raises(ValueError):
        DallyPlacement(delay=False, autotune=True)


def mixed_jobs(topo, n=40, seed=3):
    rng = np.random.default_rng(seed)
    models = ["vgg16", "resnet50", "gpt2-xl", "bert-base", "lstm"]
    jobs, t = [], 0.0
    for i in range(n):
        t += float(rng.exponential(40.0))
        jobs.append(job(topo, i, t, float(rng.uniform(100, 1500)), int(rng.choice([1, 2, 4, 6, 8, 12, 16])),
                        models[i % len(models)]))
    return jobs


@pytest.mark.parametrize("name", sorted(VARIANTS))
def test_every_variant_runs_to_completion(name):
    topo = load_topology(MIXED)
    jobs = mixed_jobs(topo)
    ordering = ORDERING.create(name, thresholds_gpu_s=(2000.0, 20000.0))
    sim = Simulator(topo, jobs, ordering, config=SimConfig(network="fair", seed=1))
    res = sim.run()
    df = res.jobs
    assert len(df) == len(jobs) and df.end_s.notna().all() and res.summary["finished"] == len(jobs)
    assert (df.start_s >= df.submit_s - 1e-9).all()
    assert sim.placement.name == ordering.default_placement and sim.preemption.name == ordering.default_preemption
