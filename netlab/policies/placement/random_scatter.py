"""Random (scattered) placement: hosts in a seeded random order, one GPU per host per round."""

import numpy as np

from ...sched import Placement
from ..base import PLACEMENT, PlacementPolicy


def scatter(free: np.ndarray, hosts: np.ndarray, n: int) -> np.ndarray:
    """GPUs per host dealing ``n`` GPUs one at a time round-robin over ``hosts`` (in order), within ``free``.

    Equivalent to the loop "for each round, give one GPU to every host in
    order that still has a free one", computed in closed form: find the
    smallest number of rounds r with sum(min(free, r)) >= n, give every host
    min(free, r - 1), then one more to the first hosts (in order) that can
    take an r-th GPU.
    """
    counts = np.zeros_like(free)
    f = free[hosts]
    if n <= 0 or f.sum() < n:
        return counts
    fs = np.sort(f)
    # total(r) = sum(min(f, r)) is increasing in r; binary search the smallest r with total(r) >= n.
    lo, hi = 1, int(fs[-1])
    while lo < hi:
        mid = (lo + hi) // 2
        if np.minimum(fs, mid).sum() >= n:
            hi = mid
        else:
            lo = mid + 1
    r = lo
    got = np.minimum(f, r - 1)
    extra = n - int(got.sum())
    can = np.flatnonzero(f >= r)[:extra]
    got[can] += 1
    counts[hosts] = got
    return counts


@PLACEMENT.register("random")
class RandomScatter(PlacementPolicy):
    """Random scattered placement: a seeded shuffle of hosts, one GPU per host round-robin.

    Why: the worst-locality baseline. It shows what the network costs when a
    scheduler ignores topology entirely (and is what an unaware scheduler
    tends towards on a busy, fragmented cluster).

    Rule: the hosts with free GPUs are shuffled with the policy's random
    stream (``self.rng``, seeded by the simulator through ``reset``); the
    job's GPUs are dealt one per host in that order, round after round, until
    all are placed, so a job spans as many hosts as it can (a 4-GPU job on an
    idle cluster gets four hosts). The ring visits hosts in the shuffled
    order. Deterministic for a given seed; None when too few GPUs are free.
    """

    name = "random"

    def __init__(self):
        self.rng = np.random.default_rng(0)  # replaced by reset(rng) at the start of every run

    def place(self, job, view):
        free = view.free_gpus
        n = job.gpus
        if int(free.sum()) < n:
            return None
        hosts = self.rng.permutation(np.flatnonzero(free > 0))
        counts = scatter(free, hosts, n)
        return Placement.from_counts(counts, order=hosts.tolist())
