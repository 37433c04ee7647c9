"""One scheduling pass: the same policy objects make the same decisions in the simulator and on real time.

Two real-time backends run on the event kernel with a :class:`~netlab.sim.kernel.RealtimeClock` over a fake
wall clock (nothing sleeps: waiting moves the fake clock, and a job's end is handed to the kernel through
``Kernel.post``, as the testbed agents' reader threads do):

* :class:`FakeRealtime`, a mechanism whose jobs finish at given times and which can preempt (checkpoint and
  restore cost as in the simulator), under Tiresias with priority preemption;
* the real :class:`~netlab.testbed.cluster.TestbedCluster` over a fake controller whose jobs end after
  ``iterations x compute`` seconds; the testbed answers that it cannot preempt.

Each must start the same jobs in the same order on the same hosts at the same times as the simulator (on the
ideal network, where a job's run time is its iterations times its isolated iteration time).
"""

from __future__ import annotations

import heapq
import itertools
import threading
import time
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

from netlab.network import NETWORKS
from netlab.policies import ORDERING, PLACEMENT, PREEMPTION
from netlab.sched import ClusterView, JobState, Scheduler
from netlab.sim import Kernel, RealtimeClock, SimConfig, Simulator
from netlab.sim.loop import KernelLoop
from netlab.testbed.cluster import TestbedCluster
from netlab.testbed.controller import RunningJob
from netlab.topology import load_topology
from netlab.workload.job import Job, isolated_iter_s
from netlab.workload.zoo import JobModel, ModelZoo

TOPO = load_topology("leafspine,racks=2,hosts_per_rack=2,gpus_per_host=4,oversub=2")  # 16 GPUs
# One second of compute and nothing to all-reduce: the isolated iteration is exactly 1 s on any placement,
# so every time in these runs is a small binary fraction and compares exactly.
ZOO = ModelZoo({"unit": JobModel("unit", 1.0, 0.0)})
CHECKPOINT_S, RESTORE_S = 3.0, 5.0


def trace(n: int = 30, seed: int = 4) -> list[Job]:
    rng = np.random.default_rng(seed)
    submit = np.cumsum(rng.integers(0, 40, size=n)).astype(float)
    return [Job(i, float(submit[i]), int(rng.choice([1, 2, 4, 6, 8, 12])), "unit", float(rng.integers(20, 400)))
            for i in range(n)]


class FakeWall:
    """A wall clock that moves only when the kernel waits on it; jobs end at given wall times.

    ``sleep(s)`` moves the clock ``s`` on, unless a job ends first: then the clock stops there and every job
    ending at that instant is handed over (``on_end``), which posts to the kernel and wakes its clock.
    """

    def __init__(self):
        self.t = 0.0
        self._ends: list = []
        self._seq = itertools.count()

    def monotonic(self) -> float:
        return self.t

    def end_at(self, t: float, on_end) -> list:
        entry = [t, next(self._seq), on_end]
        heapq.heappush(self._ends, entry)
        return entry

    def cancel(self, entry: list) -> None:
        entry[2] = None

    def sleep(self, s: float) -> None:
        target = self.t + s
        while self._ends and self._ends[0][2] is None:
            heapq.heappop(self._ends)
        # within a nanosecond: the kernel's deadline came back through t + (deadline - t), which may round
        if self._ends and self._ends[0][0] <= target + 1e-9:
            t = self.t = self._ends[0][0]
            while self._ends and self._ends[0][0] == t:
                _, _, on_end = heapq.heappop(self._ends)
                if on_end is not None:
                    on_end()
        else:
            self.t = target

    def clock(self) -> RealtimeClock:
        return RealtimeClock(speedup=1.0, sleep=self.sleep, monotonic=self.monotonic)


class FakeRealtime(KernelLoop):
    """A real-time backend that can preempt: a job's end is its remaining work after a restart's cost."""

    can_preempt = True

    def __init__(self, wall: FakeWall):
        self.wall = wall

    def run(self, jobs, ordering, placement, preemption, seed: int = 0) -> dict[int, JobState]:
        self.free_gpus = TOPO.host_gpus.copy()
        self.free_total = int(self.free_gpus.sum())
        self.running: dict[int, JobState] = {}
        self._ends: dict[int, list] = {}
        scheduler = Scheduler(ordering, placement, preemption, self)
        scheduler.reset(seed)
        states = {j.job_id: JobState(j, isolated_iter_s(ZOO[j.model], j.pattern, j.gpus, TOPO)) for j in jobs}
        kernel = Kernel(self.wall.clock())
        self._begin(kernel, scheduler, sorted(states.values(), key=lambda s: (s.submit_s, s.job_id)))
        kernel.at(1e9, Kernel.SCHEDULE, self._deadline)  # keeps the kernel waiting for posted ends
        kernel.run()
        return states

    def _deadline(self):
        raise AssertionError("the fake run did not finish")

    def view(self, now):
        return ClusterView(TOPO, self.free_gpus, self.running, now, None, self.scheduler.waiting(), ZOO,
                           NETWORKS.create("ideal"), free_total=lambda: self.free_total)

    def start(self, js, p, now):
        for h, g in zip(p.hosts, p.gpus):
            self.free_gpus[h] -= g
        self.free_total -= js.gpus
        restarted = js.first_start_s is not None
        js.first_start_s = now if js.first_start_s is None else js.first_start_s
        js.last_start_s = js.last_update_s = now
        js.status, js.placement = "running", p
        js.progress_from_s = now + (CHECKPOINT_S + RESTORE_S if restarted else 0.0)
        self.running[js.job_id] = js
        end = js.progress_from_s + js.remaining * js.iso_iter_s
        self._ends[js.job_id] = self.wall.end_at(end, lambda: self.kernel.post(Kernel.COMPLETE, self._ended, js))

    def preempt(self, js, now):
        self.advance(js, now)
        self.wall.cancel(self._ends.pop(js.job_id))
        self._release(js)
        js.status = "waiting"
        js.preemptions += 1

    def advance(self, js, now):
        if js.status != "running":
            return
        held = now - js.last_update_s
        js.attained_gpu_s += js.gpus * held
        js.run_s += held
        dt = max(0.0, now - max(js.last_update_s, js.progress_from_s))
        js.remaining -= dt / js.iso_iter_s
        js.progress_s += dt
        js.last_update_s = now

    def _release(self, js):
        for h, g in zip(js.placement.hosts, js.placement.gpus):
            self.free_gpus[h] += g
        self.free_total += js.gpus
        del self.running[js.job_id]

    def _ended(self, js):
        now = self.kernel.now
        self.advance(js, now)
        self._ends.pop(js.job_id)
        self.scheduler.stopped(js)
        self._release(js)
        js.status, js.end_s, js.remaining = "done", now, 0.0
        self._finished()
        if self._done == self._n_jobs:
            self.kernel.stop()


def record(mech) -> tuple[list, list]:
    """Wrap a mechanism's start and preempt to log (job, hosts, GPUs, time) and (job, time)."""
    starts, preempts = [], []
    start, preempt = mech.start, mech.preempt

    def logged_start(js, p, now):
        starts.append((js.job_id, p.hosts, p.gpus, now))
        start(js, p, now)

    def logged_preempt(js, now):
        preempts.append((js.job_id, now))
        preempt(js, now)

    mech.start, mech.preempt = logged_start, logged_preempt
    return starts, preempts


def simulate(jobs, ordering, placement, preemption):
    sim = Simulator(TOPO, jobs, ordering, placement, preemption, zoo=ZOO,
                    config=SimConfig(network="ideal", checkpoint_s=CHECKPOINT_S, restore_s=RESTORE_S))
    starts, preempts = record(sim)
    return sim.run(), starts, preempts


def test_simulator_and_a_preempting_realtime_backend_make_the_same_decisions():
    jobs = trace()
    ordering = ORDERING.create("tiresias", thresholds_gpu_s=(200.0, 2000.0))
    placement, preemption = PLACEMENT.create("random"), PREEMPTION.create("priority")
    res, sim_starts, sim_preempts = simulate(jobs, ordering, placement, preemption)

    wall = FakeWall()
    rt = FakeRealtime(wall)
    rt_starts, rt_preempts = record(rt)
    states = rt.run(jobs, ordering, placement, preemption)  # the same policy objects, reset by the run

    assert len(sim_preempts) >= 3, "the trace must make Tiresias preempt, or the test shows little"
    assert len(sim_starts) == len(jobs) + len(sim_preempts)
    assert rt_starts == sim_starts  # order, hosts, GPUs per host and time of every start and restart
    assert rt_preempts == sim_preempts
    t = res.jobs.set_index("job_id")
    assert [states[j].end_s for j in t.index] == t.end_s.tolist()
    assert wall.t == max(t.end_s)  # the fake clock went where the schedule said, no further


class FakeController:
    """The controller a TestbedCluster drives, without agents: a job ends after iterations x compute seconds."""

    def __init__(self, wall: FakeWall, now):
        self.testbed = SimpleNamespace(topology=TOPO, rate_scale=1.0)
        self.wall, self.now = wall, now
        self.on_job_done = None
        self.jobs: dict[int, RunningJob] = {}
        self._ids = itertools.count(1)

    def new_job_id(self) -> int:
        return next(self._ids)

    def start_job(self, spec) -> RunningJob:
        rj = self.jobs[spec.job_id] = RunningJob(spec, [])
        end = self.now() + spec.iterations * spec.compute_ms / 1000.0

        def ended():
            rj.done.set()
            self.on_job_done(spec.job_id)  # as the agent reader thread does

        self.wall.end_at(end, ended)
        return rj

    def wait_job(self, job_id, timeout_s=600.0):
        assert self.jobs[job_id].done.is_set()
        return self.jobs[job_id]

    def stop_job(self, job_id):
        raise AssertionError("nothing fails in this run")

    def job_log(self, job_id):
        return pd.DataFrame()


@pytest.mark.parametrize("ordering, placement", [("fifo", "consolidated"), ("fjf", "random"),
                                                 ("tiresias", "topo-bestfit")])
def test_simulator_and_the_testbed_cluster_make_the_same_decisions(ordering, placement):
    jobs = trace(seed=7)
    ordering = ORDERING.create(ordering, **({"thresholds_gpu_s": (200.0, 2000.0)} if ordering == "tiresias" else {}))
    placement = PLACEMENT.create(placement)
    # The testbed cannot preempt; in the simulator the same ordering runs with preemption "none".
    res, sim_starts, sim_preempts = simulate(jobs, ordering, placement, PREEMPTION.create("none"))

    wall = FakeWall()
    cluster = None
    ctl = FakeController(wall, lambda: cluster.kernel.now)
    cluster = TestbedCluster(ctl, ordering=ordering, placement=placement, time_scale=1.0, zoo=ZOO)
    tb_starts, tb_preempts = record(cluster)
    live = cluster.run(jobs, timeout_s=1e9, clock=wall.clock())

    assert sim_preempts == tb_preempts == []
    assert tb_starts == sim_starts
    cols = ["job_id", "start_s", "end_s", "jct_s", "placement"]
    pd.testing.assert_frame_equal(live.jobs[cols], res.jobs[cols])
    assert live.summary["finished"] == len(jobs) and live.summary["preemption"] == "none"
    assert (res.jobs.start_s > res.jobs.submit_s).any(), "some job must queue, or the order shows nothing"


def test_a_post_from_another_thread_wakes_a_waiting_realtime_kernel():
    """The testbed's completions come from agent reader threads: a post must cut the wait for the next event."""
    kernel = Kernel(RealtimeClock(speedup=1.0))
    seen = []
    kernel.at(600.0, Kernel.UPDATE, seen.append, "ten minutes later")  # the kernel waits for this ...

    def finished(name):
        seen.append((name, kernel.now))
        kernel.stop()

    threading.Timer(0.05, kernel.post, (Kernel.COMPLETE, finished, "job 1")).start()
    t0 = time.monotonic()
    kernel.run()  # ... and the post wakes it long before
    assert time.monotonic() - t0 < 300
    [(name, at)] = seen
    assert name == "job 1" and 0.05 <= at < 300  # run at the wall time it was handed in
    assert len(kernel) == 1  # the far event is still armed
