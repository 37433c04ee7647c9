"""The incremental re-solve with phase cores (``phase_cores``): the compiled re-solve's steps, the cores between.

Why: with ``phase_cores`` every re-solve used to go through Python over every link of the component's rows
(:func:`~.incremental.binding_component`, then :func:`~.solve.solve_component`), where the default re-solve
walks and solves only the links that can bind, in compiled calls (:func:`~.incremental.resolve_touched`). That
cost full Philly about half as much again as the default run even when no core was ever simulated
(``max_core_jobs`` 1; ``benchmarks/results/phase_cores.json``, ``philly_floor``). Here the re-solve takes the
default's steps (:func:`~.incremental.touched_part`, :func:`~.solve.solve_unless_exact`,
:func:`~.incremental.write_back`) and simulates the cores (:func:`~.cores.refine_cores`) between the mean field
and the write-back; a component with a part for the exact simulation is solved by
:func:`~.solve.solve_component` as the default re-solve does.

Same answers as before, to the bit: the binding part's links are renumbered in the order the old walk met them
(first met over every link of the rows, row by row: :func:`full_order`), so the cores' links, their flows'
columns and their cache keys come in the same order, and the solves read the same entries in the same order.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from ...jit import njit  # numba is imported at the first kernel call
from ..jit import JIT
from ..links import LinkArrays
from ..slots import Entries, Rows, jobs_at
from .components import Solved, alone, binding_components, comm_from_periods
from .cores import refine_cores
from .incremental import touched_part, write_back
from .mean_field import MeanFieldCounts
from .solve import SolveCode, solve_component, solve_unless_exact


class CoreResolve(NamedTuple):
    """A re-solve's answer (:func:`~.incremental.resolve_touched`'s values), with how it was solved and, per row
    of the component, whether the job's time came from the mean field (phase-blind)."""

    code: int
    ids: np.ndarray
    iter_s: np.ndarray
    comm_s: np.ndarray
    rows: np.ndarray
    comp_links: np.ndarray
    sub: Entries
    kept: np.ndarray
    written: np.ndarray
    blind: np.ndarray
    exact: int  # components simulated exactly
    mean_field: bool  # whether the mean field ran


@njit(**JIT)
def full_order(job, link, m, rows, glinks, t_links, t_n_links):
    """Per local link of the binding part (``job``, ``link``: its entries, in row order; ``glinks``: each local
    link's global id), its place in the order every link of the rows is first met row by row, each row's links
    in its order (``t_links``, ``t_n_links``): (row index, position in the row) as one key."""
    key = np.full(m, -1, np.int64)
    width = t_links.shape[1]
    for x in range(job.shape[0]):
        b = link[x]
        if key[b] >= 0:
            continue
        r, g = rows[job[x]], glinks[b]
        for k in range(t_n_links[r]):
            if t_links[r, k] == g:
                key[b] = job[x] * width + k
                break
    return key


@njit(**JIT)
def solve_part(now_s, touched, seeds, t: Rows, links: LinkArrays, binding, max_exact, alpha, counts: MeanFieldCounts):
    """:func:`~.incremental.resolve_touched` up to its write-back, the binding part's links renumbered in the old
    walk's order (module doc): (code, rows, their links, the entries, which links bind (in the new order), their
    capacities, the jobs, the answer, each job alone, the components). Named tuples or plain ones (``jit.py``)."""
    t, links, counts = Rows(*t), LinkArrays(*links), MeanFieldCounts(*counts)
    rows, comp_links, sub, kept = touched_part(seeds, touched, t, binding, links.capacity_gbps)
    order = np.argsort(full_order(sub.job, sub.link, kept.shape[0], rows, comp_links[kept], t.links, t.n_links))
    rank = np.empty(order.shape[0], np.int64)
    rank[order] = np.arange(order.shape[0])
    sub, kept = Entries(sub.job, rank[sub.link], sub.weight), kept[order]
    cap, jobs = links.capacity_gbps[comp_links[kept]], jobs_at(t, rows)
    if rows.shape[0] == 0:
        code, none = SolveCode.NOTHING, np.empty(0)
        out = Solved(none, none, none, none, none)
    else:
        code, out = solve_unless_exact(now_s, sub, cap, jobs, t, rows, max_exact, alpha, counts, True)
    al = alone(jobs)
    comps = binding_components(sub, cap, al.cap_gbps, max_exact, True)
    return code.value, rows, comp_links, sub, kept, cap, jobs, out, al, comps


def resolve_cores(now_s: float, touched, seeds, t, links, binding, p, rtol, counts, solved, may_bind, keep,
                  cache) -> CoreResolve:
    """The re-solve of the ``touched`` links' component (the arguments of :func:`~.incremental.resolve_touched`,
    named tuples ``t`` and ``links``), its large jobs' cores simulated after the mean field (``cache``: the
    model's :class:`~.cores.CoreCache`)."""
    code, rows, comp_links, sub, kept, cap, jobs, out, al, comps = solve_part(
        now_s, touched, seeds, tuple(t), tuple(links), binding, p.max_exact_jobs, p.alpha, tuple(counts))
    none_i = np.empty(0, np.int64)
    if code == SolveCode.NOTHING:
        return CoreResolve(code, none_i, out.iter_s, out.comm_s, rows, comp_links, sub, kept, none_i,
                           np.zeros(0, bool), 0, False)
    blind = np.zeros(len(rows), dtype=bool)
    exact = 0
    if code == SolveCode.EXACT_NEEDED:  # a part for the exact simulation: in Python, the cores after it
        out, exact, mean_field = solve_component(now_s, sub, cap, jobs, t, rows, p, counts, blind, cache)
    elif code == SolveCode.MEAN_FIELD:
        mean_field = True
        cored = refine_cores(now_s, sub, cap, comps, jobs, al, t, rows, out.iter_s, p, cache, counts)
        if len(cored):
            counts.core_jobs[0] += len(cored)
            comm_from_periods(cored, out.iter_s, jobs.compute_s, jobs.overlap, al.comm_s, out.comm_s)
        blind[:] = comps.contended & comps.large
        blind[cored] = False
    else:  # no job contended: none sits in a core's pattern now
        mean_field = False
        cache.settled(jobs.job_id.tolist(), [])
    ids, it, comm, written = write_back(touched, seeds, rows, comp_links, kept, out, rtol, t, links, solved,
                                        may_bind, keep)
    return CoreResolve(code, ids, it, comm, rows, comp_links, sub, kept, written, blind, exact, mean_field)
