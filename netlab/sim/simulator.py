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

from ..network.model import DEFAULT_NETWORK, NETWORKS, NetworkModel, iteration_time
from ..policies import ORDERING, PLACEMENT, PREEMPTION, OrderingPolicy, PlacementPolicy, PreemptionPolicy
from ..sched import ClusterView, JobState, Placement, PolicyError
from ..workload.job import Job, isolated_iter_s
from ..workload.patterns import PATTERNS
from ..network.demand import build_demand
from ..workload.zoo import ModelZoo
from .fabric import Fabric
from .history import HISTORIES, make_history
from .kernel import Kernel
from .metrics import SimResult, build_result

@dataclass
class SimConfig:
    network: str = DEFAULT_NETWORK
    seed: int = 0
    checkpoint_s: float = 10.0
    restore_s: float = 20.0  # Pollux's 30 s restart penalty, split
    # Walk past a waiting job that cannot start (no reservations)? None: the ordering policy's own
    # choice (OrderingPolicy.backfill: False for strict fifo, True for fjf and the others).
    backfill: bool | None = None
    record_links: bool = True  # False: link_history "none" (kept for existing callers)
    # Per-link history (netlab.sim.history): "full" (every interval; default), "aggregate" (per-link time-weighted
    # load per link_resolution_s bin) or "none". None: "full" if record_links else "none".
    link_history: str | None = None
    link_resolution_s: float = 3600.0
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
        mode = self.config.link_history or ("full" if self.config.record_links else "none")
        if mode not in HISTORIES:
            raise ValueError(f"SimConfig: field 'link_history': {mode!r} is not one of {', '.join(HISTORIES.names())}")
        make_history(mode, self.config.link_resolution_s)  # refuse a bad resolution now, not after the run
        self._link_history = mode
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
        self.fabric = Fabric(topo, self.network, history=make_history(self._link_history,
                                                                     self.config.link_resolution_s))
        self._pass_pending = False
        self._retries: set[float] = set()
        # Multi-host jobs' completion times live here, behind one armed kernel event:
        # a network recompute changes them all, and re-pushing each would flood the heap.
        self.net_done: dict[int, float] = {}
        self._net_version = 0
        self._net_armed = math.inf
        self._round_due = False
        self._intra_memo: dict = {}
        self._done = 0
        self._bar = None
        if self.config.progress is not False and len(self.jobs) > 0:
            from ..progress import tqdm

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
        self.fabric.close(self.kernel.now)
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
        if self.fabric.dirty:
            self._recompute_network(now)

    def waiting_order(self):
        """Waiting jobs' (key, id) in priority order."""
        return heapq.merge(*self.waiting_by_size.values())

    def view(self, now: float | None = None) -> ClusterView:
        return ClusterView(self.topology, self.free, self.running, self.kernel.now if now is None else now,
                           self.fabric.load_gbps, (self.states[j] for _, j in self.waiting_order()), self.zoo,
                           self.config.network, free_total=lambda: self.free_total,
                           phase_of=self.fabric.model.phase_now)

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
        backfill = order.backfill if self.config.backfill is None else self.config.backfill
        started, victims_all = [], []
        view = self.view(now)
        worst = self.run_order[-1][0] if self.run_order else None
        # A k-way merge of the size buckets in priority order (heap of (next item, size)), by hand rather
        # than heapq.merge so that a bucket whose jobs can no longer start this pass is dropped ("parked")
        # instead of yielding each of its jobs only to skip it. Without backfill every bucket takes part:
        # the pass stops at the first job, in priority order over all sizes, that cannot start, and that
        # job may be one too big for the free GPUs.
        heads, sources = [], {}
        for size, items in self.waiting_by_size.items():
            if not items:
                continue
            if size <= self.free_total or not backfill:
                bound = None
            elif may_preempt and worst is not None and items[0] < (worst,):
                bound = (worst,)
            else:
                continue
            it = items.irange(maximum=bound, inclusive=(True, False))
            heads.append((next(it), size))
            sources[size] = (it, bound)
        heapq.heapify(heads)
        parked: dict[int, tuple] = {}
        no_victims_from = math.inf  # a job this big found no victims; bigger, later ones won't either
        stale = False
        while heads:
            item, size = heads[0]
            key, jid = item
            nxt = next(sources[size][0], None)
            if nxt is None:
                heapq.heappop(heads)
            else:
                heapq.heapreplace(heads, (nxt, size))
            if stale:  # a start or a preemption changed the running set
                worst, stale = (self.run_order[-1][0] if self.run_order else None), False
            can_preempt = may_preempt and worst is not None and key < worst
            if self.free_total == 0 and not can_preempt:
                break
            js = self.states[jid]
            if js.gpus <= self.free_total:
                placement = self.placement.place(js, view)
                if placement is not None:
                    self._start(js, placement, now)
                    started.append(item)
                    stale = True
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
                        started.append(item)
                        stale = True
                        self._unpark(parked, sources, heads, item)
                        continue
            if not backfill:
                break  # strict order: nothing behind a job that cannot start may start before it
            if size > self.free_total and size >= no_victims_from and nxt is not None:
                # Every later job of this bucket is skipped unless free GPUs grow (no_victims_from only falls).
                heads.remove((nxt, size))
                heapq.heapify(heads)
                parked[size] = sources.pop(size)[1]
        for item in started:
            self._dequeue(item)
        for v in victims_all:
            self._enqueue(v)
        if victims_all and self.free_total > 0:
            self._want_pass()

    def _unpark(self, parked: dict, sources: dict, heads: list, after: tuple) -> None:
        """After a preemption left more GPUs free: resume the parked buckets that now fit, after ``after``.

        Their jobs before ``after`` were skipped while the bucket was parked,
        exactly as they would have been in turn: free GPUs had not grown yet.
        """
        for size in [g for g in parked if g <= self.free_total]:
            bound = parked.pop(size)
            it = self.waiting_by_size[size].irange(after, bound, inclusive=(False, False))
            nxt = next(it, None)
            if nxt is not None:
                heapq.heappush(heads, (nxt, size))
                sources[size] = (it, bound)

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
        self._take(p, -1)
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
        demand, intra_s = self._demand(model, js, p.hosts, p.gpus, phase)
        if demand is not None and self.config.network != "ideal":
            js.demand = demand
            rate = self.fabric.join(js.job_id, demand, now)
            if rate is None:  # provisional: the network settles later this instant
                js.iter_s = demand.iter_s(demand.iso_rate_gbps)
                js.comm_s = js.iter_s - model.compute_s
            else:  # its links had room: it runs at its isolated rate and nobody else changes
                js.iter_s = demand.iter_s(rate)
                js.comm_s = demand.net_s(rate) + demand.serial_intra_s
                self._schedule_completion(js)
                self._arm_network_completions()
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

    def _demand(self, model, js: JobState, hosts: tuple, gpus: tuple, phase: float):
        """``build_demand`` for a start. One-host starts (most of them) have no network demand and the
        same intra-host time for every such start: memoised. Multi-host routes are memoised by the topology."""
        if len(hosts) > 1:
            return build_demand(self.topology, model, js.job.pattern, js.job_id, hosts, gpus, js.iso_iter_s, phase)
        key = (model.name, js.job.pattern, gpus, self.topology.host_intra_gbps[hosts[0]])
        hit = self._intra_memo.get(key)
        if hit is None:
            hit = self._intra_memo[key] = build_demand(self.topology, model, js.job.pattern, 0, hosts, gpus)
        return hit

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
            self.fabric.rephase(job_id, js.phase)
            self._want_pass()

    def _take(self, p: Placement, sign: int) -> None:
        """Return (+1) or claim (-1) a placement's GPUs; most placements are one host, without numpy indexing."""
        if len(p.hosts) == 1:
            self.free[p.hosts[0]] += sign * p.gpus[0]
        else:
            self.free[np.asarray(p.hosts)] += sign * np.asarray(p.gpus)

    def _release(self, js: JobState) -> None:
        p = js.placement
        self._take(p, +1)
        self.free_total += js.gpus
        del self.running[js.job_id]
        self.run_order.remove((js.key, js.job_id))
        js.version += 1
        js.key_version += 1
        if self.fabric.leave(js.job_id, self.kernel.now):
            self.net_done.pop(js.job_id, None)

    def _preempt(self, js: JobState, now: float) -> None:
        self._advance(js, now)
        self._release(js)
        js.status = "waiting"
        js.preemptions += 1

    def _advance(self, js: JobState, now: float) -> None:
        """Bring progress, attained service and time counters up to ``now``."""
        if js.status != "running":
            return
        held = now - js.last_update_s
        js.attained_gpu_s += js.job.gpus * held
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
    def _recompute_network(self, now: float) -> None:
        """Re-solve the fabric and move the completions of jobs whose speed changed."""
        for jid, iter_s, comm_s in self.fabric.solve(now, lambda j: self.states[j].iter_s):
            js = self.states[jid]
            self._advance(js, now)  # progress so far at the old speed
            js.iter_s, js.comm_s = iter_s, comm_s
            self._schedule_completion(js)
        self._arm_network_completions()

    @property
    def link_load(self) -> np.ndarray:
        """Current time-averaged load per directed link (Gbit/s)."""
        return self.fabric.load_gbps


def simulate(topology, jobs, ordering="fifo", placement=None, preemption=None, **config) -> SimResult:
    """One call: build a :class:`Simulator` and run it. ``config`` fills :class:`SimConfig`."""
    return Simulator(topology, jobs, ordering, placement, preemption, SimConfig(**config)).run()
