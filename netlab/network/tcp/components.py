"""The pieces of a ``tcp`` solve: each job alone, and the components that binding links form.

A link *binds* when its jobs, all sending at their isolated (capped) rates at
once, would exceed its capacity; only such links couple jobs, so a solve
splits into components joined through binding links. Small ones are
simulated exactly (:mod:`~netlab.network.tcp.fluid`), large ones by the mean
field (:mod:`~netlab.network.tcp.mean_field`); a job on no binding link runs
as it would alone.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from ...jit import njit  # numba is imported at the first kernel call
from ..jit import JIT
from ..model import GBIT
from ..slots import Entries, Jobs


class Alone(NamedTuple):
    """Per job, on its own (no other traffic)."""

    cap_gbps: np.ndarray  # per-flow rate: its isolated rate, at most the pattern's cap
    gbit: np.ndarray  # per flow per iteration
    pre_s: np.ndarray  # the work before the all-reduce: compute not overlapped, plus the intra-host phase
    net_s: np.ndarray  # the all-reduce
    comm_s: np.ndarray  # intra-host phase + all-reduce
    iter_s: np.ndarray
    tail_s: np.ndarray  # the overlapped compute still running after the all-reduce


class Components(NamedTuple):
    """The components binding links form (per link: ``binding``; per job the rest)."""

    binding: np.ndarray  # per link: it can bind
    label: np.ndarray  # per job: its component (the least job index in it)
    contended: np.ndarray  # per job: on a binding link
    large: np.ndarray  # per job: contended, in a component of more than ``max_exact`` jobs (mean field)


class Solved(NamedTuple):
    """A solve's answer: per job, per link of the solve."""

    iter_s: np.ndarray
    comm_s: np.ndarray
    load_gbps: np.ndarray  # time-averaged
    overload_gbps: np.ndarray  # time-averaged demand above capacity
    queue_frac: np.ndarray  # share of time queued above the ECN threshold


@njit(**JIT)
def alone(jobs: Jobs) -> Alone:
    """Each job on its own (see :class:`Alone`)."""
    n = jobs.flow_bytes.shape[0]
    out = np.empty((7, n))
    cap, gbit, pre, net, comm, it, tail = out[0], out[1], out[2], out[3], out[4], out[5], out[6]
    for i in range(n):
        compute, intra, overlap = jobs.compute_s[i], jobs.intra_s[i], jobs.overlap[i]
        cap[i] = min(jobs.rate_cap_gbps[i], jobs.iso_rate_gbps[i])
        gbit[i] = jobs.flow_bytes[i] * 8 / GBIT
        pre[i] = (1.0 - overlap) * compute + intra
        net[i] = gbit[i] / cap[i] if cap[i] > 0 else 0.0
        comm[i] = net[i] + intra
        it[i] = compute + comm[i] - overlap * min(compute, comm[i])
        tail[i] = it[i] - pre[i] - net[i]
    return Alone(cap, gbit, pre, net, comm, it, tail)


@njit(**JIT)
def binding_components(e: Entries, cap_link, cap_job, max_exact, bound=False) -> Components:
    """Jobs joined through links that can bind (see :class:`Components`).

    A link binds when its jobs, all sending at their isolated (capped) rates at once, would exceed its
    capacity; only such links couple jobs. Union-find over the binding entries; a job on no binding link is
    a component of its own and not contended. A contended job is *large* when its component has more than
    ``max_exact`` jobs (solved by the mean field). ``bound``: the caller has found every link of ``e`` binding
    with this test (the same sums: the incremental re-solve's ``binding_entries``), so it is not taken again.
    """
    job, link, weight = e.job, e.link, e.weight
    n_jobs, n_links = cap_job.shape[0], cap_link.shape[0]
    if bound:
        binding = np.ones(n_links, np.bool_)
    else:
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
    return Components(binding, label, contended, large)


@njit(**JIT)
def comm_from_period(period, compute, overlap, floor):
    """Communication seconds (intra + network) that give ``period`` under the iteration-time rule
    (:func:`~netlab.network.model.iteration_time`); at least ``floor`` (the alone value)."""
    long_comm = period - (1.0 - overlap) * compute  # comm >= compute
    short_comm = (period - compute) / (1.0 - overlap) if overlap < 1.0 else 0.0
    return max(long_comm if long_comm >= compute else short_comm, floor)


@njit(**JIT)
def comm_from_periods(idx, period, compute, overlap, floor, comm):
    """:func:`comm_from_period` for the jobs ``idx``, into ``comm`` (one compiled call for a core's jobs, not one
    Python-to-numba call per job)."""
    for i in idx:
        comm[i] = comm_from_period(period[i], compute[i], overlap[i], floor[i])


def share_weights(gbit: np.ndarray, alpha: float) -> np.ndarray:
    """Share weights by bytes in flight: each job's Gbit per flow over the largest, to the power ``alpha``."""
    top = gbit.max()
    return (np.maximum(gbit, 1e-300) / top) ** alpha if top > 0 else np.ones(len(gbit))
