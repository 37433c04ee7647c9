"""Consolidated placement: the fewest hosts, then the fewest racks.

Rule, in order (each step only if the previous cannot hold the job):

1. one host: the best fit (the host with the fewest free GPUs that still fits,
   lowest index on ties), which keeps large holes for large jobs;
2. otherwise the global minimum number of hosts k (hosts with the most free
   GPUs first), never more; among placements with k hosts, one inside a
   single rack if any rack can give it (the lowest-numbered such rack, its
   hosts with the most free GPUs first);
3. else racks are added greedily, each time the rack that lets k hosts of
   the chosen racks hold the most GPUs, until they hold the job; the job
   takes the chosen racks' fullest hosts. The true fewest racks for k hosts
   is a subset search; on random 3x3 and 4x3 clusters this greedy matched it
   in all but 4 of ~5,700 multi-rack cases.

Why compiled: a trace-scale run asks this policy ~400,000 times (every start
and every preemption attempt); one compiled pass over the hosts costs about
a microsecond where the equivalent numpy calls cost tens. Steps 2-3 work on
counts of hosts per rack and free-GPU value (:class:`FreeIndex`), which the
policy keeps in step with the free GPUs between decisions, so a 512-GPU job on
131,072 GPUs costs tens of microseconds.
"""

from typing import NamedTuple

import numpy as np

from ...jit import njit  # numba is imported at the first kernel call

from ...sched import Placement
from ..base import PLACEMENT, PlacementPolicy


def take(free: np.ndarray, hosts: np.ndarray, n: int) -> np.ndarray:
    """GPUs per host taking ``hosts`` in the given order until n are placed."""
    counts = np.zeros_like(free)
    got = np.minimum(free[hosts], np.maximum(n - np.concatenate(([0], np.cumsum(free[hosts])[:-1])), 0))
    counts[hosts] = got
    return counts


@njit(cache=True)
def _take_ordered(free, hosts, n, counts):  # pragma: no cover  (compiled; tested through place)
    for h in hosts:
        if n <= 0:
            break
        g = min(free[h], n)
        counts[h] = g
        n -= g


@njit(cache=True)
def _best_fit(free, n):  # pragma: no cover  (compiled; tested through place)
    """The host with the fewest free GPUs that still holds n (lowest index on ties); -1 if none."""
    best = -1
    for h in range(free.shape[0]):
        if free[h] == n:  # nothing fits tighter, and no earlier host fits as tight
            return h
        if free[h] > n and (best < 0 or free[h] < free[best]):
            best = h
    return best


class FreeIndex(NamedTuple):
    """Per rack, how many hosts have each free-GPU count (``hist[rack, top - free]``: most free first), each
    rack's free GPUs, and the hosts of each rack in index order (``rack_hosts[rack_ptr[r]:rack_ptr[r + 1]]``).

    Why: the rule's steps 2-3 need only these counts, and the hosts of the racks a job lands in. A placement
    policy keeps one in step with the free GPUs it is shown, updating the hosts whose count changed since the
    last call (:func:`_sync`, one compiled comparison per host), instead of rebuilding it per decision: on
    131,072 GPUs (16,384 hosts, 512 racks) a rebuild cost ~0.3 ms of each multi-host decision.
    """

    seen: np.ndarray  # int64 per host: the free count the counts below hold
    hist: np.ndarray  # int64 (racks, top + 1)
    rack_free: np.ndarray  # int64 per rack
    rack_ptr: np.ndarray  # int64 (racks + 1)
    rack_hosts: np.ndarray  # int64 per host, rack by rack, index order inside a rack


def free_index(rack: np.ndarray, n_racks: int, top: int) -> FreeIndex:
    """An index of hosts in racks ``rack`` (int64 per host) with free counts 0..``top``, every host at 0."""
    rack = np.asarray(rack, dtype=np.int64)
    hist = np.zeros((n_racks, top + 1), dtype=np.int64)
    hist[:, top] = np.bincount(rack, minlength=n_racks)
    rack_ptr = np.zeros(n_racks + 1, dtype=np.int64)
    rack_ptr[1:] = np.cumsum(np.bincount(rack, minlength=n_racks))
    return FreeIndex(np.zeros(len(rack), dtype=np.int64), hist, np.zeros(n_racks, dtype=np.int64), rack_ptr,
                     np.argsort(rack, kind="stable").astype(np.int64))


@njit(cache=True)
def _sync(free, rack, seen, hist, rack_free):  # pragma: no cover  (compiled; tested through place)
    """Bring the index to ``free``; False (index unchanged from there on) if a count is outside 0..top."""
    top = hist.shape[1] - 1
    for h in range(free.shape[0]):
        f = free[h]
        if f != seen[h]:
            if f < 0 or f > top:
                return False
            r = rack[h]
            hist[r, top - seen[h]] -= 1
            hist[r, top - f] += 1
            rack_free[r] += f - seen[h]
            seen[h] = f
    return True


@njit(cache=True)
def _take_levels(free, hosts, top, n, counts):  # pragma: no cover  (compiled; tested through place)
    """Take ``hosts`` most free first (index order on ties: ``hosts`` is in index order) until n are placed."""
    for lv in range(top + 1):
        for h in hosts:
            if n <= 0:
                return
            if free[h] == top - lv:
                g = min(free[h], n)
                counts[h] = g
                n -= g


@njit(cache=True)
def _hosts_needed(level_counts, top, n):  # pragma: no cover  (compiled; tested through place)
    """How many hosts hold n GPUs taking the fullest first (``level_counts[lv]`` hosts with top - lv free)."""
    k, acc = 0, 0
    for lv in range(top):  # the last level holds hosts with nothing free
        v, c = top - lv, level_counts[lv]
        if c == 0:
            continue
        need = (n - acc + v - 1) // v
        if need <= c:
            return k + need
        acc += c * v
        k += c
    return k


@njit(cache=True)
def _consolidate_indexed(free, hist, rack_free, rack_ptr, rack_hosts, n):  # pragma: no cover  (compiled)
    """GPUs per host for a job no single host holds (all zero if the free GPUs cannot hold n), from the index.

    Each rack is summarised by how many of its hosts have each free count: the greedy rack step costs
    (racks x free counts) per rack added, not a scan of every host per rack.
    """
    n_racks, n_levels = hist.shape
    top = n_levels - 1
    counts = np.zeros(free.shape[0], dtype=np.int64)
    if rack_free.sum() < n:
        return counts
    k_global = _hosts_needed(hist.sum(axis=0), top, n)
    # 2a. one rack with k_global hosts (the first such rack: ranks can only tie at k_global).
    for r in range(n_racks):
        if rack_free[r] >= n and _hosts_needed(hist[r], top, n) <= k_global:
            _take_levels(free, rack_hosts[rack_ptr[r]:rack_ptr[r + 1]], top, n, counts)
            return counts
    # 2b. greedy over racks: add the rack that lets k_global hosts of the chosen racks hold the most
    # GPUs (lower number on ties) until they hold the job; then the chosen racks' fullest hosts.
    chosen = np.zeros(n_racks, dtype=np.bool_)
    order = np.empty(n_racks, dtype=np.int64)
    in_chosen = np.zeros(n_levels, dtype=np.int64)
    n_chosen = 0
    for step in range(n_racks):
        best_r, best_acc = -1, -1
        for r in range(n_racks):
            if chosen[r] or rack_free[r] == 0:
                continue
            k, acc = 0, 0  # the k_global fullest hosts of the chosen racks plus r
            for lv in range(n_levels):
                got = min(in_chosen[lv] + hist[r, lv], k_global - k)
                acc += got * (top - lv)
                k += got
                if k == k_global:
                    break
            if acc > best_acc:
                best_r, best_acc = r, acc
        chosen[best_r] = True
        order[n_chosen] = best_r
        n_chosen += 1
        for lv in range(n_levels):
            in_chosen[lv] += hist[best_r, lv]
        if best_acc >= n:
            break
    # fullest first; among equals, earlier-chosen racks first, then host index
    left = n
    for lv in range(n_levels):
        for c in range(n_chosen):
            r = order[c]
            for i in range(rack_ptr[r], rack_ptr[r + 1]):
                h = rack_hosts[i]
                if free[h] != top - lv:
                    continue
                if left <= 0:
                    return counts
                g = min(free[h], left)
                counts[h] = g
                left -= g
    return counts


def _indexed(free: np.ndarray, rack: np.ndarray, n_racks: int, index: FreeIndex | None) -> FreeIndex:
    """``index`` brought to ``free``, or a new index if there is none or a count falls outside it."""
    if index is None or not _sync(free, rack, index.seen, index.hist, index.rack_free):
        index = free_index(rack, n_racks, max(int(free.max(initial=0)), 0))
        _sync(free, rack, index.seen, index.hist, index.rack_free)
    return index


def _consolidate(free: np.ndarray, rack: np.ndarray, n_racks: int, n: int) -> np.ndarray:
    """GPUs per host for a job no single host holds (all zero if the free GPUs cannot hold n), with a fresh
    index (the rule's steps 2-3 on their own)."""
    return _consolidate_indexed(free, *_indexed(free, rack, n_racks, None)[1:], n)


def consolidate(free: np.ndarray, topology, n: int, index: FreeIndex | None = None, one_host: dict | None = None
                ) -> tuple[Placement | None, FreeIndex | None]:
    """The rule (module docstring) for ``n`` GPUs on ``free`` GPUs per host (int64) of ``topology``: the placement
    (None if they cannot hold the job), and ``index`` (a :class:`FreeIndex` of ``topology``'s racks, or None for
    a new one) brought to ``free`` if steps 2-3 needed it, for the next call. ``one_host``: a memo of one-host
    placements of ``topology`` by (host, GPUs), filled as they are made (see :class:`Consolidated`)."""
    h = _best_fit(free, n)  # 1. one host
    if h >= 0:
        if one_host is None:
            return Placement((topology.host_ids[h],), (n,)), index
        p = one_host.get((h, n))
        if p is None:
            p = one_host[(h, n)] = Placement((topology.host_ids[h],), (n,))
        return p, index
    index = _indexed(free, topology.host_rack, topology.n_racks, index)  # 2. several
    counts = _consolidate_indexed(free, *index[1:], n)
    hosts = np.flatnonzero(counts)
    if len(hosts) == 0:
        return None, index
    return Placement(tuple(map(topology.host_ids.__getitem__, hosts.tolist())), tuple(counts[hosts].tolist())), index


@PLACEMENT.register("consolidated")
class Consolidated(PlacementPolicy):
    """Fewest hosts, then fewest racks (best fit on one host when possible)."""

    name = "consolidated"

    def __init__(self):
        # (topology, its FreeIndex as of the last multi-host decision, its one-host placements by (host, GPUs))
        self._index: tuple | None = None

    def place(self, job, view):
        """The rule's placement. One-host placements (most of a trace's) are handed out from a memo: a Placement
        is frozen, so the same (host, GPUs) can be the same object, and building one (a frozen dataclass sets
        its fields through ``object.__setattr__``) cost about as much as the compiled best fit that finds it."""
        topology = view.topology
        if self._index is None or self._index[0] is not topology:
            self._index = (topology, None, {})
        _, index, one_host = self._index
        placement, index = consolidate(np.asarray(view.free_gpus, dtype=np.int64), topology, int(job.gpus), index,
                                       one_host)
        self._index = (topology, index, one_host)
        return placement
