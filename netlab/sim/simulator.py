"""The event-driven, flow-level cluster simulator.

The main loop reads like a recipe (events of one instant run before the
scheduling pass of that instant):

1. ``arrive``: a job joins the waiting queue.
2. ``complete``: a job finishes; its GPUs and flows are released.
3. ``key change`` / ``round``: a job's priority moved, or a lease ended.
4. ``settle`` (once per instant): the scheduling pass asks the ordering,
   placement and preemption policies what to do and carries it out; then,
   if the set of flows changed, the network model recomputes every
   multi-host job's iteration time and their completions are rescheduled.

Jobs progress lazily: a job's remaining iterations are brought up to date
only when its speed changes or it stops. Rates are never stepped in time.

Preemption (and migration, which is a preemption plus a restart) costs
``checkpoint_s + restore_s`` at the next start, during which the job holds
its GPUs but makes no progress.
"""

from __future__ import annotations

import heapq
import math
import time
from dataclasses import dataclass, field

import numpy as np
from sortedcontainers import SortedList

from ..network.model import NETWORKS, CommDemand, NetworkModel, iteration_time
from .. import policies as _policies  # noqa: F401  (registers policies)
from ..policies.base import (ORDERING, PLACEMENT, PREEMPTION, OrderingPolicy, Placement, PlacementPolicy,
                             PolicyError, PreemptionPolicy)
from ..workload.job import Job, isolated_iter_s
from ..workload.patterns import PATTERNS
from ..workload.zoo import ModelZoo
from .kernel import Kernel
from .metrics import SimResult, build_result
from .state import ClusterView, JobState

EPS_ITERS = 1e-6


@dataclass
class SimConfig:
    network: str = "fair"
    seed: int = 0
    checkpoint_s: float = 10.0
    restore_s: float = 20.0  # Pollux's 30 s restart penalty, split
    backfill: bool = True  # walk past a job that does not fit (no reservations)
    record_links: bool = True
    progress: bool | None = False  # tqdm bar over finished jobs (None: auto)
    network_kwargs: dict = field(default_factory=dict)


def _make(registry, what):
    if what is None or not isinstance(what, str):
        return what
    return registry.create(what)


class Simulator:
    """Run ``jobs`` on ``topology`` under an ordering, placement and preemption policy."""

    def __init__(self, topology, jobs: list[Job], ordering: OrderingPolicy | str = "fifo",
                 placement: PlacementPolicy | str | None = None, preemption: PreemptionPolicy | str | None = None,
                 config: SimConfig | None = None, zoo: ModelZoo | None = None, network: NetworkModel | None = None):
        self.topology = topology
        self.config = config or SimConfig()
        self.zoo = zoo or ModelZoo.default()
        self.ordering: OrderingPolicy = _make(ORDERING, ordering)
        placement = placement or self.ordering.default_placement or "consolidated"
        self.placement: PlacementPolicy = _make(PLACEMENT, placement)
        preemption = preemption or self.ordering.default_preemption or ("priority" if self.ordering.preemptive else "none")
        self.preemption: PreemptionPolicy = _make(PREEMPTION, preemption)
        self.network: NetworkModel = network or NETWORKS.create(self.config.network, **self.config.network_kwargs)
        self.jobs = sorted(jobs, key=lambda j: (j.submit_s, j.job_id))
        ids = [j.job_id for j in self.jobs]
        if len(set(ids)) != len(ids):
            raise ValueError("job ids must be unique")
        for j in self.jobs:
            if j.gpus <= 0:
                raise ValueError(f"job {j.job_id} ({j.name}): gpus must be > 0, got {j.gpus}")
            if j.gpus > topology.total_gpus:
                raise ValueError(f"job {j.job_id} ({j.name}): needs {j.gpus} GPUs, cluster has {topology.total_gpus}")

    # ------------------------------------------------------------------ run
    def run(self) -> SimResult:
        wall0 = time.perf_counter()
        seeds = np.random.SeedSequence(self.config.seed).spawn(3)
        self.ordering.reset(np.random.default_rng(seeds[0]))
        self.placement.reset(np.random.default_rng(seeds[1]))
        self.preemption.reset(np.random.default_rng(seeds[2]))
        topo = self.topology
        self.kernel = Kernel()
        self.free = topo.host_gpus.copy()
        self.free_total = int(self.free.sum())
        self.states: dict[int, JobState] = {}
        self.running: dict[int, JobState] = {}
        # Waiting jobs by (key, id), one sorted list per GPU count: a pass merges
        # only the sizes that can fit (or may preempt), never scanning the rest.
        self.waiting_by_size: dict[int, SortedList] = {}
        self.n_waiting = 0
        self.run_order = SortedList()  # running jobs by key: worst last
        self.demands: dict[int, CommDemand] = {}
        self._pass_pending = False
        self._net_dirty = False
        self._unscheduled: set[int] = set()
        self._round_due = False
        self.link_load = np.zeros(topo.n_links)
        self._segments: list = []
        self._seg = None
        self._done = 0
        self._bar = None
        if self.config.progress is not False and len(self.jobs) > 0:
            from tqdm.auto import tqdm

            self._bar = tqdm(total=len(self.jobs), desc="simulate", unit="job",
                             disable=None if self.config.progress is None else False, mininterval=0.5, leave=False)
        for j in self.jobs:
            model = self.zoo[j.model]
            if j.pattern not in PATTERNS:
                raise ValueError(f"job {j.job_id}: unknown communication pattern {j.pattern!r}")
            js = JobState(j, isolated_iter_s(model, j.pattern, j.gpus, topo))
            self.states[j.job_id] = js
            self.kernel.at(j.submit_s, Kernel.ARRIVE, self._arrive, js)
        if self.ordering.round_s:
            first = self.jobs[0].submit_s if self.jobs else 0.0
            self.kernel.at(first + self.ordering.round_s, Kernel.UPDATE, self._round)
        try:
            self.kernel.run()
        finally:
            if self._bar is not None:
                self._bar.close()
        self._close_segment(self.kernel.now)
        wall = time.perf_counter() - wall0
        return build_result(self, wall)

    # --------------------------------------------------------------- events
    def _arrive(self, js: JobState) -> None:
        js.status = "waiting"
        js.last_update_s = self.kernel.now
        self._enqueue(js)
        self._want_pass()

    def _complete(self, js: JobState, version: int) -> None:
        if version != js.version or js.status != "running":
            return
        now = self.kernel.now
        self._advance(js, now)
        js.remaining = 0.0
        self._release(js)
        js.status = "done"
        js.end_s = now
        self._done += 1
        if self._bar is not None:
            self._bar.update(1)
        self._want_pass()

    def _key_change(self, js: JobState, version: int) -> None:
        if version != js.key_version or js.status != "running":
            return
        now = self.kernel.now
        self.run_order.remove((js.key, js.job_id))
        self._advance(js, now)
        js.key = self.ordering.key(js, now)
        self.run_order.add((js.key, js.job_id))
        self._arm_key_change(js)
        if self.n_waiting:
            self._want_pass()

    def _round(self) -> None:
        self._round_due = True
        self._want_pass()
        if self._done < len(self.jobs):
            self.kernel.at(self.kernel.now + self.ordering.round_s, Kernel.UPDATE, self._round)

    def _want_pass(self) -> None:
        if not self._pass_pending:
            self._pass_pending = True
            self.kernel.at(self.kernel.now, Kernel.SCHEDULE, self._settle)

    # ---------------------------------------------------------- scheduling
    def _settle(self) -> None:
        self._pass_pending = False
        now = self.kernel.now
        if self.n_waiting:
            self._schedule(now)
        if self._net_dirty:
            self._recompute_network(now)

    def waiting_order(self):
        """Waiting jobs' (key, id) in priority order."""
        return heapq.merge(*self.waiting_by_size.values())

    def view(self, now: float | None = None) -> ClusterView:
        return ClusterView(self.topology, self.free, self.running, self.kernel.now if now is None else now,
                           self.link_load, (self.states[j] for _, j in self.waiting_order()))

    def _refresh_keys(self, now: float) -> None:
        items = [self.states[j] for _, j in self.waiting_order()]
        self.waiting_by_size.clear()
        self.n_waiting = 0
        for js in items:
            self._enqueue(js)
        runs = list(self.running.values())
        self.run_order.clear()
        for js in runs:
            self._advance(js, now)
            js.key = self.ordering.key(js, now)
            self.run_order.add((js.key, js.job_id))

    def _schedule(self, now: float) -> None:
        order = self.ordering
        round_pass, self._round_due = self._round_due, False
        if order.dynamic_keys or round_pass:
            self._refresh_keys(now)
        may_preempt = order.preemptive and (order.preempt_on_events or round_pass)
        started, victims_all = [], []
        view = self.view(now)
        worst = self.run_order[-1][0] if self.run_order else None
        sources = []
        for size, items in self.waiting_by_size.items():
            if size <= self.free_total:
                sources.append(iter(items))
            elif may_preempt and worst is not None:
                sources.append(items.irange(maximum=(worst,), inclusive=(True, False)))
        for key, jid in heapq.merge(*sources):
            worst = self.run_order[-1][0] if self.run_order else None
            can_preempt = may_preempt and worst is not None and key < worst
            if self.free_total == 0 and not can_preempt:
                break
            js = self.states[jid]
            if js.gpus <= self.free_total:
                placement = self.placement.place(js, view)
                if placement is not None:
                    self._start(js, placement, now)
                    started.append((key, jid))
                    continue
            elif can_preempt:
                candidates = [self.states[j] for k, j in reversed(self.run_order) if k > key]
                victims = self.preemption.victims(js, candidates, view) if candidates else []
                if victims:
                    placement = self.placement.place(js, view.with_freed(victims))
                    if placement is not None:
                        for v in victims:
                            self._preempt(v, now)
                            victims_all.append(v)
                        self._start(js, placement, now)
                        started.append((key, jid))
                        continue
            if not self.config.backfill:
                break
        for item in started:
            self._dequeue(item)
        for v in victims_all:
            self._enqueue(v)
        if victims_all and self.free_total > 0:
            self._want_pass()

    # ------------------------------------------------------------ mechanism
    def _enqueue(self, js: JobState) -> None:
        js.key = self.ordering.key(js, self.kernel.now)
        bucket = self.waiting_by_size.get(js.gpus)
        if bucket is None:
            bucket = self.waiting_by_size[js.gpus] = SortedList()
        bucket.add((js.key, js.job_id))
        self.n_waiting += 1

    def _dequeue(self, item: tuple) -> None:
        self.waiting_by_size[self.states[item[1]].gpus].remove(item)
        self.n_waiting -= 1

    def _check_placement(self, js: JobState, p: Placement) -> None:
        if p.n_gpus != js.gpus or len(p.hosts) != len(p.gpus) or len(set(p.hosts)) != len(p.hosts):
            raise PolicyError(f"{self.placement.name}: placement {p} for job {js.job_id} does not give exactly "
                              f"{js.gpus} GPUs on distinct hosts")
        for h, g in zip(p.hosts, p.gpus):
            if g <= 0 or self.free[h] < g:
                raise PolicyError(f"{self.placement.name}: placement {p} for job {js.job_id} asks {g} GPUs on host "
                                  f"{h}, which has {int(self.free[h])} free")

    def _start(self, js: JobState, p: Placement, now: float) -> None:
        self._check_placement(js, p)
        hosts = np.asarray(p.hosts)
        self.free[hosts] -= np.asarray(p.gpus)
        self.free_total -= js.gpus
        restarted = js.first_start_s is not None
        js.first_start_s = now if js.first_start_s is None else js.first_start_s
        js.last_start_s = now
        js.status = "running"
        js.placement = p
        js.last_update_s = now
        js.progress_from_s = now + (self.config.checkpoint_s + self.config.restore_s if restarted else 0.0)
        self.running[js.job_id] = js
        model = self.zoo[js.job.model]
        plan = PATTERNS.get(js.job.pattern)().plan(p.gpus, model.grad_bytes)
        intra = float(self.topology.host_intra_gbps[hosts].min())
        intra_s = plan.serial_intra_bytes * 8 / (intra * 1e9)
        if plan.flows and self.config.network != "ideal":
            demand = self._demand(js, model, plan, hosts, intra, intra_s, now)
            self.demands[js.job_id] = demand
            js.demand = demand
            js.iter_s = demand.iter_s(demand.iso_rate_gbps)  # provisional until the network settles
            js.comm_s = js.iter_s - model.compute_s
            self._net_dirty = True
            self._unscheduled.add(js.job_id)
        else:
            js.demand = None
            if self.config.network == "ideal":
                js.iter_s = js.iso_iter_s
            else:
                js.iter_s = iteration_time(model.compute_s, intra_s, model.overlap)
            js.comm_s = js.iter_s - model.compute_s
            self._schedule_completion(js)
        js.key = self.ordering.key(js, now)
        self.run_order.add((js.key, js.job_id))
        self._arm_key_change(js)

    def _demand(self, js, model, plan, hosts, intra, intra_s, now) -> CommDemand:
        links, weights = [], []
        for n, (s, d) in enumerate(plan.flows):
            l, w = self.topology.flow_links(int(hosts[s]), int(hosts[d]), key=js.job_id * 1024 + n)
            links.append(l)
            weights.append(w)
        links = np.concatenate(links)
        weights = np.concatenate(weights)
        uniq, inv = np.unique(links, return_inverse=True)
        weights = np.bincount(inv, weights=weights)
        cap = intra if plan.ring_intra_cap else math.inf
        iso_rate = min(float(np.min(self.topology.link_capacity_gbps[uniq] / weights)), cap)
        phase = js.placement.phase
        if phase is None:
            phase = (js.progress_from_s / js.iso_iter_s) % 1.0 if js.iso_iter_s > 0 else 0.0
        js.phase = phase
        return CommDemand(js.job_id, uniq, weights, plan.flow_bytes, model.compute_s, intra_s, model.overlap,
                          cap, iso_rate, js.iso_iter_s, phase)

    def set_phase(self, job_id: int, phase: float) -> None:
        """Let a policy shift a running job's communication phase (fraction of its iteration)."""
        js = self.running[job_id]
        js.phase = phase % 1.0
        if js.demand is not None:
            js.demand.phase = js.phase
            self._net_dirty = True
            self._want_pass()

    def _release(self, js: JobState) -> None:
        p = js.placement
        self.free[np.asarray(p.hosts)] += np.asarray(p.gpus)
        self.free_total += js.gpus
        del self.running[js.job_id]
        self.run_order.remove((js.key, js.job_id))
        js.version += 1
        js.key_version += 1
        if self.demands.pop(js.job_id, None) is not None:
            self._net_dirty = True

    def _preempt(self, js: JobState, now: float) -> None:
        self._advance(js, now)
        self._release(js)
        js.status = "waiting"
        js.preemptions += 1

    def _advance(self, js: JobState, now: float) -> None:
        """Bring progress, attained service and time counters up to ``now``."""
        if js.status != "running":
            return
        js.attained_gpu_s += js.gpus * (now - js.last_update_s)
        self._account(js, now)

    def _account(self, js: JobState, now: float) -> None:
        held = now - js.last_update_s
        start = max(js.last_update_s, js.progress_from_s)
        dt = max(0.0, now - start)
        js.run_s += held
        if dt > 0 and js.iter_s > 0:
            js.remaining -= dt / js.iter_s
            js.progress_s += dt
            js.comm_time_s += dt * (js.comm_s / js.iter_s)
        js.last_update_s = now

    def _schedule_completion(self, js: JobState) -> None:
        js.version += 1
        begin = max(self.kernel.now, js.progress_from_s)
        t = begin + max(js.remaining, 0.0) * js.iter_s
        self.kernel.at(t, Kernel.COMPLETE, self._complete, js, js.version)

    def _arm_key_change(self, js: JobState) -> None:
        t = self.ordering.next_key_change(js, self.kernel.now)
        js.key_version += 1
        if t is not None and math.isfinite(t):
            self.kernel.at(max(t, self.kernel.now), Kernel.UPDATE, self._key_change, js, js.key_version)

    # -------------------------------------------------------------- network
    def _recompute_network(self, now: float) -> None:
        self._net_dirty = False
        demands = list(self.demands.values())
        sol = self.network.solve(demands, self.topology.link_capacity_gbps)
        for d in demands:
            js = self.states[d.job_id]
            new_iter = sol.iter_s[d.job_id]
            self._advance(js, now)
            changed = abs(new_iter - js.iter_s) > 1e-12 * max(new_iter, 1.0)
            js.iter_s = new_iter
            js.comm_s = sol.comm_s[d.job_id]
            if changed or d.job_id in self._unscheduled:
                self._schedule_completion(js)
        self._unscheduled.clear()
        load = np.zeros(self.topology.n_links)
        load[sol.links] = sol.load_gbps
        self.link_load = load
        if self.config.record_links:
            self._close_segment(now)
            self._seg = (now, sol.links, sol.load_gbps, sol.overload_gbps)

    def _close_segment(self, now: float) -> None:
        if self._seg is not None and now > self._seg[0] and len(self._seg[1]):
            t0, links, load, over = self._seg
            self._segments.append((t0, now, links, load, over))
        if self._seg is not None:
            self._seg = (now, *self._seg[1:])


def simulate(topology, jobs, ordering="fifo", placement=None, preemption=None, **config) -> SimResult:
    """One call: build a :class:`Simulator` and run it. ``config`` fills :class:`SimConfig`."""
    return Simulator(topology, jobs, ordering, placement, preemption, SimConfig(**config)).run()
