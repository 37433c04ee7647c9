"""The large-component solver of the ``tcp`` model: a mean-field (random-phase) fixed point.

Components with more than ``max_exact_jobs`` jobs, or whose fluid simulation
does not finish, are solved here: each job, while communicating, meets the
others on every binding link with the probability that they communicate too
(random relative phases, the state jobs of unequal periods drift into), and
the link is filled to one level, a competitor held back elsewhere leaving its
surplus to the others (water-filling). On the full Philly trace nearly every
re-solve is of one component of ~110 jobs; simulating each for tens of
iterations would take minutes, the fixed point takes about 120 microseconds.
``benchmarks/bench_mean_field.py`` measures how far it is from the fluid on
the components Philly produces, and how often it converges.

Why one module of this size: :func:`mean_field` is one algorithm (about 150
lines with the reasoning behind each of its shortcuts), and
:func:`merge_mirrored` and :func:`solve_large` exist only to feed it.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from ...jit import njit  # numba is imported at the first kernel call
from ..jit import JIT
from ..slots import Entries, Jobs, Rows
from .components import Alone, Components
from .state import keep_position

MF_MAX_ITER = 60  # mean-field iterations at most ...
MF_TOL = 1e-3  # ... until no rate moves by more than this (relative)
MF_LIVE_MARGIN = 1.2  # links where every job's level is above this x its rate are left out between full passes


class MeanFieldJobs(NamedTuple):
    """Per job of a mean-field solve."""

    cap_gbps: np.ndarray  # per-flow rate alone
    weight: np.ndarray  # share weight (phi)
    gbit: np.ndarray  # per flow per iteration
    pre_s: np.ndarray  # work before the all-reduce
    tail_s: np.ndarray  # overlapped compute still running after it


class MeanFieldCounts(NamedTuple):
    """Counters over mean-field solves (each an int64 array of one, so compiled code adds in place)."""

    solves: np.ndarray
    iterations: np.ndarray
    unconverged: np.ndarray  # solves that hit the iteration limit
    link_passes: np.ndarray
    links_skipped: np.ndarray  # link passes left out (links that limit nobody)
    core_jobs: np.ndarray  # jobs given their time by a phase-aware core after the mean field (``phase_cores``)
    core_events: np.ndarray  # events the phase cores' simulations ran (what they cost)


def mean_field_counts() -> MeanFieldCounts:
    return MeanFieldCounts(*(np.zeros(1, np.int64) for _ in MeanFieldCounts._fields))


@njit(**JIT)
def mean_field(e: Entries, cap_link, jobs: MeanFieldJobs, rate0, max_iter=MF_MAX_ITER, tol=MF_TOL, counts=None,
               margin=MF_LIVE_MARGIN):
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
    ``counts`` (:class:`MeanFieldCounts`), if given, counts solves, iterations, solves that hit ``max_iter``,
    link passes and those left out.

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

    The passes over the entries index with unsigned integers (``np.uint64``): numba adds a negative-index
    wrap-around (a sign test and an add) to every read and write with a signed index, about a dozen per entry
    here, and none with an unsigned one. The same arithmetic in the same order, so the same bits; the kernel
    takes about a sixth less time on full Philly's components (the loops over jobs gained nothing: left signed).

    Why a plain damped iteration, not an accelerated one: at the fixed point the undamped map's Jacobian (in
    log rates) has a zero diagonal (a job's own term does not move its own level), a few eigenvalue pairs
    near the imaginary axis of modulus about 1 (pulls of opposite sign: a competitor held back elsewhere takes
    more of a link as its rate rises, one at the level takes less, its duty falling), which the damping must
    hold, and the others small; and it is far from normal (singular values in the tens: an error in the jobs
    that fill a link reaches the jobs left its remainder amplified).
    Anderson acceleration, two-step iterations and constant steps other than a half save an eighth of the
    iterations at best, and a pass is cheap enough (a few microseconds) that what they add per iteration
    (logarithms, least squares) costs as much or more; Newton's method needs a third of the iterations, but
    one dense solve of the component's size costs several passes. ``benchmarks/bench_mean_field_accel.py``
    measures it (``mean_field_accel.json``).
    """
    job, link, weight = e.job, e.link, e.weight
    cap_job, phi, gbit, pre_s, tail_s = jobs.cap_gbps, jobs.weight, jobs.gbit, jobs.pre_s, jobs.tail_s
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
            # each entry's level and the total weight, summed in the entries' order as they stand, with the
            # insertion sort in the same pass (the order changes little between iterations): step s moves only
            # entries before s, so entry s is read as it stood. ``prev``: key[s - 1], kept in a register
            total, prev = 0.0, 0.0
            for s in range(lo, hi):
                us = np.uint64(s)
                x, w = oj[us], ow[us]
                xu = np.uint64(x)
                v = lev[xu]
                total += w * wgt[xu]
                if s == lo or prev <= v:
                    key[us], prev = v, v
                    continue
                q, t = wj[us], s - 1
                while t >= lo and key[np.uint64(t)] > v:
                    tu, tn = np.uint64(t), np.uint64(t + 1)
                    key[tn], oj[tn], ow[tn], wj[tn] = key[tu], oj[tu], ow[tu], wj[tu]
                    t -= 1
                tn = np.uint64(t + 1)
                key[tn], oj[tn], ow[tn], wj[tn] = v, x, w, q
                if t + 1 == s:  # (not moved: a NaN level stops the shift at once)
                    prev = v
            # sat[base + s]: throughput of the first s entries (saturated below the level); free[base + s]:
            # weight of the others (at the level); top: the first entry whose level fills the link
            sat[base], free[base], top = 0.0, total, k
            sv, fv = 0.0, total  # the running sums in registers (stores and loads through memory were 9% slower)
            for s in range(k):
                u = np.uint64(lo + s)
                if top == k and sv + key[u] * fv >= c:
                    top = s
                xu = np.uint64(oj[u])
                sv = sv + ow[u] * thr[xu]
                fv = fv - ow[u] * wgt[xu]
                b1 = np.uint64(base + s + 1)
                sat[b1], free[b1] = sv, fv
            free[base + k] = 0.0
            for s in range(k):
                u = np.uint64(lo + s)
                i, a = oj[u], ow[u]
                iu = np.uint64(i)
                ph = phi[iu]
                ap = a * ph
                # i's own term (full weight: it is communicating) only lowers the level, so its segment j is
                # at most top (entries below j saturated). Each segment's linear root: the one inside its own
                # segment is the level. From where i's search ended last pass, step towards it; a step back can
                # only come from rounding at a boundary, where both roots agree to rounding.
                j, step = min(wj[u], top), 0
                at, ad = a * thr[iu], ap * duty[iu]  # (the same products, out of the loop)
                while True:
                    b = np.uint64(base + j)
                    if s < j:  # i saturated below the level: its duty-weighted term is in ``sat``
                        lam = (c - sat[b] + at) / (free[b] + ap)
                    else:
                        lam = (c - sat[b]) / (free[b] + ap - ad)
                    if j > 0 and step <= 0 and lam <= key[np.uint64(lo + j - 1)]:
                        j, step = j - 1, -1
                    elif j < top and step >= 0 and lam > key[np.uint64(lo + j)]:
                        j, step = j + 1, 1
                    else:
                        break
                wj[u] = j
                lp = lam * ph
                elev[u] = lp
                if lp < r[iu]:
                    r[iu] = lp
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
    if counts is not None:
        counts.solves[0] += 1
        counts.iterations[0] += it
        counts.unconverged[0] += change >= tol
        counts.link_passes[0] += it * m
        counts.links_skipped[0] += skipped
    return rate, duty


@njit(**JIT)
def by_link(link, m):
    """The entries grouped by link, each link's in their order: (start, order), link g's entries being
    ``order[start[g]:start[g + 1]]``."""
    start = np.zeros(m + 1, np.int64)
    for x in range(link.shape[0]):
        start[np.uint64(link[np.uint64(x)] + 1)] += 1
    for g in range(m):
        start[g + 1] += start[g]
    order, fill = np.empty(link.shape[0], np.int64), start[:m].copy()
    for x in range(link.shape[0]):
        g = np.uint64(link[np.uint64(x)])
        order[np.uint64(fill[g])] = x
        fill[g] += 1
    return start, order


@njit(**JIT)
def merge_mirrored(e: Entries, cap_link):
    """The entries the mean field needs: of links carrying exactly the same jobs with the same weights
    (both directions of a ring's links, a rack's uplinks ...) only one is kept, at the least capacity.

    Why exact: such links get the same claims (summed in the same order), and a job's share of a link
    grows with its capacity, so the smallest one gives each job's minimum share. About 3x fewer entries
    on Philly's components. Returns the kept entries in their order, with links renumbered, and the
    capacity per kept link. Unsigned indices, as in :func:`mean_field` (no wrap-around test per access): a
    fifth less time on full Philly's components, the same entries.
    """
    job, link, weight = e.job, e.link, e.weight
    m, ne = cap_link.shape[0], job.shape[0]
    start, order = by_link(link, m)
    key = np.empty(m, np.int64)
    for g in range(m):
        h = start[g + 1] - start[g]
        for p in range(start[g], start[g + 1]):
            h = h * 1000003 + job[np.uint64(order[np.uint64(p)])] + 1  # wraps: only a hash, equality is checked below
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
                    eg, eo = np.uint64(order[np.uint64(start[g] + p)]), np.uint64(order[np.uint64(start[o] + p)])
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
        if leader[np.uint64(link[np.uint64(e)])]:
            n_kept += 1
    kj, kl, kw = np.empty(n_kept, np.int64), np.empty(n_kept, np.int64), np.empty(n_kept)
    k = 0
    for x in range(ne):
        e, g = np.uint64(x), np.uint64(link[np.uint64(x)])
        if leader[g]:
            kk = np.uint64(k)
            kj[kk], kl[kk], kw[kk] = job[e], group[g], weight[e]
            k += 1
    return Entries(kj, kl, kw), gcap[:n_groups].copy()


@njit(**JIT)
def mean_field_classes(e: Entries, cap_link, jobs: MeanFieldJobs, priority, rate0, counts):
    """:func:`mean_field` class by class (a network allocation's ``priority``, 0 first): each class on the
    capacity the classes before it leave on average (their time-averaged load: duty x rate per flow), as it
    meets them while communicating in the random-phase picture. (rate, duty) per job."""
    k = rate0.shape[0]
    rate, duty = np.empty(k), np.empty(k)
    left = cap_link.copy()
    local = np.full(k, -1, np.int64)
    for c in np.unique(priority):
        mem = np.flatnonzero(priority == c)
        local[mem] = np.arange(mem.shape[0])
        sel = np.flatnonzero(priority[e.job] == c)
        floor = np.maximum(left, cap_link * 1e-9)  # a class left nothing still crawls (no zero rate)
        merged, mc = merge_mirrored(Entries(local[e.job[sel]], e.link[sel], e.weight[sel]), floor)
        sub = MeanFieldJobs(jobs.cap_gbps[mem], jobs.weight[mem], jobs.gbit[mem], jobs.pre_s[mem], jobs.tail_s[mem])
        r, d = mean_field(merged, mc, sub, rate0[mem], MF_MAX_ITER, MF_TOL, counts)
        rate[mem], duty[mem] = r, d
        for x in sel:
            a = local[e.job[x]]
            left[e.link[x]] = max(left[e.link[x]] - e.weight[x] * r[a] * d[a], 0.0)
    return rate, duty


@njit(**JIT)
def _as_met(link, m):
    """True if the ``m`` links are first met in the entries in the order of their ids (0, 1, ..., m - 1): then
    numbering them in the order first met gives each its own id. On the incremental re-solve's binding part
    they are (its links are numbered in the order the component first met them)."""
    top = -1
    for x in range(link.shape[0]):
        g = link[x]
        if g > top:
            if g != top + 1:
                return False
            top = g
    return top == m - 1


@njit(**JIT)
def solve_large(now_s, e: Entries, cap_link, comps: Components, jobs: Jobs, al: Alone, alpha, t: Rows, rows, it,
                overload, queue, counts):
    """The ``comps.large`` jobs by the mean field over their binding links, in place: their iteration times
    ``it``, the links' ``overload`` (added) and ``queue``, and their rows' phase state (kept positions).

    Warm start: the rate that gave each job its last iteration time (``jobs.last_iter_s``, NaN if none; its
    cap if new or unslowed). Overload: what the jobs would send beyond their rate while communicating; queue
    above threshold: a crude proxy, the share of the duty-weighted offered load beyond capacity.
    """
    job, link, weight = e.job, e.link, e.weight
    binding, large = comps.binding, comps.large
    gbit, pre, tail, cap_job, alone_net = al.gbit, al.pre_s, al.tail_s, al.cap_gbps, al.net_s
    n, m = large.shape[0], cap_link.shape[0]
    local = np.full(n, -1, np.int64)
    members = np.flatnonzero(large)
    k = members.shape[0]
    local[members] = np.arange(k)
    # the entries of large jobs on binding links, renumbered (links in the order first met: each link's
    # levels are computed on their own, so the order changes no result)
    if _as_met(link, m) and k == n and binding.all():  # every entry, renumbered to itself: no copy
        ej, el, ew, blinks, ne = job, link, weight, np.arange(m), job.shape[0]
    else:
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
    g, c, p, tl, cj = gbit[members], cap_link[blinks], pre[members], tail[members], cap_job[members]
    rate0 = cj.copy()
    for a in range(k):
        net0 = jobs.last_iter_s[members[a]] - p[a] - tl[a]
        if np.isfinite(net0) and net0 > alone_net[members[a]]:
            rate0[a] = g[a] / (net0 if net0 > 0 else 1.0)
    top = g.max()
    phi = np.ones(k)
    if top > 0:
        for a in range(k):
            phi[a] = max(g[a], 1e-300) / top
            if alpha != 1.0:  # (a power costs more than the rest of this loop)
                phi[a] = phi[a] ** alpha
    prio = jobs.priority[members]
    for a in range(k):
        phi[a] *= jobs.share[members[a]]  # a network allocation's weight (1: unchanged, bit for bit)
    mf_jobs = MeanFieldJobs(cj, phi, g, p, tl)
    if prio.min() == prio.max():
        merged, mc = merge_mirrored(Entries(ej, el, ew), c)
        rate, duty = mean_field(merged, mc, mf_jobs, rate0, MF_MAX_ITER, MF_TOL, counts)
    else:
        rate, duty = mean_field_classes(Entries(ej, el, ew), c, mf_jobs, prio, rate0, counts)
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
        it[i] = p[a] + (g[a] / rate[a] if rate[a] > 0 else 0.0) + tl[a]
        keep_position(now_s, rows[i], it[i], jobs.phase[i], t)



@njit(**JIT)
def limiting_entries(e: Entries, cap_link, jobs: MeanFieldJobs, rate, duty, rtol=1e-2):
    """Per entry of a solved mean field (:func:`mean_field`'s rates and duties): whether its link limits its
    job, i.e. holds the job's rate below its cap.

    At the fixed point job i's rate is the least of its levels; link l holds it there when, with i at its
    rate and every other job k at its duty-weighted ``min(r_k, level x phi_k)``, l is full (to ``rtol``).
    A binding link that limits nobody is where jobs meet only on average, below capacity: it joins them
    into one component without slowing any of them (``benchmarks/bench_components.py`` counts them;
    :mod:`~netlab.network.tcp.cores` simulates the jobs the same link limits).
    """
    job, link, w = e.job, e.link, e.weight
    phi, cap_job = jobs.weight, jobs.cap_gbps
    n_e, m = job.shape[0], cap_link.shape[0]
    start, order = by_link(link, m)
    out = np.zeros(n_e, np.bool_)
    for g in range(m):
        for s in range(start[g], start[g + 1]):
            x = order[s]
            i = job[x]
            if not rate[i] < cap_job[i] * (1.0 - 1e-3):
                continue
            level = rate[i] / phi[i]
            total = w[x] * rate[i]
            for q in range(start[g], start[g + 1]):
                y = order[q]
                if y != x:
                    k = job[y]
                    total += w[y] * duty[k] * min(rate[k], level * phi[k])
            out[x] = total >= cap_link[g] * (1.0 - rtol)
    return out
