"""Consolidated placement: the fewest hosts, then the fewest racks.

Rule, in order (each step only if the previous cannot hold the job):

1. one host: the best fit (the host with the fewest free GPUs that still fits,
   lowest index on ties), which keeps large holes for large jobs;
2. otherwise the global minimum number of hosts k (hosts with the most free
   GPUs first); among placements with k hosts, one inside a single rack if any
   rack can give it, else hosts taken rack by rack, racks with the most free
   GPUs first, so the job spans as few racks as the free GPUs allow.

Vectorised over hosts; cost grows with hosts, not jobs.
"""

import numpy as np

from ..base import PLACEMENT, Placement, PlacementPolicy


def hosts_needed(free_sorted_desc: np.ndarray, n: int) -> int:
    """How many hosts (taken largest first) hold n GPUs; a large number if none do."""
    csum = np.cumsum(free_sorted_desc)
    k = int(np.searchsorted(csum, n)) + 1
    return k if k <= len(free_sorted_desc) else 1 << 30


def take(free: np.ndarray, hosts: np.ndarray, n: int) -> np.ndarray:
    """GPUs per host taking ``hosts`` in the given order until n are placed."""
    counts = np.zeros_like(free)
    got = np.minimum(free[hosts], np.maximum(n - np.concatenate(([0], np.cumsum(free[hosts])[:-1])), 0))
    counts[hosts] = got
    return counts


@PLACEMENT.register("consolidated")
class Consolidated(PlacementPolicy):
    """Fewest hosts, then fewest racks (best fit on one host when possible)."""

    name = "consolidated"

    def place(self, job, view):
        free = view.free_gpus
        n = job.gpus
        h = int(np.where(free >= n, free, np.inf).argmin())
        if free[h] >= n:
            return Placement((h,), (int(n),))
        if free.sum() < n:
            return None
        rack = view.topology.host_rack
        # Sort hosts by (rack, free desc) once; per-rack minimum host counts.
        order = np.lexsort((-free, rack))
        k_global = hosts_needed(np.sort(free)[::-1], n)
        best_rack, best_k = None, 1 << 30
        rack_free = np.bincount(rack, weights=free, minlength=view.topology.n_racks)
        for r in np.flatnonzero(rack_free >= n):
            hs = order[rack[order] == r]
            k = hosts_needed(free[hs], n)
            if k < best_k:
                best_rack, best_k = r, k
        if best_rack is not None and best_k <= k_global:
            hs = order[rack[order] == best_rack]
            return Placement.from_counts(take(free, hs, n))
        # Span racks: racks with the most free GPUs first, hosts by free GPUs within a rack.
        rank = np.argsort(np.argsort(-rack_free, kind="stable"), kind="stable")
        hs = np.lexsort((-free, rank[rack]))
        hs = hs[free[hs] > 0]
        return Placement.from_counts(take(free, hs, n))
