"""DCTCP's beat-down in the incremental re-solve: the two solves of :mod:`~.beatdown`, per touched component.

Why it can be incremental: the beat-down weights of a job follow from the marked fractions of the links its
ring flows cross (:func:`~.beatdown.beatdown_weights`), and only binding links are ever marked. Binding links
are what joins jobs into components, so the marks on a component's links come from a solve of that component
alone, its weights too, and the second (weighted) solve of it reads nothing outside it. A change therefore
re-solves the components it touches twice (the first solve gives their links' marked fractions, the weights
follow, the second solve shares the links with them) and leaves every other component's answer as it is,
as the one-solve re-solve does (:mod:`~.incremental`).

What it keeps: each component's rows carry their phase state from one re-solve to the next, as the one-solve
model's do (the first solve's changes to it are undone, so the second starts where the last re-solve left
it); both solves start the mean field from the job's last time (the warm start of the one-solve re-solve),
and the first is not counted among the model's solves. The batch ``solve`` (:func:`~.beatdown.beaten_solve`:
every job, fresh state) is what policies and the referee's predictions use; a simulation uses this module unless
``beatdown_incremental`` is off (:mod:`~.params`: the two ways compared).

The weights need each job's ring flows' own links (``CommDemand.flow_paths``), which a component's rows do
not hold (their links are summed over flows): :class:`FlowPathTable` keeps them per row, flat, for the
compiled weights (:func:`row_weights`, :func:`~.beatdown.beatdown_weights`'s rule).
"""

from __future__ import annotations

import numpy as np

from ...jit import njit  # numba is imported at the first kernel call
from ..jit import JIT
from ..links import LinkArrays
from ..slots import Jobs, Rows, jobs_at
from .incremental import touched_part, unsolved, write_back
from .mean_field import MeanFieldCounts, mean_field_counts
from .solve import SolveCode, solve_component, solve_unless_exact


@njit(**JIT)
def row_weights(rows, r_start, r_n, f_start, f_len, e_link, e_share, marked, beta):
    """Per row of ``rows``, its beat-down weight: over its flows (``r_start[r]``, ``r_n[r]`` into the flows,
    each ``f_start``, ``f_len`` into the entries: link id and share of the flow on it), the flow with the highest
    price (the sum of ``marked[link] x share``; the first of equal ones) gives the ratio price / the largest
    ``marked`` on its path (1 if none), and the weight is ``ratio ** -beta``; 1 for a row with no flow or
    marked link. The same rule, sums and order as :func:`~.beatdown.beatdown_weights`."""
    out = np.ones(rows.shape[0])
    for a in range(rows.shape[0]):
        r = rows[a]
        price, ratio = 0.0, 1.0
        for f in range(r_start[r], r_start[r] + r_n[r]):
            p, top = 0.0, 0.0
            for x in range(f_start[f], f_start[f] + f_len[f]):
                q = marked[e_link[x]]
                p += q * e_share[x]
                top = max(top, q)
            if p > price:
                price, ratio = p, (p / top if top > 0.0 else 1.0)
        out[a] = ratio ** -beta
    return out


@njit(**JIT)
def _compacted(r_start, r_n, f_start, f_len, e_link, e_share, n_flows, n_entries):
    """The live rows' flows and entries (rows with ``r_n`` > 0) copied to the front, in row order, into arrays
    of ``n_flows`` and ``n_entries``; ``r_start`` moved in place. (flow start, flow length, links, shares)."""
    fs, fl = np.empty(n_flows, np.int64), np.empty(n_flows, np.int64)
    el, es = np.empty(n_entries, np.int64), np.empty(n_entries)
    nf = ne = 0
    for r in range(r_start.shape[0]):
        if r_n[r] == 0:
            continue
        first = r_start[r]
        r_start[r] = nf
        for f in range(first, first + r_n[r]):
            fs[nf], fl[nf] = ne, f_len[f]
            for x in range(f_start[f], f_start[f] + f_len[f]):
                el[ne], es[ne] = e_link[x], e_share[x]
                ne += 1
            nf += 1
    return fs, fl, el, es


def _grown(a: np.ndarray, n: int, fill=0) -> np.ndarray:
    """``a`` with room for at least ``n`` entries (doubled), the new ones ``fill``."""
    if n <= len(a):
        return a
    out = np.full(max(n, 2 * len(a), 64), fill, dtype=a.dtype)
    out[:len(a)] = a
    return out


class FlowPathTable:
    """Per row of the model's slot table, its job's ring flows' paths (``CommDemand.flow_paths``), flat: the row's
    flows (start, count), each flow's entries (start, count), each entry a link id and the share of the flow on
    it. Appended as jobs join or re-route (:meth:`put`), dropped as they leave (:meth:`drop`); the arrays are
    compacted when more than half of them is dropped rows'."""

    def __init__(self, n_links: int):
        self.r_start, self.r_n = np.zeros(0, np.int64), np.zeros(0, np.int64)
        self.f_start, self.f_len = np.zeros(0, np.int64), np.zeros(0, np.int64)
        self.e_link, self.e_share = np.zeros(0, np.int64), np.zeros(0)
        self.n_flows = self.n_entries = 0  # used, live or not
        self.live_flows = self.live_entries = 0
        self.marked = np.zeros(n_links)  # per link: its marked fraction, set only while weights are found

    def put(self, row: int, paths) -> None:
        """Row ``row`` now holds a job whose flows' paths are ``paths`` (``CommDemand.flow_paths``: per flow, its
        links and the share of it on each; None or empty: weight 1)."""
        self.drop(row)
        paths = paths or ()
        if not len(paths):
            return
        lens = np.fromiter((len(p[0]) for p in paths), np.int64, len(paths))
        nf, ne = len(paths), int(lens.sum())
        self.f_start, self.f_len = _grown(self.f_start, self.n_flows + nf), _grown(self.f_len, self.n_flows + nf)
        self.e_link, self.e_share = _grown(self.e_link, self.n_entries + ne), _grown(self.e_share, self.n_entries + ne)
        self.f_len[self.n_flows:self.n_flows + nf] = lens
        self.f_start[self.n_flows:self.n_flows + nf] = self.n_entries + np.cumsum(lens) - lens
        self.e_link[self.n_entries:self.n_entries + ne] = np.concatenate([p[0] for p in paths])
        self.e_share[self.n_entries:self.n_entries + ne] = np.concatenate([p[1] for p in paths])
        self.r_start, self.r_n = _grown(self.r_start, row + 1), _grown(self.r_n, row + 1)
        self.r_start[row], self.r_n[row] = self.n_flows, nf
        self.n_flows += nf
        self.n_entries += ne
        self.live_flows += nf
        self.live_entries += ne

    def drop(self, row: int) -> None:
        """Row ``row``'s job left (or is re-routed): its flows are no longer read."""
        if row >= len(self.r_n) or self.r_n[row] == 0:
            return
        first, nf = int(self.r_start[row]), int(self.r_n[row])
        self.live_flows -= nf
        self.live_entries -= int(self.f_len[first:first + nf].sum())
        self.r_n[row] = 0
        if self.n_entries > 4096 and self.live_entries < self.n_entries // 2:
            self.f_start, self.f_len, self.e_link, self.e_share = _compacted(
                self.r_start, self.r_n, self.f_start, self.f_len, self.e_link, self.e_share, self.live_flows,
                self.live_entries)
            self.n_flows, self.n_entries = self.live_flows, self.live_entries

    def weights(self, rows: np.ndarray, links: np.ndarray, marked: np.ndarray, beta: float) -> np.ndarray:
        """Per row of ``rows``, its beat-down weight when ``links`` (global ids) are marked ``marked`` and no
        other link is (:func:`row_weights`)."""
        self.r_start, self.r_n = _grown(self.r_start, int(rows.max()) + 1), _grown(self.r_n, int(rows.max()) + 1)
        self.marked[links] = marked
        out = row_weights(rows, self.r_start, self.r_n, self.f_start, self.f_len, self.e_link, self.e_share,
                          self.marked, beta)
        self.marked[links] = 0.0
        return out


@njit(**JIT)
def _weighted(jobs: Jobs, w) -> Jobs:
    """``jobs`` with each share weight times ``w`` (a queue of its own where ``w`` is not 1)."""
    return Jobs(jobs.job_id, jobs.flow_bytes, jobs.compute_s, jobs.intra_s, jobs.overlap, jobs.rate_cap_gbps,
                jobs.iso_rate_gbps, jobs.phase, jobs.share * w, jobs.priority, jobs.last_iter_s,
                jobs.own_queue | (w != 1.0))


@njit(**JIT)
def resolve_touched_twice(now_s, touched, seeds, t: Rows, links: LinkArrays, binding, max_exact, alpha, rtol,
                          counts: MeanFieldCounts, scratch: MeanFieldCounts, solved, may_bind, keep, r_start, r_n,
                          f_start, f_len, e_link, e_share, marked, beta):
    """:func:`~.incremental.resolve_touched` with the beat-down's two solves (module doc), in one compiled call when
    no part of the component is for the exact simulation; the same answer tuple. The first solve's counters go
    into ``scratch``, and its changes to the rows' phase state are undone; the weights are :func:`row_weights`
    over the flow path table's arrays (``marked``: per link, zero, used as scratch). ``EXACT_NEEDED``: nothing
    solved, nothing written (the caller runs :class:`TwoPass`)."""
    t, links = Rows(*t), LinkArrays(*links)
    counts, scratch = MeanFieldCounts(*counts), MeanFieldCounts(*scratch)
    rows, comp_links, sub, kept = touched_part(seeds, touched, t, binding, links.capacity_gbps)
    if rows.shape[0] == 0:
        return unsolved(SolveCode.NOTHING.value, rows, comp_links, sub, kept)
    solved_links = comp_links[kept]
    cap, jobs = links.capacity_gbps[solved_links], jobs_at(t, rows)
    anchor, period, anchor_phase = t.anchor_s[rows], t.period_s[rows], t.anchor_phase[rows]
    code, first = solve_unless_exact(now_s, sub, cap, jobs, t, rows, max_exact, alpha, scratch, True)
    if code == SolveCode.EXACT_NEEDED:
        return unsolved(code.value, rows, comp_links, sub, kept)
    t.anchor_s[rows], t.period_s[rows], t.anchor_phase[rows] = anchor, period, anchor_phase
    marked[solved_links] = first.queue_frac
    w = row_weights(rows, r_start, r_n, f_start, f_len, e_link, e_share, marked, beta)
    marked[solved_links] = 0.0
    code, out = solve_unless_exact(now_s, sub, cap, _weighted(jobs, w), t, rows, max_exact, alpha, counts, True)
    ids, it, comm, written = write_back(touched, seeds, rows, comp_links, kept, out, rtol, t, links, solved,
                                        may_bind, keep)
    return code.value, ids, it, comm, rows, comp_links, sub, kept, written


class TwoPass:
    """A component's re-solve with the beat-down (module doc), for the model's ``resolve``: in one compiled call
    (:meth:`resolve_touched`) unless a part of the component is for the exact simulation, then in Python around the
    compiled solves (:meth:`__call__`, called as :func:`~.solve.solve_component` is, with the global ids of the
    links it solves over). Either way: the first solve (its changes to the rows' phase state undone, counted
    nowhere), each link's marked fraction, each row's weight (:func:`row_weights`), the second
    solve with every job's share weight times its beat-down weight (and a queue of its own where that weight is
    not 1, as :class:`~.beatdown.Reweighted` reads)."""

    def __init__(self, paths: FlowPathTable):
        self.paths = paths
        self.scratch = mean_field_counts()  # the first solves' counters, read by nobody

    def resolve_touched(self, now_s, touched, seeds, t: tuple, links: tuple, binding, p, rtol, counts: tuple, solved,
                        may_bind, keep):
        """:func:`resolve_touched_twice` over the flow path table (``t``, ``links``, ``counts``: plain tuples;
        ``p``: the model's parameters)."""
        f = self.paths
        f.r_start, f.r_n = _grown(f.r_start, len(t[0])), _grown(f.r_n, len(t[0]))
        return resolve_touched_twice(now_s, touched, seeds, t, links, binding, p.max_exact_jobs, p.alpha, rtol, counts,
                                     tuple(self.scratch), solved, may_bind, keep, f.r_start, f.r_n, f.f_start,
                                     f.f_len, f.e_link, f.e_share, f.marked, p.beatdown_beta)

    def __call__(self, now_s, e, cap_link, links, jobs, t, rows, p, counts, blind=None, cache=None):
        saved = t.anchor_s[rows], t.period_s[rows], t.anchor_phase[rows]
        first, _, _ = solve_component(now_s, e, cap_link, jobs, t, rows, p, self.scratch, None, cache)
        t.anchor_s[rows], t.period_s[rows], t.anchor_phase[rows] = saved
        w = self.paths.weights(rows, links, first.queue_frac, p.beatdown_beta)
        weighted = jobs._replace(share=jobs.share * w, own_queue=jobs.own_queue | (w != 1.0))
        return solve_component(now_s, e, cap_link, weighted, t, rows, p, counts, blind, cache)
