"""Gandiva-style packing with job-size affinity."""

import numpy as np

from ...sched import Placement
from ..base import PLACEMENT, PlacementPolicy
from .consolidated import take


def host_job_sizes(view) -> tuple[np.ndarray, np.ndarray]:
    """Per host: (smallest, largest) GPU count of the jobs running on it; (big, 0) on hosts with none."""
    n_hosts = len(view.free_gpus)
    lo = np.full(n_hosts, np.iinfo(np.int64).max, dtype=np.int64)
    hi = np.zeros(n_hosts, dtype=np.int64)
    running = [js for js in view.running.values() if js.placement is not None]
    if running:
        hosts = np.fromiter((h for js in running for h in js.placement.hosts), dtype=np.int64)
        sizes = np.fromiter((js.gpus for js in running for _ in js.placement.hosts), dtype=np.int64)
        np.minimum.at(lo, hosts, sizes)
        np.maximum.at(hi, hosts, sizes)
    return lo, hi


@PLACEMENT.register("gandiva")
class Gandiva(PlacementPolicy):
    """Gandiva-style greedy packing with job-size affinity.

    Why: Gandiva (OSDI 2018) packs jobs greedily and keeps jobs of the same
    size together ("affinity"), so similar jobs share servers, interference
    stays predictable and whole servers remain free for large jobs. Its
    time-slicing and migration are not modelled here; this is the placement
    rule only.

    Rule, for a job of n GPUs, in order:

    1. affinity hosts: hosts with >= n free GPUs whose running jobs all have
       exactly n GPUs; best fit (fewest free GPUs), lowest index on ties;
    2. empty hosts (no GPU in use) that fit n; best fit, lowest index;
    3. any host that fits n; best fit, lowest index;
    4. the job needs several hosts: whole empty hosts first (largest first,
       lowest index), then affinity hosts, then the rest, each group by most
       free GPUs first, until n GPUs are placed. None if fewer than n GPUs
       are free.

    Per call it costs one pass over the running jobs' placements (to find
    each host's job sizes) plus vectorised work over hosts.
    """

    name = "gandiva"

    def place(self, job, view):
        free = view.free_gpus
        n = job.gpus
        if int(free.sum()) < n:
            return None
        cap = view.topology.host_gpus
        lo, hi = host_job_sizes(view)
        affinity = (lo == n) & (hi == n)
        empty = free == cap
        fits = free >= n
        for group in (affinity & fits, empty & fits, fits):
            cand = np.flatnonzero(group)
            if len(cand):
                h = cand[np.argmin(free[cand])]  # argmin takes the first (lowest index) minimum
                counts = np.zeros_like(free)
                counts[h] = n
                return Placement.from_counts(counts)
        # Several hosts: group 0 = empty, 1 = affinity, 2 = other; most free first, then index.
        group = np.where(empty, 0, np.where(affinity, 1, 2))
        idx = np.arange(len(free))
        order = np.lexsort((idx, -free, group))
        order = order[free[order] > 0]
        return Placement.from_counts(take(free, order, n), order=order.tolist())
