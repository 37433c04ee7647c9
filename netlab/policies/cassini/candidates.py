"""CASSINI's candidate placements: what the wrapped host placement policies would do, plus random samples."""

from __future__ import annotations

import numpy as np

from ...sched import Placement
from ..placement.consolidated import take
from ..placement.random_scatter import scatter


def propose(policies, rng: np.random.Generator, n_candidates: int, job, view) -> list[Placement]:
    """Up to ``n_candidates`` distinct placements (same GPUs per host, whatever the ring order).

    First each policy's own pick, in order; then seeded random samples,
    cycling through three kinds so the set mixes locality levels: hosts in
    random order packed (fill each host), scattered (one GPU per host per
    round), and racks in random order with hosts shuffled within (packed:
    few racks, random hosts). At most ``4 x n_candidates`` samples are drawn.
    """
    out, seen = [], set()

    def add(p):
        if p is not None and len(out) < n_candidates:
            key = tuple(sorted(zip(p.hosts, p.gpus)))
            if key not in seen:
                seen.add(key)
                out.append(p)

    for pol in policies:
        add(pol.place(job, view))
    free, n = view.free_gpus, job.gpus
    if int(free.sum()) < n:
        return out
    hosts = np.flatnonzero(free > 0)
    rack = view.topology.host_rack
    for attempt in range(4 * n_candidates):
        if len(out) >= n_candidates:
            break
        perm = rng.permutation(hosts)
        kind = attempt % 3
        if kind == 2:
            order = rng.permutation(view.topology.n_racks)
            perm = perm[np.argsort(order[rack[perm]], kind="stable")]
        counts = scatter(free, perm, n) if kind == 1 else take(free, perm, n)
        add(Placement.from_counts(counts, order=perm.tolist()))
    return out
