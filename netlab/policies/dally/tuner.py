"""Dally's auto-tuner: scale the delay timers by what waiting costs against what a worse placement costs.

Why: a fixed timer is right for one load only. When the cluster is busy,
jobs wait long for a locality that rarely comes and the waiting costs more
than the slowdown it avoids; when the network is congested, jobs that gave up
on locality pay a large slowdown and waiting longer would have been cheaper.

Rule: over each tuning period the placement feeds two costs, both in
job-seconds,

* queueing cost ``Q``: time jobs spent waiting for their locality level
  (from their first declined placement until they start);
* slowdown cost ``S``: extra time jobs placed below their best level lose to
  the network, ``elapsed x (1 - iso_iter_s / iter_s)`` (the share of wall time
  they would have saved running at isolated speed);

then ``update`` multiplies the timer scale by ``1 / step`` if ``Q > S``
(waiting costs more: shorten), by ``step`` if ``S > Q`` (slowdown costs more:
lengthen), leaves it if equal (including no observations), and clips it to
``[min_scale, max_scale]``. Accumulators reset after every update.
"""

from __future__ import annotations


class AutoTuner:
    """Multiplicative, bounded controller for the delay-timer scale."""

    def __init__(self, step: float = 1.25, min_scale: float = 0.125, max_scale: float = 8.0, scale: float = 1.0):
        if step <= 1:
            raise ValueError(f"step must be > 1, got {step}")
        if not 0 < min_scale <= scale <= max_scale:
            raise ValueError(f"need 0 < min_scale <= scale <= max_scale, got {min_scale}, {scale}, {max_scale}")
        self.step, self.min_scale, self.max_scale = float(step), float(min_scale), float(max_scale)
        self.scale = float(scale)
        self.queue_s = 0.0
        self.slowdown_s = 0.0
        self.history: list[tuple[float, float, float]] = []  # (queue_s, slowdown_s, scale after)

    def add_queue(self, seconds: float) -> None:
        self.queue_s += max(0.0, float(seconds))

    def add_slowdown(self, seconds: float) -> None:
        self.slowdown_s += max(0.0, float(seconds))

    def update(self) -> float:
        """One tuning step; returns the new scale."""
        q, s = self.queue_s, self.slowdown_s
        if q > s:
            self.scale = max(self.min_scale, self.scale / self.step)
        elif s > q:
            self.scale = min(self.max_scale, self.scale * self.step)
        self.history.append((q, s, self.scale))
        self.queue_s = self.slowdown_s = 0.0
        return self.scale
