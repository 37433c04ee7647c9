"""``tcp``: TCP-like, work-conserving link sharing with per-job phase state carried across events.

Why: the testbed (HTB shaping, FIFO queues, TCP) does not share a link the
way ``fair`` assumes. Jobs alternate compute and all-reduce, so a link is
shared only while transfers overlap and a job that is computing leaves the
link to the others; and TCP over one FIFO queue divides the link by bytes in
flight, not equally: a long transfer keeps more of it than a short one. Time
shifts (CASSINI) matter only if jobs keep their relative phase from one
event to the next. This model simulates exactly that, as a fluid:

* every job repeats ``pre`` (the compute that does not overlap the
  all-reduce, plus the serial intra-host phase), then the all-reduce
  (``flow_bytes`` per flow), then waits for the overlapped compute, so that
  alone it runs at :meth:`CommDemand.iter_s` of its isolated rate;
* while transfers overlap, each link is shared by weighted max-min among the
  jobs *communicating* on it (progressive filling), weight proportional to
  the job's flow bytes (``alpha = 1``; ``alpha = 0`` is max-min): transfers
  that overlap progress at the same fraction of their size;
* each job's rate is capped by its isolated rate (its path's own bottleneck
  and the pattern's cap), so only *binding* links, where every job sending
  at its isolated rate at once would exceed the capacity, couple jobs;
* a transfer already in flight holds more of the link than one that just
  joined (TCP: its window has grown with the bytes it has sent, a newcomer
  starts small): its weight is ``phi x (1 + lead x fraction sent)``,
  evaluated whenever a transfer starts or ends. Two jobs in step then push
  each other apart into taking turns, and a slightly faster job that catches
  up with a slower one is held back behind it, locking to its period: what
  the testbed's long runs show (``benchmarks/results/fidelity.json``;
  ``lead = 0`` is plain weighted sharing, under which offsets neither grow
  nor shrink and such jobs drift through each other);
* compute time jitters per iteration by ``jitter`` (relative standard
  deviation; a fixed table of normal draws keeps results deterministic), so
  unstable alignments (exactly in step) can drift apart as on real hosts;
* every running job keeps an *anchor*, the time one of its iterations
  started, and its period: at each re-solve its position inside its
  iteration is taken from there, the component is simulated forward from
  those positions for ``horizon`` iterations, the mean period after
  ``warmup`` becomes the job's iteration time, and the anchor moves to the
  last simulated iteration start. A shift set by a policy (``phase``)
  re-anchors the job; jobs on other links are not re-solved, so their
  relative phases persist.

Components with more than ``max_exact_jobs`` jobs, or whose simulation does
not finish within ``max_events``, are solved by a mean-field fixed point
instead (:func:`_mean_field`): each job, while communicating, meets the others
on every binding link with the probability that they communicate too (random
relative phases, the state jobs of unequal periods drift into), and the link
is filled to one level, a competitor held back elsewhere leaving its surplus
to the others (water-filling). On the full Philly trace nearly every re-solve
is of one component of ~110 jobs, about 40,000 times; simulating each for tens
of iterations would take minutes, the fixed point takes about 120
microseconds (a whole re-solve about 200). ``benchmarks/bench_mean_field.py``
measures how far the two are apart on the components Philly produces, and how
often the fixed point converges.

Queueing (ECN proxy): on each binding link a fluid queue grows at the rate
communicating jobs would send at their isolated rates beyond the capacity
(up to ``buffer_us`` of the link's rate) and drains at the unused capacity;
``queue_frac`` is the fraction of time it holds more than ``ecn_threshold_us``
worth of bytes, the time a DCTCP-style switch would mark. Today's
demand-above-capacity ``overload_gbps`` is reported beside it.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from .model import GBIT, NETWORKS, NetSolution, NetworkModel, _incidence

# Compiled with numpy's error model: every division here is guarded, and the check numba otherwise adds to
# each one (to raise ZeroDivisionError) costs about 4% of the mean field's time. Results are bit-identical.
_JIT = dict(cache=True, nogil=True, error_model="numpy")
JITTER = 0.0125  # relative std of compute per iteration: median compute CV of the one-job testbed runs (fidelity.json)
ALPHA = 1.0  # share weight = flow bytes ** ALPHA
LEAD = 2.0  # a transfer's weight grows by LEAD x the fraction of it already sent (leader advantage; calibrated)
HORIZON = 24  # iterations simulated per job and re-solve ...
WARMUP = 12  # ... the first half of which are left out of the mean period: jobs started in step take ~5-8
#              iterations to separate into turns, and a period averaged over that transient is off by ~2%
MAX_EXACT_JOBS = 8  # larger components use the mean-field fixed point
MAX_EVENTS = 20_000  # per simulation: beyond it, the mean-field fixed point
MF_MAX_ITER = 60  # mean-field iterations at most ...
MF_TOL = 1e-3  # ... until no rate moves by more than this (relative)
MF_LIVE_MARGIN = 1.2  # links where every job's level is above this x its rate are left out between full passes
ROW_TABLE = 1 << 22  # job ids below this find their state row in an array (the simulator's 0 .. jobs - 1; <= 32 MB)
ECN_THRESHOLD_US = 50.0  # queue above this many microseconds of the link's rate counts as marking
DRAWS = 1  # scenario predictions: jitter draws averaged
BUFFER_US = 2_000.0  # the queue holds at most this many microseconds of the link's rate
_NOISE = np.random.default_rng(20261124).standard_normal(4096)  # fixed draws: results are deterministic

# Columns of the per-link statistics a simulation integrates (over its simulated time).
L_GBIT, L_OVER, L_ABOVE = 0, 1, 2  # Gbit carried is integrated for callers of _simulate; solves use the others


@njit(**_JIT)
def _rates(A, cap_link, cap_job, phi, active, rate, live, resid, s, newly):  # pragma: no cover  (compiled)
    """Weighted max-min per-flow rates of the ``active`` jobs (rate_i = phi_i x level), by progressive filling.

    ``A[i, l]``: job i's flows on link l. Work arrays are passed in to avoid allocations.
    """
    n, m = A.shape
    for i in range(n):
        rate[i] = 0.0
        live[i] = active[i]
        newly[i] = False
    for link in range(m):
        resid[link] = cap_link[link]
    for _ in range(n):
        best = np.inf
        for i in range(n):
            if live[i] and cap_job[i] / phi[i] < best:
                best = cap_job[i] / phi[i]
        for link in range(m):
            s[link] = 0.0
            for i in range(n):
                if live[i]:
                    s[link] += A[i, link] * phi[i]
            if s[link] > 0.0 and resid[link] / s[link] < best:
                best = resid[link] / s[link]
        if best == np.inf:
            break
        thr = best * (1.0 + 1e-12)
        frozen = 0
        for i in range(n):
            if not live[i]:
                continue
            hit = cap_job[i] / phi[i] <= thr
            if not hit:
                for link in range(m):
                    if A[i, link] > 0.0 and resid[link] / s[link] <= thr:
                        hit = True
                        break
            if hit:
                rate[i] = min(phi[i] * best, cap_job[i])
                newly[i] = True
                frozen += 1
        if frozen == 0:
            break
        for i in range(n):
            if newly[i]:
                newly[i] = False
                live[i] = False
                for link in range(m):
                    resid[link] = max(resid[link] - A[i, link] * rate[i], 0.0)


@njit(**_JIT)
def _simulate(A, cap_link, cap_job, phi, gbit, intra_s, compute_s, overlap, phase, rem, until, it_start, jitter,
              lead, noise, noise_at, stop_job, stop_starts, max_events, q_thr, q_buf, starts, n_starts,
              link_stats):  # pragma: no cover  (compiled)
    """Run the fluid from the given state (time 0) until ``stop_job`` (or, if -1, every job) has recorded
    ``stop_starts`` iteration starts, or ``max_events`` events; the time reached.

    ``lead``: a transfer's weight grows with the fraction of it already sent, ``phi x (1 + lead x sent)``,
    evaluated whenever the set of communicating jobs changes: a flow already in flight holds a larger window
    than one that just joined (see the module docstring).

    Per job the state is ``phase`` (0: pre-communication work, ``rem`` seconds left; 1: all-reduce, ``rem``
    Gbit left per flow; 2: waiting until ``until``, the start offset or the overlapped compute), and
    ``it_start``, when its current iteration began. Iteration starts are written to ``starts[i, k]``
    (``n_starts[i]`` of them, at most ``starts.shape[1]`` kept). ``link_stats[l]`` integrates Gbit carried,
    demand above capacity (Gbit) and seconds with the queue above ``q_thr[l]`` Gbit (queue capped at
    ``q_buf[l]``). The arrays ``phase``, ``rem``, ``until`` and ``it_start`` are updated in place.
    """
    n, m = A.shape
    rate = np.zeros(n)
    active = np.zeros(n, np.bool_)
    live = np.zeros(n, np.bool_)
    newly = np.zeros(n, np.bool_)
    resid = np.zeros(m)
    s = np.zeros(m)
    queue = np.zeros(m)
    cur_compute = compute_s.copy()
    weight = phi.copy()
    keep = starts.shape[1]
    for i in range(n):
        n_starts[i] = 0
    t = 0.0
    dirty = True
    for _ in range(max_events):
        if dirty:
            for i in range(n):
                active[i] = phase[i] == 1
                weight[i] = phi[i]
                if active[i] and lead > 0.0 and gbit[i] > 0.0:
                    weight[i] = phi[i] * (1.0 + lead * max(1.0 - rem[i] / gbit[i], 0.0))
            _rates(A, cap_link, cap_job, weight, active, rate, live, resid, s, newly)
            dirty = False
        dt = np.inf
        for i in range(n):
            if phase[i] == 0:
                d = rem[i]
            elif phase[i] == 1:
                d = rem[i] / rate[i] if rate[i] > 0.0 else np.inf
            else:
                d = until[i] - t
            if d < dt:
                dt = d
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
                link_stats[link, L_GBIT] += served * dt
                excess = offered - cap_link[link]
                if excess > 0.0:
                    link_stats[link, L_OVER] += excess * dt
                slope = excess if excess > 0.0 else cap_link[link] - served
                if excess <= 0.0:
                    slope = -slope
                q0 = queue[link]
                q1 = min(max(q0 + slope * dt, 0.0), q_buf[link])
                # seconds of this interval with the (linear, clipped) queue above the threshold
                if q0 > q_thr[link] and q1 > q_thr[link]:
                    link_stats[link, L_ABOVE] += dt
                elif slope > 0.0 and q1 > q_thr[link]:
                    link_stats[link, L_ABOVE] += dt - (q_thr[link] - q0) / slope
                elif slope < 0.0 and q0 > q_thr[link]:
                    link_stats[link, L_ABOVE] += (q0 - q_thr[link]) / -slope
                queue[link] = q1
        t += dt
        done = False
        for i in range(n):
            if phase[i] == 0:
                rem[i] -= dt
                if rem[i] <= 1e-12 * (1.0 + cur_compute[i] + intra_s[i]):
                    if gbit[i] > 0.0:
                        phase[i] = 1
                        rem[i] = gbit[i]
                        dirty = True
                    else:
                        phase[i] = 2
                        comm = t - it_start[i] - (1.0 - overlap[i]) * cur_compute[i]
                        until[i] = max(t, it_start[i] + cur_compute[i] + comm
                                       - overlap[i] * min(cur_compute[i], comm))
            elif phase[i] == 1:
                rem[i] -= rate[i] * dt
                if rem[i] <= 1e-9 * gbit[i]:
                    # comm = intra + network time of this iteration; the overlapped compute may still run
                    comm = t - it_start[i] - (1.0 - overlap[i]) * cur_compute[i]
                    phase[i] = 2
                    until[i] = max(t, it_start[i] + cur_compute[i] + comm - overlap[i] * min(cur_compute[i], comm))
                    dirty = True
            if phase[i] == 2 and until[i] - t <= 1e-12 * (1.0 + t):
                it_start[i] = t
                phase[i] = 0
                k = n_starts[i]
                c = compute_s[i]
                if jitter > 0.0:
                    c = max(0.0, c * (1.0 + jitter * noise[(noise_at[i] + k) % noise.shape[0]]))
                cur_compute[i] = c
                rem[i] = (1.0 - overlap[i]) * c + intra_s[i]
                if k < keep:
                    starts[i, k] = t
                n_starts[i] = k + 1
        if stop_job >= 0:
            done = n_starts[stop_job] >= stop_starts
        else:
            done = True
            for i in range(n):
                if n_starts[i] < stop_starts:
                    done = False
                    break
        if done:
            break
    return t


@njit(**_JIT)
def _mean_field(job, link, weight, cap_link, cap_job, phi, gbit, pre_s, tail_s, rate0, max_iter=MF_MAX_ITER,
                tol=MF_TOL, stats=None, margin=MF_LIVE_MARGIN):  # pragma: no cover  (compiled)
    """Per job (mean per-flow rate while communicating, duty) at the random-phase fixed point.

    While job i communicates, job k communicates too with probability equal to its duty ``d_k`` (the
    fraction of its period spent in the all-reduce). On binding link l, i's flows run at ``lam x phi_i``
    where the level ``lam`` fills the link (water-filling, work-conserving):
    ``A_il phi_i lam + sum_k A_kl d_k min(r_k, lam phi_k) = capacity``: a competitor held back elsewhere
    (at rate ``r_k`` below its share here) leaves the rest to the others. i's rate is the smallest over its
    links, at most its cap; ``period = pre + gbit / rate + tail``. Iterated (geometric damping, duty from
    the damped rate) to a fixed point from ``rate0``.

    Why water-filling: the earlier form took the larger of the share against everyone's weights and what
    everyone's mean throughput leaves; the switch between the two made the iteration cycle (93% of the
    re-solves on full Philly ended at the iteration limit with rates still jumping by 50-200%). The level is
    monotone in each competitor's rate; this form converged in every re-solve measured, in about 14
    iterations, and is closer to the exact fluid simulation (``benchmarks/bench_mean_field.py``).

    Per link the entries are kept sorted by ``r_k / phi_k`` (the level at which each saturates; insertion
    sort, the order changes little between iterations) with prefix sums of the saturated throughput and
    of the unsaturated weights. Between two sorted levels the link's fill is linear in the level, so each
    job's level is the root of the one segment that holds its own root, found by stepping from where its
    search ended the pass before (checking a segment by its root, not by evaluating the fill at both ends,
    is 10% faster): about O(entries) per iteration. Stops when no job would move by ``tol`` (relative);
    ``stats``, if given, counts solves, iterations and solves that hit ``max_iter`` (and, if it has five
    slots, link passes and those left out).

    Every job is updated in every iteration. Updating only the jobs a change reaches (those that would move
    by ``tol`` or more) saved a third of the work on Philly but stopped early: iteration times ended
    0.5% (median), 3.8% (max) from the fixed point, against 0.03% and 1% this way.

    Links that limit nobody are left out between full passes. A job's rate is the smallest of its levels,
    so a link where every job's level is well above its rate (``margin``) changes nothing; on Philly's large
    components that is 80% of the binding links. The first pass and the last are over every link: after a
    full pass only the links where some job's level is within ``margin`` of its rate stay live, and when
    the iteration settles on those a full pass checks it (the result is a fixed point over every link, as
    before; a link that has come to limit someone makes the check move, and the live set is formed again).
    About a fifth less work at the same fixed point (``margin = inf``: every link in every pass).
    """
    n, m, n_e = cap_job.shape[0], cap_link.shape[0], job.shape[0]
    start = np.zeros(m + 1, np.int64)
    for e in range(n_e):
        start[link[e] + 1] += 1
    for g in range(m):
        start[g + 1] += start[g]
    fill = start[:m].copy()
    oj, ow = np.empty(n_e, np.int64), np.empty(n_e)  # per link: its entries' jobs and weights, by level
    for e in range(n_e):
        oj[fill[link[e]]], ow[fill[link[e]]] = job[e], weight[e]
        fill[link[e]] += 1
    key = np.empty(n_e)  # the entries' levels, in the same order
    sat, free = np.empty(n_e + m), np.empty(n_e + m)  # per link, k + 1 slots from start[g] + g
    rate = rate0.copy()  # a warm start (the last solve's rates)
    duty, lev, thr, wgt, r = np.empty(n), np.empty(n), np.empty(n), np.empty(n), np.empty(n)
    wj = np.full(n_e, n_e, np.int64)  # where each entry's segment search ended last pass (moves with the sort)
    elev = np.empty(n_e)  # each entry's job's level x phi (its rate if this link limits it), last pass
    live = np.ones(m, np.bool_)  # links computed in a reduced pass
    it, change, full, skipped = 0, 0.0, True, 0
    for it in range(1, max_iter + 1):
        for i in range(n):
            net = gbit[i] / rate[i] if rate[i] > 0 else 0.0
            duty[i] = net / max(pre_s[i] + net + tail_s[i], 1e-300)
            lev[i] = rate[i] / phi[i]  # the level at which job i saturates
            thr[i] = duty[i] * rate[i]  # its mean throughput per flow
            wgt[i] = duty[i] * phi[i]  # its mean weight while below its level
            r[i] = cap_job[i]
        for g in range(m):
            if not (full or live[g]):
                skipped += 1
                continue
            lo, hi = start[g], start[g + 1]
            k, base, c = hi - lo, lo + g, cap_link[g]
            total = 0.0
            for s in range(lo, hi):
                key[s] = lev[oj[s]]
                total += ow[s] * wgt[oj[s]]
            for s in range(lo + 1, hi):  # insertion sort: the order changes little between iterations
                v = key[s]
                if key[s - 1] <= v:
                    continue
                x, w, q, t = oj[s], ow[s], wj[s], s - 1
                while t >= lo and key[t] > v:
                    key[t + 1], oj[t + 1], ow[t + 1], wj[t + 1] = key[t], oj[t], ow[t], wj[t]
                    t -= 1
                key[t + 1], oj[t + 1], ow[t + 1], wj[t + 1] = v, x, w, q
            # sat[base + s]: throughput of the first s entries (saturated below the level); free[base + s]:
            # weight of the others (at the level); top: the first entry whose level fills the link
            sat[base], free[base], top = 0.0, total, k
            for s in range(k):
                if top == k and sat[base + s] + key[lo + s] * free[base + s] >= c:
                    top = s
                sat[base + s + 1] = sat[base + s] + ow[lo + s] * thr[oj[lo + s]]
                free[base + s + 1] = free[base + s] - ow[lo + s] * wgt[oj[lo + s]]
            free[base + k] = 0.0
            for s in range(k):
                i, a = oj[lo + s], ow[lo + s]
                ap = a * phi[i]
                # i's own term (full weight: it is communicating) only lowers the level, so its segment j is
                # at most top (entries below j saturated). Each segment's linear root: the one inside its own
                # segment is the level. From where i's search ended last pass, step towards it; a step back can
                # only come from rounding at a boundary, where both roots agree to rounding.
                j, step = min(wj[lo + s], top), 0
                while True:
                    if s < j:  # i saturated below the level: its duty-weighted term is in ``sat``
                        lam = (c - sat[base + j] + a * thr[i]) / (free[base + j] + ap)
                    else:
                        lam = (c - sat[base + j]) / (free[base + j] + ap - ap * duty[i])
                    if j > 0 and step <= 0 and lam <= key[lo + j - 1]:
                        j, step = j - 1, -1
                    elif j < top and step >= 0 and lam > key[lo + j]:
                        j, step = j + 1, 1
                    else:
                        break
                wj[lo + s] = j
                elev[lo + s] = lam * phi[i]
                if lam * phi[i] < r[i]:
                    r[i] = lam * phi[i]
        if full:  # live: the links where some job's level is within ``margin`` of its rate
            for g in range(m):
                live[g] = False
                for s in range(start[g], start[g + 1]):
                    if elev[s] <= margin * r[oj[s]]:
                        live[g] = True
                        break
        change = 0.0
        for i in range(n):
            change = max(change, abs(r[i] - rate[i]) / max(rate[i], 1e-300))
            # geometric damping; a new job (at its cap: no warm start) takes its first step whole. A warm job's
            # first step is damped too: its rate was a fixed point, and its first response to a change
            # overshoots (2.4% fewer iterations on Philly than taking every first step whole)
            rate[i] = r[i] if it == 1 and rate0[i] >= cap_job[i] else np.sqrt(rate[i] * r[i])
        if change < tol and full:
            break
        full = change < tol  # settled on the live links: check on every link
    for i in range(n):
        net = gbit[i] / rate[i] if rate[i] > 0 else 0.0
        duty[i] = net / max(pre_s[i] + net + tail_s[i], 1e-300)
    if stats is not None:  # solves, iterations, solves that did not converge, link passes, those left out
        stats[0] += 1
        stats[1] += it
        stats[2] += change >= tol
        if stats.shape[0] > 4:
            stats[3] += it * m
            stats[4] += skipped
    return rate, duty


@njit(**_JIT)
def _binding_components(job, link, weight, cap_link, cap_job, n_jobs, max_exact):  # pragma: no cover  (compiled)
    """(binding mask per link, component label per job, contended mask, large mask per job): jobs joined
    through links that can bind.

    A link binds when its jobs, all sending at their isolated (capped) rates at once, would exceed its
    capacity; only such links couple jobs. Union-find over the binding entries; a job on no binding link is
    a component of its own and not contended. A contended job is *large* when its component has more than
    ``max_exact`` jobs (solved by the mean field).
    """
    n_links = cap_link.shape[0]
    offered = np.zeros(n_links)
    for e in range(job.shape[0]):
        offered[link[e]] += weight[e] * cap_job[job[e]]
    binding = offered > cap_link * (1.0 + 1e-9)
    parent = np.arange(n_jobs)
    first = np.full(n_links, -1, np.int64)
    contended = np.zeros(n_jobs, np.bool_)
    last, a = -1, -1  # a: the root of job ``last``'s tree (entries come job by job: found once per job)
    for e in range(job.shape[0]):
        if not binding[link[e]]:
            continue
        j = job[e]
        if j != last:
            contended[j] = True
            last = a = j
            while parent[a] != a:
                a = parent[a]
        if first[link[e]] < 0:
            first[link[e]] = j
            continue
        b = first[link[e]]
        while parent[b] != b:
            b = parent[b]
        if a != b:
            parent[max(a, b)] = min(a, b)
            a = min(a, b)
    label = np.empty(n_jobs, np.int64)
    size = np.zeros(n_jobs, np.int64)
    for j in range(n_jobs):
        r = j
        while parent[r] != r:
            r = parent[r]
        label[j] = r
        if contended[j]:
            size[r] += 1
    large = np.zeros(n_jobs, np.bool_)
    for j in range(n_jobs):
        large[j] = contended[j] and size[label[j]] > max_exact
    return binding, label, contended, large


@njit(**_JIT)
def _merge_mirrored(job, link, weight, cap_link):  # pragma: no cover  (compiled)
    """The entries the mean field needs: of links carrying exactly the same jobs with the same weights
    (both directions of a ring's links, a rack's uplinks ...) only one is kept, at the least capacity.

    Why exact: such links get the same claims (summed in the same order), and a job's share of a link
    grows with its capacity, so the smallest one gives each job's minimum share. About 3x fewer entries
    on Philly's components. Returns (job, link, weight) of the kept entries in their order, with links
    renumbered, and the capacity per kept link.
    """
    m, ne = cap_link.shape[0], job.shape[0]
    start = np.zeros(m + 1, np.int64)
    for e in range(ne):
        start[link[e] + 1] += 1
    for g in range(m):
        start[g + 1] += start[g]
    order = np.empty(ne, np.int64)
    fill = start[:m].copy()
    for e in range(ne):
        order[fill[link[e]]] = e
        fill[link[e]] += 1
    key = np.empty(m, np.int64)
    for g in range(m):
        h = start[g + 1] - start[g]
        for p in range(start[g], start[g + 1]):
            h = h * 1000003 + job[order[p]] + 1  # wraps: only a hash, equality is checked below
        key[g] = h
    group = np.full(m, -1, np.int64)
    leader = np.zeros(m, np.bool_)
    gcap = np.empty(m)
    n_groups = 0
    size = 1
    while size < 2 * m:
        size *= 2
    table = np.full(size, -1, np.int64)  # open addressing by key: the leader (first link) of each group
    for g in range(m):
        slot = (key[g] ^ (key[g] >> 31)) & (size - 1)
        while table[slot] >= 0:
            o = table[slot]
            if key[o] == key[g] and start[o + 1] - start[o] == start[g + 1] - start[g]:
                same = True
                for p in range(start[g + 1] - start[g]):
                    eg, eo = order[start[g] + p], order[start[o] + p]
                    if job[eg] != job[eo] or weight[eg] != weight[eo]:
                        same = False
                        break
                if same:
                    group[g] = group[o]
                    gcap[group[o]] = min(gcap[group[o]], cap_link[g])
                    break
            slot = (slot + 1) & (size - 1)
        if group[g] < 0:
            table[slot] = g
            group[g], leader[g], gcap[n_groups] = n_groups, True, cap_link[g]
            n_groups += 1
    n_kept = 0
    for e in range(ne):
        if leader[link[e]]:
            n_kept += 1
    kj, kl, kw = np.empty(n_kept, np.int64), np.empty(n_kept, np.int64), np.empty(n_kept)
    k = 0
    for e in range(ne):
        if leader[link[e]]:
            kj[k], kl[k], kw[k] = job[e], group[link[e]], weight[e]
            k += 1
    return kj, kl, kw, gcap[:n_groups].copy()


@njit(**_JIT)
def _keep_position(now_s, row, period, phase, anchor_s, period_s, phase_s):  # pragma: no cover  (compiled)
    """Record a new period for state ``row``. The job keeps its position: it is re-anchored at the same
    fraction of its iteration under the new period; a new job, or one a policy moved, starts its iterations
    at ``phase x period``."""
    old_anchor, old_period = anchor_s[row], period_s[row]
    if np.isnan(old_anchor) or phase_s[row] != phase:
        anchor_s[row] = phase * period
    else:
        frac = ((now_s - old_anchor) % old_period) / old_period if old_period > 0 else 0.0
        anchor_s[row] = now_s - frac * period
    period_s[row], phase_s[row] = period, phase


@njit(**_JIT)
def _solve_large(now_s, job, link, weight, cap_link, binding, large, cols, cap_job, gbit, pre, tail, alone_net, alpha,
                 rows, anchor_s, period_s, phase_s, it, overload, queue, mf_stats):  # pragma: no cover  (compiled)
    """The ``large`` jobs by the mean field over their binding links, in place: their iteration times
    ``it``, the links' ``overload`` (added) and ``queue``, and their state rows (kept positions).

    Warm start: the rate that gave each job its last iteration time (``cols[:, 8]``, if given; its cap if
    new or unslowed). Overload: what the jobs would send beyond their rate while communicating; queue above
    threshold: a crude proxy, the share of the duty-weighted offered load beyond capacity.
    """
    n, m = large.shape[0], cap_link.shape[0]
    local = np.full(n, -1, np.int64)
    members = np.flatnonzero(large)
    k = members.shape[0]
    local[members] = np.arange(k)
    # the entries of large jobs on binding links, renumbered (links in the order first met: each link's
    # levels are computed on their own, so the order changes no result)
    blocal, blinks = np.full(m, -1, np.int64), np.empty(m, np.int64)
    ej, el, ew = np.empty(job.shape[0], np.int64), np.empty(job.shape[0], np.int64), np.empty(job.shape[0])
    ne = nb = 0
    for e in range(job.shape[0]):
        if large[job[e]] and binding[link[e]]:
            if blocal[link[e]] < 0:
                blocal[link[e]], blinks[nb] = nb, link[e]
                nb += 1
            ej[ne], el[ne], ew[ne] = local[job[e]], blocal[link[e]], weight[e]
            ne += 1
    ej, el, ew, blinks = ej[:ne], el[:ne], ew[:ne], blinks[:nb]
    g, c, p, t, cj = gbit[members], cap_link[blinks], pre[members], tail[members], cap_job[members]
    rate0 = cj.copy()
    for a in range(k):
        net0 = (cols[members[a], 8] if cols.shape[1] > 8 else np.nan) - p[a] - t[a]
        if np.isfinite(net0) and net0 > alone_net[members[a]]:
            rate0[a] = g[a] / (net0 if net0 > 0 else 1.0)
    top = g.max()
    phi = np.ones(k)
    if top > 0:
        for a in range(k):
            phi[a] = max(g[a], 1e-300) / top
            if alpha != 1.0:  # (a power costs more than the rest of this loop)
                phi[a] = phi[a] ** alpha
    mj, ml, mw, mc = _merge_mirrored(ej, el, ew, c)
    rate, duty = _mean_field(mj, ml, mw, mc, cj, phi, g, p, t, rate0, MF_MAX_ITER, MF_TOL, mf_stats)
    over, offered = np.zeros(blinks.shape[0]), np.zeros(blinks.shape[0])
    for e in range(ne):
        a = ej[e]
        over[el[e]] += ew[e] * max(cj[a] - rate[a], 0.0) * duty[a]
        offered[el[e]] += ew[e] * (cj[a] * duty[a])
    for b in range(blinks.shape[0]):
        overload[blinks[b]] += over[b]
        queue[blinks[b]] = min(max((offered[b] - c[b]) / max(offered[b], 1e-300), 0.0), 1.0)
    for a in range(k):
        i = members[a]
        it[i] = p[a] + (g[a] / rate[a] if rate[a] > 0 else 0.0) + t[a]
        _keep_position(now_s, rows[i], it[i], cols[i, 6], anchor_s, period_s, phase_s)


@njit(**_JIT)
def _alone(cols):  # pragma: no cover  (compiled)
    """Per job of ``solve_arrays``' columns: per-flow rate cap, Gbit per flow, the work before the all-reduce
    (``pre``), and alone: network s, communication s, iteration s, and the overlapped compute still running
    after the all-reduce (``tail``)."""
    n = cols.shape[0]
    out = np.empty((7, n))
    cap, gbit, pre, net, comm, it, tail = out[0], out[1], out[2], out[3], out[4], out[5], out[6]
    for i in range(n):
        compute, intra, overlap = cols[i, 1], cols[i, 2], cols[i, 3]
        cap[i] = min(cols[i, 4], cols[i, 5])
        gbit[i] = cols[i, 0] * 8 / GBIT
        pre[i] = (1.0 - overlap) * compute + intra
        net[i] = gbit[i] / cap[i] if cap[i] > 0 else 0.0
        comm[i] = net[i] + intra
        it[i] = compute + comm[i] - overlap * min(compute, comm[i])
        tail[i] = it[i] - pre[i] - net[i]
    return cap, gbit, pre, net, comm, it, tail


@njit(**_JIT)
def _comm_from_period(period, compute, overlap, floor):  # pragma: no cover  (compiled)
    """Communication seconds (intra + network) that give ``period`` under :func:`iteration_time`; at least
    ``floor`` (the alone value)."""
    long_comm = period - (1.0 - overlap) * compute  # comm >= compute
    short_comm = (period - compute) / (1.0 - overlap) if overlap < 1.0 else 0.0
    return max(long_comm if long_comm >= compute else short_comm, floor)


@njit(**_JIT)
def _solve_rest(now_s, job, link, weight, cap_link, binding, large, contended, cols, cap_job, gbit, pre, tail,
                alone_net, alone_comm, alpha, rows, anchor_s, period_s, phase_s, it, overload,
                queue, mf_stats):  # pragma: no cover  (compiled)
    """After the exact components: the large ones (:func:`_solve_large`), then every job's communication
    s and each link's time-averaged load, and new jobs on no binding link start their iterations at their
    phase. (comm, load, whether the mean field ran)."""
    n = cols.shape[0]
    mean_field = large.any()
    if mean_field:
        _solve_large(now_s, job, link, weight, cap_link, binding, large, cols, cap_job, gbit, pre, tail, alone_net,
                     alpha, rows, anchor_s, period_s, phase_s, it, overload, queue, mf_stats)
    comm = alone_comm.copy()
    for i in range(n):
        if contended[i]:
            comm[i] = _comm_from_period(it[i], cols[i, 1], cols[i, 3], alone_comm[i])
        elif np.isnan(anchor_s[rows[i]]):
            anchor_s[rows[i]], period_s[rows[i]], phase_s[rows[i]] = cols[i, 6] * it[i], it[i], cols[i, 6]
    # Time-averaged load: every job moves its Gbit per flow once per iteration, whatever the sharing.
    load = np.zeros(cap_link.shape[0])
    for e in range(job.shape[0]):
        load[link[e]] += weight[e] * gbit[job[e]] / max(it[job[e]], 1e-300)
    return comm, load, mean_field


SOLVED_ALONE, SOLVED_MEAN_FIELD = 1, 2  # what _solve_unless_exact did (0: nothing, an exact component is there)


@njit(**_JIT)
def _solve_unless_exact(now_s, job, link, weight, cap_link, cols, table, free, n_free, max_exact, alpha, anchor_s,
                        period_s, phase_s, mf_stats):  # pragma: no cover  (compiled)
    """``solve_arrays`` in one compiled call, state rows claimed included, when no component is for the exact
    simulation: (SOLVED_ALONE or SOLVED_MEAN_FIELD, free rows left, iteration s, comm s, load, overload,
    queue). Otherwise, before solving anything: (0, ...) when an exact component is there, or why claiming
    rows stopped (:func:`_claim_rows`). Why: on Philly nearly every re-solve is one large component, and the
    Python steps between the compiled ones cost a sixth of the re-solve."""
    n, m = cols.shape[0], cap_link.shape[0]
    e = np.empty(0)
    rows, n_free, need = _claim_rows(table, cols[:, 7].astype(np.int64), free, n_free)
    if need:
        return need, n_free, e, e, e, e, e
    cap_job, gbit, pre, alone_net, alone_comm, alone_it, tail = _alone(cols)
    binding, label, contended, large = _binding_components(job, link, weight, cap_link, cap_job, n, max_exact)
    for i in range(n):
        if contended[i] and not large[i]:
            return 0, n_free, e, e, e, e, e
    it, overload, queue = alone_it.copy(), np.zeros(m), np.zeros(m)
    comm, load, mean_field = _solve_rest(now_s, job, link, weight, cap_link, binding, large, contended, cols, cap_job,
                                         gbit, pre, tail, alone_net, alone_comm, alpha, rows, anchor_s, period_s,
                                         phase_s, it, overload, queue, mf_stats)
    return SOLVED_MEAN_FIELD if mean_field else SOLVED_ALONE, n_free, it, comm, load, overload, queue


def _weights(gbit: np.ndarray, alpha: float) -> np.ndarray:
    """Share weights by bytes in flight: each job's Gbit per flow over the largest, to the power ``alpha``."""
    top = gbit.max()
    return (np.maximum(gbit, 1e-300) / top) ** alpha if top > 0 else np.ones(len(gbit))


def _position(now_s: float, anchor_s: float, period_s: float, pre_s: float, net_s: float):
    """(phase, rem, until, it_start) of a job whose iterations start at ``anchor + k period``, at ``now``.

    Inside the iteration: ``pre`` seconds of work, then the all-reduce taking ``net`` seconds at the last
    solved rate (its Gbit left is proportional to the time left), then waiting to the period's end.
    Times are relative to ``now`` (the simulation starts at 0).
    """
    if not period_s > 0:
        return 0, pre_s, 0.0, 0.0
    e = (now_s - anchor_s) % period_s
    if e < pre_s:
        return 0, pre_s - e, 0.0, -e
    if e < pre_s + net_s:
        return 1, 1.0 - (e - pre_s) / net_s, 0.0, -e  # rem as a fraction of the job's Gbit (scaled by caller)
    return 2, 0.0, period_s - e, -e


NEED_ROWS, NEED_TABLE, NEED_DICT = -1, -2, -3  # why _claim_rows stopped (0: done)


@njit(**_JIT)
def _claim_rows(table, keys, free, n_free):  # pragma: no cover  (compiled)
    """(rows, free rows left, why it stopped): each key's row in ``table``, a new one from the top of the
    free stack ``free[:n_free]`` if it has none. Stops early when the stack is empty (NEED_ROWS) or a key
    in 0 .. ROW_TABLE - 1 lies beyond the table (NEED_TABLE); rows already claimed stay claimed, so the
    caller grows what is missing and calls again. Keys outside 0 .. ROW_TABLE - 1 get -1 (NEED_DICT)."""
    rows = np.empty(keys.shape[0], np.int64)
    need = 0
    for a in range(keys.shape[0]):
        key = keys[a]
        if key < 0 or key >= ROW_TABLE:
            rows[a], need = -1, NEED_DICT
            continue
        if key >= table.shape[0]:
            return rows, n_free, NEED_TABLE
        r = table[key]
        if r < 0:
            if n_free == 0:
                return rows, n_free, NEED_ROWS
            n_free -= 1
            r = table[key] = free[n_free]
        rows[a] = r
    return rows, n_free, need


@NETWORKS.register("tcp")
class TcpNetwork(NetworkModel):
    """TCP-like sharing by bytes in flight, work-conserving, with per-job phase kept across events (fluid)."""

    name = "tcp"
    incremental = True  # re-solve only the component that changed: others keep their phases

    def __init__(self, alpha: float = ALPHA, jitter: float = JITTER, lead: float = LEAD, horizon: int = HORIZON, warmup: int = WARMUP,
                 max_exact_jobs: int = MAX_EXACT_JOBS, max_events: int = MAX_EVENTS,
                 ecn_threshold_us: float = ECN_THRESHOLD_US, buffer_us: float = BUFFER_US, draws: int = DRAWS):
        if not (alpha >= 0 and jitter >= 0 and lead >= 0 and horizon > warmup + 1 and warmup >= 0 and max_exact_jobs >= 1
                and max_events > 0 and 0 <= ecn_threshold_us <= buffer_us and draws >= 1):
            raise ValueError("tcp network: need alpha >= 0, jitter >= 0, lead >= 0, horizon > warmup + 1 >= 1, "
                             "max_exact_jobs >= 1, max_events > 0, 0 <= ecn_threshold_us <= buffer_us, draws >= 1")
        self.alpha, self.jitter, self.lead = float(alpha), float(jitter), float(lead)
        self.horizon, self.warmup = int(horizon), int(warmup)
        self.max_exact_jobs, self.max_events = int(max_exact_jobs), int(max_events)
        self.ecn_threshold_us, self.buffer_us = float(ecn_threshold_us), float(buffer_us)
        self.draws = int(draws)  # jitter draws a scenario prediction averages over (simulate_starts' ``draw``)
        # Phase state per job, in rows of arrays the compiled solve updates in place: the anchor (s; NaN if
        # none), the period (s) and the phase the policy last set. ``_table``: job id -> row for ids 0 ..
        # ROW_TABLE - 1 (the simulator's), an array a compiled lookup reads and fills; ``_row``: the same for
        # other ids. Free rows are a stack, ``_free[:_n_free]``.
        self._row: dict[int, int] = {}
        self._table = np.full(0, -1, np.int64)
        self._free, self._n_free = np.zeros(0, np.int64), 0
        self.anchor_s, self.period_s, self.phase_s = np.full(0, np.nan), np.full(0, np.nan), np.full(0, np.nan)
        self.exact_solves = self.mean_field_solves = 0
        # mean field: solves, iterations, solves not converged, link passes, link passes left out
        self.mf_stats = np.zeros(5, np.int64)

    def simulate_starts(self, demands, capacity_gbps, start_s: dict, iterations: dict, draw: int = 0) -> dict:
        """Iteration start times per job from given start times (see :func:`simulate_starts`)."""
        return simulate_starts(self, demands, capacity_gbps, start_s, iterations, draw)

    def forget(self, job_id: int) -> None:
        """The job left the network: drop its phase state."""
        r = self.state_row(job_id)
        if r is None:
            return
        self.anchor_s[r] = self.period_s[r] = self.phase_s[r] = np.nan
        self._free[self._n_free] = r
        self._n_free += 1
        if 0 <= job_id < len(self._table):
            self._table[job_id] = -1
        else:
            del self._row[job_id]

    def state_row(self, job_id: int) -> int | None:
        """The job's phase-state row, None if it has none."""
        if 0 <= job_id < len(self._table):
            r = int(self._table[job_id])
            return r if r >= 0 else None
        return self._row.get(job_id)

    def phase_now(self, job_id: int) -> float | None:
        """The job's anchor on its current period (its iterations start at ``phase x period + k x period``):
        where the model has moved it, e.g. two jobs started in step that have separated into turns."""
        r = self.state_row(job_id)
        if r is None or not (self.period_s[r] > 0 and np.isfinite(self.anchor_s[r])):
            return None
        return float(self.anchor_s[r] % self.period_s[r] / self.period_s[r])

    def _rows(self, ids: np.ndarray) -> np.ndarray:
        """The state rows of these jobs, new (empty) rows for jobs without one (:func:`_claim_rows`)."""
        keys = ids.astype(np.int64)
        while True:
            rows, self._n_free, need = _claim_rows(self._table, keys, self._free, self._n_free)
            if not self._grow(need, keys):
                break
        if need == NEED_DICT:  # ids the table does not cover
            for a in np.flatnonzero(rows < 0).tolist():
                j = int(keys[a])
                if j not in self._row:
                    if not self._n_free:
                        self._grow_state()
                    self._n_free -= 1
                    self._row[j] = int(self._free[self._n_free])
                rows[a] = self._row[j]
        return rows

    def _grow(self, need: int, keys: np.ndarray) -> bool:
        """Grow what :func:`_claim_rows` stopped for (more rows, or a table that covers ``keys``); False if
        it stopped for nothing that growing gives."""
        if need == NEED_ROWS:
            self._grow_state()
        elif need == NEED_TABLE:
            grown = np.full(min(max(2 * len(self._table), int(keys.max()) + 1, 1024), ROW_TABLE), -1, np.int64)
            grown[:len(self._table)] = self._table
            self._table = grown
        return need in (NEED_ROWS, NEED_TABLE)

    def _grow_state(self) -> None:
        """Twice the state rows (at least 64); the new ones go on the free stack, lowest on top."""
        old = len(self.anchor_s)
        grow = np.full(max(64, old), np.nan)
        self.anchor_s, self.period_s, self.phase_s = (np.concatenate([x, grow]) for x in
                                                      (self.anchor_s, self.period_s, self.phase_s))
        free = np.zeros(len(self.anchor_s), np.int64)
        free[:self._n_free] = self._free[:self._n_free]
        new = np.arange(len(self.anchor_s) - 1, old - 1, -1)
        free[self._n_free:self._n_free + len(new)] = new
        self._free, self._n_free = free, self._n_free + len(new)

    # ----------------------------------------------------------------- solve
    def solve(self, demands, capacity_gbps, now_s: float = 0.0) -> NetSolution:
        if not demands:
            return NetSolution({}, {})
        job, link, weight, links = _incidence(demands)
        cap_link = np.ascontiguousarray(capacity_gbps[links], dtype=np.float64)
        cols = np.array([(d.flow_bytes, d.compute_s, d.serial_intra_s, d.overlap, d.rate_cap_gbps,
                          d.iso_rate_gbps, d.phase, d.job_id) for d in demands], dtype=float).reshape(-1, 8)
        it, comm, load, overload, queue = self.solve_arrays(now_s, cap_link, job, link, weight.astype(float), cols)
        ids = [d.job_id for d in demands]
        sol = NetSolution(dict(zip(ids, it.tolist())), dict(zip(ids, comm.tolist())), links, load, overload)
        sol.queue_frac = queue
        return sol

    def solve_arrays(self, now_s, cap_link, job, link, weight, cols):
        """Iteration s, comm s per job and load, overload (Gbit/s, time-averaged) and queue_frac per link.

        ``cols`` per job: flow bytes, compute s, serial intra s, overlap, rate cap, isolated rate, phase
        (fraction of the period, as set by policies), job id, and optionally the job's last solved
        iteration s (NaN if none: a warm start for the fixed point).
        """
        n, m = cols.shape[0], len(cap_link)
        while True:
            done, self._n_free, it, comm, load, overload, queue = _solve_unless_exact(
                now_s, job, link, weight, cap_link, cols, self._table, self._free, self._n_free, self.max_exact_jobs,
                self.alpha, self.anchor_s, self.period_s, self.phase_s, self.mf_stats)
            if not self._grow(done, cols[:, 7]):
                break
        if done > 0:  # no component small enough for the exact simulation (99% of Philly's re-solves)
            self.mean_field_solves += done == SOLVED_MEAN_FIELD
            return it, comm, load, overload, queue
        # an exact component is there (or an id beyond the row table): the same first steps again, in Python
        # around the exact simulations (1% of Philly's re-solves, so computing them twice costs nothing)
        rows = self._rows(cols[:, 7])
        cap_job, gbit, pre, alone_net, alone_comm, alone_it, tail = _alone(cols)
        binding, label, contended, large = _binding_components(job, link, weight, cap_link, cap_job, n,
                                                               self.max_exact_jobs)
        it, overload, queue = alone_it.copy(), np.zeros(m), np.zeros(m)
        small = contended & ~large
        for comp in np.unique(label[small]) if small.any() else ():
            members = np.flatnonzero(label == comp)
            sel = (label[job] == comp) & binding[link]
            local = -np.ones(n, dtype=np.int64)
            local[members] = np.arange(len(members))
            blinks, bl = np.unique(link[sel], return_inverse=True)
            A = np.zeros((len(members), len(blinks)))
            np.add.at(A, (local[job[sel]], bl), weight[sel])
            res = self._exact(now_s, members, A, cap_link[blinks], cols, cap_job, gbit, pre, rows, alone_it,
                              alone_net)
            if res is None:  # the simulation did not finish: solve it with the others by the fixed point
                large[members] = True
                continue
            self.exact_solves += 1
            p_it, anchor, l_over, l_queue = res
            it[members] = p_it
            overload[blinks] += l_over
            queue[blinks] = l_queue
            r = rows[members]
            self.anchor_s[r], self.period_s[r], self.phase_s[r] = anchor, p_it, cols[members, 6]
        comm, load, mean_field = _solve_rest(now_s, job, link, weight, cap_link, binding, large, contended, cols,
                                             cap_job, gbit, pre, tail, alone_net, alone_comm, self.alpha, rows,
                                             self.anchor_s, self.period_s, self.phase_s, it, overload, queue,
                                             self.mf_stats)
        self.mean_field_solves += mean_field
        return it, comm, load, overload, queue

    def _exact(self, now_s, members, A, cap_link, cols, cap_job, gbit, pre, rows, alone_it, alone_net):
        k = len(members)
        compute, intra, overlap, phase, ids = cols[:, 1], cols[:, 2], cols[:, 3], cols[:, 6], cols[:, 7]
        st_phase = np.zeros(k, np.int64)
        rem, until, it_start = np.zeros(k), np.zeros(k), np.zeros(k)
        for a, i in enumerate(members):
            row = rows[i]
            if np.isnan(self.anchor_s[row]) or self.phase_s[row] != phase[i]:
                anchor, period = phase[i] * alone_it[i], alone_it[i]
            else:
                anchor, period = self.anchor_s[row], self.period_s[row]
            # the all-reduce stretched by the same factor as the period (its last solve)
            net_s = alone_net[i] + max(period - alone_it[i], 0.0)
            p, r, u, s0 = _position(now_s, anchor, period, pre[i], net_s)
            st_phase[a], until[a], it_start[a] = p, u, s0
            rem[a] = r * gbit[i] if p == 1 else r
        phi = _weights(gbit[members], self.alpha)
        # every start of every job is kept: the fastest makes about (slowest / fastest period) x horizon of them
        ratio = alone_it[members].max() / max(alone_it[members].min(), 1e-300)
        starts = np.zeros((k, int(min(math.ceil((self.horizon + 1) * ratio) + 2, 64 * (self.horizon + 1)))))
        n_starts = np.zeros(k, np.int64)
        stats = np.zeros((len(cap_link), 3))
        noise_at = (ids[members].astype(np.int64) * 977) % len(_NOISE)
        t_end = _simulate(A, cap_link, cap_job[members].copy(), phi, gbit[members].copy(), intra[members].copy(),
                          compute[members].copy(), overlap[members].copy(), st_phase, rem, until, it_start,
                          self.jitter, self.lead, _NOISE, noise_at, -1, self.horizon + 1, self.max_events,
                          cap_link * self.ecn_threshold_us * 1e-6, cap_link * self.buffer_us * 1e-6, starts, n_starts,
                          stats)
        if n_starts.min() < 3 or not t_end > 0:
            return None
        return (*_window_periods(starts, n_starts, self.warmup, now_s), stats[:, L_OVER] / t_end, stats[:, L_ABOVE] / t_end)


def _window_periods(starts: np.ndarray, n_starts: np.ndarray, warmup: int, now_s: float = 0.0):
    """(period, anchor) per job from one simulation's iteration starts, over one common time window.

    The window opens once every job is past its ``warmup`` starts and closes at the last recorded start
    of the job that finished last, so that it spans whole periods of the slowest job: a fast job's mean
    period then counts every contended episode the slow one causes, not a share that depends on where its
    own count of iterations happened to stop. The anchor is each job's last start (relative to ``now_s``).
    """
    k = len(n_starts)
    kept = np.minimum(n_starts, starts.shape[1])
    w = np.minimum(warmup, n_starts - 3)
    t0 = max(starts[i, w[i]] for i in range(k))
    t1 = max(starts[i, kept[i] - 1] for i in range(k))
    period, anchor = np.empty(k), np.empty(k)
    for i in range(k):
        s = starts[i, :kept[i]]
        inside = s[(s >= t0 - 1e-12) & (s <= t1 + 1e-12)]
        if len(inside) < 2:  # too few starts in the common window: its own warm-up to its last start
            inside = s[w[i]:]
        period[i] = (inside[-1] - inside[0]) / (len(inside) - 1)
        anchor[i] = now_s + s[-1]
    return period, anchor


def simulate_starts(model: TcpNetwork, demands, capacity_gbps, start_s: dict, iterations: dict, draw: int = 0) -> dict:
    """Every job's iteration start times (s) when each starts at ``start_s[job]`` and all run together.

    What a testbed scenario does: jobs launched at a common time (plus their offsets), each running
    ``iterations[job]`` iterations. The fluid is simulated until every job has started its last iteration
    plus one (that start marks the end of the previous one), jobs going on past their own count; a caller
    measuring a window where all run (as :func:`netlab.testbed.scenarios.summarise_logs` does) sees the same
    contention as on the testbed. Deterministic: jitter draws come from a fixed table; ``draw`` picks
    another set of them (another run of the same experiment).
    """
    if not demands:
        return {}
    job, link, weight, links = _incidence(demands)
    n = len(demands)
    A = np.zeros((n, len(links)))
    np.add.at(A, (job, link), weight)
    cap_link = np.ascontiguousarray(capacity_gbps[links], dtype=np.float64)
    cols = np.array([(d.flow_bytes, d.compute_s, d.serial_intra_s, d.overlap, d.rate_cap_gbps, d.iso_rate_gbps)
                     for d in demands], dtype=float).reshape(-1, 6)
    gbit = cols[:, 0] * 8 / GBIT
    phi = _weights(gbit, model.alpha)
    most = max(int(iterations[d.job_id]) for d in demands) + 1
    starts = np.zeros((n, most + 1))
    n_starts = np.zeros(n, np.int64)
    ids = np.array([d.job_id for d in demands], dtype=np.int64)
    until = np.array([float(start_s[d.job_id]) for d in demands])
    _simulate(A, cap_link, np.minimum(cols[:, 4], cols[:, 5]), phi, gbit, cols[:, 2].copy(), cols[:, 1].copy(),
              cols[:, 3].copy(), np.full(n, 2, np.int64), np.zeros(n), until, np.zeros(n), model.jitter, model.lead, _NOISE,
              (ids * 977 + draw * 1543) % len(_NOISE), -1, most, max(model.max_events, 40 * n * most),
              cap_link * model.ecn_threshold_us * 1e-6, cap_link * model.buffer_us * 1e-6, starts, n_starts,
              np.zeros((len(links), 3)))
    return {d.job_id: starts[i, :min(n_starts[i], most + 1)].copy() for i, d in enumerate(demands)}
