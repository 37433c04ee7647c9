"""A small event kernel: a heap of (time, priority, sequence, callback).

Ties at one instant run by priority, then by insertion order, so a run is
deterministic. The clock is swappable: :class:`SimClock` jumps to the next
event; :class:`RealtimeClock` waits for wall time to catch up (scaled), which
lets the live testbed replay the same schedule.
"""

from __future__ import annotations

import heapq
import itertools
import math
import time
from typing import Callable


class SimClock:
    def __init__(self, start: float = 0.0):
        self.now = start

    def advance_to(self, t: float) -> None:
        self.now = t


class RealtimeClock(SimClock):
    """Simulated seconds pass as ``speedup`` times wall seconds."""

    def __init__(self, start: float = 0.0, speedup: float = 1.0, sleep=time.sleep, monotonic=time.monotonic):
        super().__init__(start)
        self.speedup, self._sleep, self._mono = speedup, sleep, monotonic
        self._wall0 = monotonic()

    def advance_to(self, t: float) -> None:
        wait = (t - self.now) / self.speedup - (self._mono() - self._wall0)
        if wait > 0:
            self._sleep(wait)
        self._wall0 = self._mono()
        self.now = t


class Kernel:
    # Priorities at equal times: resources are freed before they are claimed,
    # and the scheduling pass sees every state change of that instant.
    COMPLETE, ARRIVE, UPDATE, SCHEDULE = 0, 1, 2, 9

    def __init__(self, clock: SimClock | None = None):
        self.clock = clock or SimClock()
        self._heap: list = []
        self._seq = itertools.count()
        self.events = 0

    @property
    def now(self) -> float:
        return self.clock.now

    def at(self, t: float, priority: int, fn: Callable, *args) -> None:
        if t < self.clock.now or math.isnan(t):
            raise ValueError(f"event at {t} is before now ({self.clock.now})")
        heapq.heappush(self._heap, (t, priority, next(self._seq), fn, args))

    def step(self) -> bool:
        if not self._heap:
            return False
        t, _, _, fn, args = heapq.heappop(self._heap)
        self.clock.advance_to(t)
        self.events += 1
        fn(*args)
        return True

    def run(self, until: float = math.inf) -> None:
        heap = self._heap
        while heap and heap[0][0] <= until:
            self.step()

    def __len__(self) -> int:
        return len(self._heap)
