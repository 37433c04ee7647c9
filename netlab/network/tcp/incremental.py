"""The ``tcp`` model driven by the simulator: re-solve only what a change reaches, in one compiled call.

Only *binding* links (every job on them at its isolated rate at once would
exceed the capacity) couple jobs, so a change re-solves the jobs on the links
it touched and those joined to them through binding links; everyone else keeps
their times and phase state, so their relative phases persist. Whether a link
can bind follows from ``offered``, per link the sum of its jobs' isolated
rates, kept up to date as jobs join and leave, and so does the mask of the
links that can bind (:func:`update_binding`, on the links a change moves):
a re-solve reads the mask instead of testing every link of the fabric.

A job's time-averaged load on each of its links is its bytes per iteration
over its period, whatever the sharing, so loads are kept per row
(``Rows.link_load``) and updated by difference.
"""

from __future__ import annotations

import numpy as np

from ...jit import njit  # numba is imported at the first kernel call
from ..jit import JIT
from ..links import LinkArrays
from ..slots import Component, Rows, component_at, jobs_at
from .components import Solved
from .mean_field import MeanFieldCounts
from .solve import SolveCode, solve_unless_exact


@njit(**JIT)
def binding_component(seeds, touched, t: Rows, binding) -> Component:
    """The joined rows on the ``touched`` links (``seeds``: the links the changes touched, with repeats) and those
    joined to them through links that can bind (``binding``, per link; ``touched`` widened in place)."""
    return component_at(seeds, touched, t, binding)


@njit(**JIT)
def update_binding(binding, links, offered, capacity):
    """Whether each of ``links`` can bind now (``offered`` above its capacity), into the ``binding`` mask."""
    for g in links:
        binding[g] = offered[g] > capacity[g] * (1 + 1e-9)


@njit(**JIT)
def resolve_touched(now_s, touched, seeds, t: Rows, links: LinkArrays, binding, max_exact, alpha, rtol,
                    counts: MeanFieldCounts):
    """The component of the ``touched`` links (``seeds``: their ids, with repeats; ``touched`` widened in place;
    ``binding``: the links that can bind) solved
    and written back, when no part of it is for the exact simulation: (code, job ids, iteration s, comm s of
    the jobs whose time moved, the component's links), the code a :class:`SolveCode` value. ``EXACT_NEEDED``:
    nothing written; the caller solves the component (:func:`binding_component` again) and calls
    :func:`write_back`. Named tuples or plain ones (``jit.py``)."""
    t, links, counts = Rows(*t), LinkArrays(*links), MeanFieldCounts(*counts)
    comp = binding_component(seeds, touched, t, binding)
    none_i, none_f = np.empty(0, np.int64), np.empty(0)
    if comp.rows.shape[0] == 0:
        return SolveCode.NOTHING.value, none_i, none_f, none_f, comp.links
    code, out = solve_unless_exact(now_s, comp.entries, links.capacity_gbps[comp.links], jobs_at(t, comp.rows), t,
                                   comp.rows, max_exact, alpha, counts)
    if code == SolveCode.EXACT_NEEDED:
        return code.value, none_i, none_f, none_f, comp.links
    ids, it, comm = write_back(touched, seeds, comp, out, rtol, t, links)
    return code.value, ids, it, comm, comp.links


@njit(**JIT)
def write_back(touched, seeds, comp: Component, out: Solved, rtol, t: Rows, links: LinkArrays):
    """A component's solve into the links and rows, in place: the links' overload and queue (touched links
    cleared first), and the rows whose iteration time moved (their time and loads); those rows' (job id,
    iteration s, comm s).

    The touched links are the ``seeds`` (the links the changes touched) and those the component widened them
    to, all among its links: they are cleared by id, not by a pass over every link of the fabric.

    A fixed point converges to a tolerance, so unaffected jobs' times wobble by about that much: only a
    change beyond ``rtol`` moves a job (and its completion); the others keep their time.
    """
    for g in seeds:
        links.overload_gbps[g] = links.queue_frac[g] = 0.0
    for g in comp.links:
        if touched[g]:
            links.overload_gbps[g] = links.queue_frac[g] = 0.0
    for b in range(comp.links.shape[0]):
        links.overload_gbps[comp.links[b]], links.queue_frac[comp.links[b]] = out.overload_gbps[b], out.queue_frac[b]
    rows, it = comp.rows, out.iter_s
    moved = np.zeros(rows.shape[0], np.bool_)
    for a in range(rows.shape[0]):
        moved[a] = not (abs(it[a] - t.iter_s[rows[a]]) <= rtol * it[a])  # NaN (a new job) counts as moved
        if moved[a]:
            t.iter_s[rows[a]] = it[a]
    row_loads(rows[moved], t, links.load_gbps)
    return t.job_id[rows[moved]], it[moved], out.comm_s[moved]


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
