"""A TCP-like fluid simulation of a candidate job and the running jobs on its links (feature ``fluid_tcp_slowdown``).

Why: the max-min features assume every flow on a link gets an equal share
while all jobs communicate at once. Measured on the testbed (HTB shaping,
FIFO queues, no AQM, no fair queueing), neither holds: jobs alternate
compute and all-reduce, so a link is shared only while transfers overlap
and a job uses the others' compute gaps; and TCP does not share a FIFO
bottleneck equally between a short all-reduce and long transfers: the long
ones keep most of it. This module simulates exactly that, from the same
demands (:class:`~netlab.network.model.CommDemand`) on any topology:

* jobs: the candidate (row 0) and the running jobs that share at least one
  of its links (at most ``MAX_NEIGHBOURS``, those loading its links most);
  only the candidate's links are modelled, and each job's per-flow rate is
  capped at its isolated rate (``iso_rate_gbps``, which already holds the
  rest of its path and the pattern's own cap);
* each job repeats: the non-overlapped compute ``(1 - overlap) x compute_s``
  plus the serial intra-host phase, then the all-reduce (``flow_bytes`` per
  flow), then waits for the overlapped compute, so that alone it runs at
  exactly ``CommDemand.iter_s(iso_rate_gbps)``;
* while transfers overlap, links are shared by weighted max-min (progressive
  filling) with each job's weight proportional to its flow bytes
  (``ALPHA = 1``): transfers that overlap progress at the same fraction of
  their size, so a short all-reduce next to a long transfer gets a share in
  proportion to its size rather than an equal one (``ALPHA = 0`` would be
  max-min);
* links on which even every job sending at its isolated rate cannot exceed
  the capacity never bind and are dropped, as are neighbours left with no
  link; with no neighbour left the result is the job's alone slowdown,
  without simulating;
* the running jobs start at random points of their iterations (Latin-hypercube
  draws of offsets, fixed: the feature is deterministic; ``DRAW_BUDGET`` job
  draws in all, so 16 draws for two jobs down to 4 for seven),
  run indefinitely, and the candidate's mean period over iterations
  ``WARMUP`` .. ``ITERATIONS`` is averaged over the draws.

The result over the candidate's ``iso_iter_s`` is the column
``fluid_tcp_slowdown``; event-driven and compiled with numba (tens of
microseconds per candidate on a few neighbours, about 0.4 ms for the 8
candidates of a 16-GPU job among 80 running jobs; the work per draw is
bounded by ``MAX_EVENTS``). Links that repeat or are dominated by another
(both directions of a cable, equal-cost spine links) are merged before
simulating: the rates are the same without them.

Where the constants come from (testbed dataset, 543 rows): ``ALPHA = 1``
fits best (R^2 of the column alone: 0.63 at 0, 0.79 at 0.5, 0.85 at 0.75,
0.86 at 1, 0.52 at 1.5), a choice made on all rows: choosing it inside each
training fold instead lowers the ``fluid`` model's held-out R^2 by 0.004 on
average over four grouped splits (0.008 on the benchmark's). The horizon
matters: the testbed reports iterations 2 to 8 of jobs started together, and
simulating that horizon (``ITERATIONS = 8``, ``WARMUP = 2``) scores 0.86
where a steady state (16 to 32 iterations) scores 0.80 to 0.85: a prediction
is for the next few iterations, not for the far future.

Those choices were made on a first dataset in which every job ran 8
iterations; they were kept unchanged for the equal-duration dataset that
replaced it (same 300 configurations, every job measured under steady
contention), where the column alone scores R^2 0.92 and the ``fluid`` model
0.95 out of fold.
"""

from __future__ import annotations

import numpy as np
from ..jit import njit  # numba is imported at the first kernel call

from ..network.model import GBIT, iteration_time
from ..network.tcp.fluid import NOISE, WAIT, FluidJobs, FluidLinks, FluidRun, FluidState, LinkStats, Starts, simulate

ALPHA = 1.0  # share weight = flow bytes ** ALPHA (0: max-min)
DRAW_BUDGET = 32  # draws of the running jobs' offsets x jobs simulated (averaged over the draws) ...
MIN_DRAWS, MAX_DRAWS = 4, 16  # ... within these bounds
ITERATIONS = 8  # candidate iterations simulated
WARMUP = 2  # first iterations left out of its mean period
MAX_NEIGHBOURS = 6  # running jobs simulated with the candidate, those loading its links most
MAX_EVENTS = 2000  # per draw: bounds the work when neighbours iterate much faster than the candidate


def _offsets(draws: int, jobs: int, seed: int = 0) -> np.ndarray:
    """(draws, jobs) start offsets as fractions of each job's period: a Latin hypercube (each job's draws cover
    [0, 1) in equal strata), fixed by ``seed``."""
    rng = np.random.default_rng(seed)
    u = (np.argsort(rng.random((jobs, draws)), axis=1) + rng.random((jobs, draws))) / draws
    return np.ascontiguousarray(u.T)


def _offset_tables(max_draws: int, jobs: int) -> np.ndarray:
    """``tables[d, :d]``: the (d, jobs) Latin hypercube of d draws, for every d up to ``max_draws``."""
    tables = np.zeros((max_draws + 1, max_draws, jobs))
    for d in range(1, max_draws + 1):
        tables[d, :d] = _offsets(d, jobs)
    return tables


OFFSETS = _offset_tables(MAX_DRAWS, MAX_NEIGHBOURS + 1)


@njit(cache=True, nogil=True)
def _period(A, cap_link, cap_job, phi, gbit, intra_s, compute_s, overlap, start_s, iterations, warmup,
            max_events):  # pragma: no cover  (compiled)
    """Job 0's mean period over its iterations ``warmup`` .. ``iterations`` (NaN if fewer than 2 completed).

    The fluid itself is the ``tcp`` network model's (:func:`netlab.network.tcp.fluid.simulate`), run without
    jitter from every job waiting for its start offset.
    """
    n, m = A.shape
    starts = Starts(np.zeros((n, iterations + 1)), np.zeros(n, np.int64))
    one_class = np.zeros(n, np.int64)
    simulate(FluidJobs(A, cap_job, phi, one_class, gbit, intra_s, compute_s, overlap, np.zeros(n, np.int64)),
             FluidState(np.full(n, WAIT, np.int64), np.zeros(n), start_s.copy(), start_s.copy()),
             FluidLinks(cap_link, np.full(m, np.inf), np.full(m, np.inf)),
             FluidRun(0.0, np.zeros(n), NOISE, 0, iterations + 1, max_events), starts,
             LinkStats(np.zeros(m), np.zeros(m), np.zeros(m)))
    k0 = starts.count[0]
    if k0 < 3:
        return np.nan
    k = min(k0, iterations + 1)
    w = min(warmup, k - 3)
    return (starts.time_s[0, k - 1] - starts.time_s[0, w]) / (k - 1 - w)


@njit(cache=True, nogil=True)
def _mean_period(A, cap_link, cap_job, phi, gbit, intra_s, compute_s, overlap, iso_s, offsets, iterations, warmup,
                 max_events):  # pragma: no cover  (compiled)
    """Job 0's mean period averaged over the offset draws (job 0 starts at 0, job i at offsets[d, i] x iso_s[i])."""
    n = A.shape[0]
    start = np.zeros(n)
    acc, cnt = 0.0, 0
    for d in range(offsets.shape[0]):
        for i in range(1, n):
            start[i] = offsets[d, i] * iso_s[i]
        p = _period(A, cap_link, cap_job, phi, gbit, intra_s, compute_s, overlap, start, iterations, warmup,
                    max_events)
        if p == p:
            acc += p
            cnt += 1
    return acc / cnt if cnt else np.nan


class JobTable:
    """Per running job, what the simulation needs, as arrays indexed like the background's demands."""

    def __init__(self, demands):
        cols = np.array([(d.flow_bytes, d.compute_s, d.overlap, d.serial_intra_s, d.iso_rate_gbps, d.rate_cap_gbps)
                         for d in demands], dtype=float).reshape(-1, 6)
        self.gbit = cols[:, 0] * 8 / GBIT
        self.compute_s, self.overlap, self.intra_s = cols[:, 1], cols[:, 2], cols[:, 3]
        self.cap_gbps = np.minimum(cols[:, 4], cols[:, 5])
        ok = np.isfinite(self.cap_gbps) & (self.cap_gbps > 0)
        comm = np.divide(self.gbit, self.cap_gbps, out=np.zeros(len(cols)), where=ok) + self.intra_s
        # alone on its placement: CommDemand.iter_s(cap), i.e. network.model.iteration_time
        self.iso_s = self.compute_s + comm - self.overlap * np.minimum(self.compute_s, comm)


@njit(cache=True, nogil=True)
def _local_period(cand_w, capacity, seg, e_weight, e_job, gbit_j, compute_j, overlap_j, intra_j, cap_j, iso_j,
                  gbit0, compute0, overlap0, intra0, cap0, alone0, alpha, offsets, draw_budget, min_draws,
                  iterations, warmup, max_neighbours, max_events):  # pragma: no cover  (compiled)
    """The candidate's mean simulated period among its link neighbours; -1.0 when no link can bind.

    Builds the local problem: the links that can bind (every job at its isolated rate would exceed the
    capacity), the neighbours on them (the ``max_neighbours`` loading them most), their flows per link,
    and drops dominated links (link l never binds before k if every job loads k at least as much relative to
    its capacity; of identical links the first is kept: both directions of a cable, equal-cost spine links).
    """
    n_links = capacity.shape[0]
    offered = cand_w * cap0
    for e in range(seg.shape[0]):
        offered[seg[e]] += e_weight[e] * cap_j[e_job[e]]
    binding = offered > capacity * (1.0 + 1e-9)
    n_bind = 0
    for link in range(n_links):
        if binding[link]:
            n_bind += 1
    if n_bind == 0:
        return -1.0
    # Neighbours: the running jobs with flows on a binding link, by their load there (dense over job ids).
    load = np.zeros(gbit_j.shape[0])
    for e in range(seg.shape[0]):
        if binding[seg[e]]:
            load[e_job[e]] += e_weight[e] * cap_j[e_job[e]] / capacity[seg[e]]
    ids = np.flatnonzero(load > 0.0)
    if ids.shape[0] == 0:
        return -1.0
    if ids.shape[0] > max_neighbours:
        ids = np.sort(ids[np.argsort(-load[ids], kind="mergesort")[:max_neighbours]])
    n = ids.shape[0] + 1
    row = np.full(gbit_j.shape[0], -1, np.int64)
    for i in range(ids.shape[0]):
        row[ids[i]] = i + 1
    local = np.full(n_links, -1, np.int64)
    k = 0
    for link in range(n_links):
        if binding[link]:
            local[link] = k
            k += 1
    A = np.zeros((n, n_bind))
    cl = np.zeros(n_bind)
    for link in range(n_links):
        if binding[link]:
            A[0, local[link]] = cand_w[link]
            cl[local[link]] = capacity[link]
    for e in range(seg.shape[0]):
        if binding[seg[e]] and row[e_job[e]] > 0:
            A[row[e_job[e]], local[seg[e]]] += e_weight[e]
    # Columns by decreasing total relative load: a column can only be dominated by one with a larger or equal
    # total, and dominance is transitive, so comparing each with the columns kept so far is enough.
    B = np.empty((n, n_bind))
    total = np.zeros(n_bind)
    for link in range(n_bind):
        for i in range(n):
            B[i, link] = A[i, link] / cl[link]
            total[link] += B[i, link]
    keep = np.zeros(n_bind, np.bool_)
    kept = np.empty(n_bind, np.int64)
    n_kept = 0
    for a in np.argsort(-total, kind="mergesort"):
        dominated = False
        for q in range(n_kept):
            b = kept[q]
            dominated = True
            for i in range(n):
                if B[i, a] > B[i, b] * (1.0 + 1e-12):
                    dominated = False
                    break
            if dominated:
                break
        if not dominated:
            keep[a] = True
            kept[n_kept] = a
            n_kept += 1
    A = A[:, keep].copy()
    cl = cl[keep].copy()
    gbit = np.empty(n)
    compute = np.empty(n)
    overlap = np.empty(n)
    intra = np.empty(n)
    cap = np.empty(n)
    iso = np.empty(n)
    gbit[0], compute[0], overlap[0], cap[0], iso[0] = gbit0, compute0, overlap0, cap0, alone0
    intra[0] = intra0
    for i in range(1, n):
        j = ids[i - 1]
        gbit[i], compute[i], overlap[i], cap[i], iso[i] = gbit_j[j], compute_j[j], overlap_j[j], cap_j[j], iso_j[j]
        intra[i] = intra_j[j]
    top = gbit.max()
    phi = np.empty(n)
    for i in range(n):
        phi[i] = (max(gbit[i], 1e-300) / top) ** alpha if top > 0.0 else 1.0
    draws = min(offsets.shape[0] - 1, max(min_draws, draw_budget // n))
    return _mean_period(A, cl, cap, phi, gbit, intra, compute, overlap, iso, offsets[draws, :draws], iterations,
                        warmup, max_events)


def fluid_slowdown(demand, capacity: np.ndarray, seg: np.ndarray, e_weight: np.ndarray, e_job: np.ndarray,
                   jobs: JobTable, ref_iter_s: float, alpha: float = ALPHA, draw_budget: int = DRAW_BUDGET,
                   iterations: int = ITERATIONS, warmup: int = WARMUP, max_neighbours: int = MAX_NEIGHBOURS,
                   max_events: int = MAX_EVENTS) -> float:
    """``demand``'s simulated iteration time among its link neighbours over ``ref_iter_s``.

    ``capacity``: the capacities of ``demand.links``; ``seg``, ``e_weight``, ``e_job``: the running jobs' entries
    on those links (:meth:`~netlab.slowdown.features.Background.entries`: index into ``demand.links``, flows,
    job index into ``jobs``). Without contention (or if the simulation cannot finish), the alone value.
    """
    cap0 = min(demand.iso_rate_gbps, demand.rate_cap_gbps)
    alone = demand.iter_s(cap0)
    ref = ref_iter_s if ref_iter_s > 0 else alone
    if not len(seg) or demand.flow_bytes <= 0:
        return alone / ref
    offsets = OFFSETS if OFFSETS.shape[2] >= max_neighbours + 1 else _offset_tables(MAX_DRAWS, max_neighbours + 1)
    period = _local_period(np.asarray(demand.weights, dtype=float), np.asarray(capacity, dtype=float),
                           np.asarray(seg, dtype=np.int64), np.asarray(e_weight, dtype=float),
                           np.asarray(e_job, dtype=np.int64), jobs.gbit, jobs.compute_s, jobs.overlap, jobs.intra_s,
                           jobs.cap_gbps, jobs.iso_s, demand.flow_bytes * 8 / GBIT, float(demand.compute_s),
                           float(demand.overlap), float(demand.serial_intra_s), float(cap0), float(alone),
                           float(alpha), offsets, int(draw_budget), MIN_DRAWS, int(iterations), int(warmup),
                           int(max_neighbours), int(max_events))
    if not np.isfinite(period) or period < 0:
        return alone / ref
    return period / ref


def alone_slowdown(compute_s: float, intra_s: float, overlap: float, ref_iter_s: float) -> float:
    """A one-host job's slowdown (nothing on the network): ``iteration_time`` over the reference."""
    it = iteration_time(compute_s, intra_s, overlap)
    return it / ref_iter_s if ref_iter_s > 0 else 1.0
