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
from ..network.demand import build_demand
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
        self._retries: set[float] = set()
        # Multi-host jobs' completion times live here, behind one armed kernel event:
        # a network recompute changes them all, and re-pushing each would flood the heap.
        self.net_done: dict[int, float] = {}
        self._net_version = 0
        self._net_armed = math.inf
        self._round_due = False
        self.link_load = np.zeros(topo.n_links)
        self.link_over = np.zeros(topo.n_links)
        self.link_rate = np.zeros(topo.n_links)  # fair model: instantaneous sum of flow rates
        self.net_rate: dict[int, float] = {}
        self._shortcut = self.network.name == "fair"
        self.link_jobs: dict[int, set[int]] = {}  # link -> network jobs on it
        self._touched: set[int] = set()  # links whose set of jobs changed since the last recompute
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
        old, js.key = js.key, self.ordering.key(js, now)
        self.run_order.add((js.key, js.job_id))
        self._arm_key_change(js, must_advance=js.key == old)
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
                           self.link_load, (self.states[j] for _, j in self.waiting_order()), self.zoo,
                           self.config.network)

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
        no_victims_from = math.inf  # a job this big found no victims; bigger, later ones won't either
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
                self._retry(js, view)
            # Preempt when GPUs are short, or when they suffice but the placement declined them
            # (a policy that wants a better-consolidated placement may displace worse-ranked jobs).
            if can_preempt and js.gpus < no_victims_from:
                candidates = (self.states[j] for _, j in self.run_order.irange(minimum=(key, math.inf),
                                                                               reverse=True))
                victims = self.preemption.victims(js, candidates, view)
                if not victims:
                    if js.gpus > self.free_total:
                        no_victims_from = js.gpus
                else:
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
        phase = p.phase
        if phase is None:  # by default a job's iterations start when it starts making progress
            phase = (js.progress_from_s / js.iso_iter_s) % 1.0 if js.iso_iter_s > 0 else 0.0
        js.phase = phase
        demand, intra_s = build_demand(self.topology, model, js.job.pattern, js.job_id, p.hosts, p.gpus,
                                       js.iso_iter_s, phase)
        if demand is not None and self.config.network != "ideal":
            self.demands[js.job_id] = demand
            js.demand = demand
            js.iter_s = demand.iter_s(demand.iso_rate_gbps)  # provisional until the network settles
            js.comm_s = js.iter_s - model.compute_s
            for link in demand.links.tolist():
                self.link_jobs.setdefault(link, set()).add(js.job_id)
            if self._shortcut and self._joins_unsaturated(demand):
                self._apply_alone(js, demand, now, +1)
            else:
                self._touched.update(demand.links.tolist())
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
        for jid, phase in p.shifts:
            if jid in self.running:
                self.set_phase(jid, phase)

    def _retry(self, js: JobState, view: ClusterView) -> None:
        t = self.placement.retry_at(js, view)
        if t is not None and math.isfinite(t) and t > self.kernel.now and t not in self._retries:
            self._retries.add(t)
            self.kernel.at(t, Kernel.UPDATE, self._wake, t)

    def _wake(self, t: float) -> None:
        self._retries.discard(t)
        self._want_pass()

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
        demand = self.demands.pop(js.job_id, None)
        if demand is not None:
            self.net_done.pop(js.job_id, None)
            alone = self._shortcut and js.job_id in self.net_rate and self._leaves_unsaturated(demand)
            for link in demand.links.tolist():
                self.link_jobs[link].discard(js.job_id)
            if alone:
                self._apply_alone(js, demand, self.kernel.now, -1)
            else:
                self._touched.update(demand.links.tolist())
                self._net_dirty = True
            self.net_rate.pop(js.job_id, None)

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
        if js.demand is None:
            self.kernel.at(t, Kernel.COMPLETE, self._complete, js, js.version)
        else:
            self.net_done[js.job_id] = t

    def _arm_network_completions(self) -> None:
        t = min(self.net_done.values(), default=math.inf)
        if t != self._net_armed:
            self._net_version += 1
            self._net_armed = t
            if math.isfinite(t):
                self.kernel.at(t, Kernel.COMPLETE, self._network_complete, self._net_version)

    def _network_complete(self, version: int) -> None:
        if version != self._net_version:
            return
        now = self.kernel.now
        self._net_armed = math.inf
        for jid in [j for j, t in self.net_done.items() if t <= now]:
            js = self.states[jid]
            self._complete(js, js.version)
        self._arm_network_completions()

    def _arm_key_change(self, js: JobState, must_advance: bool = False) -> None:
        now = self.kernel.now
        t = self.ordering.next_key_change(js, now)
        js.key_version += 1
        if must_advance and t is not None and t <= now:
            # The key did not change, yet the policy asks to look again now: it would loop forever.
            raise PolicyError(f"{self.ordering.name}: next_key_change for job {js.job_id} is {t} <= now ({now}) "
                              f"although its key {js.key} did not change")
        if t is not None and math.isfinite(t):
            self.kernel.at(max(t, self.kernel.now), Kernel.UPDATE, self._key_change, js, js.key_version)

    # -------------------------------------------------------------- network
    # Exact shortcuts for the fair model. A job that joins links which stay
    # unsaturated even at its isolated rate (or that it saturates alone) changes
    # nobody's max-min share; nor does one that leaves links on which it was
    # the only job, or that were not saturated. Only other changes re-solve.
    def _joins_unsaturated(self, d: CommDemand) -> bool:
        cap = self.topology.link_capacity_gbps[d.links]
        before = self.link_rate[d.links]
        after = before + d.weights * d.iso_rate_gbps
        tight = after > cap * (1 - 1e-9)
        return bool(np.all(after <= cap * (1 + 1e-9)) and np.all(before[tight] <= 1e-9 * cap[tight]))

    def _leaves_unsaturated(self, d: CommDemand) -> bool:
        cap = self.topology.link_capacity_gbps[d.links]
        saturated = self.link_rate[d.links] >= cap * (1 - 1e-9)
        return all(len(self.link_jobs[l]) == 1 for l in d.links[saturated].tolist())

    def _apply_alone(self, js: JobState, d: CommDemand, now: float, sign: int) -> None:
        rate = d.iso_rate_gbps if sign > 0 else self.net_rate[js.job_id]
        net = d.net_s(rate)
        it = d.iter_s(rate)
        if sign > 0:
            js.iter_s, js.comm_s = it, net + d.serial_intra_s
            self.net_rate[js.job_id] = rate
            self._schedule_completion(js)
            self._arm_network_completions()
        self.link_load = self.link_load.copy()  # views handed to policies stay as they were
        self.link_rate[d.links] += sign * d.weights * rate
        self.link_load[d.links] += sign * d.weights * rate * (net / it)
        empty = [l for l in d.links.tolist() if not self.link_jobs[l]]
        self.link_rate[empty] = self.link_load[empty] = self.link_over[empty] = 0.0
        self._record(now)

    def _record(self, now: float) -> None:
        if self.config.record_links:
            self._close_segment(now)
            busy = np.flatnonzero(self.link_load)
            self._seg = (now, busy, self.link_load[busy], self.link_over[busy])

    def _component(self) -> list[int]:
        """Jobs connected, through shared links, to the links touched since the last recompute.

        Other jobs' rates cannot have changed: max-min shares depend only on the
        jobs and links of one connected component.
        """
        links = set(self._touched)
        jobs: set[int] = set()
        frontier = list(links)
        while frontier:
            new_jobs = set()
            for link in frontier:
                new_jobs |= self.link_jobs.get(link, set())
            new_jobs -= jobs
            jobs |= new_jobs
            frontier = []
            for jid in new_jobs:
                for link in self.demands[jid].links.tolist():
                    if link not in links:
                        links.add(link)
                        frontier.append(link)
        self._touched = set(links)
        return sorted(jobs)

    def _recompute_network(self, now: float) -> None:
        self._net_dirty = False
        if self.network.name != "fair" or len(self.demands) <= 64:
            ids = list(self.demands)  # phase offsets couple whole groups; small sets: solve all
            self._touched |= {l for l, jobs in self.link_jobs.items() if jobs}
        else:
            ids = self._component()
        demands = [self.demands[j] for j in ids]
        sol = self.network.solve(demands, self.topology.link_capacity_gbps)
        for d in demands:
            js = self.states[d.job_id]
            new_iter = sol.iter_s[d.job_id]
            changed = abs(new_iter - js.iter_s) > 1e-12 * max(new_iter, 1.0)
            if changed or d.job_id in self._unscheduled:
                self._advance(js, now)
                js.iter_s = new_iter
                js.comm_s = sol.comm_s[d.job_id]
                self._schedule_completion(js)
        self._unscheduled.clear()
        self._arm_network_completions()
        touched = np.fromiter(self._touched, dtype=np.int64, count=len(self._touched))
        self._touched = set()
        self.link_load = self.link_load.copy()  # views handed to policies stay as they were
        self.link_load[touched] = 0.0
        self.link_over[touched] = 0.0
        self.link_load[sol.links] = sol.load_gbps
        self.link_over[sol.links] = sol.overload_gbps
        if sol.rate_load_gbps is not None:
            self.link_rate[touched] = 0.0
            self.link_rate[sol.links] = sol.rate_load_gbps
            self.net_rate.update(sol.rate_gbps)
        self._record(now)

    def _close_segment(self, now: float) -> None:
        if self._seg is not None and now > self._seg[0] and len(self._seg[1]):
            t0, links, load, over = self._seg
            self._segments.append((t0, now, links, load, over))
        if self._seg is not None:
            self._seg = (now, *self._seg[1:])


def simulate(topology, jobs, ordering="fifo", placement=None, preemption=None, **config) -> SimResult:
    """One call: build a :class:`Simulator` and run it. ``config`` fills :class:`SimConfig`."""
    return Simulator(topology, jobs, ordering, placement, preemption, SimConfig(**config)).run()
