"""Synthetic cluster states for benchmarks and tests: clusters fragmented by running jobs.

Placement policies are cheap on an empty cluster and expensive on a
fragmented one; benchmarks and tests need the latter without running a
whole simulation to get there.
"""

from __future__ import annotations

import numpy as np

from ..policies.base import Placement


def scatter(free: np.ndarray, gpus: int, rng: np.random.Generator, max_per_host: int = 8) -> Placement | None:
    """Take ``gpus`` GPUs from random hosts, at most ``max_per_host`` from each; updates ``free`` in place.

    None (and ``free`` unchanged) when fewer GPUs are free than asked.
    """
    if free.sum() < gpus:
        return None
    hosts, taken, need = [], [], int(gpus)
    for h in rng.permutation(len(free)):
        if need == 0:
            break
        take = int(min(free[h], need, rng.integers(1, max_per_host + 1)))
        if take:
            free[h] -= take
            hosts.append(int(h))
            taken.append(take)
            need -= take
    if need:  # ran out of luck on the per-host caps: give them back and refuse
        free[hosts] += taken
        return None
    return Placement(tuple(hosts), tuple(taken))
