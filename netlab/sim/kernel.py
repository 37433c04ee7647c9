"""A small event kernel: a heap of (time, priority, sequence, callback).

Ties at one instant run by priority, then by insertion order, so a run is
deterministic. The clock is swappable (SimPy's idea): :class:`SimClock`
jumps to the next event; :class:`RealtimeClock` waits for wall time to catch
up (scaled), so the live testbed replays the same schedule the simulator
runs. Under a real-time clock, other threads (the testbed agents' readers)
hand events in with :meth:`Kernel.post`, which wakes the waiting clock; the
event runs on the kernel's thread at the time it was handed in.
"""

from __future__ import annotations

import collections
import heapq
import itertools
import math
import threading
import time
from typing import Callable


class SimClock:
    """Simulated time: jumps to each event."""

    waits = False  # never waits, so nothing can happen between two events

    def __init__(self, start: float = 0.0):
        self.now = start

    def advance_to(self, t: float) -> bool:
        self.now = t
        return True

    def wall_now(self) -> float:
        return self.now

    def wake(self) -> None:
        """Nothing to wake: simulated time never waits."""


class RealtimeClock(SimClock):
    """Simulated seconds pass as ``speedup`` times wall seconds, from the moment the clock is made.

    Time ``t`` falls at wall time ``wall0 + (t - start) / speedup`` (SimPy's
    RealtimeEnvironment): a late event runs at once and the ones after it keep
    their wall times, so a slow callback does not shift the rest of the
    schedule. ``sleep(seconds)`` waits up to that long and may return early
    after :meth:`wake` (the default waits on a threading.Event);
    ``monotonic`` reads the wall clock. Tests pass both to run on a fake clock.
    """

    waits = True

    def __init__(self, start: float = 0.0, speedup: float = 1.0, sleep: Callable[[float], object] | None = None,
                 monotonic: Callable[[], float] = time.monotonic):
        if not speedup > 0:
            raise ValueError(f"speedup must be > 0, got {speedup}")
        super().__init__(start)
        self.start, self.speedup, self._mono = start, speedup, monotonic
        self._woken = threading.Event()
        self._sleep = sleep if sleep is not None else self._woken.wait
        self._wall0 = monotonic()

    def wall_now(self) -> float:
        """The simulated time the wall clock shows now (never before the last event's time)."""
        return max(self.now, self.start + (self._mono() - self._wall0) * self.speedup)

    def advance_to(self, t: float) -> bool:
        """Wait until wall time reaches ``t``; True if it did, False if :meth:`wake` cut the wait short
        (then ``now`` is the wall time reached, at most ``t``)."""
        wait = self._wall0 + (t - self.start) / self.speedup - self._mono()
        if wait > 0:
            self._sleep(wait)
        if self._woken.is_set():
            self._woken.clear()
            self.now = min(t, self.wall_now())
            return False
        self.now = t
        return True

    def wake(self) -> None:
        self._woken.set()


class Kernel:
    # Priorities at equal times: resources are freed before they are claimed,
    # and the scheduling pass sees every state change of that instant.
    COMPLETE, ARRIVE, UPDATE, SCHEDULE = 0, 1, 2, 9

    def __init__(self, clock: SimClock | None = None):
        self.clock = clock or SimClock()
        self._heap: list = []
        self._seq = itertools.count()
        self._inbox: collections.deque = collections.deque()  # (priority, fn, args) from other threads
        self._stopped = False
        self.events = 0

    @property
    def now(self) -> float:
        return self.clock.now

    def at(self, t: float, priority: int, fn: Callable, *args) -> None:
        if t < self.clock.now or math.isnan(t):
            raise ValueError(f"event at {t} is before now ({self.clock.now})")
        heapq.heappush(self._heap, (t, priority, next(self._seq), fn, args))

    def reserve(self, n: int) -> int:
        """Reserve ``n`` sequence numbers (the tie-break of events at equal time and priority) for events armed
        later with :meth:`at_reserved`; returns the first. They order among the others as if they had been
        armed now, one after another: arming them later changes no event's order."""
        first = next(self._seq)
        self._seq = itertools.count(first + n)
        return first

    def at_reserved(self, t: float, priority: int, seq: int, fn: Callable, *args) -> None:
        """:meth:`at` with a sequence number from :meth:`reserve`."""
        if t < self.clock.now or math.isnan(t):
            raise ValueError(f"event at {t} is before now ({self.clock.now})")
        heapq.heappush(self._heap, (t, priority, seq, fn, args))

    def post(self, priority: int, fn: Callable, *args) -> None:
        """From any thread: run ``fn(*args)`` on the kernel's thread as soon as it looks, at the clock's time then.

        Wakes a real-time clock that is waiting for the next event.
        """
        self._inbox.append((priority, fn, args))  # deque.append is atomic
        self.clock.wake()

    def stop(self) -> None:
        """Make :meth:`run` return after the event running now."""
        self._stopped = True

    def step(self) -> bool:
        if not self._heap:
            return False
        t, _, _, fn, args = heapq.heappop(self._heap)
        self.clock.advance_to(t)
        self.events += 1
        fn(*args)
        return True

    def run(self, until: float = math.inf) -> None:
        """Run events up to time ``until``, until none is left or :meth:`stop` is called."""
        self._stopped = False
        heap = self._heap
        clock = self.clock
        if not clock.waits:  # simulated time: nothing can be posted between two events
            pop = heapq.heappop  # step() written out: the loop runs once per event of a run
            while heap and heap[0][0] <= until and not self._stopped:
                t, _, _, fn, args = pop(heap)
                clock.now = t  # SimClock.advance_to
                self.events += 1
                fn(*args)
            return
        while not self._stopped:
            self._take_posts()
            if not heap or heap[0][0] > until:
                if not self._inbox:
                    return
                continue
            t = heap[0][0]
            if self.clock.advance_to(t):  # reached t with no post in between
                t, _, _, fn, args = heapq.heappop(heap)
                self.events += 1
                fn(*args)

    def _take_posts(self) -> None:
        inbox = self._inbox
        if not inbox:
            return
        now = self.clock.wall_now()
        while inbox:
            priority, fn, args = inbox.popleft()
            heapq.heappush(self._heap, (now, priority, next(self._seq), fn, args))

    def __len__(self) -> int:
        return len(self._heap)
