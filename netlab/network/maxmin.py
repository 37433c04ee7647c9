"""Weighted max-min fair rates by progressive filling, vectorised with numpy.

Each job is a set of lock-step flows that all move at one per-flow rate r_j
(Gbit/s). Job j loads link l with ``w[j, l] * r_j``, where ``w`` counts j's
flows on l (fractional under split ECMP). Progressive filling raises every
unfrozen r_j together until a link saturates (or a job reaches its own cap),
freezes the jobs on that link, and repeats. The loop runs once per distinct
bottleneck level, each pass a handful of numpy reductions over the non-zeros.

Result properties (checked by the property tests):

* no link carries more than its capacity;
* rates are non-negative;
* every job is either at its cap or crosses a saturated link on which no other
  job has a higher per-flow rate (its bottleneck).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

REL_EPS = 1e-9


@dataclass
class MaxMinResult:
    rate: np.ndarray  # per job, Gbit/s per flow
    bottleneck: np.ndarray  # per non-zero entry: this link froze this job
    load: np.ndarray  # per link, Gbit/s


DENSE_MAX_CELLS = 400_000  # below this many link x job cells a dense matrix is faster


def max_min(capacity: np.ndarray, job: np.ndarray, link: np.ndarray, weight: np.ndarray, n_jobs: int,
            rate_cap: np.ndarray | None = None) -> MaxMinResult:
    """Progressive filling over ``len(capacity)`` links and ``n_jobs`` jobs.

    ``job``, ``link`` and ``weight`` list the non-zeros of the job x link
    incidence (one entry per job and link). ``rate_cap`` bounds each job's
    rate (inf: none). A job with no links and no cap gets rate inf.
    Small problems (the usual case) run on a dense matrix, large ones sparse;
    both compute the same thing.
    """
    capacity = np.asarray(capacity, dtype=float)
    n_links = len(capacity)
    cap = np.full(n_jobs, np.inf) if rate_cap is None else np.asarray(rate_cap, dtype=float)
    if n_links * n_jobs <= DENSE_MAX_CELLS:
        return _dense(capacity, job, link, weight, n_jobs, cap)
    rate = np.zeros(n_jobs)
    frozen = np.zeros(n_jobs, dtype=bool)
    bottleneck = np.zeros(len(job), dtype=bool)
    remaining = capacity.copy()
    tol = REL_EPS * np.maximum(capacity, 1.0)
    while not frozen.all():
        live_entry = ~frozen[job]
        w_live = np.bincount(link, weights=weight * live_entry, minlength=n_links)
        used = w_live > 0
        step_link = np.full(n_links, np.inf)
        step_link[used] = remaining[used] / w_live[used]
        step_cap = np.where(frozen, np.inf, cap - rate)
        step = min(step_link.min(initial=np.inf), step_cap.min(initial=np.inf))
        if not np.isfinite(step):
            rate[~frozen] = np.inf
            break
        step = max(step, 0.0)
        rate[~frozen] += step
        remaining -= step * w_live
        np.maximum(remaining, 0.0, out=remaining)
        saturated = used & (remaining <= tol)
        hit = live_entry & saturated[link]
        newly = np.zeros(n_jobs, dtype=bool)
        newly[job[hit]] = True
        bottleneck |= hit
        newly |= ~frozen & (rate >= cap * (1 - REL_EPS))
        if not newly.any():  # numerical corner: freeze the tightest link's jobs
            tight = live_entry & (link == int(np.argmin(np.where(used, remaining, np.inf))))
            newly[job[tight]] = True
            bottleneck |= tight
        frozen |= newly
    load = np.bincount(link, weights=weight * rate[job], minlength=n_links) if len(job) else np.zeros(n_links)
    return MaxMinResult(rate, bottleneck, load)


def _dense(capacity, job, link, weight, n_jobs, cap) -> MaxMinResult:
    n_links = len(capacity)
    w = np.zeros((n_links, n_jobs))
    np.add.at(w, (link, job), weight)
    on = w > 0
    rate = np.zeros(n_jobs)
    live = np.ones(n_jobs, dtype=bool)
    bott = np.zeros((n_links, n_jobs), dtype=bool)
    remaining = capacity.copy()
    tol = REL_EPS * np.maximum(capacity, 1.0)
    step_link = np.empty(n_links)
    while live.any():
        w_live = w @ live
        used = w_live > 0
        step_link.fill(np.inf)
        np.divide(remaining, w_live, out=step_link, where=used)
        step = min(step_link.min(initial=np.inf), (cap[live] - rate[live]).min(initial=np.inf))
        if not np.isfinite(step):
            rate[live] = np.inf
            break
        step = max(step, 0.0)
        rate[live] += step
        remaining -= step * w_live
        np.maximum(remaining, 0.0, out=remaining)
        saturated = used & (remaining <= tol)
        hit = on[saturated] & live
        newly = hit.any(axis=0) | (live & (rate >= cap * (1 - REL_EPS)))
        if not newly.any():  # numerical corner: freeze the tightest link's jobs
            tight = int(np.argmin(np.where(used, remaining, np.inf)))
            saturated = np.zeros(n_links, dtype=bool)
            saturated[tight] = True
            hit = on[saturated] & live
            newly = hit.any(axis=0)
        bott[saturated] |= hit
        live &= ~newly
    load = (w * rate).sum(axis=1) if n_jobs else np.zeros(n_links)
    return MaxMinResult(rate, bott[link, job], load)
