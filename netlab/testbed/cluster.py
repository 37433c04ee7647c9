"""TestbedCluster: replay a trace on a live testbed with the simulator's policies.

The scheduling loop is the simulator's (:mod:`netlab.sim.loop` and the one
pass, :class:`~netlab.sched.Scheduler`), run on the event kernel with a
real-time clock (:class:`~netlab.sim.kernel.RealtimeClock`) and carried out
on real processes: jobs arrive as kernel events at their submit times (scaled
by ``time_scale``), the ordering policy sorts the waiting queue, the placement
policy reads the same :class:`~netlab.sched.ClusterView` and returns a
:class:`~netlab.sched.Placement`, and the controller starts one rank per GPU
on the chosen hosts. Completions come from the agents' ``job_exit`` events:
the controller's reader thread hands each to the kernel
(:meth:`~netlab.sim.kernel.Kernel.post`), which wakes and runs it, and the
pass that follows, on its own thread. The result is the simulator's
:class:`~netlab.sim.metrics.SimResult` (the same per-job table and
``summary.json``), in trace seconds.

Scaling: ``time_scale`` shrinks every duration (submit times, compute time)
and the gradient bytes with it, on top of the testbed's ``rate_scale`` for
link rates, so an iteration's compute/communication balance is the model's.
Preemption is not carried out on the testbed (a killed rank loses its
state): the cluster answers ``can_preempt = False``, so preemptive orderings
run without it, which ``config.json`` records. Likewise a placement's
``shifts`` of running jobs' phases are not carried out (their ranks already
run on their own clocks).

Phases (CASSINI's time shifts): with ``start_delay_s`` every job starts at a
known time, ``start_delay_s`` (wall) after the decision, delayed further so its
iterations begin where the simulator would begin them: at trace times
``phase x P`` modulo ``P``, ``P`` the job's iteration alone on its placement
(``JobState.iter_s``; the placement's ``phase``; without one, the earliest
start sets it, as the simulator's default does). Running jobs carry that
phase, period and their demand, so a phase-aware placement sees them as it
does in the simulator. Without ``start_delay_s`` a job starts as soon as its
ranks are up and a phase only delays its first iteration by ``phase x
iso_iter_s`` (relative to an unknown start, so shifts between jobs are not kept).
"""

from __future__ import annotations

import time

import numpy as np

from ..network.demand import build_demand
from ..network.model import Capabilities, LiveNetwork
from ..policies import ORDERING, PLACEMENT, PREEMPTION
from ..sched import ClusterView, JobState, Placement, RunningJobs, Scheduler
from ..sim.history import empty_links
from ..sim.kernel import Kernel, RealtimeClock
from ..sim.loop import KernelLoop
from ..sim.metrics import SimResult, job_table, summarise
from ..workload.job import Job, isolated_iter_s
from ..workload.zoo import ModelZoo
from .base import TestbedError
from .controller import Controller, TrainSpec

#: the testbed's network as policies see it: real links, and a job starts at its phase (``start_delay_s``)
TESTBED_NETWORK = LiveNetwork("testbed", Capabilities(uses_phase=True))

MIN_GRAD_BYTES = 4096  # below this an all-reduce is pure latency


class TestbedCluster(KernelLoop):
    """Run jobs on the hosts behind ``controller`` under an ordering and a placement policy."""

    __test__ = False  # not a pytest class
    can_preempt = False  # a killed rank loses its state: the agents do not checkpoint

    def __init__(self, controller: Controller, ordering="fifo", placement=None, time_scale: float = 1.0,
                 zoo: ModelZoo | None = None, seed: int = 0, backend: str = "auto",
                 start_delay_s: float | None = None):
        if time_scale <= 0:
            raise ValueError(f"time_scale must be > 0, got {time_scale}")
        if start_delay_s is not None and not (isinstance(start_delay_s, (int, float)) and 0 < start_delay_s < 600):
            raise ValueError(f"start_delay_s must be None or seconds in (0, 600), got {start_delay_s!r}")
        self.start_delay_s = start_delay_s
        self.controller = controller
        self.testbed = controller.testbed
        self.topology = self.testbed.topology
        self.ordering = ORDERING.create(ordering) if isinstance(ordering, str) else ordering
        placement = placement or self.ordering.default_placement or "consolidated"
        self.placement = PLACEMENT.create(placement) if isinstance(placement, str) else placement
        # The ordering's preemption, as the simulator builds it: the pass leaves it unused because this
        # mechanism answers can_preempt = False.
        self.preemption = PREEMPTION.create(self.ordering.default_preemption
                                            or ("priority" if self.ordering.preemptive else "none"))
        self.time_scale, self.seed, self.backend = time_scale, seed, backend
        self.zoo = zoo or ModelZoo.default()

    # ----------------------------------------------------------- helpers
    def train_spec(self, js: JobState, p: Placement, now: float | None = None) -> TrainSpec:
        """The testbed job for ``js`` on ``p`` decided at trace time ``now``: a rank per GPU, bytes and compute
        scaled, and its start (see the module doc on phases). Sets ``js.phase``."""
        model = self.zoo[js.job.model]
        names = [self.topology.hosts[h].name for h in p.hosts]
        grad = max(MIN_GRAD_BYTES, int(model.grad_bytes * self.testbed.rate_scale * self.time_scale))
        start_at = None
        if self.start_delay_s is None or now is None:
            js.phase = p.phase
            offset_ms = (p.phase or 0.0) * js.iso_iter_s * self.time_scale * 1000.0
        else:
            period = js.iter_s  # the job's period alone on p (start() sets it), which its phase is a fraction of
            earliest = now + self.start_delay_s / self.time_scale  # trace s
            js.phase = (p.phase if p.phase is not None else earliest / period) % 1.0
            offset = (js.phase * period - earliest) % period  # first iteration at a trace time = phase x period
            start_at = self._unix0 + earliest * self.time_scale
            offset_ms = offset * self.time_scale * 1000.0
        return TrainSpec(self.controller.new_job_id(), list(zip(names, p.gpus)), grad_bytes=grad,
                         compute_ms=model.compute_s * self.time_scale * 1000.0, iterations=int(js.job.iterations),
                         offset_ms=offset_ms, backend=self.backend, start_at=start_at, overlap=model.overlap)

    def _demand(self, js: JobState, p: Placement, phase: float):
        """The job's traffic on ``p`` at ``phase`` (None inside one host), as the simulator's jobs carry it."""
        return build_demand(self.topology, self.zoo[js.job.model], js.job.pattern, js.job_id, p.hosts, p.gpus,
                            js.iso_iter_s, phase)[0]

    # ----------------------------------------------------------- run
    def run(self, jobs: list[Job], timeout_s: float = 1800.0, clock: RealtimeClock | None = None) -> SimResult:
        """Run ``jobs`` to completion (wall-clock ``timeout_s`` at most) and return the result tables.

        ``clock``: the kernel's real-time clock (default: wall time, ``1 / time_scale`` trace seconds per
        second, from now); tests pass one on a fake wall clock.
        """
        topo = self.topology
        for j in jobs:
            if j.gpus > topo.total_gpus:
                raise ValueError(f"job {j.job_id}: needs {j.gpus} GPUs, the testbed has {topo.total_gpus}")
        scheduler = Scheduler(self.ordering, self.placement, self.preemption, self)
        scheduler.reset(self.seed)
        states = {j.job_id: JobState(j, isolated_iter_s(self.zoo[j.model], j.pattern, j.gpus, topo)) for j in jobs}
        arrivals = sorted(states.values(), key=lambda s: (s.job.submit_s, s.job_id))
        self.free_gpus = topo.host_gpus.copy()
        self.free_total = int(self.free_gpus.sum())
        self.running = RunningJobs()  # (its log of starts and stops: ClusterView.changes)
        self._live: dict[int, tuple] = {}  # testbed job id -> (JobState, RunningJob)
        clock = clock or RealtimeClock(speedup=1.0 / self.time_scale)
        self._unix0 = time.time()  # the unix time of trace time 0 (ranks wait for unix start times)
        kernel = Kernel(clock)
        self._begin(kernel, scheduler, arrivals)
        kernel.at(clock.now + timeout_s / self.time_scale, Kernel.SCHEDULE, self._timeout, timeout_s)
        self.controller.on_job_done = lambda job_id: kernel.post(Kernel.COMPLETE, self._exited, job_id)
        wall0 = time.perf_counter()
        try:
            if arrivals:
                kernel.run()
        except BaseException:
            for _, rj in self._live.values():
                self.controller.stop_job(rj.spec.job_id)
            raise
        finally:
            self.controller.on_job_done = None
        wall = time.perf_counter() - wall0
        return self._result(states, wall, kernel.events)

    def _timeout(self, timeout_s: float) -> None:
        raise TestbedError(f"trace did not finish within {timeout_s:.0f} s ({len(self.running)} running, "
                           f"{self._n_jobs - self._done - len(self.running)} not started)")

    def _exited(self, testbed_job_id: int) -> None:
        """A testbed job's last rank exited (posted by the controller's reader thread; runs on the kernel's)."""
        entry = self._live.pop(testbed_job_id, None)
        if entry is None:  # not one of this run's jobs
            return
        js, rj = entry
        self.controller.wait_job(testbed_job_id, timeout_s=0)  # raises on a failed rank
        now = self.kernel.now
        self.scheduler.stopped(js)
        p = js.placement
        self.free_gpus[list(p.hosts)] += p.gpus
        self.free_total += js.gpus
        del self.running[js.job_id]
        self._finish(js, rj, now)
        self._finished()
        if self._done == self._n_jobs:
            self.kernel.stop()

    # ----------------------------------------------------------- the mechanism
    def view(self, now: float) -> ClusterView:
        return ClusterView(self.topology, self.free_gpus, self.running, now, None, self.scheduler.waiting(),
                           self.zoo, TESTBED_NETWORK)

    def start(self, js: JobState, p: Placement, now: float) -> None:
        self.free_gpus[list(p.hosts)] -= p.gpus
        self.free_total -= js.gpus
        js.placement, js.status = p, "running"
        js.first_start_s = js.last_start_s = js.last_update_s = now
        # Its traffic on p and its period alone there (what the simulator's jobs carry, and the period a
        # phase is a fraction of); then its start, then its demand at that phase.
        d0 = self._demand(js, p, 0.0)
        js.iter_s = d0.iter_s(d0.iso_rate_gbps) if d0 is not None else js.iso_iter_s
        spec = self.train_spec(js, p, now)
        js.demand = self._demand(js, p, js.phase or 0.0) if d0 is not None else None
        self.running[js.job_id] = js
        self._live[spec.job_id] = (js, self.controller.start_job(spec))
        js.extra.update(testbed_job_id=spec.job_id, phase=js.phase, offset_ms=spec.offset_ms, start_at=spec.start_at)

    def advance(self, js: JobState, now: float) -> None:
        """GPU time held so far (the ordering's attained service); progress is read from the ranks' logs."""
        if js.status != "running":
            return
        held = now - js.last_update_s
        js.attained_gpu_s += js.gpus * held
        js.run_s += held
        js.last_update_s = now

    # ----------------------------------------------------------- results
    def _result(self, states: dict[int, JobState], wall: float, events: int) -> SimResult:
        topo = self.topology
        table = job_table(states.values(), topo)
        extra = {jid: js.extra for jid, js in states.items()}
        for col in ("testbed_job_id", "phase", "offset_ms", "start_error_ms", "measured_iter_s", "measured_iter_p99_s"):
            table[col] = [extra[j].get(col, np.nan) for j in table.job_id]
            table[col] = table[col].astype(float)
        summary = summarise(table, empty_links(), topo.total_gpus, wall, events)
        summary.update(ordering=self.ordering.name, placement=self.placement.name, preemption="none",
                       network="testbed", topology=topo.name, seed=self.seed, tier_bytes={})
        config = dict(ordering=self.ordering.describe(), placement=self.placement.describe(), preemption="none",
                      network="testbed", seed=self.seed, time_scale=self.time_scale,
                      rate_scale=self.testbed.rate_scale, backend=self.backend, start_delay_s=self.start_delay_s,
                      preemption_note="the live testbed does not preempt", topology=topo.params | {"name": topo.name},
                      jobs=len(table))
        return SimResult(table, empty_links(), summary, config)

    def _finish(self, js: JobState, rj, now: float) -> None:
        """Fill the job's accounting from its rank-0 iteration log (trace seconds)."""
        js.status, js.end_s = "done", now
        js.run_s = js.progress_s = now - js.first_start_s
        js.remaining = 0.0
        js.attained_gpu_s = js.run_s * js.gpus
        try:
            log = self.controller.job_log(rj.spec.job_id)
        except Exception:  # noqa: BLE001 - accounting only; the job itself finished
            log = None
        if log is not None and len(log):
            r0 = log[log["rank"] == 0]
            js.comm_time_s = float(r0.allreduce_s.sum()) / self.time_scale
            js.extra["measured_iter_s"] = float(r0.iter_s.median()) / self.time_scale
            js.extra["measured_iter_p99_s"] = float(r0.iter_s.quantile(0.99)) / self.time_scale
            if rj.spec.start_at is not None:  # how far the first iteration began from where it was put (wall ms)
                planned = rj.spec.start_at + rj.spec.offset_ms / 1000.0
                js.extra["start_error_ms"] = (float(r0.compute_start.min()) - planned) * 1000.0
