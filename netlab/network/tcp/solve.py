"""One ``tcp`` solve of a set of jobs: split into components, each solved its way.

Components joined through binding links (:mod:`~netlab.network.tcp.components`)
of at most ``max_exact_jobs`` contended jobs are simulated exactly
(:func:`simulate_component`, the fluid of :mod:`~netlab.network.tcp.fluid`,
from each job's phase state); larger ones, and those whose simulation does not
finish within ``max_events``, by the mean field
(:func:`~netlab.network.tcp.mean_field.solve_large`); a job on no binding link
runs as alone. :func:`solve_unless_exact` does it all in one compiled call when
no component is for the exact simulation (99% of Philly's re-solves);
:func:`solve_component` otherwise steps through the components in Python.
"""

from __future__ import annotations

import math
from enum import IntEnum

import numpy as np

from ...jit import njit  # numba is imported at the first kernel call
from ..jit import JIT
from ..slots import Entries, Jobs, Rows
from .components import (Alone, Components, Solved, alone, binding_components, comm_from_period, comm_from_periods,
                         share_weights)
from .cores import refine_cores
from .fluid import COMM, NOISE, FluidJobs, FluidLinks, FluidRun, FluidState, Starts, lead_per_job, link_stats, simulate
from .mean_field import MeanFieldCounts, solve_large
from .params import TcpParams
from .state import position, window_periods


class SolveCode(IntEnum):
    """What :func:`solve_unless_exact` (and the incremental solve) did."""

    EXACT_NEEDED = 0  # nothing yet: a component is small enough for the exact simulation (Python's part)
    ALONE = 1  # solved: no job contended
    MEAN_FIELD = 2  # solved: the mean field ran
    NOTHING = 3  # incremental: the change reached no running job


@njit(**JIT)
def solve_rest(now_s, e: Entries, cap_link, comps: Components, jobs: Jobs, al: Alone, alpha, t: Rows, rows, it,
               overload, queue, counts: MeanFieldCounts, loads=True):
    """After the exact components: the large ones (:func:`~netlab.network.tcp.mean_field.solve_large`), then
    every job's communication s and each link's time-averaged load, and new jobs on no binding link start
    their iterations at their phase. (comm, load, whether the mean field ran). ``loads`` False: no loads (an
    empty array), for a caller that keeps them per row (the incremental re-solve: ``write_back`` reads the
    rows' times, not these sums, and the pass over every entry with a division was a few percent of it)."""
    n = jobs.flow_bytes.shape[0]
    mean_field = comps.large.any()
    if mean_field:
        solve_large(now_s, e, cap_link, comps, jobs, al, alpha, t, rows, it, overload, queue, counts)
    comm = al.comm_s.copy()
    for i in range(n):
        if comps.contended[i]:
            comm[i] = comm_from_period(it[i], jobs.compute_s[i], jobs.overlap[i], al.comm_s[i])
        elif np.isnan(t.anchor_s[rows[i]]):
            t.anchor_s[rows[i]], t.period_s[rows[i]], t.anchor_phase[rows[i]] = jobs.phase[i] * it[i], it[i], \
                jobs.phase[i]
    # Time-averaged load: every job moves its Gbit per flow once per iteration, whatever the sharing.
    load = np.zeros(cap_link.shape[0] if loads else 0)
    for x in range(e.job.shape[0] if loads else 0):
        load[e.link[x]] += e.weight[x] * al.gbit[e.job[x]] / max(it[e.job[x]], 1e-300)
    return comm, load, mean_field


@njit(**JIT)
def solve_unless_exact(now_s, e: Entries, cap_link, jobs: Jobs, t: Rows, rows, max_exact, alpha,
                       counts: MeanFieldCounts, bound=False):
    """The whole solve in one compiled call when no component is for the exact simulation: (ALONE or
    MEAN_FIELD, the answer); else (EXACT_NEEDED, empty arrays) before solving anything. Why: on Philly nearly
    every re-solve is one large component, and Python steps between compiled ones cost a sixth of it.
    ``bound``: every link of ``e`` binds, as the caller found (the incremental re-solve's binding part), so the
    test is not taken again, and the answer has no per-link loads (:func:`solve_rest`'s ``loads``)."""
    n, m = jobs.flow_bytes.shape[0], cap_link.shape[0]
    al = alone(jobs)
    comps = binding_components(e, cap_link, al.cap_gbps, max_exact, bound)
    for i in range(n):
        if comps.contended[i] and not comps.large[i]:
            none = np.empty(0)
            return SolveCode.EXACT_NEEDED, Solved(none, none, none, none, none)
    it, overload, queue = al.iter_s.copy(), np.zeros(m), np.zeros(m)
    comm, load, mean_field = solve_rest(now_s, e, cap_link, comps, jobs, al, alpha, t, rows, it, overload, queue,
                                        counts, not bound)
    return SolveCode.MEAN_FIELD if mean_field else SolveCode.ALONE, Solved(it, comm, load, overload, queue)


def solve_component(now_s: float, e: Entries, cap_link: np.ndarray, jobs: Jobs, t: Rows, rows: np.ndarray,
                    p: TcpParams, counts: MeanFieldCounts,
                    blind: np.ndarray | None = None, cache=None) -> tuple[Solved, int, bool]:
    """The solve with exact components: (answer, components simulated exactly, whether the mean field ran).

    ``blind`` (one bool per job, if given) is set to whether the job's time came from the mean field, which
    ignores phase (a contended job of a component too large for the exact simulation, or whose simulation
    did not finish), and not from a phase-aware core after it (``phase_cores``, :mod:`~.cores`).

    The first steps are those of :func:`solve_unless_exact` again, in Python around the exact simulations
    (1% of Philly's re-solves, so computing them twice costs nothing).
    """
    n, m = len(jobs.flow_bytes), len(cap_link)
    job, link, weight = e
    al = alone(jobs)
    comps = binding_components(e, cap_link, al.cap_gbps, p.max_exact_jobs)
    label, large = comps.label, comps.large
    it, overload, queue = al.iter_s.copy(), np.zeros(m), np.zeros(m)
    small = comps.contended & ~large
    exact = 0
    for comp in np.unique(label[small]) if small.any() else ():
        members = np.flatnonzero(label == comp)
        sel = (label[job] == comp) & comps.binding[link]
        local = -np.ones(n, dtype=np.int64)
        local[members] = np.arange(len(members))
        blinks, bl = np.unique(link[sel], return_inverse=True)
        flows = np.zeros((len(members), len(blinks)))
        np.add.at(flows, (local[job[sel]], bl), weight[sel])
        res = simulate_component(now_s, members, flows, cap_link[blinks], jobs, al, t, rows, p)
        if res is None:  # the simulation did not finish: solve it with the others by the fixed point
            large[members] = True
            continue
        exact += 1
        p_it, anchor, l_over, l_queue = res
        it[members] = p_it
        overload[blinks] += l_over
        queue[blinks] = l_queue
        r = rows[members]
        t.anchor_s[r], t.period_s[r], t.anchor_phase[r] = anchor, p_it, jobs.phase[members]
    # (``loads`` given, not left to its default: called from Python with a default omitted, numba's dispatcher
    # missed the compiled overload on every call and typed each argument again in Python, ~50x the call itself)
    comm, load, mean_field = solve_rest(now_s, e, cap_link, comps, jobs, al, p.alpha, t, rows, it, overload, queue,
                                        counts, True)
    cored = np.empty(0, np.int64)
    if mean_field and p.phase_cores:
        cored = refine_cores(now_s, e, cap_link, comps, jobs, al, t, rows, it, p, cache, counts)
        counts.core_jobs[0] += len(cored)
        comm_from_periods(cored, it, jobs.compute_s, jobs.overlap, al.comm_s, comm)
        if len(cored):
            # (the same sums in the same order as np.add.at, which was a twentieth of a full-Philly run with cores)
            load = np.bincount(link, weight * (al.gbit[job] / np.maximum(it[job], 1e-300)), m)
    elif cache is not None and p.phase_cores:  # no core: none of these jobs sits in a core's pattern now
        cache.settled(jobs.job_id.tolist(), [])
    if blind is not None:
        blind[:] = comps.contended & large
        blind[cored] = False
    return Solved(it, comm, load, overload, queue), exact, bool(mean_field)


def simulate_component(now_s, members, flows, cap_link, jobs: Jobs, al: Alone, t: Rows, rows, p: TcpParams):
    """The fluid of one small component from its jobs' phase state, ``horizon`` iterations on: (period,
    anchor per job, overload and queue_frac per link), or None if it did not finish in ``max_events``."""
    k = len(members)
    stage = np.zeros(k, np.int64)
    rem, until, it_start = np.zeros(k), np.zeros(k), np.zeros(k)
    for a, i in enumerate(members):
        row = rows[i]
        if np.isnan(t.anchor_s[row]) or t.anchor_phase[row] != jobs.phase[i]:
            anchor, period = jobs.phase[i] * al.iter_s[i], al.iter_s[i]
        else:
            anchor, period = t.anchor_s[row], t.period_s[row]
        # the all-reduce stretched by the same factor as the period (its last solve)
        net_s = al.net_s[i] + max(period - al.iter_s[i], 0.0)
        s, r, u, s0 = position(now_s, anchor, period, al.pre_s[i], net_s)
        stage[a], until[a], it_start[a] = s, u, s0
        rem[a] = r * al.gbit[i] if s == COMM else r
    # every start of every job is kept: the fastest makes about (slowest / fastest period) x horizon of them
    ratio = al.iter_s[members].max() / max(al.iter_s[members].min(), 1e-300)
    starts = Starts(np.zeros((k, int(min(math.ceil((p.horizon + 1) * ratio) + 2, 64 * (p.horizon + 1))))),
                    np.zeros(k, np.int64))
    stats = link_stats(len(cap_link))
    phi = share_weights(al.gbit[members], p.alpha) * jobs.share[members]  # bytes in flight x allocation weight
    fjobs = FluidJobs(flows, al.cap_gbps[members].copy(), phi, jobs.priority[members].copy(), al.gbit[members].copy(),
                      jobs.intra_s[members].copy(), jobs.compute_s[members].copy(), jobs.overlap[members].copy(),
                      (jobs.job_id[members] * 977) % len(NOISE))
    links = FluidLinks(cap_link, cap_link * p.ecn_threshold_us * 1e-6, cap_link * p.buffer_us * 1e-6)
    run = FluidRun(p.jitter, lead_per_job(p.lead, jobs.own_queue[members]), NOISE, -1, p.horizon + 1, p.max_events)
    t_end = simulate(fjobs, FluidState(stage, rem, until, it_start), links, run, starts, stats)
    if starts.count.min() < 3 or not t_end > 0:
        return None
    return (*window_periods(starts.time_s, starts.count, p.warmup, now_s), stats.over_gbit / t_end,
            stats.marked_s / t_end)
