"""CASSINI's per-link compatibility score: how well on/off jobs interleave on one link.

Why: a data-parallel job alternates compute (no traffic) and communication
(its all-reduce flows at full speed). Two jobs that share a link only slow
each other while their communication windows overlap, so the right question
for a shared link is not "how much traffic" but "can the windows be rotated
so their sum stays under capacity". CASSINI (NSDI 2024) answers it on a
circle: each job's demand is drawn around one iteration, the jobs are
rotated against each other, and the score is the share of capacity never
exceeded.

Definitions (all rates Gbit/s, times seconds):

* A job's :class:`Wave` on a link: ``rate_gbps`` (weight on the link x its
  isolated per-flow rate) during ``[start_s, start_s + window_s)`` of every
  period of ``period_s``, 0 otherwise. ``start_s`` is where the window sits
  at phase 0: after the compute, less the overlapped part, exactly where the
  phase network puts it.
* The unified circle (:func:`netlab.network.circle.unified_circle`, the one
  the ``phase`` network model solves on, so a score of 1 means no overlap
  there either): 72 steps of the longest period, periods quantised to
  whole steps, the LCM of the counts capped at 4 longest periods.
* A shift is a whole number of steps; a phase is ``shift / count`` (a
  fraction of the job's own quantised period, what ``Placement.phase``
  takes).
* ``score = 1 - sum_bins max(0, sum_j demand_j - C) / (bins x C)``: 1 when
  the link is never oversubscribed, 0.5 for two full-capacity half-period
  jobs that are aligned.

Optimisation (:func:`optimise`): jobs whose phase is fixed stay put; when
nothing is fixed the first job is held (only relative shifts matter). Free
jobs without a starting phase are added greedily, each at its best shift
against those already placed (exhaustive over its own period: for two jobs
this is the exhaustive search), then coordinate descent sweeps the free jobs,
moving one at a time to its best shift, until no move strictly reduces the
excess. A job only moves when that pays, and then by the smallest move
among its best shifts: least disruption for running jobs, and it avoids a
trap of taking the first best shift, which can strand the last job in a gap
too small for it (see tests/test_cassini.py).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...network.circle import BINS, MAX_PERIODS, Circle, unified_circle


@dataclass(frozen=True)
class Wave:
    """One job's on/off bandwidth on one link over one iteration."""

    period_s: float
    start_s: float
    window_s: float
    rate_gbps: float

    @classmethod
    def from_demand(cls, demand, weight: float, period_s: float) -> "Wave":
        """The wave of ``demand`` (a CommDemand) on a link carrying ``weight`` of its flows (see :func:`wave_row`)."""
        period, start, window, rate = wave_row(demand, period_s).tolist()
        return cls(period, start, window, weight * rate)


def wave_row(demand, period_s: float) -> np.ndarray:
    """(period_s, start_s, window_s, per-flow rate) of a job, before its weight on a link.

    The window is the job's communication at its isolated rate (what it needs
    if interleaving works), placed where the phase network starts it:
    ``compute - overlap * min(compute, comm)`` into the period.
    """
    rate = demand.iso_rate_gbps
    window = demand.net_s(rate)
    comm = window + demand.serial_intra_s
    start = demand.compute_s - demand.overlap * min(demand.compute_s, comm)
    return np.array([period_s, start, window, rate], dtype=float)


def as_array(waves) -> np.ndarray:
    """(jobs, 4) float array of (period_s, start_s, window_s, rate_gbps); passes arrays through."""
    if isinstance(waves, np.ndarray):
        return waves
    return np.array([(w.period_s, w.start_s, w.window_s, w.rate_gbps) for w in waves], dtype=float).reshape(-1, 4)


def base_profiles(waves, step_s: float, counts: np.ndarray) -> np.ndarray:
    """(jobs, max count) demand per bin of each job's own period at shift 0 (fractional bin coverage)."""
    arr = as_array(waves)
    pos = np.arange(counts.max())[None, :].astype(float)
    c = counts[:, None].astype(float)
    start = (arr[:, 1:2] / step_s) % c
    width = np.minimum(arr[:, 2:3] / step_s, c)
    cov = (np.clip(np.minimum(pos + 1, start + width) - np.maximum(pos, start), 0, 1)
           + np.clip(np.minimum(pos + 1, start + width - c) - np.maximum(pos, start - c), 0, 1))
    cov[pos >= c] = 0.0
    return cov * arr[:, 3:4]


def layout(profiles: np.ndarray, counts: np.ndarray, shifts, bins: int) -> np.ndarray:
    """(jobs, bins): each job's profile delayed by its shift and repeated around the circle."""
    t = np.arange(bins)
    idx = (t[None, :] - np.asarray(shifts, dtype=np.int64)[:, None]) % counts[:, None]
    return np.take_along_axis(profiles, idx, axis=1)


def all_shifts(profile: np.ndarray, count: int, bins: int) -> np.ndarray:
    """(count, bins): row s is the profile delayed by s bins."""
    t = np.arange(bins)
    return profile[(t[None, :] - np.arange(count)[:, None]) % count]


def excess(total_gbps: np.ndarray, capacity_gbps: float) -> np.ndarray:
    """Sum over the last axis of the demand above capacity."""
    return np.maximum(total_gbps - capacity_gbps, 0.0).sum(axis=-1)


def score_of(excess_gbps, bins: int, capacity_gbps: float):
    return 1.0 - np.asarray(excess_gbps) / (bins * capacity_gbps)


def to_shifts(phases, counts: np.ndarray) -> list[int | None]:
    return [None if p is None else int(round((p % 1.0) * c)) % int(c) for p, c in zip(phases, counts.tolist())]


@dataclass(frozen=True)
class LinkResult:
    score: float
    phases: tuple[float, ...]
    circle: Circle


def _setup(waves, bins, max_periods):
    arr = as_array(waves)
    circle = unified_circle(arr[:, 0], bins, max_periods)
    return circle, base_profiles(arr, circle.step_s, circle.counts)


def evaluate(waves, capacity_gbps: float, phases, bins: int = BINS, max_periods: int = MAX_PERIODS) -> float:
    """Compatibility of the jobs on one link at the given phases (no optimisation)."""
    circle, prof = _setup(waves, bins, max_periods)
    total = layout(prof, circle.counts, to_shifts(phases, circle.counts), circle.bins).sum(axis=0)
    return float(score_of(excess(total, capacity_gbps), circle.bins, capacity_gbps))


def scan(waves, capacity_gbps: float, phases, j: int, bins: int = BINS,
         max_periods: int = MAX_PERIODS) -> tuple[np.ndarray, Circle]:
    """Scores for every shift of job ``j`` (others at their phases; None = absent), and the circle."""
    circle, prof = _setup(waves, bins, max_periods)
    others = [i for i, p in enumerate(phases) if i != j and p is not None]
    bg = np.zeros(circle.bins)
    if others:
        sh = to_shifts([phases[i] for i in others], circle.counts[others])
        bg = layout(prof[others], circle.counts[others], sh, circle.bins).sum(axis=0)
    rows = all_shifts(prof[j], int(circle.counts[j]), circle.bins)
    return score_of(excess(rows + bg, capacity_gbps), circle.bins, capacity_gbps), circle


def nearest(options: np.ndarray, current: int, count: int) -> int:
    """The option closest to ``current`` around a circle of ``count`` bins (the smallest move)."""
    d = np.abs(options - current) % count
    return int(options[np.argmin(np.minimum(d, count - d))])


def optimise(waves, capacity_gbps: float, phases=None, fixed=(), bins: int = BINS, max_periods: int = MAX_PERIODS,
             max_rounds: int = 8) -> LinkResult:
    """Best phases for the jobs on one link (see the module doc). ``phases[i]`` None: no starting phase."""
    circle, prof = _setup(waves, bins, max_periods)
    n = len(prof)
    phases = list(phases) if phases is not None else [None] * n
    fixed = set(fixed)
    for i in fixed:
        phases[i] = 0.0 if phases[i] is None else phases[i]
    if not fixed:
        first = next((i for i, p in enumerate(phases) if p is not None), 0)
        fixed = {first}
        phases[first] = 0.0 if phases[first] is None else phases[first]
    counts, B = circle.counts, circle.bins
    shifts = to_shifts(phases, counts)
    placed = [i for i in range(n) if shifts[i] is not None]
    rows = np.zeros((n, B))
    rows[placed] = layout(prof[placed], counts[placed], [shifts[i] for i in placed], B)
    total = rows.sum(axis=0)
    candidates: dict[int, np.ndarray] = {}

    def excess_by_shift(i):
        if i not in candidates:
            candidates[i] = all_shifts(prof[i], int(counts[i]), B)
        return excess(candidates[i] + (total - rows[i]), capacity_gbps)

    for i in range(n):  # greedy start for jobs without a phase
        if shifts[i] is None:
            shifts[i] = int(np.argmin(excess_by_shift(i)))
            rows[i] = candidates[i][shifts[i]]
            total = total + rows[i]
    free = [i for i in range(n) if i not in fixed]
    eps = 1e-9 * capacity_gbps * B
    moved = {i for i in range(n) if phases[i] is None}
    for _ in range(max_rounds if free else 0):  # coordinate descent
        improved = False
        for i in free:
            exc = excess_by_shift(i)
            cur = shifts[i]
            if exc.min() < exc[cur] - eps:
                best = nearest(np.flatnonzero(exc <= exc.min() + eps), cur, int(counts[i]))
                shifts[i] = best
                total = total - rows[i] + candidates[i][best]
                rows[i] = candidates[i][best]
                moved.add(i)
                improved = True
        if not improved or len(free) == 1:  # one free job reaches its best in one step
            break
    out = tuple(shifts[i] / int(counts[i]) if i in moved else float(phases[i]) % 1.0 for i in range(n))
    return LinkResult(float(score_of(excess(total, capacity_gbps), B, capacity_gbps)), out, circle)
