"""The ``tcp`` model driven by the simulator: re-solve only what a change reaches, in one compiled call.

Only *binding* links (every job on them at its isolated rate at once would
exceed the capacity) couple jobs, so a change re-solves the jobs on the links
it touched and those joined to them through binding links; everyone else keeps
their times and phase state, so their relative phases persist. Whether a link
can bind follows from ``offered``, per link the sum of its jobs' isolated
rates, kept up to date as jobs join and leave, and so does the mask of the
links that can bind (:func:`update_binding`, on the links a change moves):
a re-solve reads the mask instead of testing every link of the fabric. The
solve itself reads only the component's links that bind in it: the entries
on other links are left out as the component is built (those that cannot
bind in any solve, :func:`update_binding`'s ``may_bind``) and after its own
binding test (:func:`binding_entries`), with the same result.

A job's time-averaged load on each of its links is its bytes per iteration
over its period, whatever the sharing, so loads are kept per row
(``Rows.link_load``) and updated by difference.
"""

from __future__ import annotations

import numpy as np

from ...jit import njit  # numba is imported at the first kernel call
from ..jit import JIT
from ..links import LinkArrays
from ..slots import Component, Entries, Rows, component_at, component_rows, jobs_at, keep_link
from .components import Solved
from .mean_field import MeanFieldCounts
from .solve import SolveCode, solve_unless_exact


@njit(**JIT)
def binding_component(seeds, touched, t: Rows, binding) -> Component:
    """The joined rows on the ``touched`` links (``seeds``: the links the changes touched, with repeats) and those
    joined to them through links that can bind (``binding``, per link; ``touched`` widened in place)."""
    return component_at(seeds, touched, t, binding)


@njit(**JIT)
def update_binding(binding, may_bind, links, offered, capacity, jobs, t: Rows, solved, keep):
    """Whether each of ``links`` can bind now (``offered`` above its capacity), into the ``binding`` mask, and
    whether a solve of any component may find it binding, into ``may_bind``: a binding link, or one with two
    jobs or more (``jobs``: running jobs per link) whose offered load is within 1e-6 of its capacity. The row
    table ``t`` (named or plain, ``jit.py``) keeps its joined rows' places on the ``keep`` links: those that
    may bind and those that hold a solve's overload and queue (``solved``, :func:`write_back`), so
    ``keep = may_bind | solved`` (:func:`~netlab.network.slots.keep_link`, where a link's ``keep`` flips): a
    component is walked and built over them only, and finds among its links every one it must clear.

    Why ``may_bind``: a solve tests each link of its component on the component's own sum
    (:func:`binding_entries`), a sum over some of the link's jobs, so it may differ from ``offered`` (kept by
    adding and subtracting as jobs come and go) by rounding, about 1e-16 of the sums' size per operation, far
    below 1e-6. A link with one job never binds in a solve: a job's isolated rate is the least of its links'
    capacity / flows (``demand.py``), so its flows there offer at most the capacity, to rounding. Entries on
    other links are left out of the solve (:func:`binding_entries`): with them out,
    the solve's own test keeps exactly the links it kept before."""
    t = Rows(*t)
    for g in links:
        binding[g] = offered[g] > capacity[g] * (1 + 1e-9)
        may = binding[g] or (jobs[g] >= 2 and offered[g] > capacity[g] * (1 - 1e-6))
        if may != may_bind[g]:
            may_bind[g] = may
            kept = may or solved[g]
            if kept != keep[g]:
                keep[g] = kept
                keep_link(g, kept, t)


@njit(**JIT)
def binding_entries(rows, t: Rows, capacity):
    """The binding part of the component of ``rows`` (walked over their kept places, :func:`update_binding`):
    (its links that may bind, the rows' kept places, numbered in the order first met row by row; its entries on
    those of them that can bind in its solve, in the same order, their links renumbered in that order; and which
    of the links those are). ``capacity``: per link of the fabric.

    A solve reads a job's links only where they can bind (every job on the link at its isolated, capped rate at
    once would exceed the capacity): the offered sums, the union of jobs into components and the mean field's
    claims are over binding links, and a non-binding link gets no overload or queue. On a busy rail fabric a
    large job has thousands of links of which few can bind (its NIC links carry only its own flows, most others
    are far from full), so the solve's passes run over a small part of its entries. Exact: the test is
    :func:`~netlab.network.tcp.components.binding_components`' own (the same products summed in the same
    order), so the solve finds the same binding links and, on them, the same entries in the same order.

    Why one kernel, one pass over the kept places and one over their entries: building the component's entries,
    numbering their links, then reading them again for the offered sums, counting and copying the binding ones
    took five passes over ~1,800 entries in a Philly re-solve. When every link of the component binds (on full
    Philly nearly every re-solve: its ~190 links are the fabric's uplinks, all full) the entries found are the
    binding ones, numbered alike, and are returned without the third pass that would copy them."""
    nnz = 0
    for r in rows:
        nnz += t.n_kept[r]
    job, loc, weight = np.empty(nnz, np.int64), np.empty(nnz, np.int64), np.empty(nnz)
    links, offered = np.empty(nnz, np.int64), np.zeros(nnz)  # per kept link, numbered as first met
    m = x = 0
    for i in range(rows.shape[0]):
        r = rows[i]
        base, rate = t.node_base[r], min(t.rate_cap_gbps[r], t.iso_rate_gbps[r])
        for j in range(t.n_kept[r]):
            k = t.node_kept[base + j]
            g = t.links[r, k]
            b = t.link_local[g]
            if b < 0:
                b = t.link_local[g] = m
                links[m] = g
                m += 1
            w = t.weights[r, k]
            job[x], loc[x], weight[x] = i, b, w
            offered[b] += w * rate
            x += 1
    local, kept = np.empty(m, np.int64), np.empty(m, np.int64)
    n_kept = 0
    for b in range(m):
        t.link_local[links[b]] = -1  # (the table is left all -1, as :func:`first_met_table` leaves it)
        local[b] = -1
        if offered[b] > capacity[links[b]] * (1.0 + 1e-9):
            local[b], kept[n_kept] = n_kept, b
            n_kept += 1
    if n_kept == m:  # every link binds (nearly every Philly re-solve): the entries are the binding ones as they are
        return links[:m].copy(), Entries(job, loc, weight), kept
    sj, sl, sw = np.empty(nnz, np.int64), np.empty(nnz, np.int64), np.empty(nnz)
    n_e = 0
    for x in range(nnz):
        b = local[loc[x]]
        if b >= 0:
            sj[n_e], sl[n_e], sw[n_e] = job[x], b, weight[x]
            n_e += 1
    return links[:m].copy(), Entries(sj[:n_e], sl[:n_e], sw[:n_e]), kept[:n_kept].copy()


@njit(**JIT)
def touched_part(seeds, touched, t: Rows, binding, capacity):
    """The component a re-solve walks and the part of it its solve reads: (its rows, joined to the ``touched``
    links (``seeds``: their ids, with repeats; ``touched`` widened in place) through links that can bind
    (``binding``), then :func:`binding_entries`' three values over them; all empty when no row is on a seed).
    Shared by the one-solve re-solve (:func:`resolve_touched`) and the beat-down's two solves
    (:func:`~.beatdown_resolve.resolve_touched_twice`)."""
    rows = component_rows(seeds, touched, t, binding, True)  # binding links couple its rows
    comp_links, sub, kept = binding_entries(rows, t, capacity)
    return rows, comp_links, sub, kept


@njit(**JIT)
def unsolved(code, rows, comp_links, sub, kept):
    """A re-solve's answer tuple (:func:`resolve_touched`'s) when nothing was solved or written: ``code``, no moved
    job and no link written, the component's rows and binding part as found (:func:`touched_part`)."""
    none_i, none_f = np.empty(0, np.int64), np.empty(0)
    return code, none_i, none_f, none_f, rows, comp_links, sub, kept, none_i


@njit(**JIT)
def resolve_touched(now_s, touched, seeds, t: Rows, links: LinkArrays, binding, max_exact, alpha, rtol,
                    counts: MeanFieldCounts, solved, may_bind, keep):
    """The component of the ``touched`` links (``seeds``: their ids, with repeats; ``touched`` widened in place;
    ``binding``: the links that can bind; ``t`` keeps its rows' places on the ``keep`` links, those a solve may
    find binding and those a solve wrote, :func:`update_binding`) solved and written back, when no part of it is
    for the exact simulation: (code, job ids, iteration s, comm s of the jobs whose time moved, the component's
    rows, its kept links (in the order first met), its entries on links that bind in its solve and which of its
    links those are (:func:`binding_entries`), the links it wrote (:func:`write_back`)), the code a
    :class:`SolveCode` value. ``EXACT_NEEDED``: nothing written; the caller solves the component's binding part
    (returned, so that it is not found a second time) and calls :func:`write_back` (``solved``: its links
    written). Named tuples or plain ones (``jit.py``)."""
    t, links, counts = Rows(*t), LinkArrays(*links), MeanFieldCounts(*counts)
    rows, comp_links, sub, kept = touched_part(seeds, touched, t, binding, links.capacity_gbps)
    if rows.shape[0] == 0:
        return unsolved(SolveCode.NOTHING.value, rows, comp_links, sub, kept)
    code, out = solve_unless_exact(now_s, sub, links.capacity_gbps[comp_links[kept]], jobs_at(t, rows), t, rows,
                                   max_exact, alpha, counts, True)  # (sub binds: no loads, write_back keeps them)
    if code == SolveCode.EXACT_NEEDED:
        return unsolved(code.value, rows, comp_links, sub, kept)
    ids, it, comm, written = write_back(touched, seeds, rows, comp_links, kept, out, rtol, t, links, solved,
                                        may_bind, keep)
    return code.value, ids, it, comm, rows, comp_links, sub, kept, written


@njit(**JIT)
def write_back(touched, seeds, rows, comp_links, kept, out: Solved, rtol, t: Rows, links: LinkArrays, solved,
               may_bind, keep):
    """A component's solve into the links and rows, in place: the links' overload and queue (``out``'s per link
    of ``comp_links[kept]``, the links the solve read; the other links of its ``rows`` cannot bind in it and get
    none: cleared, as the seeds, the links the changes touched), and the rows whose iteration time moved (their
    time and loads); those rows' (job id, iteration s, comm s). ``touched`` is cleared on the component's links
    ``comp_links`` (the seeds are the caller's).

    The links are cleared by id, not by a pass over every link of the fabric, and only those a solve wrote
    (``solved``, per link, kept here: a link not written since it was last cleared holds 0.0 in both, so
    clearing it changes nothing): on a busy rail fabric a component's rows have far more links than ever bind,
    and writing every one of them (scattered over the fabric's link arrays) cost about as much as the solve.
    Nor are they looked for among every link of the rows (~95,000 on a rail 131k re-solve, two passes): the
    rows keep their places on the links a solve wrote (``keep = may_bind | solved``, :func:`update_binding`),
    so every such link of the rows is among ``comp_links`` (the rows' kept links), and a link cleared that can
    no longer bind leaves the kept ones (:func:`~netlab.network.slots.keep_link`).

    A fixed point converges to a tolerance, so unaffected jobs' times wobble by about that much: only a
    change beyond ``rtol`` moves a job (and its completion); the others keep their time.

    The fourth value is the ids of the links written (repeats possible): those cleared, those the solve wrote
    and every link of the moved rows (their loads), for :meth:`~netlab.network.links.LinkState.mark`. Why not
    every link of the rows: a reader that keeps per-link state (the aggregated history) reads each named
    link, and on a busy rail fabric about 4% of a component's links change in a re-solve.
    """
    it = out.iter_s
    moved = np.zeros(rows.shape[0], np.bool_)
    n_moved_links = 0
    for a in range(rows.shape[0]):
        moved[a] = not (abs(it[a] - t.iter_s[rows[a]]) <= rtol * it[a])  # NaN (a new job) counts as moved
        if moved[a]:
            t.iter_s[rows[a]] = it[a]
            n_moved_links += t.n_links[rows[a]]
    written = np.empty(seeds.shape[0] + comp_links.shape[0] + kept.shape[0] + n_moved_links, np.int64)
    n = _clear_solved(seeds, written, 0, links, t, solved, may_bind, keep)
    n = _clear_solved(comp_links, written, n, links, t, solved, may_bind, keep)
    for g in comp_links:  # every link the walk widened ``touched`` to (coupling links are among them)
        touched[g] = False
    for b in range(kept.shape[0]):
        g = comp_links[kept[b]]
        links.overload_gbps[g], links.queue_frac[g] = out.overload_gbps[b], out.queue_frac[b]
        solved[g] = True
        if not keep[g]:  # (a link that binds in a solve may bind: kept already)
            keep[g] = True
            keep_link(g, True, t)
        written[n] = g
        n += 1
    for a in range(rows.shape[0]):
        if moved[a]:
            r = rows[a]
            for k in range(t.n_links[r]):
                written[n] = t.links[r, k]
                n += 1
    row_loads(rows[moved], t, links.load_gbps)
    return t.job_id[rows[moved]], it[moved], out.comm_s[moved], written[:n].copy()


@njit(**JIT)
def _clear_solved(ids, written, n, links: LinkArrays, t: Rows, solved, may_bind, keep):
    """Clear the overload and queue of each of ``ids`` a solve wrote (``solved``), each named in ``written`` from
    ``n`` on; one that cannot bind leaves the kept links. The next free place in ``written``."""
    for g in ids:
        if solved[g]:
            links.overload_gbps[g] = links.queue_frac[g] = 0.0
            solved[g] = False
            written[n] = g
            n += 1
            if keep[g] and not may_bind[g]:
                keep[g] = False
                keep_link(g, False, t)
    return n


@njit(**JIT)
def row_loads(rows, t: Rows, load):
    """Set each row's time-averaged load (flows x Gbit per flow per iteration / iteration s) on its links,
    updating ``load`` by the difference. ``t``: named or plain (``jit.py``)."""
    t = Rows(*t)
    for r in rows:
        gbit = t.flow_bytes[r] * 8 / 1e9
        for k in range(t.n_links[r]):
            new = t.weights[r, k] * (gbit / t.iter_s[r])
            load[t.links[r, k]] += new - t.link_load[r, k]
            t.link_load[r, k] = new


@njit(**JIT)
def clear_row_load(r, t: Rows, links: LinkArrays):
    """A leaving row's load off its links; links it leaves empty (no job counted) go to zero. Named tuples or
    plain ones (``jit.py``)."""
    t, links = Rows(*t), LinkArrays(*links)
    for k in range(t.n_links[r]):
        g = t.links[r, k]
        links.load_gbps[g] -= t.link_load[r, k]
        t.link_load[r, k] = 0.0
        if links.jobs[g] == 0:
            links.load_gbps[g] = links.overload_gbps[g] = links.queue_frac[g] = 0.0


@njit(**JIT)
def adds_nonbinding(capacity, offered, links, weights, rate):
    """True if, with ``weights x rate`` more offered on ``links``, none of them can bind (offered <= capacity);
    with ``rate`` 0: none of them binds now."""
    for k in range(links.shape[0]):
        if offered[links[k]] + weights[k] * rate > capacity[links[k]] * (1 + 1e-9):
            return False
    return True
