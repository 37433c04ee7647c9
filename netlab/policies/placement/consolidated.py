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
counts of hosts per free-GPU value (see ``_consolidate``), so a 512-GPU job on
131,072 GPUs costs well under a millisecond.
"""

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


@njit(cache=True)
def _consolidate(free, rack, n_racks, n):  # pragma: no cover  (compiled; tested through place)
    """GPUs per host for a job no single host holds (all zero if the free GPUs cannot hold n).

    Free counts are small integers, so hosts are ordered by a counting sort (most free first, index order on
    ties: a stable sort) and each rack is summarised by how many of its hosts have each free count: the greedy
    rack step then costs (racks x distinct free counts) per rack added, not a scan of every host per rack.
    """
    n_hosts = free.shape[0]
    counts = np.zeros(n_hosts, dtype=np.int64)
    total, top = 0, 0
    for h in range(n_hosts):
        total += free[h]
        top = max(top, free[h])
    if total < n:
        return counts
    # distinct free counts, most first (level 0 = the largest)
    per_value = np.zeros(top + 1, dtype=np.int64)
    for h in range(n_hosts):
        per_value[free[h]] += 1
    level_of = np.full(top + 1, -1, dtype=np.int64)
    values = np.empty(top + 1, dtype=np.int64)
    n_levels = 0
    for v in range(top, -1, -1):
        if per_value[v]:
            level_of[v], values[n_levels] = n_levels, v
            n_levels += 1
    # hosts rack by rack, each rack's most free first, index order on ties
    rack_ptr = np.zeros(n_racks + 1, dtype=np.int64)
    for h in range(n_hosts):
        rack_ptr[rack[h] + 1] += 1
    for r in range(n_racks):
        rack_ptr[r + 1] += rack_ptr[r]
    level_start = np.zeros(n_levels + 1, dtype=np.int64)
    for v in range(top + 1):
        if per_value[v]:
            level_start[level_of[v] + 1] = per_value[v]
    for lv in range(n_levels):
        level_start[lv + 1] += level_start[lv]
    by_free = np.empty(n_hosts, dtype=np.int64)
    fill = level_start.copy()
    for h in range(n_hosts):
        lv = level_of[free[h]]
        by_free[fill[lv]] = h
        fill[lv] += 1
    rack_hosts = np.empty(n_hosts, dtype=np.int64)
    fill = rack_ptr.copy()
    rack_free = np.zeros(n_racks, dtype=np.int64)
    hist = np.zeros((n_racks, n_levels), dtype=np.int64)  # hosts of each rack at each free count
    for h in by_free:
        r = rack[h]
        rack_hosts[fill[r]] = h
        fill[r] += 1
        rack_free[r] += free[h]
        hist[r, level_of[free[h]]] += 1
    k_global, acc = 0, 0
    while acc < n:
        acc += free[by_free[k_global]]
        k_global += 1
    # 2a. one rack with k_global hosts (the first such rack: ranks can only tie at k_global).
    for r in range(n_racks):
        if rack_free[r] < n:
            continue
        k, acc, i = 0, 0, rack_ptr[r]
        while acc < n:
            acc += free[rack_hosts[i]]
            i += 1
            k += 1
        if k <= k_global:
            _take_ordered(free, rack_hosts[rack_ptr[r]:rack_ptr[r + 1]], n, counts)
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
                acc += got * values[lv]
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
    cursor = rack_ptr.copy()
    left = n
    for lv in range(n_levels):
        for c in range(n_chosen):
            r = order[c]
            while cursor[r] < rack_ptr[r + 1] and free[rack_hosts[cursor[r]]] == values[lv]:
                h = rack_hosts[cursor[r]]
                cursor[r] += 1
                if left <= 0:
                    return counts
                g = min(free[h], left)
                counts[h] = g
                left -= g
    return counts


def consolidate(free: np.ndarray, topology, n: int) -> Placement | None:
    """The rule (module docstring) for ``n`` GPUs on ``free`` GPUs per host (int64) of ``topology``; None if they
    cannot hold the job."""
    h = _best_fit(free, n)  # 1. one host
    if h >= 0:
        return Placement((topology.host_ids[h],), (n,))
    counts = _consolidate(free, topology.host_rack, topology.n_racks, n)  # 2. several
    hosts = np.flatnonzero(counts)
    if len(hosts) == 0:
        return None
    return Placement(tuple(map(topology.host_ids.__getitem__, hosts.tolist())), tuple(counts[hosts].tolist()))


@PLACEMENT.register("consolidated")
class Consolidated(PlacementPolicy):
    """Fewest hosts, then fewest racks (best fit on one host when possible)."""

    name = "consolidated"

    def place(self, job, view):
        return consolidate(np.asarray(view.free_gpus, dtype=np.int64), view.topology, int(job.gpus))
