"""The fluid simulation of the ``tcp`` model: jobs alternating compute and all-reduce on shared links.

Each job repeats three stages: ``PRE`` (the compute that does not overlap the
all-reduce, plus the serial intra-host phase: ``rem`` seconds left), ``COMM``
(the all-reduce: ``rem`` Gbit left per flow) and ``WAIT`` (until ``until``:
the overlapped compute, or a start offset). While transfers overlap, each
link is shared by weighted max-min among the jobs communicating on it
(:func:`fill_rates`), each job capped at its isolated rate; a transfer's
weight grows with the fraction of it already sent (``lead``). Jobs of a
network allocation's higher class (``priority``, 0 first) are served first,
strictly: a lower class gets what they leave at that moment. Rates are
recomputed whenever a transfer starts or ends; time advances from event to
event. The rules are the package's (:mod:`netlab.network.tcp`).

Inputs are named tuples of arrays (:class:`FluidJobs`, :class:`FluidState`,
:class:`FluidLinks`, :class:`FluidRun`); results go to :class:`Starts` and
:class:`LinkStats` in place.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from ...jit import njit  # numba is imported at the first kernel call
from ..jit import JIT

PRE, COMM, WAIT = 0, 1, 2  # a job's stage inside its iteration (FluidState.stage)
NOISE = np.random.default_rng(20261124).standard_normal(4096)  # fixed jitter draws: results are deterministic


class FluidJobs(NamedTuple):
    """Per job (row) of a simulated component."""

    flows: np.ndarray  # (job, link): the job's flows on each link
    cap_gbps: np.ndarray  # per-flow rate alone (its path's bottleneck, the pattern's cap)
    weight: np.ndarray  # share weight (bytes in flight, ``phi``, times the allocation's weight)
    priority: np.ndarray  # int64: the allocation's class, 0 served first
    gbit: np.ndarray  # per flow per iteration
    intra_s: np.ndarray  # serial intra-host phase
    compute_s: np.ndarray
    overlap: np.ndarray
    noise_at: np.ndarray  # int64: where its jitter draws start in ``FluidRun.noise``


class FluidState(NamedTuple):
    """Per job, where it is; updated in place as the simulation runs."""

    stage: np.ndarray  # int64: PRE, COMM or WAIT
    rem: np.ndarray  # PRE: seconds left; COMM: Gbit left per flow
    until: np.ndarray  # WAIT: until this time
    it_start: np.ndarray  # when its current iteration began


class FluidLinks(NamedTuple):
    """Per link of the component."""

    capacity_gbps: np.ndarray
    mark_gbit: np.ndarray  # a queue above this is marked (ECN threshold)
    buffer_gbit: np.ndarray  # the queue holds at most this


def lead_per_job(lead: float, own_queue: np.ndarray) -> np.ndarray:
    """Each job's leader advantage: ``lead``, but none for a job in a queue of its own (a network allocation's
    class, as the testbed's per-job HTB class), where no other job's flows share its FIFO to be out-competed.
    A job in a queue of its own against jobs in the shared one: it has none, they keep theirs (an
    approximation: the shared jobs' advantage is over each other only)."""
    return np.where(np.asarray(own_queue, dtype=np.bool_), 0.0, float(lead))


class FluidRun(NamedTuple):
    """How far and with what noise to run."""

    jitter: float  # relative std of compute per iteration
    lead: np.ndarray  # per job, leader advantage: weight x (1 + lead x fraction sent) (see lead_per_job)
    noise: np.ndarray  # the table of normal draws jitter reads
    stop_job: int  # run until this job (-1: every job) has recorded ...
    stop_starts: int  # ... this many iteration starts
    max_events: int  # or this many events


class Starts(NamedTuple):
    """Iteration start times per job: ``time_s[i, :count[i]]`` (at most ``time_s.shape[1]`` kept)."""

    time_s: np.ndarray
    count: np.ndarray  # int64


class LinkStats(NamedTuple):
    """Per link, integrated over the simulated time."""

    gbit: np.ndarray  # Gbit carried
    over_gbit: np.ndarray  # demand above capacity
    marked_s: np.ndarray  # seconds with the queue above the mark


def link_stats(m: int) -> LinkStats:
    return LinkStats(np.zeros(m), np.zeros(m), np.zeros(m))


class RateWork(NamedTuple):
    """Scratch arrays of :func:`fill_rates` (per job: ``live``, ``newly``, ``order``, ``own_level``; per link:
    ``resid``, ``weight_sum``, ``level``), made once per simulation by :func:`rate_work`."""

    live: np.ndarray
    resid: np.ndarray
    weight_sum: np.ndarray
    newly: np.ndarray  # int64: the jobs a round froze, ascending
    order: np.ndarray  # int64: the live jobs, ascending
    own_level: np.ndarray  # a live job's cap over its weight
    level: np.ndarray  # a link's residual over its weight sum


@njit(**JIT)
def rate_work(n: int, m: int) -> RateWork:
    return RateWork(np.zeros(n, np.bool_), np.zeros(m), np.zeros(m), np.zeros(n, np.int64), np.zeros(n, np.int64),
                    np.zeros(n), np.zeros(m))


@njit(**JIT)
def job_links(flows):
    """Each job's links (its non-zero flows), in link order, as (``ptr``, ``lk``, ``fw``): job ``i``'s are
    ``lk[ptr[i]:ptr[i + 1]]`` with ``fw`` flows on each. A job crosses a few of a component's links: filling over
    these is what filling over the dense (job, link) table would be, with the same sums in the same order."""
    n, m = flows.shape
    ptr = np.zeros(n + 1, np.int64)
    for i in range(n):
        ptr[i + 1] = ptr[i] + np.count_nonzero(flows[i])
    lk, fw = np.empty(ptr[n], np.int64), np.empty(ptr[n])
    for i in range(n):
        x = ptr[i]
        for g in range(m):
            if flows[i, g] > 0.0:
                lk[x], fw[x] = g, flows[i, g]
                x += 1
    return ptr, lk, fw


@njit(**JIT)
def fill_rates(ptr, lk, fw, cap_link, cap_job, weight, priority, active, rate, work: RateWork):
    """Weighted max-min per-flow rates of the ``active`` jobs (``rate_i = weight_i x level``), by progressive
    filling, into ``rate``, class by class (``priority`` 0 first, each on what the classes before it left).
    Each job's links are (``ptr``, ``lk``, ``fw``) (:func:`job_links`). ``work`` holds scratch arrays (no
    allocation per call)."""
    n, m = cap_job.shape[0], cap_link.shape[0]
    live, resid = work.live, work.resid
    for i in range(n):
        rate[i] = 0.0
    for link in range(m):
        resid[link] = cap_link[link]
    served = -1  # the classes up to this one are filled
    while True:
        c = -1
        for i in range(n):
            if active[i] and priority[i] > served and (c < 0 or priority[i] < c):
                c = priority[i]
        if c < 0:
            break
        for i in range(n):
            live[i] = active[i] and priority[i] == c
        _fill_class(ptr, lk, fw, cap_job, weight, rate, live, resid, work.weight_sum, work.newly, work.order,
                    work.own_level, work.level)
        served = c


@njit(**JIT)
def _fill_class(ptr, lk, fw, cap_job, weight, rate, live, resid, s, newly, order, own, level):
    """Progressive filling of the ``live`` jobs on the residual capacities ``resid`` (both updated); each
    link's weight sum is added over the live jobs in index order.

    Each round passes over the jobs still live only (``order``, kept ascending as jobs freeze), not over every
    job: in a core most jobs compute while a few communicate. A job's level alone (``own``) is divided once per
    fill and a link's (``level``) once per round: the same divisions and sums in the same order as over every
    job, so the same rates to the bit."""
    m = resid.shape[0]
    na = 0
    for i in range(cap_job.shape[0]):
        if live[i]:
            order[na] = i
            own[i] = cap_job[i] / weight[i]
            na += 1
    for _ in range(cap_job.shape[0]):
        best = np.inf
        for a in range(na):
            if own[order[a]] < best:
                best = own[order[a]]
        for link in range(m):
            s[link] = 0.0
        for a in range(na):
            i = order[a]
            for x in range(ptr[i], ptr[i + 1]):
                s[lk[x]] += fw[x] * weight[i]
        for link in range(m):
            level[link] = resid[link] / s[link] if s[link] > 0.0 else np.inf  # no live flow: limits nobody
            if level[link] < best:
                best = level[link]
        if best == np.inf:
            break
        thr = best * (1.0 + 1e-12)
        frozen = still = 0
        for a in range(na):  # decided on this round's sums, then applied
            i = order[a]
            hit = own[i] <= thr
            if not hit:
                for x in range(ptr[i], ptr[i + 1]):
                    if level[lk[x]] <= thr:
                        hit = True
                        break
            if hit:
                rate[i] = min(weight[i] * best, cap_job[i])
                newly[frozen] = i
                frozen += 1
            else:
                order[still] = i
                still += 1
        if frozen == 0:
            break
        for f in range(frozen):  # ascending, as they were met
            i = newly[f]
            live[i] = False
            for x in range(ptr[i], ptr[i + 1]):
                resid[lk[x]] = max(resid[lk[x]] - fw[x] * rate[i], 0.0)
        na = still


@njit(**JIT)
def lead_weights(stage, rem, gbit, phi, lead, active, weight):
    """Which jobs communicate (``active``) and their share weights: ``phi x (1 + lead x fraction sent)`` while
    in flight (:func:`simulate`'s docstring). Shared with the cores' kernel (:mod:`~.core_fluid`)."""
    for i in range(stage.shape[0]):
        active[i] = stage[i] == COMM
        weight[i] = phi[i]
        if active[i] and lead[i] > 0.0 and gbit[i] > 0.0:
            weight[i] = phi[i] * (1.0 + lead[i] * max(1.0 - rem[i] / gbit[i], 0.0))


@njit(**JIT)
def next_event_s(stage, rem, rate, until, t):
    """Seconds to the next stage change of any job at the current rates (inf: none)."""
    dt = np.inf
    for i in range(stage.shape[0]):
        if stage[i] == PRE:
            d = rem[i]
        elif stage[i] == COMM:
            d = rem[i] / rate[i] if rate[i] > 0.0 else np.inf
        else:
            d = until[i] - t
        if d < dt:
            dt = d
    return dt


@njit(**JIT)
def advance(t, dt, stage, rem, rate, gbit, cur_compute, compute_s, intra_s, overlap, it_start, until, jitter,
            noise, noise_at, starts, n_starts):
    """Every job ``dt`` on, to time ``t``: stage changes, each new iteration's compute (jittered) and start
    recorded (the first ``starts.shape[1]``); True if the set of communicating jobs changed (rates are stale)."""
    keep = starts.shape[1]
    dirty = False
    for i in range(stage.shape[0]):
        if stage[i] == PRE:
            rem[i] -= dt
            if rem[i] <= 1e-12 * (1.0 + cur_compute[i] + intra_s[i]):
                if gbit[i] > 0.0:
                    stage[i] = COMM
                    rem[i] = gbit[i]
                    dirty = True
                else:
                    stage[i] = WAIT
                    comm = t - it_start[i] - (1.0 - overlap[i]) * cur_compute[i]
                    until[i] = max(t, it_start[i] + cur_compute[i] + comm
                                   - overlap[i] * min(cur_compute[i], comm))
        elif stage[i] == COMM:
            rem[i] -= rate[i] * dt
            if rem[i] <= 1e-9 * gbit[i]:
                # comm = intra + network time of this iteration; the overlapped compute may still run
                comm = t - it_start[i] - (1.0 - overlap[i]) * cur_compute[i]
                stage[i] = WAIT
                until[i] = max(t, it_start[i] + cur_compute[i] + comm - overlap[i] * min(cur_compute[i], comm))
                dirty = True
        if stage[i] == WAIT and until[i] - t <= 1e-12 * (1.0 + t):
            it_start[i] = t
            stage[i] = PRE
            k = n_starts[i]
            c = compute_s[i]
            if jitter > 0.0:
                c = max(0.0, c * (1.0 + jitter * noise[(noise_at[i] + k) % noise.shape[0]]))
            cur_compute[i] = c
            rem[i] = (1.0 - overlap[i]) * c + intra_s[i]
            if k < keep:
                starts[i, k] = t
            n_starts[i] = k + 1
    return dirty


@njit(**JIT)
def simulate(jobs: FluidJobs, st: FluidState, links: FluidLinks, run: FluidRun, starts: Starts,
             stats: LinkStats) -> float:
    """Run the fluid from ``st`` (time 0) until ``run.stop_job`` (or, if -1, every job) has recorded
    ``run.stop_starts`` iteration starts, or ``run.max_events`` events; the time reached.

    A transfer's weight is ``weight x (1 + lead x fraction sent)``, evaluated whenever the set of
    communicating jobs changes: a flow already in flight holds a larger window than one that just joined.
    Each link's fluid queue grows at the rate communicating jobs would send at their isolated rates beyond
    the capacity (up to ``buffer_gbit``) and drains at the unused capacity; ``stats.marked_s`` counts the
    time it holds more than ``mark_gbit``.
    """
    A, cap_job, phi, gbit = jobs.flows, jobs.cap_gbps, jobs.weight, jobs.gbit
    intra_s, compute_s, overlap = jobs.intra_s, jobs.compute_s, jobs.overlap
    stage, rem, until, it_start = st.stage, st.rem, st.until, st.it_start
    cap_link, q_thr, q_buf = links.capacity_gbps, links.mark_gbit, links.buffer_gbit
    n, m = A.shape
    rate = np.zeros(n)
    active = np.zeros(n, np.bool_)
    work = rate_work(n, m)
    ptr, lk, fw = job_links(A)  # the flows do not change while it runs
    queue = np.zeros(m)
    cur_compute = compute_s.copy()
    weight = phi.copy()
    n_starts = starts.count
    for i in range(n):
        n_starts[i] = 0
    t = 0.0
    dirty = True
    for _ in range(run.max_events):
        if dirty:
            lead_weights(stage, rem, gbit, phi, run.lead, active, weight)
            fill_rates(ptr, lk, fw, cap_link, cap_job, weight, jobs.priority, active, rate, work)
            dirty = False
        dt = next_event_s(stage, rem, rate, until, t)
        if dt == np.inf:
            break
        dt = max(dt, 0.0)
        if dt > 0.0:
            for link in range(m):
                served, offered = 0.0, 0.0
                for i in range(n):
                    if active[i] and A[i, link] > 0.0:
                        served += A[i, link] * rate[i]
                        offered += A[i, link] * cap_job[i]
                stats.gbit[link] += served * dt
                excess = offered - cap_link[link]
                if excess > 0.0:
                    stats.over_gbit[link] += excess * dt
                slope = excess if excess > 0.0 else cap_link[link] - served
                if excess <= 0.0:
                    slope = -slope
                q0 = queue[link]
                q1 = min(max(q0 + slope * dt, 0.0), q_buf[link])
                # seconds of this interval with the (linear, clipped) queue above the threshold
                if q0 > q_thr[link] and q1 > q_thr[link]:
                    stats.marked_s[link] += dt
                elif slope > 0.0 and q1 > q_thr[link]:
                    stats.marked_s[link] += dt - (q_thr[link] - q0) / slope
                elif slope < 0.0 and q0 > q_thr[link]:
                    stats.marked_s[link] += (q0 - q_thr[link]) / -slope
                queue[link] = q1
        t += dt
        if advance(t, dt, stage, rem, rate, gbit, cur_compute, compute_s, intra_s, overlap, it_start, until,
                   run.jitter, run.noise, jobs.noise_at, starts.time_s, n_starts):
            dirty = True
        if run.stop_job >= 0:
            done = n_starts[run.stop_job] >= run.stop_starts
        else:
            done = True
            for i in range(n):
                if n_starts[i] < run.stop_starts:
                    done = False
                    break
        if done:
            break
    return t
