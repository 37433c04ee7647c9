"""Dally's delay scheduling over locality levels (same host, same rack, any), with sensitivity-scaled timers.

Why: a network-sensitive job placed across racks on an oversubscribed fabric
can run much slower for its whole life; waiting a little for a consolidated
placement is often cheaper (delay scheduling, as in Hadoop/Spark, applied to
network locality by Dally, Sharma et al. 2024).

Rule:

* a job's *best level* is the best it could ever get on this topology
  (host if its GPUs fit the largest host, rack if they fit the largest rack,
  else any: no waiting);
* the candidate placement is topology-aware best fit
  (:func:`~netlab.policies.placement.topo_bestfit.place_best`), which always
  returns the best level available now;
* if that level is no worse than the job's *allowed* level, it starts.
  Otherwise the placement declines (None) and ``retry_at`` returns when the
  allowed level next widens, so the simulator looks again exactly then;
* the allowed level starts at the best level when the job is first declined
  (``job.extra['dally_wait_from_s']``) and widens by one level each time a
  timer expires: after ``T(best)``, then ``T(best + 1)`` more, ...;
* ``T(level) = min(max_timer_s, timer_s[level] x scale x sensitivity)``,
  with ``sensitivity`` from :func:`netlab.sensitivity.sensitivity` (0 for a
  1-GPU job or a model with no gradients: such jobs never wait) and
  ``scale`` the auto-tuner's multiplier (1 without it).

With ``delay=False`` it is plain topology-aware best fit. With
``autotune=True`` every ``tune_period_s`` of simulated time the observed
queueing and slowdown costs update ``scale`` (:mod:`.tuner`).
"""

from __future__ import annotations

import numpy as np

from ...sensitivity import job_sensitivity
from ..base import PLACEMENT, PlacementPolicy
from ...topology.info import ANY, HOST, topo_info
from ..placement.topo_bestfit import level_of, place_best
from .tuner import AutoTuner

WAIT = "dally_wait_from_s"
RETRY = "dally_retry_s"


def _feasible(view, n: int, level: int) -> bool:
    """Can ``n`` GPUs be had at ``level`` or better right now? (a cheap pre-check)."""
    free = view.free_gpus
    if level == HOST:
        return int(free.max()) >= n
    if level == ANY:
        return int(free.sum()) >= n
    return int(view.rack_free().max()) >= n


class DallyPlacement(PlacementPolicy):
    """Delay scheduling: wait up to a sensitivity-scaled timer per locality level, then accept a worse one."""

    name = "dally"

    def __init__(self, delay: bool = True, autotune: bool = True, timer_s: tuple[float, float] = (600.0, 600.0),
                 max_timer_s: float = 3600.0, tune_period_s: float = 3600.0, tune_step: float = 1.25,
                 min_scale: float = 0.125, max_scale: float = 8.0):
        if autotune and not delay:
            raise ValueError("autotune tunes the delay timers: it needs delay=True")
        if len(timer_s) != 2 or min(timer_s) < 0 or max_timer_s < 0:
            raise ValueError(f"timer_s must be (host_s, rack_s) >= 0 and max_timer_s >= 0, "
                             f"got {timer_s}, {max_timer_s}")
        if tune_period_s <= 0:
            raise ValueError(f"tune_period_s must be > 0, got {tune_period_s}")
        self.delay, self.autotune = bool(delay), bool(autotune)
        self.timer_s = tuple(float(t) for t in timer_s)
        self.max_timer_s = float(max_timer_s)
        self.tune_period_s = float(tune_period_s)
        self.tune_step, self.min_scale, self.max_scale = float(tune_step), float(min_scale), float(max_scale)
        self._fresh()

    def _fresh(self) -> None:
        self.tuner = AutoTuner(self.tune_step, self.min_scale, self.max_scale)
        self._next_tune_s = None
        self._waiting: dict[int, list] = {}  # job_id -> [JobState, accounted up to (s)]
        self._degraded: dict[int, list] = {}

    def reset(self, rng: np.random.Generator) -> None:
        super().reset(rng)
        self._fresh()

    @property
    def scale(self) -> float:
        return self.tuner.scale if self.autotune else 1.0

    # ----------------------------------------------------------- timers
    def timer(self, job, level: int, view) -> float:
        """Seconds ``job`` waits at ``level`` before accepting the next one."""
        s = job_sensitivity(job, view.topology, view.zoo)
        return min(self.max_timer_s, self.timer_s[level] * self.scale * s)

    def allowed(self, job, view) -> tuple[int, float | None]:
        """(the worst level ``job`` accepts now, when that widens; None once it accepts any)."""
        best = topo_info(view.topology).best_level(job.gpus)
        wait_from = job.extra.get(WAIT)
        if wait_from is None or not self.delay:
            return (best, None) if self.delay and best < ANY else (ANY, None)
        level, expiry = best, wait_from
        while level < ANY:
            expiry = expiry + self.timer(job, level, view)
            if view.now < expiry:
                return level, expiry
            level += 1
        return ANY, None

    # -------------------------------------------------------- placement
    def place(self, job, view):
        if self.autotune:
            self._maybe_tune(view.now)
        topo = view.topology
        best = topo_info(topo).best_level(job.gpus)
        ex = job.extra
        if self.delay and best < ANY and WAIT in ex:
            level, expiry = self.allowed(job, view)
            if level < ANY and not _feasible(view, job.gpus, level):
                ex[RETRY] = expiry
                return None
        p = place_best(job, view)
        if p is None:
            return None
        level = level_of(p, topo)
        if not self.delay or level <= best:
            return self._accept(job, level, best, view.now, p)
        if WAIT not in ex:
            ex[WAIT] = view.now
            self._waiting[job.job_id] = [job, view.now]
        allowed, expiry = self.allowed(job, view)
        if level <= allowed:
            return self._accept(job, level, best, view.now, p)
        ex[RETRY] = expiry
        return None

    def retry_at(self, job, view):
        return job.extra.get(RETRY)

    def _accept(self, job, level: int, best: int, now: float, p):
        ex = job.extra
        ex.pop(RETRY, None)
        if ex.pop(WAIT, None) is not None:
            rec = self._waiting.pop(job.job_id, None)
            if rec is not None:
                self.tuner.add_queue(now - rec[1])
        old = self._degraded.pop(job.job_id, None)
        if old is not None:  # restarting after a preemption: settle the previous run's slowdown
            self._settle(old, job.last_update_s)
        ex["dally_level"] = level
        if level > best:
            self._degraded[job.job_id] = [job, now]
        return p

    # ------------------------------------------------------------ tuner
    def _maybe_tune(self, now: float) -> None:
        if self._next_tune_s is None:
            self._next_tune_s = now + self.tune_period_s
        elif now >= self._next_tune_s:
            self.observe(now)
            self.tuner.update()
            self._next_tune_s = now + self.tune_period_s

    @staticmethod
    def _slowdown_share(js) -> float:
        return max(0.0, 1.0 - js.iso_iter_s / js.iter_s) if js.iter_s > 0 else 0.0

    def _settle(self, rec: list, until: float) -> None:
        js, since = rec
        self.tuner.add_slowdown((until - since) * self._slowdown_share(js))
        rec[1] = max(since, until)

    def observe(self, now: float) -> None:
        """Feed the tuner the queueing and slowdown costs accrued since the last call."""
        for jid, rec in list(self._waiting.items()):
            js = rec[0]
            if js.status == "waiting" and WAIT in js.extra:
                self.tuner.add_queue(now - rec[1])
                rec[1] = now
            else:
                del self._waiting[jid]
        for jid, rec in list(self._degraded.items()):
            js = rec[0]
            if js.status == "running":
                self._settle(rec, now)
            else:  # finished, or preempted: up to when it stopped
                self._settle(rec, js.end_s if js.end_s is not None else js.last_update_s)
                del self._degraded[jid]


PLACEMENT.register("dally", doc="Dally delay scheduling with auto-tuned, sensitivity-scaled timers")(DallyPlacement)


@PLACEMENT.register("dally-delay")
def _fixed_timers(**kw) -> DallyPlacement:
    """Dally delay scheduling with fixed sensitivity-scaled timers (no auto-tuner)"""
    p = DallyPlacement(**{"autotune": False, **kw})
    p.name = "dally-delay"
    return p
