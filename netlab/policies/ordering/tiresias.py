"""Tiresias' discretised 2D-LAS: least attained GPU-time first, in a few queues."""

from __future__ import annotations

import bisect
import math

from ..base import ORDERING, OrderingPolicy

# Attained service within a rounding error of a threshold counts as past it, so a
# key-change event that lands a hair short still demotes (instead of re-arming itself
# at the same instant forever): max(1e-6 GPU-s, 1e-9 x attained).
_EPS_GPU_S = 1e-6
_EPS_REL = 1e-9

#: where a job stands in its queue: JobState.extra[_PLACE] = (running?, queue, key, time it got that key)
_PLACE = "tiresias_place"
# Tiers inside a queue (second key element): running jobs, then pending ones (and jobs just appended).
_RUNNING, _PENDING = 0, 1
_APPENDED = 1.0  # third key element of an appended job: behind every preempted one (-t <= 0)

WITHIN_QUEUE = ("running-first", "submit")
DEMOTION = ("exact", "reference")


def _slack(a: float) -> float:
    return a + max(_EPS_GPU_S, _EPS_REL * abs(a))


@ORDERING.register("tiresias")
class Tiresias(OrderingPolicy):
    """Discretised two-dimensional least-attained-service (Tiresias 2D-LAS, ``dlas-gpu``); preemptive.

    Why: without knowing durations, favouring jobs that have used the least
    GPU-time (GPUs x running time) lets short jobs finish quickly while long
    or large jobs sink; discretising into a few queues, each served in a
    fixed order, avoids the constant preemption churn of continuous LAS
    (Tiresias, NSDI 2019).

    Rule (defaults: the semantics of Tiresias' own simulator, ``dlas-gpu``):

    * attained service a = job.attained_at(now), in GPU-seconds (time holding
      GPUs x GPUs, restore overheads included);
    * queue q = number of thresholds <= a. ``thresholds_gpu_s=(3250, 7200)``:
      three queues, a job moves from queue 0 to 1 at 3,250 GPU-s and from 1
      to 2 at 7,200 GPU-s (Tiresias' values). ``next_key_change`` tells the
      simulator when a running job crosses its next threshold
      (now + (threshold - a) / gpus), so the demotion, and the preemption it
      allows, happen exactly then;
    * ``within_queue="running-first"`` (default): every job has a place in
      its queue's line. A job joins the end of its queue when it arrives
      (queue 0), when it moves down, and when the starvation guard moves it
      up. After every scheduling pass the running jobs of a queue stand
      ahead of its pending ones, each group in its former order; a job
      preempted from the running group goes to the front of the pending
      ones (Tiresias re-partitions each queue list after every pass). Keys:

      - running: ``(q, 0, 0, s)``, s a counter drawn when the job joins the
        running group: in the order they joined;
      - preempted: ``(q, 1, -t, s)``, t the preemption time, s its running
        counter: ahead of older pending jobs, then in running order;
      - appended (arrived, moved down or up, not yet through a pass):
        ``(q, 1, 1.0, s)``, s drawn when it joined: behind every pending job
        of its queue. A job that moves down while running stays there for
        the scheduling pass of that instant, so pending jobs of its new
        queue ahead of it may displace it (as in Tiresias, which appends it
        to the queue's end); an instant later (``next_key_change`` returns
        the next representable time) it joins the running group.

      Preemptive: a pending job displaces running jobs with worse keys, i.e.
      jobs of lower queues, or a job just moved down into its own queue;
      never a running job of its own queue otherwise;
    * ``within_queue="submit"``: key = (q, submit_s, job_id): FIFO by submit
      time inside a queue, so an older waiting job preempts a newer running
      one of the same queue. With ``thresholds_gpu_s=(3600, 36000)`` this is
      netlab's former default (1 and 10 GPU-hours).

    ``demotion="exact"`` (default): a job moves down exactly when it crosses
    a threshold. ``demotion="reference"``: when Tiresias' simulator does. It
    checks every job's queue at each of its events, and schedules its next
    check ``floor((threshold - t) / gpus)`` seconds ahead, t the wall seconds
    the job has run: against a limit in GPU-seconds, so a multi-GPU job can
    move down hundreds of seconds late when nothing else happens. Here every
    pass re-keys every job (``dynamic_keys``) and ``next_key_change`` returns
    that time. Only for reproducing its figures (``netlab.crossval``).

    Kept deviations from Tiresias' simulator: the preemption policy
    (``priority``) takes victims worst-first until enough GPUs are free,
    where Tiresias keeps every lower-ranked running job that still fits
    after the higher-ranked ones (the same victims except when a small
    worst-ranked job did not need to go: netlab then restarts it in the
    follow-up pass of the same instant, counting one preemption more).

    Starvation guard (off by default, ``starve_factor=None``): as in Tiresias'
    "PromoteKnob", a waiting job that has run before and has now waited longer
    than ``starve_factor`` x its run time so far is promoted back to queue 0
    (at its end); its attained service is counted afresh from the promotion.
    Enabling it makes keys time-dependent for waiting jobs, so
    ``dynamic_keys`` is turned on and a re-evaluation runs every
    ``starve_check_s`` seconds (``round_s``); with preemption on events this
    only adds checks. The promotion base is kept in
    ``JobState.extra['tiresias_base_gpu_s']``, a job's place in
    ``JobState.extra['tiresias_place']``.
    """

    name = "tiresias"
    preemptive = True

    def __init__(self, thresholds_gpu_s=(3250.0, 7200.0), within_queue: str = "running-first",
                 starve_factor: float | None = None, starve_check_s: float = 60.0, demotion: str = "exact"):
        th = tuple(float(t) for t in thresholds_gpu_s)
        if any(t <= 0 for t in th) or list(th) != sorted(th) or len(set(th)) != len(th):
            raise ValueError(f"thresholds_gpu_s must be positive and strictly increasing, got {thresholds_gpu_s}")
        if within_queue not in WITHIN_QUEUE:
            raise ValueError(f"within_queue must be one of {WITHIN_QUEUE}, got {within_queue!r}")
        if starve_factor is not None and starve_factor <= 0:
            raise ValueError(f"starve_factor must be > 0 or None, got {starve_factor}")
        if starve_check_s <= 0:
            raise ValueError(f"starve_check_s must be > 0, got {starve_check_s}")
        if demotion not in DEMOTION:
            raise ValueError(f"demotion must be one of {DEMOTION}, got {demotion!r}")
        self.thresholds_gpu_s = th
        self.within_queue = within_queue
        self.starve_factor = starve_factor
        self.starve_check_s = float(starve_check_s)
        self.demotion = demotion
        self._seq = 0
        if demotion == "reference":
            self.dynamic_keys = True  # the reference looks at every job's queue at each of its events
        if starve_factor is not None:
            self.dynamic_keys = True
            self.round_s = self.starve_check_s

    def reset(self, rng) -> None:
        super().reset(rng)
        self._seq = 0

    def _next(self) -> int:
        self._seq += 1
        return self._seq

    def _attained(self, job, now) -> float:
        return job.attained_at(now) - job.extra.get("tiresias_base_gpu_s", 0.0)

    def queue(self, job, now) -> int:
        """The job's queue index (0 = highest priority)."""
        return bisect.bisect_right(self.thresholds_gpu_s, _slack(self._attained(job, now)))

    def key(self, job, now):
        if (self.starve_factor is not None and job.status == "waiting" and job.run_s > 0
                and now - job.last_update_s > self.starve_factor * job.run_s
                and self.queue(job, now) > 0):
            # Waiting since its last stop (last_update_s) for too long: promote to queue 0.
            job.extra["tiresias_base_gpu_s"] = job.attained_at(now)
        q = self.queue(job, now)
        if self.within_queue == "submit":
            return (q, job.submit_s, job.job_id)
        return self._place(job, q, now)

    def _place(self, job, q: int, now: float) -> tuple:
        """The running-first key: a job's place changes only when its status or queue does (idempotent)."""
        running = job.status == "running"
        old = job.extra.get(_PLACE)
        if old is not None and old[1] == q:
            was_running, _, key, since = old
            if was_running == running:
                if not (running and key[1] == _PENDING and now > since):
                    return key  # nothing happened to it
                key = (q, _RUNNING, 0, self._next())  # appended while running, through a pass: joins the runners
            elif running:
                key = (q, _RUNNING, 0, self._next())  # started: behind the jobs already running
            elif key[1] == _RUNNING:
                key = (q, _PENDING, -now, key[3])  # preempted: ahead of older pending jobs, in running order
            # else: preempted while still appended (just moved down): it keeps its place at the end
        else:
            key = (q, _PENDING, _APPENDED, self._next())  # arrived, moved down or promoted: end of queue q
        job.extra[_PLACE] = (running, q, key, now)
        return key

    def next_key_change(self, job, now):
        if self.within_queue != "submit" and job.status == "running":
            old = job.extra.get(_PLACE)
            if old is not None and old[0] and old[2][1] == _PENDING:
                # Moved down while running: it joins the running group just after this instant's pass.
                return math.nextafter(max(now, old[3]), math.inf)
        a = self._attained(job, now)
        i = bisect.bisect_right(self.thresholds_gpu_s, _slack(a))
        if i >= len(self.thresholds_gpu_s) or job.gpus <= 0:
            return None
        exact = (self.thresholds_gpu_s[i] - a) / job.gpus
        if self.demotion == "reference":  # wall seconds run against the GPU-second limit, in whole seconds
            # (with the reference's whole-second times this is never 0 before the crossing; with fractional
            # ones it can be: then the exact crossing)
            t = now + (math.floor((self.thresholds_gpu_s[i] - a / job.gpus) / job.gpus) or exact)
        else:
            t = now + exact
        # Always strictly later than now, so the change event cannot repeat at one instant.
        return max(t, math.nextafter(now, math.inf)) if math.isfinite(t) else None
