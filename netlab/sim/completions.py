"""When each running multi-host job will finish, kept so that the next one is found without a scan.

Why: a network re-solve moves the completion times of tens of jobs, and the simulator arms one kernel event
for the earliest of them. Scanning every running job's time for the minimum after each re-solve cost in
proportion to the running set (3-4% of a 131,072-GPU run with thousands of running jobs). A heap of
(time, job) entries, an old entry left behind and skipped when met, then cost a Python push per moved job and a
Python pop per entry gone stale (full Philly under ``fair``: 1.75 million moved times, about 7% of the run).
Here the jobs are keys 0..n-1 (the simulator's job rows) of an indexed binary heap in arrays: a job has at most
one entry, moved in place when its time changes, and a re-solve's times go in with one compiled call.

Jobs due at one instant come out in the order they were first given a time since they last had none (the
order a dict of job id -> time iterates in), so a run completes them in the same order as it did when the
times lived in a dict and were scanned.
"""

from __future__ import annotations

import math

import numpy as np

from ..jit import njit  # numba is imported at the first kernel call

_SIZE, _COUNT = 0, 1  # state[]: entries in the heap, stamps handed out


@njit(cache=True)
def _before(t, stamp, a, b):  # pragma: no cover  (compiled; tested through Completions)
    return t[a] < t[b] or (t[a] == t[b] and stamp[a] < stamp[b])


@njit(cache=True)
def _sift_up(heap, pos, t, stamp, i):  # pragma: no cover
    k = heap[i]
    while i > 0:
        parent = (i - 1) >> 1
        p = heap[parent]
        if not _before(t, stamp, k, p):
            break
        heap[i] = p
        pos[p] = i
        i = parent
    heap[i] = k
    pos[k] = i


@njit(cache=True)
def _sift_down(heap, pos, t, stamp, i, size):  # pragma: no cover
    k = heap[i]
    while True:
        c = 2 * i + 1
        if c >= size:
            break
        if c + 1 < size and _before(t, stamp, heap[c + 1], heap[c]):
            c += 1
        child = heap[c]
        if not _before(t, stamp, child, k):
            break
        heap[i] = child
        pos[child] = i
        i = c
    heap[i] = k
    pos[k] = i


@njit(cache=True)
def _remove_at(heap, pos, t, stamp, state, i):  # pragma: no cover
    """Take the entry at heap place ``i`` out."""
    size = state[_SIZE] - 1
    state[_SIZE] = size
    pos[heap[i]] = -1
    if i < size:
        k = heap[size]
        heap[i] = k
        pos[k] = i
        _sift_down(heap, pos, t, stamp, i, size)
        _sift_up(heap, pos, t, stamp, pos[k])


@njit(cache=True)
def _push(heap, pos, t, stamp, state, k):  # pragma: no cover
    """Put key ``k`` (not in the heap) in at its time."""
    i = state[_SIZE]
    state[_SIZE] = i + 1
    heap[i] = k
    pos[k] = i
    _sift_up(heap, pos, t, stamp, i)


@njit(cache=True)
def _set_many(keys, times, t, has, stamp, pos, heap, state):  # pragma: no cover
    """Each key of ``keys`` in order gets the time beside it (a stamp if it had no time); its entry moves.
    Returns the keys that had no time (-1, nothing changed, if a key is outside 0..capacity-1)."""
    for x in range(keys.shape[0]):
        if keys[x] < 0 or keys[x] >= t.shape[0]:
            return -1
    new = 0
    for x in range(keys.shape[0]):
        k = keys[x]
        if not has[k]:
            has[k] = True
            stamp[k] = state[_COUNT]
            state[_COUNT] += 1
            new += 1
        t[k] = times[x]
        i = pos[k]
        if i < 0:
            _push(heap, pos, t, stamp, state, k)
        else:
            _sift_up(heap, pos, t, stamp, i)
            _sift_down(heap, pos, t, stamp, pos[k], state[_SIZE])
    return new


@njit(cache=True)
def _due(now, t, stamp, pos, heap, state):  # pragma: no cover
    """The keys whose time is at most ``now``, taken off the heap, in stamp order."""
    n = 0
    out = np.empty(state[_SIZE], dtype=np.int64)
    while state[_SIZE] > 0 and t[heap[0]] <= now:
        out[n] = heap[0]
        n += 1
        _remove_at(heap, pos, t, stamp, state, 0)
    keys = out[:n]
    return keys[np.argsort(stamp[keys], kind="mergesort")]


class Completions:
    """Key (a job's row, 0..n-1) -> completion time, with the earliest time and the keys due by a time found
    through an indexed heap. ``capacity``: keys expected (the arrays grow for a larger key)."""

    __slots__ = ("_t", "_has", "_stamp", "_pos", "_heap", "_state", "_n")

    def __init__(self, capacity: int = 64):
        capacity = max(int(capacity), 1)
        self._t = np.zeros(capacity)  # key -> its completion time now (if it has one)
        self._has = np.zeros(capacity, dtype=np.bool_)
        self._stamp = np.zeros(capacity, dtype=np.int64)  # key -> when it got a time (its place in dict order)
        self._pos = np.full(capacity, -1, dtype=np.int64)  # key -> its place in the heap (-1: none)
        self._heap = np.zeros(capacity, dtype=np.int64)  # keys, a binary min-heap by (time, stamp)
        self._state = np.zeros(2, dtype=np.int64)  # entries in the heap, stamps handed out
        self._n = 0  # keys with a time

    def _grow(self, top: int) -> None:
        """Room for key ``top``."""
        old = len(self._t)
        if top < old:
            return
        new = max(top + 1, 2 * old)
        self._t = np.concatenate([self._t, np.zeros(new - old)])
        self._has = np.concatenate([self._has, np.zeros(new - old, dtype=np.bool_)])
        self._stamp = np.concatenate([self._stamp, np.zeros(new - old, dtype=np.int64)])
        self._pos = np.concatenate([self._pos, np.full(new - old, -1, dtype=np.int64)])
        self._heap = np.concatenate([self._heap, np.zeros(new - old, dtype=np.int64)])

    def __len__(self) -> int:
        return self._n

    def __contains__(self, key: int) -> bool:
        return 0 <= key < len(self._has) and bool(self._has[key])

    def get(self, key: int, default=None):
        return float(self._t[key]) if key in self else default

    def set(self, key: int, t: float) -> None:
        """``key`` finishes at ``t`` (replacing the time it had)."""
        self.set_many(np.array((key,), dtype=np.int64), np.array((t,), dtype=np.float64))

    def set_many(self, keys, times) -> None:
        """:meth:`set` for each key of ``keys`` in order, at the time of ``times`` beside it (arrays or lists):
        a re-solve moves tens of jobs at once, in one compiled call."""
        keys, times = np.asarray(keys, dtype=np.int64), np.asarray(times, dtype=np.float64)
        new = _set_many(keys, times, self._t, self._has, self._stamp, self._pos, self._heap, self._state)
        if new < 0:  # a key outside the arrays: room for it, or refused
            if keys.min() < 0:
                raise ValueError(f"Completions: keys are 0..n-1, got {int(keys.min())}")
            self._grow(int(keys.max()))
            new = _set_many(keys, times, self._t, self._has, self._stamp, self._pos, self._heap, self._state)
        self._n += new

    def pop(self, key: int) -> None:
        """``key`` has no completion time any more (stopped, or its time is unknown until a re-solve)."""
        if key in self:
            self._has[key] = False
            self._n -= 1
            i = self._pos[key]
            if i >= 0:
                _remove_at(self._heap, self._pos, self._t, self._stamp, self._state, i)

    def first(self) -> float:
        """The earliest completion time (infinity if none)."""
        return float(self._t[self._heap[0]]) if self._state[_SIZE] > 0 else math.inf

    def due(self, now: float) -> list[int]:
        """The keys whose time is at most ``now``, in the order they got a time; their entries leave the heap
        (they keep their times until :meth:`pop`; :meth:`keep` puts back one that does not finish)."""
        if self._state[_SIZE] == 0 or self._t[self._heap[0]] > now:
            return []
        return _due(float(now), self._t, self._stamp, self._pos, self._heap, self._state).tolist()

    def keep(self, key: int) -> None:
        """Put a key taken by :meth:`due` back on the heap if it still has a time."""
        if key in self and self._pos[key] < 0:
            _push(self._heap, self._pos, self._t, self._stamp, self._state, key)
