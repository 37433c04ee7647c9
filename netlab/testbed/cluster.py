"""TestbedCluster: replay a trace on a live testbed with the simulator's policies.

The scheduler loop is the simulator's, carried out on real processes: jobs
arrive at their submit times (scaled by ``time_scale``), the ordering policy
sorts the waiting queue, the placement policy reads the same
:class:`~netlab.sched.ClusterView` and returns a
:class:`~netlab.sched.Placement`, and the controller starts one rank
per GPU on the chosen hosts. Completions come from the agents' ``job_exit``
events. The result is the simulator's :class:`~netlab.sim.metrics.SimResult`
(the same per-job table and ``summary.json``), in trace seconds.

Scaling: ``time_scale`` shrinks every duration (submit times, compute time)
and the gradient bytes with it, on top of the testbed's ``rate_scale`` for
link rates, so an iteration's compute/communication balance is the model's.
Preemption is not carried out on the testbed (a killed rank loses its
state); preemptive orderings run without it, which ``config.json`` records.

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

import threading
import time

import numpy as np

from ..policies import ORDERING, PLACEMENT
from ..sched import ClusterView, JobState, Placement, PolicyError
from ..sim.metrics import SimResult, empty_links, job_table, summarise
from ..workload.job import Job, isolated_iter_s
from ..workload.zoo import ModelZoo
from .base import TestbedError
from .controller import Controller, TrainSpec

MIN_GRAD_BYTES = 4096  # below this an all-reduce is pure latency


class TestbedCluster:
    """Run jobs on the hosts behind ``controller`` under an ordering and a placement policy."""

    __test__ = False  # not a pytest class

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
        self.time_scale, self.seed, self.backend = time_scale, seed, backend
        self.zoo = zoo or ModelZoo.default()
        self._changed = threading.Event()

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
            period = js.iter_s  # the job's period alone on p (run() sets it), which its phase is a fraction of
            earliest = now + self.start_delay_s / self.time_scale  # trace s
            js.phase = (p.phase if p.phase is not None else earliest / period) % 1.0
            offset = (js.phase * period - earliest) % period  # first iteration at a trace time = phase x period
            start_at = self._unix0 + earliest * self.time_scale
            offset_ms = offset * self.time_scale * 1000.0
        return TrainSpec(self.controller.new_job_id(), list(zip(names, p.gpus)), grad_bytes=grad,
                         compute_ms=model.compute_s * self.time_scale * 1000.0, iterations=int(js.job.iterations),
                         offset_ms=offset_ms, backend=self.backend, start_at=start_at)

    def _now(self) -> float:
        return (time.monotonic() - self._t0) / self.time_scale

    # ----------------------------------------------------------- run
    def run(self, jobs: list[Job], timeout_s: float = 1800.0) -> SimResult:
        """Run ``jobs`` to completion (wall-clock ``timeout_s`` at most) and return the result tables."""
        topo = self.topology
        for j in jobs:
            if j.gpus > topo.total_gpus:
                raise ValueError(f"job {j.job_id}: needs {j.gpus} GPUs, the testbed has {topo.total_gpus}")
        seeds = np.random.SeedSequence(self.seed).spawn(2)
        self.ordering.reset(np.random.default_rng(seeds[0]))
        self.placement.reset(np.random.default_rng(seeds[1]))
        states = {j.job_id: JobState(j, isolated_iter_s(self.zoo[j.model], j.pattern, j.gpus, topo)) for j in jobs}
        arrivals = sorted(states.values(), key=lambda s: (s.job.submit_s, s.job_id))
        free = topo.host_gpus.copy()
        running: dict[int, JobState] = {}
        waiting: list[JobState] = []
        live = {}
        self.controller.on_job_done = lambda job_id: self._changed.set()
        self._t0 = time.monotonic()
        self._unix0 = time.time()  # the unix time of trace time 0 (ranks wait for unix start times)
        wall0 = time.perf_counter()
        passes = 0
        try:
            while arrivals or waiting or running:
                if time.perf_counter() - wall0 > timeout_s:
                    raise TestbedError(f"trace did not finish within {timeout_s:.0f} s "
                                       f"({len(running)} running, {len(waiting) + len(arrivals)} not started)")
                now = self._now()
                while arrivals and arrivals[0].job.submit_s <= now:
                    js = arrivals.pop(0)
                    js.status = "waiting"
                    waiting.append(js)
                for job_id, rj in list(live.items()):
                    if rj.done.is_set():
                        self.controller.wait_job(rj.spec.job_id, timeout_s=0)  # raises on a failed rank
                        js = running.pop(job_id)
                        del live[job_id]
                        self._finish(js, rj, now)
                        free[list(js.placement.hosts)] += js.placement.gpus
                waiting.sort(key=lambda s: (self.ordering.key(s, now), s.job_id))
                for js in list(waiting):
                    view = ClusterView(topo, free, running, now, None, waiting, self.zoo, "testbed")
                    p = self.placement.place(js, view)
                    if p is None:
                        if not self.ordering.backfill:
                            break  # strict order (fifo): nothing behind a job that cannot start starts first
                        continue
                    self._check(js, p, free)
                    free[list(p.hosts)] -= p.gpus
                    js.placement, js.status = p, "running"
                    js.first_start_s = js.last_start_s = now
                    # Its traffic on p and its period alone there (what the simulator's jobs carry, and the
                    # period a phase is a fraction of); then its start, then its demand at that phase.
                    d0 = view.demand_for(js, p)
                    js.iter_s = d0.iter_s(d0.iso_rate_gbps) if d0 is not None else js.iso_iter_s
                    spec = self.train_spec(js, p, now)
                    js.demand = view.demand_for(js, p, js.phase or 0.0) if d0 is not None else None
                    live[js.job_id] = self.controller.start_job(spec)
                    js.extra.update(testbed_job_id=spec.job_id, phase=js.phase, offset_ms=spec.offset_ms,
                                    start_at=spec.start_at)
                    running[js.job_id] = js
                    waiting.remove(js)
                passes += 1
                nxt = arrivals[0].job.submit_s if arrivals else None
                wait_s = 0.5 if nxt is None else max(0.0, min(0.5, (nxt - self._now()) * self.time_scale))
                self._changed.wait(wait_s)
                self._changed.clear()
        except BaseException:
            for rj in live.values():
                self.controller.stop_job(rj.spec.job_id)
            raise
        finally:
            self.controller.on_job_done = None
        wall = time.perf_counter() - wall0
        table = job_table(states.values(), topo)
        extra = {jid: js.extra for jid, js in states.items()}
        for col in ("testbed_job_id", "phase", "offset_ms", "start_error_ms", "measured_iter_s", "measured_iter_p99_s"):
            table[col] = [extra[j].get(col, np.nan) for j in table.job_id]
            table[col] = table[col].astype(float)
        summary = summarise(table, empty_links(), topo.total_gpus, wall, passes)
        summary.update(ordering=self.ordering.name, placement=self.placement.name, preemption="none",
                       network="testbed", topology=topo.name, seed=self.seed, tier_bytes={})
        config = dict(ordering=self.ordering.describe(), placement=self.placement.describe(), preemption="none",
                      network="testbed", seed=self.seed, time_scale=self.time_scale,
                      rate_scale=self.testbed.rate_scale, backend=self.backend, start_delay_s=self.start_delay_s,
                      preemption_note="the live testbed does not preempt", topology=topo.params | {"name": topo.name},
                      jobs=len(table))
        return SimResult(table, empty_links(), summary, config)

    def _check(self, js: JobState, p: Placement, free) -> None:
        if sum(p.gpus) != js.gpus or any(free[h] < g for h, g in zip(p.hosts, p.gpus)):
            raise PolicyError(f"{self.placement.name} placed job {js.job_id} ({js.gpus} GPUs) on "
                              f"{dict(zip(p.hosts, p.gpus))}, free there: {[int(free[h]) for h in p.hosts]}")

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
