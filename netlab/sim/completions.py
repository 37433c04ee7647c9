"""When each running multi-host job will finish, kept so that the next one is found without a scan.

Why: a network re-solve moves the completion times of tens of jobs, and the simulator arms one kernel event
for the earliest of them. Scanning every running job's time for the minimum after each re-solve cost in
proportion to the running set (3-4% of a 131,072-GPU run with thousands of running jobs). Here each new time
is pushed on a heap (an old entry of the same job is left there and skipped when met), so the next
completion costs the entries that went stale since.

Jobs due at one instant come out in the order they were first given a time since they last had none (the
order a dict of job id -> time iterates in), so a run completes them in the same order as it did when the
times lived in a dict and were scanned.
"""

from __future__ import annotations

import heapq
import itertools
import math


class Completions:
    """Job id -> completion time, with the earliest time and the jobs due by a time found through a heap."""

    __slots__ = ("_t", "_stamp", "_heap", "_count")

    def __init__(self):
        self._t: dict[int, float] = {}  # job id -> its completion time now
        self._stamp: dict[int, int] = {}  # job id -> when it got a time (its place in the dict's order)
        self._heap: list = []  # (time, stamp, job id); an entry is stale unless both still match the job's
        self._count = itertools.count()

    def __len__(self) -> int:
        return len(self._t)

    def __contains__(self, job_id: int) -> bool:
        return job_id in self._t

    def get(self, job_id: int, default=None):
        return self._t.get(job_id, default)

    def set(self, job_id: int, t: float) -> None:
        """``job_id`` finishes at ``t`` (replacing the time it had)."""
        self.set_many((job_id,), (t,))

    def set_many(self, job_ids: list, times: list) -> None:
        """:meth:`set` for each job of ``job_ids`` in order, at the time of ``times`` beside it: a re-solve moves
        tens of jobs at once, and one call with the loop here costs about half of a call per job."""
        stamps, ts, heap, count, push = self._stamp, self._t, self._heap, self._count, heapq.heappush
        for job_id, t in zip(job_ids, times):
            stamp = stamps.get(job_id)
            if stamp is None:
                stamp = stamps[job_id] = next(count)
            ts[job_id] = t
            push(heap, (t, stamp, job_id))
        if len(heap) > 4 * len(ts) + 1024:  # mostly stale entries: keep only the live ones
            self._heap = [(t, stamps[j], j) for j, t in ts.items()]
            heapq.heapify(self._heap)

    def pop(self, job_id: int) -> None:
        """``job_id`` has no completion time any more (stopped, or its time is unknown until a re-solve)."""
        if self._t.pop(job_id, None) is not None:
            del self._stamp[job_id]

    def _live(self, entry) -> bool:
        t, stamp, job_id = entry
        return self._t.get(job_id) == t and self._stamp[job_id] == stamp

    def first(self) -> float:
        """The earliest completion time (infinity if none)."""
        heap = self._heap
        while heap:
            if self._live(heap[0]):
                return heap[0][0]
            heapq.heappop(heap)
        return math.inf

    def due(self, now: float) -> list[int]:
        """The jobs whose time is at most ``now``, in the order they got a time; their entries leave the heap
        (they keep their times until :meth:`pop`; :meth:`keep` puts back one that does not finish)."""
        heap, found = self._heap, []
        while heap and heap[0][0] <= now:
            entry = heapq.heappop(heap)
            if self._live(entry):
                found.append((entry[1], entry[2]))
        found.sort()
        out, last = [], None
        for stamp, job_id in found:  # the same live entry may have been pushed twice (set to the same time)
            if stamp != last:
                out.append(job_id)
                last = stamp
        return out

    def keep(self, job_id: int) -> None:
        """Put a job taken by :meth:`due` back on the heap if it still has a time."""
        t = self._t.get(job_id)
        if t is not None:
            heapq.heappush(self._heap, (t, self._stamp[job_id], job_id))
