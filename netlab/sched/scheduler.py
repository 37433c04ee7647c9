"""The scheduling pass, written once: order the waiting jobs, place them, preempt for them, check every placement.

A :class:`Scheduler` holds the three policies (``netlab.policies.base``),
the waiting jobs and the running jobs' order, and drives a
:class:`~netlab.sched.mechanism.Mechanism`: the simulator, the live testbed
and the Slurm advisor each carry its decisions out. It never advances time
itself: the mechanism calls :meth:`Scheduler.add` when a job arrives,
:meth:`Scheduler.stopped` when one ends, and :meth:`Scheduler.schedule` once
per instant at which something changed.

One pass (:meth:`Scheduler.schedule`) walks the waiting jobs in the ordering
policy's key order. A job that fits the free GPUs is offered to the placement
policy; a placement is checked (:func:`~netlab.sched.mechanism.check_placement`)
and started. A job that cannot start may displace running jobs ranked below
it, if the ordering is preemptive and the mechanism can preempt: the
preemption policy names victims (worst first) and the job starts if the
placement accepts the GPUs they would free. Otherwise, with ``backfill`` the
walk goes on past it (no reservations); without it the pass stops there
(strict order, head-of-line blocking).

After a pass that started or stopped a job (and every ``period_s`` of the
network policy while jobs run), the network policy, if any, allocates the
network to the running jobs and the mechanism applies its decisions
(:meth:`Scheduler.allocate`). Every ``period_s`` of the migration policy, if
any, while jobs run, it names running jobs to move and their new
placements; each is checked against the GPUs free once the job releases its
own and the mechanism moves it (:meth:`Scheduler.migrate`).

The walk is hot in the simulator (full Philly: tens of thousands of passes
over queues of thousands), so waiting jobs are kept by size, each size a
sorted list of ``(key, job id)``, and the pass merges only the sizes that can
start (see :meth:`Scheduler.schedule`).
"""

from __future__ import annotations

import heapq
import math

import numpy as np
from sortedcontainers import SortedList

from .allocation import DEFAULT_ALLOCATION, NetAllocation
from .decision import PolicyError
from .mechanism import Mechanism, check_placement
from .state import JobState


class Scheduler:
    """The policies' decisions for one cluster, carried out by ``mechanism``.

    ``backfill`` (None: the ordering policy's own choice) says whether a job
    that cannot start blocks the jobs behind it. ``preemption`` may be None
    (never preempt); preemption also needs a preemptive ordering and a
    mechanism that can preempt.
    """

    def __init__(self, ordering, placement, preemption, mechanism: Mechanism, backfill: bool | None = None,
                 network=None, migration=None):
        self.ordering, self.placement, self.preemption = ordering, placement, preemption
        # The network policy; one that never allocates (``none``) is not asked at all.
        self.network = network if network is not None and network.allocates else None
        # The migration policy; one that never moves a job (``none``) is not asked at all.
        self.migration = migration if migration is not None and migration.migrates else None
        if self.migration is not None and not mechanism.can_migrate:
            raise PolicyError(f"{type(mechanism).__name__} cannot move a running job, so the migration policy "
                              f"{self.migration.name!r} cannot be carried out here; use migration 'none'")
        self._migration_armed = False
        self.net_dirty = False  # the running set changed since the network policy last allocated
        # running jobs the network policy has given an allocation (a superset of those whose allocation is not
        # the default): the jobs it may leave out that must go back to the default are among these
        self._allocated: set[int] = set()
        self._net_tick_armed = False
        self.mechanism = mechanism
        self.backfill = ordering.backfill if backfill is None else backfill
        self.jobs: dict[int, JobState] = {}  # every job added, by id
        # Waiting jobs by (key, id), one sorted list per GPU count: a pass merges
        # only the sizes that can fit (or may preempt), never scanning the rest.
        self.waiting_by_size: dict[int, SortedList] = {}
        self.n_waiting = 0
        self.run_order = SortedList()  # running jobs by (key, id): worst last
        self._retries: set[float] = set()
        self.passes = 0  # scheduling passes run (benchmarks count them)

    def reset(self, seed: int) -> None:
        """Give each policy its own random stream for a run (ordering, placement, preemption, in that order)."""
        # the migration policy's stream is spawned fifth, so adding it changed none of the other four
        seeds = np.random.SeedSequence(seed).spawn(5)
        for policy, s in zip((self.ordering, self.placement, self.preemption, self.network, self.migration), seeds):
            if policy is not None:
                policy.reset(np.random.default_rng(s))

    # ------------------------------------------------------------ queues
    def add(self, js: JobState, now: float) -> None:
        """``js`` waits (it arrived, or was preempted): key it and queue it by size."""
        self.jobs[js.job_id] = js
        js.key = self.ordering.key(js, now)
        bucket = self.waiting_by_size.get(js.gpus)
        if bucket is None:
            bucket = self.waiting_by_size[js.gpus] = SortedList()
        bucket.add((js.key, js.job_id))
        self.n_waiting += 1

    def _dequeue(self, item: tuple) -> None:
        self.waiting_by_size[self.jobs[item[1]].gpus].remove(item)
        self.n_waiting -= 1

    def stopped(self, js: JobState) -> None:
        """``js`` no longer runs (it ended, or is being preempted): out of the running order, its key timer void."""
        self.run_order.remove((js.key, js.job_id))
        js.key_version += 1
        js.allocation = DEFAULT_ALLOCATION
        self._allocated.discard(js.job_id)
        self._net_changed(js)

    def _net_changed(self, js: JobState) -> None:
        """``js`` started or stopped: the network policy is asked again after the pass, unless it reads only
        jobs with traffic and ``js`` runs on one host (it has none)."""
        if not (self.network is not None and self.network.traffic_only and len(js.placement.hosts) == 1):
            self.net_dirty = True

    def waiting_order(self):
        """Waiting jobs' (key, id) in priority order."""
        return heapq.merge(*self.waiting_by_size.values())

    def waiting(self):
        """Waiting jobs in priority order."""
        jobs = self.jobs
        return (jobs[j] for _, j in self.waiting_order())

    # -------------------------------------------------------------- keys
    def _refresh_keys(self, now: float) -> None:
        items = [self.jobs[j] for _, j in self.waiting_order()]
        self.waiting_by_size.clear()
        self.n_waiting = 0
        for js in items:
            self.add(js, now)
        runs = list(self.mechanism.running.values())  # in the order they started (policies may count calls)
        self.run_order.clear()
        advance = self.mechanism.advance
        for js in runs:
            advance(js, now)
            js.key = self.ordering.key(js, now)
            self.run_order.add((js.key, js.job_id))

    def _arm_key_change(self, js: JobState, now: float, must_advance: bool = False) -> None:
        t = self.ordering.next_key_change(js, now)
        js.key_version += 1
        if must_advance and t is not None and t <= now:
            # The key did not change, yet the policy asks to look again now: it would loop forever.
            raise PolicyError(f"{self.ordering.name}: next_key_change for job {js.job_id} is {t} <= now ({now}) "
                              f"although its key {js.key} did not change")
        if t is not None and math.isfinite(t):
            self.mechanism.wake_at(max(t, now), self._key_change, js, js.key_version)

    def _key_change(self, now: float, js: JobState, version: int) -> bool:
        """A running job's key moves (e.g. a Tiresias demotion): re-rank it; a pass if jobs wait."""
        if version != js.key_version or js.status != "running":
            return False
        self.run_order.remove((js.key, js.job_id))
        self.mechanism.advance(js, now)
        old, js.key = js.key, self.ordering.key(js, now)
        self.run_order.add((js.key, js.job_id))
        self._arm_key_change(js, now, must_advance=js.key == old)
        return self.n_waiting > 0

    # -------------------------------------------------------- decisions
    def _start(self, js: JobState, placement, now: float) -> None:
        mech = self.mechanism
        check_placement(self.placement.name, js, placement, mech.free_gpus)
        mech.start(js, placement, now)
        js.key = self.ordering.key(js, now)
        self.run_order.add((js.key, js.job_id))
        self._arm_key_change(js, now)
        self._net_changed(js)
        if self.migration is not None and not self._migration_armed:
            self._migration_armed = True
            mech.wake_at(now + self.migration.period_s, self._migration_tick)

    def _preempt(self, js: JobState, now: float) -> None:
        self.stopped(js)
        self.mechanism.preempt(js, now)

    def _retry(self, js: JobState, view, now: float) -> None:
        t = self.placement.retry_at(js, view)
        if t is not None and math.isfinite(t) and t > now and t not in self._retries:
            self._retries.add(t)
            self.mechanism.wake_at(t, self._wake)

    def _wake(self, t: float) -> bool:
        self._retries.discard(t)
        return True

    # ------------------------------------------------------------ network
    def allocate(self, now: float) -> None:
        """The network policy's allocations for the running jobs, applied by the mechanism.

        Called by the mechanism after a pass (the event loop does it when the
        running set changed, :attr:`net_dirty`). Every running job the policy
        leaves out gets the default allocation. Every decision is checked; the mechanism is handed only what
        changes a job's allocation, and the decisions for jobs started at this instant. With a ``period_s`` the policy
        is asked again that often while jobs run.
        """
        self.net_dirty = False
        policy, mech = self.network, self.mechanism
        if policy is None:
            return
        decisions = policy.allocate(mech.view(now))
        running = mech.running
        # the mechanism is handed the decisions that change something, in the policy's order: those a job does
        # not hold already (the very object: one it was handed before, and took) and those for the jobs started
        # at this instant (they join the network with theirs). A policy answers for every job it decides on and
        # moves a few: handing over the rest cost the mechanism a pass over them at every call
        handed = {}
        for jid, alloc in decisions.items():
            js = running.get(jid)
            if js is None:
                raise PolicyError(f"{policy.name}: allocation for job {jid}, which is not running")
            if alloc is js.allocation and js.last_start_s != now:
                continue
            if not isinstance(alloc, NetAllocation):
                raise PolicyError(f"{policy.name}: allocation for job {jid} is a {type(alloc).__name__}, "
                                  f"not a NetAllocation")
            handed[jid] = alloc
        # then the jobs left out that must go back to the default (the others left out have it already), in the
        # running order. A pass runs hundreds of one-host jobs the policy has nothing for: the jobs left out are
        # looked for among those it gave an allocation only
        back = None
        left = self._allocated.difference(decisions)
        if left:
            left = {jid for jid in left if running[jid].allocation is not DEFAULT_ALLOCATION}
            if left:
                back = {jid: DEFAULT_ALLOCATION for jid in running if jid in left}
        self._allocated = set(decisions)  # (the others left out are at the default now)
        mech.allocate({**handed, **back} if back else handed, now)
        period = policy.period_s
        if period is not None and running and not self._net_tick_armed:
            self._net_tick_armed = True
            mech.wake_at(now + period, self._net_tick)

    def _net_tick(self, now: float) -> bool:
        """The network policy's period ended: allocate again (through a pass at this instant)."""
        self._net_tick_armed = False
        self.net_dirty = True
        return True

    # ---------------------------------------------------------- migration
    def migrate(self, now: float) -> bool:
        """Ask the migration policy which running jobs to move and have the mechanism move them; True if any moved.

        Every running job's accounting is brought up to ``now`` first (the policy reads its remaining work).
        """
        policy, mech = self.migration, self.mechanism
        for js in mech.running.values():
            mech.advance(js, now)
        moves = policy.migrations(mech.view(now))
        free = mech.free_gpus.copy()  # every move checked, in order, before any is carried out
        for jid, placement in moves.items():
            js = mech.running.get(jid)
            if js is None:
                raise PolicyError(f"{policy.name}: migration of job {jid}, which is not running")
            np.add.at(free, list(js.placement.hosts), list(js.placement.gpus))
            check_placement(policy.name, js, placement, free)
            np.subtract.at(free, list(placement.hosts), list(placement.gpus))
        for jid, placement in moves.items():
            js = mech.running[jid]
            self.stopped(js)
            mech.migrate(js, placement, now)
            js.key = self.ordering.key(js, now)
            self.run_order.add((js.key, js.job_id))
            self._arm_key_change(js, now)
        return bool(moves)

    def _migration_tick(self, now: float) -> bool:
        """The migration policy's period ended: move what it says, and look again a period later while jobs
        run. A move changes the running set: a pass follows at this instant."""
        self._migration_armed = False
        if not self.mechanism.running:
            return False
        moved = self.migrate(now)
        self._migration_armed = True
        self.mechanism.wake_at(now + self.migration.period_s, self._migration_tick)
        return moved

    # -------------------------------------------------------------- pass
    def schedule(self, now: float, round_pass: bool = False) -> bool:
        """One scheduling pass at ``now`` (``round_pass``: a lease round ended, re-rank and preempt now).

        Returns True when it preempted and GPUs are still free: the mechanism runs another pass this instant
        (the victims wait again and may fit what is left).
        """
        order, mech, jobs = self.ordering, self.mechanism, self.jobs
        self.passes += 1
        if order.dynamic_keys or round_pass:
            self._refresh_keys(now)
        may_preempt = (self.preemption is not None and order.preemptive and mech.can_preempt
                       and (order.preempt_on_events or round_pass))
        backfill = self.backfill
        started, victims_all = [], []
        view = None  # built at the first decision that needs it, when nothing has changed yet this pass
        run_order = self.run_order
        worst = run_order[-1][0] if run_order else None
        # A k-way merge of the size buckets in priority order (heap of (next item, size)), by hand rather
        # than heapq.merge so that a bucket whose jobs can no longer start this pass is dropped ("parked")
        # instead of yielding each of its jobs only to skip it. Without backfill every bucket takes part:
        # the pass stops at the first job, in priority order over all sizes, that cannot start, and that
        # job may be one too big for the free GPUs.
        heads, sources = [], {}
        free_total = mech.free_total  # nothing starts before the merge begins
        for size, items in self.waiting_by_size.items():
            if not items:
                continue
            if size <= free_total or not backfill:
                bound = None
                # the whole bucket: the list's own iterator, not irange's bisection and slice (one a bucket a
                # pass, tens of thousands of passes a run; no bucket changes during the merge)
                it = iter(items)
            elif may_preempt and worst is not None and items[0] < (worst,):
                bound = (worst,)
                it = items.irange(maximum=bound, inclusive=(True, False))
            else:
                continue
            heads.append((next(it), size))
            sources[size] = (it, bound)
        if not heads:
            return False  # nothing fits and nothing may preempt: no policy is asked anything
        heapq.heapify(heads)
        parked: dict[int, tuple] = {}  # buckets no job of which starts unless free GPUs grow
        ranked: dict[int, tuple] = {}  # buckets too big for the free GPUs whose jobs rank too low to preempt
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
                worst, stale = (run_order[-1][0] if run_order else None), False
            can_preempt = may_preempt and worst is not None and key < worst
            if mech.free_total == 0 and not can_preempt:
                break
            js = jobs[jid]
            if js.gpus <= mech.free_total:
                if view is None:
                    view = mech.view(now)
                placement = self.placement.place(js, view)
                if placement is not None:
                    self._start(js, placement, now)
                    started.append(item)
                    stale = True
                    if ranked and (mech.free_total == 0 or worst is None or run_order[-1][0] > worst):
                        self._unpark(ranked, sources, heads, item, everything=True)
                    continue
                self._retry(js, view, now)
            # Preempt when GPUs are short, or when they suffice but the placement declined them
            # (a policy that wants a better-consolidated placement may displace worse-ranked jobs).
            if can_preempt and js.gpus < no_victims_from:
                if view is None:
                    view = mech.view(now)
                candidates = (jobs[j] for _, j in run_order.irange(minimum=(key, math.inf), reverse=True))
                victims = self.preemption.victims(js, candidates, view)
                if not victims:
                    if js.gpus > mech.free_total:
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
                        if parked:  # (most preemptions find none parked: no call)
                            self._unpark(parked, sources, heads, item)
                        if ranked:
                            self._unpark(ranked, sources, heads, item, everything=True)
                        continue
            if not backfill:
                break  # strict order: nothing behind a job that cannot start may start before it
            if size > mech.free_total and nxt is not None:
                if size >= no_victims_from:
                    # Every later job of this bucket is skipped unless free GPUs grow (no_victims_from only falls).
                    self._park(parked, sources, heads, size, nxt)
                elif not can_preempt:
                    # Later jobs of this bucket rank lower still: each would be skipped in turn, as long as
                    # free GPUs neither grow nor run out and the worst-ranked running job stays where it is.
                    # Any of those three changes resumes the bucket after the job that made it.
                    self._park(ranked, sources, heads, size, nxt)
        for item in started:
            self._dequeue(item)
        for v in victims_all:
            self.add(v, now)
        return bool(victims_all) and mech.free_total > 0

    @staticmethod
    def _park(parked: dict, sources: dict, heads: list, size: int, nxt: tuple) -> None:
        """Drop bucket ``size`` (its next item ``nxt``) from the merge until :meth:`_unpark` resumes it."""
        heads.remove((nxt, size))
        heapq.heapify(heads)
        parked[size] = sources.pop(size)[1]

    def _unpark(self, parked: dict, sources: dict, heads: list, after: tuple, everything: bool = False) -> None:
        """Resume parked buckets after ``after``: those that now fit the free GPUs (``everything``: all).

        Their jobs before ``after`` were skipped while the bucket was parked,
        exactly as they would have been in turn: what would have let them
        start had not changed yet.
        """
        free_total = self.mechanism.free_total
        for size in [g for g in parked if everything or g <= free_total]:
            bound = parked.pop(size)
            it = self.waiting_by_size[size].irange(after, bound, inclusive=(False, False))
            nxt = next(it, None)
            if nxt is not None:
                heapq.heappush(heads, (nxt, size))
                sources[size] = (it, bound)
