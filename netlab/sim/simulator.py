"""The event-driven, flow-level cluster simulator.

The main loop reads like a recipe (events of one instant run before the
scheduling pass of that instant; :mod:`netlab.sim.loop`, which the live
testbed runs too):

1. ``arrive``: a job joins the waiting queue.
2. ``complete``: a job finishes; its GPUs and flows are released.
3. ``key change`` / ``round``: a job's priority moved, or a lease ended.
4. ``settle`` (once per instant): the scheduling pass
   (:class:`~netlab.sched.Scheduler`) asks the ordering, placement and
   preemption policies what to do and this simulator, a
   :class:`~netlab.sched.Mechanism`, carries it out; then, if the set of
   flows changed, the network model recomputes every multi-host job's
   iteration time and their completions are rescheduled.

Jobs progress lazily: a job's remaining iterations are brought up to date
only when its speed changes or it stops. Rates are never stepped in time.

Preemption (and migration, which is a preemption plus a restart) costs the
job's checkpoint plus its restore at the next start, during which the job
holds its GPUs but makes no progress: by default from its model's size
(:mod:`netlab.workload.checkpoint`), or fixed ``checkpoint_s + restore_s``
seconds when the configuration gives them (:meth:`SimConfig.restart_s`).
"""

from __future__ import annotations

import gc
import itertools
import math
import time

import numpy as np

from ..errors import UnknownNameError, unknown_name
from ..network.model import NetworkModel, iteration_time, make_network
from ..policies import (MIGRATION, NETWORK_POLICIES, ORDERING, PLACEMENT, PREEMPTION, MigrationPolicy, NetworkPolicy,
                        OrderingPolicy, PlacementPolicy, PreemptionPolicy)
from ..sched import ClusterView, JobState, NetAllocation, Placement, RunningJobs, Scheduler
from ..workload.job import Job, JobError, isolated_comm_s, isolated_iter_s
from ..workload.patterns import PATTERNS
from ..network.demand import build_demand
from ..workload.zoo import ModelZoo
from .completions import Completions
from .config import SimConfig
from .fabric import Fabric
from .history import make_history
from .kernel import Kernel
from .loop import KernelLoop
from .metrics import SimResult, build_result
from .netalloc import check_allocation, rerouted


def _make(registry, what, field: str):
    if what is None or not isinstance(what, str):
        return what
    return registry.get(what, field)()


class Simulator(KernelLoop):
    """Run ``jobs`` on ``topology`` under an ordering, placement, preemption, network and migration policy."""

    can_preempt = True  # a preempted job checkpoints and later restores (SimConfig.restart_s)
    can_migrate = True  # a moved job checkpoints and restores at once, on its new placement

    def __init__(self, topology, jobs: list[Job], ordering: OrderingPolicy | str = "fifo",
                 placement: PlacementPolicy | str | None = None, preemption: PreemptionPolicy | str | None = None,
                 config: SimConfig | None = None, zoo: ModelZoo | None = None, network: NetworkModel | None = None,
                 netpolicy: NetworkPolicy | str | None = None, migration: MigrationPolicy | str | None = None):
        self.topology = topology
        self.config = config or SimConfig()
        self.zoo = zoo or ModelZoo.default()
        self.ordering: OrderingPolicy = _make(ORDERING, ordering, "ordering")
        placement = placement or self.ordering.default_placement or "consolidated"
        self.placement: PlacementPolicy = _make(PLACEMENT, placement, "placement")
        preemption = preemption or self.ordering.default_preemption or ("priority" if self.ordering.preemptive else "none")
        self.preemption: PreemptionPolicy = _make(PREEMPTION, preemption, "preemption")
        self.netpolicy: NetworkPolicy = _make(NETWORK_POLICIES, netpolicy or "none", "netpolicy")
        self.migration: MigrationPolicy = _make(MIGRATION, migration or "none", "migration")
        self.network: NetworkModel = make_network(network, self.config.network, self.config.network_kwargs)
        self._link_history = self.config.history_mode  # a registered name: SimConfig checked it
        self.jobs = sorted(jobs, key=lambda j: (j.submit_s, j.job_id))
        ids = [j.job_id for j in self.jobs]
        if len(set(ids)) != len(ids):
            raise JobError("job ids must be unique")
        for j in self.jobs:
            if j.gpus <= 0:
                raise JobError(f"job {j.job_id} ({j.name}): gpus must be > 0, got {j.gpus}")
            if j.gpus > topology.total_gpus:
                raise JobError(f"job {j.job_id} ({j.name}): needs {j.gpus} GPUs, cluster has {topology.total_gpus}")

    # ------------------------------------------------------------------ run
    def run(self) -> SimResult:
        wall0 = time.perf_counter()
        scheduler = Scheduler(self.ordering, self.placement, self.preemption, self, self.config.backfill,
                              self.netpolicy, self.migration)
        scheduler.reset(self.config.seed)
        topo = self.topology
        self.free_gpus = topo.host_gpus.copy()
        self.free_total = int(self.free_gpus.sum())
        self.states: dict[int, JobState] = {}
        self.running = RunningJobs()  # (its log of starts and stops: ClusterView.changes)
        self.fabric = Fabric(topo, self.network, history=make_history(self._link_history,
                                                                     self.config.link_resolution_s))
        # Multi-host jobs' completion times live here, behind one armed kernel event:
        # a network recompute changes them all, and re-pushing each would flood the kernel's heap.
        self.net_done = Completions()
        self._net_version = 0
        self._net_armed = math.inf
        self._intra_memo: dict = {}
        # starting jobs whose flows wait for the network policy's decision of this pass before they join the fabric
        self._unrouted: dict[int, JobState] = {}
        self._route_at_start = self.netpolicy.allocates
        self._host_intra = self.topology.host_intra_gbps.tolist()  # the memo's key reads it per one-host start
        self._restart_memo: dict[str, float] = {}  # restart seconds by model name (fixed for the run)
        self._reroute_memo: dict = {}  # a path choice's route by placement (netalloc.rerouted)
        self._allocations_taken: dict = {}  # id -> a NetAllocation the network model took (_check_allocation)
        self._bar = None
        if self.config.progress is not False and len(self.jobs) > 0:
            from ..progress import tqdm

            self._bar = tqdm(total=len(self.jobs), desc="simulate", unit="job",
                             disable=None if self.config.progress is None else False, mininterval=0.5, leave=False)
        self._iso_memo: dict = {}  # (model, pattern, gpus) -> (iteration s, comm s) alone: fixed for the run
        self._build_states()
        self._begin(Kernel(), scheduler, list(self.states.values()))
        frozen = _freeze_for_run()
        try:
            self.kernel.run()
        finally:
            if frozen:
                gc.unfreeze()
            if self._bar is not None:
                self._bar.close()
        self.fabric.close(self.kernel.now)
        wall = time.perf_counter() - wall0
        return build_result(self, wall)

    def _build_states(self) -> None:
        """A :class:`JobState` per job, with the cyclic garbage collector off while they are built.

        Why: each state is three objects the collector tracks (itself, its ``extra`` dict, its ``runs`` list), none
        of them garbage, and building them triggers collections of the older generations again and again as the
        heap grows: on a large trace those collections cost several times the states themselves.
        Turning the collector off here frees nothing later and changes no result (nothing built here is a cycle)."""
        enabled = gc.isenabled()
        gc.disable()
        try:
            for j in self.jobs:
                model = self.zoo[j.model]
                if j.pattern not in PATTERNS:  # refused before the run, as the zoo refuses an unknown model
                    raise UnknownNameError(f"job {j.job_id}: " + unknown_name("communication pattern", j.pattern,
                                                                               PATTERNS.names(), "pattern"))
                self.states[j.job_id] = JobState(j, self._isolated(model, j.pattern, j.gpus)[0])
        finally:
            if enabled:
                gc.enable()

    # --------------------------------------------------------------- events
    def _complete(self, js: JobState, version: int) -> None:
        if version != js.version or js.status != "running":
            return
        now = self.kernel.now
        self.advance(js, now)
        js.remaining = 0.0
        self.scheduler.stopped(js)
        self._release(js)
        js.demand = None  # a finished job's links are no one's business: a million-job run would keep them all
        js.status = "done"
        js.end_s = now
        if self._bar is not None:
            self._bar.update(1)
        self._finished()

    # ---------------------------------------------------------- scheduling
    def _after_pass(self, now: float) -> None:
        if self._unrouted:
            self._join_unrouted(now)
        if self.fabric.dirty:
            self._recompute_network(now)

    def waiting_order(self):
        """Waiting jobs' (key, id) in priority order."""
        return self.scheduler.waiting_order()

    def view(self, now: float | None = None) -> ClusterView:
        return ClusterView(self.topology, self.free_gpus, self.running, self.kernel.now if now is None else now,
                           self.fabric.load_snapshot(), (self.states[j] for _, j in self.waiting_order()), self.zoo,
                           self.network, free_total=lambda: self.free_total, restart_s=self._restart_s)

    def _restart_s(self, js: JobState) -> float:
        """What stopping and restarting ``js`` costs it here (its model's checkpoint and restore)."""
        return self._model_restart_s(self.zoo[js.job.model])

    def _isolated(self, model, pattern: str, gpus: int) -> tuple[float, float]:
        """(``isolated_iter_s``, ``isolated_comm_s``) of a job of ``model``: the same for every job of its model,
        pattern and size in a run, memoised (each call reads the topology's host maxima, ~10 us a job)."""
        key = (model.name, pattern, gpus)
        hit = self._iso_memo.get(key)
        if hit is None:
            hit = self._iso_memo[key] = (isolated_iter_s(model, pattern, gpus, self.topology),
                                         isolated_comm_s(model, pattern, gpus, self.topology))
        return hit

    def _model_restart_s(self, model) -> float:
        """``SimConfig.restart_s`` of a zoo model, computed once per model a run restarts."""
        t = self._restart_memo.get(model.name)
        if t is None:
            t = self._restart_memo[model.name] = self.config.restart_s(model)
        return t

    # ------------------------------------------------------------ mechanism
    def start(self, js: JobState, p: Placement, now: float) -> None:
        self._take(p, -1)
        self.free_total -= js.gpus
        restarted = js.first_start_s is not None
        js.first_start_s = now if js.first_start_s is None else js.first_start_s
        js.last_start_s = now
        js.status = "running"
        js.placement = p
        js.last_update_s = now
        model = self.zoo[js.job.model]
        js.progress_from_s = now + (self._model_restart_s(model) if restarted else 0.0)
        js.phase_blind = False
        self.running[js.job_id] = js
        phase = p.phase
        if phase is None:  # by default a job's iterations start when it starts making progress
            phase = (js.progress_from_s / js.iso_iter_s) % 1.0 if js.iso_iter_s > 0 else 0.0
        js.phase = phase
        demand, intra_s = self._demand(model, js, p.hosts, p.gpus, phase)
        contention = self.network.capabilities.contention
        if demand is not None and contention and self._route_at_start:
            # the network policy decides after this pass (Scheduler.allocate): the flows join once, on the paths
            # and in the class it gives, instead of joining on the fabric's ECMP and being re-routed at once
            self._unrouted[js.job_id] = js
            self._joined(js, demand, None)
        elif demand is not None and contention:
            self._join(js, demand, now)
        else:  # comm_s is all of the job's communication, overlapped or not, as the network models report it
            js.demand = None
            if not contention:
                js.iter_s = js.iso_iter_s
                js.comm_s = self._isolated(model, js.job.pattern, js.gpus)[1]
            else:
                js.iter_s = iteration_time(model.compute_s, intra_s, model.overlap)
                js.comm_s = intra_s
            self._schedule_completion(js)
        for jid, phase in p.shifts:
            if jid in self.running:
                self.set_phase(jid, phase)

    def _join(self, js: JobState, demand, now: float) -> None:
        """A starting job's flows join the fabric."""
        self._joined(js, demand, self.fabric.join(js.job_id, demand, now))

    def _joined(self, js: JobState, demand, rate: float | None) -> None:
        """``js``'s flows joined the fabric (at its start, or re-routed); ``rate``: its per-flow rate if known."""
        js.demand = demand
        if rate is None:  # provisional: the network settles later this instant
            js.iter_s = demand.iter_s(demand.iso_rate_gbps)
            js.comm_s = demand.net_s(demand.iso_rate_gbps) + demand.serial_intra_s
        else:  # its links had room: it runs at its isolated rate and nobody else changes
            js.phase_blind = False
            js.iter_s = demand.iter_s(rate)
            js.comm_s = demand.net_s(rate) + demand.serial_intra_s
            self._schedule_completion(js)
            self._arm_network_completions()

    def allocate(self, allocations: dict[int, NetAllocation], now: float) -> None:
        """Carry out a network policy's allocations (``netlab.sim.netalloc``): the network model takes them or
        refuses what it cannot honour; a job without flows (one host) and the ``ideal`` model ignore them."""
        contended = self.network.capabilities.contention
        changes = []  # consecutive class / weight / cap changes, handed to the fabric at once (in order)
        for jid, alloc in allocations.items():
            js = self.running[jid]
            if self._unrouted.pop(jid, None) is not None:  # started this pass: it joins with its allocation
                changes = self._reallocated(changes, now)
                self._join_allocated(js, alloc, now)
                continue
            if alloc is js.allocation or alloc == js.allocation:  # identity first: most are unchanged
                continue
            if contended and js.demand is not None:
                self._check_allocation(jid, alloc)
                if alloc.paths != js.allocation.paths:
                    changes = self._reallocated(changes, now)
                    demand = rerouted(self.topology, self.zoo, js, alloc, self._reroute_memo)
                    self.advance(js, now)  # progress so far at the old speed
                    self.net_done.pop(jid)
                    self._joined(js, demand, self.fabric.reallocate(jid, alloc, now, demand=demand))
                else:
                    changes.append((jid, alloc))
            js.allocation = alloc
        self._reallocated(changes, now)

    def _reallocated(self, changes: list, now: float) -> list:
        """The fabric takes ``changes`` (class / weight / cap, in order: ``Fabric.reallocate_many``); a new list."""
        if changes:
            self.fabric.reallocate_many(changes, now)
            return []
        return changes

    def _check_allocation(self, jid: int, alloc: NetAllocation) -> None:
        """Refuse what the network model cannot honour of ``alloc`` (``netalloc.check_allocation``), before
        anything changes; an allocation object it took once is not checked again (a policy hands out the same
        few again and again, and the model checks what reaches it once more)."""
        if self._allocations_taken.get(id(alloc)) is not alloc:
            check_allocation(self.network, jid, alloc)
            if len(self._allocations_taken) >= 10_000:  # bounded, as the route memos
                self._allocations_taken.clear()
            self._allocations_taken[id(alloc)] = alloc

    def _join_allocated(self, js: JobState, alloc: NetAllocation, now: float) -> None:
        """A job started this pass joins the fabric once, with its network allocation (re-built on its paths if
        it has a choice of its own, else its start's demand on the fabric's ECMP, given the allocation)."""
        demand = js.demand
        if alloc is not js.allocation and alloc != js.allocation:
            self._check_allocation(js.job_id, alloc)
            if alloc.paths is not None:
                demand = rerouted(self.topology, self.zoo, js, alloc, self._reroute_memo)
            else:
                demand.allocation = alloc
        js.allocation = alloc
        self._join(js, demand, now)

    def _join_unrouted(self, now: float) -> None:
        """Jobs started without a network decision since (none was asked this pass) join on their own demand."""
        for js in list(self._unrouted.values()):
            self._join_allocated(js, js.allocation, now)
        self._unrouted.clear()

    def _demand(self, model, js: JobState, hosts: tuple, gpus: tuple, phase: float):
        """``build_demand`` for a start. One-host starts (most of them) have no network demand and the
        same intra-host time for every such start: memoised. Multi-host routes are memoised by the topology."""
        if len(hosts) > 1:
            return build_demand(self.topology, model, js.job.pattern, js.job_id, hosts, gpus, js.iso_iter_s, phase)
        key = (model.name, js.job.pattern, gpus, self._host_intra[hosts[0]])
        hit = self._intra_memo.get(key)
        if hit is None:
            hit = self._intra_memo[key] = build_demand(self.topology, model, js.job.pattern, 0, hosts, gpus)
        return hit

    def set_phase(self, job_id: int, phase: float) -> None:
        """Let a policy shift a running job's communication phase (fraction of its iteration)."""
        js = self.running[job_id]
        js.phase = phase % 1.0
        if job_id in self._unrouted:  # not in the fabric yet: it joins at this phase
            js.demand.phase = js.phase
        elif js.demand is not None:
            self.fabric.rephase(job_id, js.phase, self.kernel.now)
            self._want_pass()

    def _take(self, p: Placement, sign: int) -> None:
        """Return (+1) or claim (-1) a placement's GPUs; up to 8 hosts (most placements) one by one, without the
        two arrays and the fancy index numpy would build (about half the time on a few hosts)."""
        hosts = p.hosts
        if len(hosts) <= 8:
            free = self.free_gpus
            for h, g in zip(hosts, p.gpus):
                free[h] += sign * g
        else:
            self.free_gpus[np.asarray(hosts)] += sign * np.asarray(p.gpus)

    def _release(self, js: JobState) -> None:
        p = js.placement
        self._take(p, +1)
        self.free_total += js.gpus
        del self.running[js.job_id]
        js.version += 1
        self._unrouted.pop(js.job_id, None)
        if self.fabric.leave(js.job_id, self.kernel.now):
            self.net_done.pop(js.job_id)

    def preempt(self, js: JobState, now: float) -> None:
        js.runs.append((js.last_start_s, now, js.placement))
        self.advance(js, now)
        self._release(js)
        js.demand = None  # its next start builds its demand again; kept, every waiting job's would hold its route
        js.status = "waiting"
        js.preemptions += 1

    def migrate(self, js: JobState, p: Placement, now: float) -> None:
        """Move running ``js`` to ``p``: it stops (its run so far recorded), then starts again on ``p`` at once,
        holding those GPUs without progress while it checkpoints and restores (``start`` charges a restart)."""
        js.runs.append((js.last_start_s, now, js.placement))
        self.advance(js, now)
        self._release(js)
        js.migrations += 1
        self.start(js, p, now)

    def advance(self, js: JobState, now: float) -> None:
        """Bring progress, attained service and time counters up to ``now``."""
        if js.status != "running":
            return
        held = now - js.last_update_s
        js.attained_gpu_s += js.gpus * held
        start = max(js.last_update_s, js.progress_from_s)
        dt = max(0.0, now - start)
        js.run_s += held
        if dt > 0 and js.iter_s > 0:
            js.remaining -= dt / js.iter_s
            js.progress_s += dt
            if js.phase_blind:
                js.phase_blind_s += dt
            js.comm_time_s += dt * (js.comm_s / js.iter_s)
        js.last_update_s = now

    def _schedule_completion(self, js: JobState) -> None:
        js.version += 1
        begin = max(self.kernel.now, js.progress_from_s)
        t = begin + max(js.remaining, 0.0) * js.iter_s
        if js.demand is None:
            self.kernel.at(t, Kernel.COMPLETE, self._complete, js, js.version)
        else:
            self.net_done.set(js.job_id, t)

    def _arm_network_completions(self) -> None:
        t = self.net_done.first()
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
        due = self.net_done.due(now)
        for jid in due:
            js = self.states[jid]
            self._complete(js, js.version)
        for jid in due:  # not expected: a due job that did not finish keeps its time
            self.net_done.keep(jid)
        self._arm_network_completions()

    # -------------------------------------------------------------- network
    def _recompute_network(self, now: float) -> None:
        """Re-solve the fabric and move the completions of jobs whose speed changed."""
        moved = self.fabric.solve(now)
        blind = moved.phase_blind
        if blind is None:  # the model did not say: one that ignores phase is blind to it
            blind = not self.network.capabilities.uses_phase
        if isinstance(blind, bool):
            blind = itertools.repeat(blind)
        # The hot loop of a run (each re-solve of a large component moves tens of jobs): advance() and
        # _schedule_completion() written out for a running job with flows, the same operations in the same order.
        # The new completion times go to net_done in one call (in the jobs' order, as one call each would).
        states, done_ids, done_ts = self.states, [], []
        for jid, iter_s, comm_s, phase_blind in zip(moved.job_id, moved.iter_s, moved.comm_s, blind):
            js = states[jid]
            if js.status != "running" or js.demand is None:  # not expected: the general path
                self.net_done.set_many(done_ids, done_ts)  # the times before it first, in order
                done_ids, done_ts = [], []
                self.advance(js, now)
                js.iter_s, js.comm_s, js.phase_blind = iter_s, comm_s, phase_blind
                self._schedule_completion(js)
                continue
            last, start = js.last_update_s, js.progress_from_s  # advance(js, now): progress at the old speed
            held = now - last
            js.attained_gpu_s += js.gpus * held
            dt = now - (start if start > last else last)
            js.run_s += held
            if dt > 0 and js.iter_s > 0:
                old = js.iter_s
                js.remaining -= dt / old
                js.progress_s += dt
                js.comm_time_s += dt * (js.comm_s / old)
                if js.phase_blind:
                    js.phase_blind_s += dt
            js.last_update_s = now
            js.iter_s, js.comm_s, js.phase_blind = iter_s, comm_s, phase_blind
            js.version += 1  # _schedule_completion(js), into net_done
            remaining = js.remaining
            done_ids.append(jid)
            done_ts.append((start if start > now else now) + (0.0 if 0.0 > remaining else remaining) * iter_s)
        self.net_done.set_many(done_ids, done_ts)
        self._arm_network_completions()

    @property
    def link_load(self) -> np.ndarray:
        """Current time-averaged load per directed link (Gbit/s)."""
        return self.fabric.load_gbps


def _freeze_for_run() -> bool:
    """Move every object alive now (the job states, the trace, the topology) out of the collector's sight for the
    run, if nothing else froze objects: True if frozen (the caller unfreezes after the run).

    Why: the run keeps hundreds of thousands of tracked objects alive from its start to its end, none of them
    garbage, and each collection of the oldest generation walked them all (about 1 s of CPU a full Philly run).
    Frozen, a collection walks only what the run made since. Nothing is freed later and no result changes:
    the collector only finds cycles, and the run's objects stay alive anyway. A caller's own frozen objects
    (``gc.freeze`` before a fork) are left as they are: then nothing is frozen here.
    """
    if not gc.isenabled() or gc.get_freeze_count() > 0:
        return False
    gc.freeze()
    return True


def simulate(topology, jobs, ordering="fifo", placement=None, preemption=None, **config) -> SimResult:
    """One call: build a :class:`Simulator` and run it. ``config`` fills :class:`SimConfig`."""
    return Simulator(topology, jobs, ordering, placement, preemption, SimConfig(**config)).run()
