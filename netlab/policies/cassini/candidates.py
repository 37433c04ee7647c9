"""The host scheduler's short list: the placements it finds acceptable, for CASSINI to choose among.

Why: in CASSINI (NSDI 2024) the host scheduler (Themis, Pollux) keeps
deciding where jobs may go; it proposes its top placements and CASSINI only
picks the one whose shared links interleave best, then shifts phases. A
pool padded with random or scattered placements lets CASSINI trade locality
for a better score, which the host would never accept: in netlab that made
CASSINI 0.83x of its own host at 4:1 (issue 13).

Rule (:func:`shortlist`), for a host placement policy ``host``:

1. the host's own pick comes first; a job inside one host (no network
   traffic) gets only that;
2. then each rack in turn (rack index order) seeds an alternative: the seed
   rack, then the other racks with the most free GPUs (lower index on ties)
   until they hold the job; the job takes the seed rack's hosts first, then
   the added racks' in the order they were added, fullest hosts first
   within a rack (index order on ties);
3. an alternative is acceptable only if it uses no more racks and no more
   hosts than the host's own pick (the host's locality is kept);
4. distinct placements (same GPUs per host) in that order, at most ``k``.

:func:`propose` is a different pool: each of several policies' picks plus
seeded random samples of mixed locality. CASSINI no longer uses it; the
predictive placement (``placement/predictive.py``) ranks that pool.
"""

from __future__ import annotations

import numpy as np

from ...sched import Placement
from ..placement.consolidated import take
from ..placement.random_scatter import scatter


def _seeded(free: np.ndarray, rack: np.ndarray, n_racks: int, seed: int, n: int) -> Placement | None:
    """Step 2 for one seed rack (None if the seed rack has no free GPU)."""
    rack_free = np.bincount(rack, weights=free, minlength=n_racks).astype(np.int64)
    if rack_free[seed] == 0:
        return None
    order = [seed] + [int(r) for r in np.argsort(-rack_free, kind="stable") if r != seed and rack_free[r] > 0]
    hosts, gpus, need = [], [], n
    for r in order:
        members = np.flatnonzero(rack == r)
        for h in members[np.argsort(-free[members], kind="stable")]:
            if need == 0 or free[h] == 0:
                break
            g = int(min(free[h], need))
            hosts.append(int(h))
            gpus.append(g)
            need -= g
        if need == 0:
            return Placement(tuple(hosts), tuple(gpus))
    return None


def shortlist(host, job, view, k: int) -> list[Placement]:
    """Up to ``k`` placements the ``host`` placement policy finds acceptable, its own pick first (module doc)."""
    own = host.place(job, view)
    if own is None or len(own.hosts) == 1 or k <= 1:
        return [] if own is None else [own]
    topo = view.topology
    free = np.asarray(view.free_gpus, dtype=np.int64)
    rack = np.asarray(topo.host_rack, dtype=np.int64)
    n_racks, h0 = len(set(rack[list(own.hosts)].tolist())), len(own.hosts)
    out, seen = [own], {tuple(sorted(zip(own.hosts, own.gpus)))}
    for seed in range(topo.n_racks):
        if len(out) >= k:
            break
        p = _seeded(free, rack, topo.n_racks, seed, int(job.gpus))
        if p is None or len(p.hosts) > h0 or len(set(rack[list(p.hosts)].tolist())) > n_racks:
            continue
        key = tuple(sorted(zip(p.hosts, p.gpus)))
        if key not in seen:
            seen.add(key)
            out.append(p)
    return out




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
