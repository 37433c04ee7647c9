"""The fluid of one phase core (:mod:`~.cores`), set-up to periods in one compiled call.

Why a kernel of its own: a core is simulated after every mean-field re-solve that changes it, thousands of
times in a Philly run, and a core of 30-60 jobs whose periods differ tenfold takes tens of thousands of events.
:func:`~.fluid.simulate` pays, at every event, for what a core never uses: per-link queue and overload
statistics (jobs x links) and Python around it (each job's position, the window of periods). Here, for a core
(one class: ``refine_cores`` leaves classes to the mean field), the fluid's own per-event steps
(:func:`~.fluid.lead_weights`, :func:`~.fluid.fill_rates` over each job's own links, :func:`~.fluid.advance`)
run with no statistics, from the rows' phase state to the periods and anchors, in one compiled call.

So a core's periods are those :func:`~.solve.simulate_component` computes (``tests/test_core_fluid.py`` checks
them equal to the bit).
"""

from __future__ import annotations

import math

import numpy as np

from ...jit import njit  # numba is imported at the first kernel call
from ..jit import JIT
from ..slots import Jobs, Rows
from .components import Alone, share_weights
from .fluid import (COMM, NOISE, advance, fill_rates, job_links, lead_per_job, lead_weights, next_event_s,
                    rate_work)
from .mean_field import MeanFieldCounts
from .params import TcpParams
from .state import position, window_periods


def simulate_core(now_s: float, members: np.ndarray, flows: np.ndarray, cap_link: np.ndarray, jobs: Jobs,
                  al: Alone, t: Rows, rows: np.ndarray, p: TcpParams, counts: MeanFieldCounts | None = None):
    """(period, anchor) per job of the core ``members`` (local indices, ``flows`` theirs on ``cap_link``), from
    their rows' phase state, ``p.horizon`` iterations on; None if the simulation did not finish (a job with
    fewer than three starts within ``p.max_events`` events). ``counts``, if given, counts the events."""
    r = rows[members]
    phi = share_weights(al.gbit[members], p.alpha) * jobs.share[members]
    ok, period, anchor, events = core_periods(
        now_s, np.ascontiguousarray(flows, dtype=np.float64), np.ascontiguousarray(cap_link, dtype=np.float64),
        t.anchor_s[r], t.period_s[r], t.anchor_phase[r], jobs.phase[members], al.pre_s[members], al.net_s[members],
        al.iter_s[members], al.gbit[members], al.cap_gbps[members], phi, jobs.intra_s[members],
        jobs.compute_s[members], jobs.overlap[members], (jobs.job_id[members] * 977) % len(NOISE),
        lead_per_job(p.lead, jobs.own_queue[members]), p.jitter, NOISE, p.horizon, p.warmup, p.max_events)
    if counts is not None:
        counts.core_events[0] += events
    return (period, anchor) if ok else None


@njit(**JIT)
def core_periods(now_s, flows, cap_link, anchor_s, period_s, anchor_phase, phase, pre_s, net_s, iter_s, gbit,
                 cap_job, phi, intra_s, compute_s, overlap, noise_at, lead, jitter, noise, horizon, warmup,
                 max_events):
    """(finished, period, anchor, events): :func:`simulate_core`'s work, compiled."""
    starts, count, t_end, events = core_starts(now_s, flows, cap_link, anchor_s, period_s, anchor_phase, phase, pre_s,
                                               net_s, iter_s, gbit, cap_job, phi, intra_s, compute_s, overlap,
                                               noise_at, lead, jitter, noise, horizon, max_events)
    if count.min() < 3 or not t_end > 0:
        return False, np.empty(0), np.empty(0), events
    period, anchor = window_periods(starts, count, warmup, now_s)
    return True, period, anchor, events


@njit(**JIT)
def core_starts(now_s, flows, cap_link, anchor_s, period_s, anchor_phase, phase, pre_s, net_s, iter_s, gbit, cap_job,
                phi, intra_s, compute_s, overlap, noise_at, lead, jitter, noise, horizon, max_events):
    """(starts, count, the time reached, events): every job's iteration starts (``starts[i, :count[i]]``, at
    most its width kept) over ``horizon`` iterations of the core from its jobs' phase state. Why apart from
    :func:`core_periods`: ``bench_phase_cores.py --part settle`` reads the starts themselves."""
    k, m = flows.shape
    stage = np.zeros(k, np.int64)
    rem, until, it_start = np.zeros(k), np.zeros(k), np.zeros(k)
    for a in range(k):
        if np.isnan(anchor_s[a]) or anchor_phase[a] != phase[a]:
            anchor, period = phase[a] * iter_s[a], iter_s[a]
        else:
            anchor, period = anchor_s[a], period_s[a]
        # the all-reduce stretched by the same factor as the period (its last solve)
        s, r, u, s0 = position(now_s, anchor, period, pre_s[a], net_s[a] + max(period - iter_s[a], 0.0))
        stage[a], until[a], it_start[a] = s, u, s0
        rem[a] = r * gbit[a] if s == COMM else r
    # every start of every job is kept: the fastest makes about (slowest / fastest period) x horizon of them
    ratio = iter_s.max() / max(iter_s.min(), 1e-300)
    keep = int(min(math.ceil((horizon + 1) * ratio) + 2, 64 * (horizon + 1)))
    starts, count = np.zeros((k, keep)), np.zeros(k, np.int64)
    ptr, lk, fw = job_links(flows)  # each job's own links
    t_end, events = _run(ptr, lk, fw, cap_link, cap_job, phi, gbit, intra_s, compute_s, overlap, noise_at, lead,
                         jitter, noise, stage, rem, until, it_start, starts, count, horizon + 1, max_events)
    return starts, count, t_end, events


@njit(**JIT)
def _run(ptr, lk, fw, cap_link, cap_job, phi, gbit, intra_s, compute_s, overlap, noise_at, lead, jitter, noise,
         stage, rem, until, it_start, starts, count, stop_starts, max_events):
    """:func:`~.fluid.simulate`'s event loop for one class, without link statistics: until every job has
    ``stop_starts`` starts or ``max_events`` events; (the time reached, the events run)."""
    n, m = cap_job.shape[0], cap_link.shape[0]
    rate, weight = np.zeros(n), phi.copy()
    active, one_class = np.zeros(n, np.bool_), np.zeros(n, np.int64)
    work = rate_work(n, m)
    cur_compute = compute_s.copy()
    t = 0.0
    dirty = True
    events = 0
    for _ in range(max_events):
        events += 1
        if dirty:
            lead_weights(stage, rem, gbit, phi, lead, active, weight)
            fill_rates(ptr, lk, fw, cap_link, cap_job, weight, one_class, active, rate, work)
            dirty = False
        dt = next_event_s(stage, rem, rate, until, t)
        if dt == np.inf:
            break
        dt = max(dt, 0.0)
        t += dt
        if advance(t, dt, stage, rem, rate, gbit, cur_compute, compute_s, intra_s, overlap, it_start, until, jitter,
                   noise, noise_at, starts, count):
            dirty = True
        done = True
        for i in range(n):
            if count[i] < stop_starts:
                done = False
                break
        if done:
            break
    return t, events
