"""Simulator mechanics: kernel order, preemption cost, determinism, outputs, bad decisions."""

import json

import numpy as np
import pandas as pd
import pytest

from netlab.policies.base import OrderingPolicy, PlacementPolicy
from netlab.sched import Placement, PolicyError
from netlab.sim import Kernel, RealtimeClock, simulate
from netlab.sim.metrics import SUMMARY_KEYS
from netlab.topology import load_topology
from netlab.workload.job import Job, isolated_iter_s
from netlab.workload.zoo import ModelZoo

ZOO = ModelZoo.default()


def random_jobs(n=60, seed=3, max_gpus=16):
    rng = np.random.default_rng(seed)
    models = ["resnet50", "vgg16", "bert-base", "resnet18"]
    return [Job(i, float(t), int(rng.choice([1, 2, 4, 8, max_gpus])), models[i % 4], float(rng.integers(200, 3000)))
            for i, t in enumerate(np.cumsum(rng.exponential(60, n)))]


def test_kernel_orders_ties_by_priority_then_insertion():
    k, seen = Kernel(), []
    k.at(5.0, Kernel.SCHEDULE, seen.append, "pass")
    k.at(5.0, Kernel.ARRIVE, seen.append, "arrive-1")
    k.at(5.0, Kernel.COMPLETE, seen.append, "complete")
    k.at(5.0, Kernel.ARRIVE, seen.append, "arrive-2")
    k.at(1.0, Kernel.SCHEDULE, seen.append, "early")
    k.run()
    assert seen == ["early", "complete", "arrive-1", "arrive-2", "pass"]
    assert k.now == 5.0 and k.events == 5
    with pytest.raises(ValueError):
        k.at(4.0, 0, seen.append, "past")


def test_realtime_clock_waits_scaled_wall_time():
    slept, wall = [], [0.0]
    clock = RealtimeClock(speedup=10.0, sleep=lambda s: slept.append(s), monotonic=lambda: wall[0])
    clock.advance_to(5.0)
    assert slept == [pytest.approx(0.5)] and clock.now == 5.0


class NewestFirst(OrderingPolicy):
    """Preemptive LIFO: the test's stand-in for a priority scheduler."""

    name = "newest-first"
    preemptive = True

    def key(self, job, now):
        return (-job.submit_s, job.job_id)


def test_preemption_pays_checkpoint_and_restore_once():
    topo = load_topology("leafspine,racks=1,hosts_per_rack=1,gpus_per_host=1")
    it = ZOO["resnet50"].compute_s  # single GPU: no communication at all
    jobs = [Job(0, 0.0, 1, "resnet50", 100 / it), Job(1, 10.0, 1, "resnet50", 20 / it)]
    res = simulate(topo, jobs, NewestFirst(), "first-fit", checkpoint_s=10, restore_s=20).jobs.set_index("job_id")
    # B preempts A at t=10 and ends at 30; A restarts at 30, makes progress from 60, has 90 s left -> 150.
    assert res.loc[1, "end_s"] == pytest.approx(30.0)
    assert res.loc[0, "end_s"] == pytest.approx(150.0)
    assert res.loc[0, "preemptions"] == 1 and res.loc[1, "preemptions"] == 0
    assert res.loc[0, "run_s"] == pytest.approx(10 + 120)  # holds GPUs during the restore
    assert res.loc[0, "wait_s"] == pytest.approx(20.0)
    assert res.loc[0, "slowdown"] == pytest.approx(1.0)  # progress time equals isolated time


def test_same_seed_same_table_and_different_seed_differs():
    topo = load_topology("leafspine,racks=4,hosts_per_rack=2,gpus_per_host=4,oversub=4")
    jobs = random_jobs()
    a = simulate(topo, jobs, "fifo", "random", seed=7).jobs
    b = simulate(topo, jobs, "fifo", "random", seed=7).jobs
    c = simulate(topo, jobs, "fifo", "random", seed=8).jobs
    pd.testing.assert_frame_equal(a, b)
    assert not a.placement.equals(c.placement)


def test_every_job_finishes_and_gpus_never_oversubscribed():
    topo = load_topology("leafspine,racks=2,hosts_per_rack=2,gpus_per_host=4,oversub=2")
    res = simulate(topo, random_jobs(80), "fifo", "consolidated")
    jobs = res.jobs
    assert jobs.end_s.notna().all()
    # Sweep start/end events: GPUs in use never exceed the cluster's 16.
    ev = pd.concat([pd.DataFrame({"t": jobs.start_s, "d": jobs.gpus}), pd.DataFrame({"t": jobs.end_s, "d": -jobs.gpus})])
    in_use = ev.sort_values(["t", "d"]).d.cumsum()
    assert in_use.max() <= topo.total_gpus
    assert set(SUMMARY_KEYS) <= set(res.summary)
    assert res.summary["avg_jct_s"] == pytest.approx(jobs.jct_s.mean())
    assert 0 < res.summary["gpu_util"] <= 1
    assert (jobs.slowdown >= 1 - 1e-9).all()


def test_results_written_atomically(tmp_path):
    topo = load_topology("leafspine,racks=2,hosts_per_rack=2,gpus_per_host=4,oversub=2")
    res = simulate(topo, random_jobs(20), "fifo", "consolidated")
    out = res.save(tmp_path / "run")
    assert sorted(p.name for p in out.iterdir()) == ["config.json", "jobs.parquet", "links.parquet", "summary.json"]
    back = pd.read_parquet(out / "jobs.parquet")
    pd.testing.assert_frame_equal(back, res.jobs)
    assert json.loads((out / "summary.json").read_text())["jobs"] == 20


class Greedy(PlacementPolicy):
    name = "greedy"

    def place(self, job, view):
        return Placement((0,), (job.gpus,))  # ignores free GPUs: a buggy policy


def test_bad_placement_is_a_clear_policy_error():
    topo = load_topology("leafspine,racks=1,hosts_per_rack=2,gpus_per_host=2")
    with pytest.raises(PolicyError, match="asks 3 GPUs on host 0, which has 2 free|does not give exactly"):
        simulate(topo, [Job(0, 0.0, 3, "resnet50", 10)], "fifo", Greedy())


def test_job_larger_than_cluster_is_rejected():
    topo = load_topology("leafspine,racks=1,hosts_per_rack=2,gpus_per_host=2")
    with pytest.raises(ValueError, match="needs 8 GPUs, cluster has 4"):
        simulate(topo, [Job(0, 0.0, 8, "resnet50", 10)], "fifo")


def run_checked(topo, jobs, ordering):
    """Run a simulation that, after every scheduling pass, compares each running network job's iteration time
    and every link load with a from-scratch fair solve of all running demands (no shortcuts, components, slots)."""
    from netlab.network.model import NETWORKS
    from netlab.sim.simulator import SimConfig, Simulator

    sim = Simulator(topo, jobs, ordering, "random", config=SimConfig(network="fair", seed=1))
    full = NETWORKS.create("fair")
    checks = []
    settle = sim._settle

    def checked_settle():
        settle()
        demands = [js.demand for js in sim.running.values() if js.demand is not None]
        if not demands:
            return
        sol = full.solve(demands, topo.link_capacity_gbps)
        for d in demands:
            got, want = sim.states[d.job_id].iter_s, sol.iter_s[d.job_id]
            assert got == pytest.approx(want, rel=1e-9), (sim.kernel.now, d.job_id)
        load = np.zeros(topo.n_links)
        load[sol.links] = sol.load_gbps
        np.testing.assert_allclose(sim.fabric.load_gbps, load, rtol=1e-9, atol=1e-9)
        checks.append(len(demands))

    sim._settle = checked_settle
    return sim.run(), checks


@pytest.mark.parametrize("ordering", ["fifo", "tiresias"])
def test_incremental_fair_network_matches_a_full_resolve(ordering):
    # Scattered placements on a 4:1 spine put many jobs on shared links; Tiresias adds preemptions, so jobs
    # join and leave saturated and unsaturated links: every shortcut and every component re-solve is checked.
    topo = load_topology("leafspine,racks=4,hosts_per_rack=4,gpus_per_host=4,oversub=4,spines=2")
    res, checks = run_checked(topo, random_jobs(n=150, seed=7, max_gpus=16), ordering)
    assert res.summary["finished"] == 150
    assert len(checks) > 100 and max(checks) >= 8  # many passes with several network jobs running at once


def test_bucket_parked_after_a_failed_preemption_resumes_when_a_later_preemption_frees_gpus():
    """The scheduling pass stops walking a size bucket once its jobs can neither fit nor preempt; if a later
    preemption leaves enough GPUs free, the bucket's later jobs must still start in that same pass."""
    from netlab.policies.ordering.tiresias import Tiresias
    from netlab.policies.placement.consolidated import Consolidated
    from netlab.policies.preemption.priority import ByPriority
    from netlab.sim import Simulator
    from netlab.sim.simulator import SimConfig

    class NoPreemptionForBigJobs(ByPriority):  # declines victims for 6+ GPU jobs whatever the candidates
        def victims(self, job, candidates, view):
            return [] if job.gpus >= 6 else super().victims(job, candidates, view)

    class Logged(Consolidated):
        def place(self, job, view):
            p = super().place(job, view)
            log.append((view.now, job.job_id, p.hosts if p else None))
            return p

    log = []
    topo = load_topology("leafspine,racks=1,hosts_per_rack=2,gpus_per_host=8,oversub=1,spines=1")
    # V holds all 16 GPUs and drops to queue 1 after 100 GPU-s (6.25 s). At t=10 P, Q, R arrive in queue 0.
    jobs = [Job(0, 0.0, 16, "resnet50", 10_000), Job(1, 10.0, 6, "resnet50", 10_000),
            Job(2, 10.0, 2, "resnet50", 10_000), Job(3, 10.0, 6, "resnet50", 10_000)]
    Simulator(topo, jobs, Tiresias(thresholds_gpu_s=(100.0,)), Logged(), NoPreemptionForBigJobs(),
              SimConfig(record_links=False)).run()
    at_10 = [(j, hosts) for t, j, hosts in log if t == 10.0 and hosts is not None]
    # P finds no victims (6-GPU bucket parked); Q preempts V and takes 2 GPUs on host 0 (best fit), leaving
    # 14 free; R (the parked bucket's next job) then fits in the same pass: best fit puts it on host 0 (6 free).
    # P starts in the next pass, on host 1. Without resuming the bucket P would have been placed first, on host 0.
    assert at_10[:3] == [(2, (0,)), (3, (0,)), (1, (1,))]


def test_backfill_off_stops_at_a_head_job_too_big_for_the_free_gpus():
    # The pass merges waiting jobs by size bucket; with backfill off it must stop at the first job in
    # priority order over ALL sizes that cannot start, even one whose bucket is larger than the free GPUs.
    # 8 GPUs: A (6 GPUs) runs 0-1100; B (4 GPUs) at 1 cannot start; C (1 GPU) at 2 must wait behind it.
    topo = load_topology("leafspine,racks=1,hosts_per_rack=1,gpus_per_host=8,oversub=1,spines=1")
    def job(i, submit_s, gpus, duration_s):
        return Job(i, submit_s, gpus, "resnet50", duration_s / isolated_iter_s(ZOO["resnet50"], "ring", gpus, topo))

    jobs = [job(0, 0.0, 6, 1100), job(1, 1.0, 4, 100), job(2, 2.0, 1, 10)]
    for ordering in ("fifo", "fjf"):  # B is ahead of C in both
        res = simulate(topo, jobs, ordering, network="ideal", backfill=False).jobs.set_index("job_id")
        assert res.start_s[1] == pytest.approx(1100) and res.start_s[2] == pytest.approx(1100), ordering
        on = simulate(topo, jobs, ordering, network="ideal", backfill=True).jobs.set_index("job_id")
        assert on.start_s[2] == pytest.approx(2) and on.start_s[1] == pytest.approx(1100), ordering


def test_building_the_job_states_leaves_the_garbage_collector_as_it_was():
    """The states are built with the collector off (it only slowed the build down); a run hands it back as found:
    on if it was on, off if the caller had turned it off, and on again when the build fails (an unknown pattern)."""
    import gc

    topo = load_topology("leafspine,racks=1,hosts_per_rack=2,gpus_per_host=4")
    jobs = [Job(0, 0.0, 2, "resnet50", 10.0), Job(1, 5.0, 4, "vgg16", 10.0)]
    was = gc.isenabled()
    try:
        gc.enable()
        res = simulate(topo, jobs)
        assert gc.isenabled() and res.summary["finished"] == 2
        gc.disable()
        simulate(topo, jobs)
        assert not gc.isenabled()
        gc.enable()
        with pytest.raises(Exception, match="pattern"):
            simulate(topo, [Job(0, 0.0, 2, "resnet50", 10.0, pattern="no-such-pattern")])
        assert gc.isenabled()
    finally:
        (gc.enable if was else gc.disable)()


def test_the_run_freezes_what_was_alive_before_it_and_unfreezes_it_after(monkeypatch):
    """During the kernel's run the objects alive at its start are frozen (out of the collector's sight), after
    it none are; a caller that froze objects itself keeps them frozen, and the run freezes nothing more (the
    count may fall: a frozen object freed while frozen leaves it)."""
    import gc

    from netlab.sim import kernel as kernel_mod

    seen = []
    run = kernel_mod.Kernel.run

    def spy(self, *args, **kwargs):
        seen.append(gc.get_freeze_count())
        return run(self, *args, **kwargs)

    monkeypatch.setattr(kernel_mod.Kernel, "run", spy)
    topo = load_topology("leafspine,racks=1,hosts_per_rack=2,gpus_per_host=4")
    jobs = [Job(0, 0.0, 2, "resnet50", 10.0), Job(1, 5.0, 4, "vgg16", 10.0)]
    was = gc.isenabled()
    gc.enable()
    gc.unfreeze()
    try:
        res = simulate(topo, jobs)
        assert res.summary["finished"] == 2
        assert seen[-1] > 0 and gc.get_freeze_count() == 0
        gc.freeze()  # the caller's own freeze (as before a fork)
        mine = gc.get_freeze_count()
        simulate(topo, jobs)
        # nothing more frozen, and the caller's objects still frozen (a few of them may be freed meanwhile)
        assert 0.99 * mine <= seen[-1] <= mine and 0.99 * mine <= gc.get_freeze_count() <= mine
    finally:
        gc.unfreeze()
        (gc.enable if was else gc.disable)()
