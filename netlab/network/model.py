"""Network models: from the running jobs' flows to their iteration times.

A job's iteration time is compute plus communication, less the overlapped
part (documented rule, one place)::

    iter = compute + comm - overlap * min(compute, comm)

``overlap`` is 0 (strict compute-then-communicate, CASSINI's on/off picture)
to 1 (communication fully hidden behind compute when it is shorter).
Communication is ``flow_bytes / rate`` over the network plus any serial
intra-host phase.

Modes (registry ``NETWORKS``):

* ``fair``: all running jobs' flows share every link max-min fairly at once
  (their communication phases are taken to coincide: the worst case, and the
  classic flow-level model). Recomputed only when the set of flows changes.
* ``phase``: communication is on/off within each iteration. Each job has a
  phase offset (a fraction of its period, settable by policies); jobs collide
  only while their windows overlap. Solved as a periodic steady state on a
  unified circle (see :class:`PhaseNetwork`).
* ``ideal``: a non-blocking network; every job runs at its isolated speed.
  The lower bound every result is compared with.

Link accounting is time-averaged over the iteration: ``load`` is the mean
Gbit/s a link carries, ``overload`` the mean demand above capacity: for each
job bottlenecked on the link, the rate it would have alone minus the rate it
gets, while it communicates. Integrated over time this is the ECN-mark proxy.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
from numba import njit

from ..registry import Registry
from .maxmin import _filling, max_min
from .phase import BINS, MAX_PERIODS, unified_circle

NETWORKS: Registry["NetworkModel"] = Registry("network model")
#: the model a simulation uses unless told otherwise: ``tcp``, the one that matches the testbed under contention
#: (benchmarks/results/fidelity.json: contended jobs 2.6% median error against 30% for ``fair``); ``fair``
#: (max-min, about 1.6-1.8x faster on full Philly), ``phase`` and ``ideal`` remain as bounds
DEFAULT_NETWORK = "tcp"

GBIT = 1e9


def iteration_time(compute_s: float, comm_s: float, overlap: float) -> float:
    return compute_s + comm_s - overlap * min(compute_s, comm_s)


@dataclass
class CommDemand:
    """The network demand of one running multi-host job."""

    job_id: int
    links: np.ndarray  # directed link ids
    weights: np.ndarray  # flows of this job on each link (fractional under split ECMP)
    flow_bytes: float  # bytes per flow per iteration
    compute_s: float
    serial_intra_s: float = 0.0
    overlap: float = 0.0
    rate_cap_gbps: float = math.inf
    iso_rate_gbps: float = math.inf  # per-flow rate alone on this placement
    iso_iter_s: float = 0.0  # iteration time on the ideal network
    phase: float = 0.0  # offset of the iteration start, as a fraction of the period

    def net_s(self, rate_gbps: float) -> float:
        return self.flow_bytes * 8 / (rate_gbps * GBIT) if self.flow_bytes else 0.0

    def iter_s(self, rate_gbps: float) -> float:
        return iteration_time(self.compute_s, self.net_s(rate_gbps) + self.serial_intra_s, self.overlap)


@dataclass
class NetSolution:
    iter_s: dict[int, float]
    comm_s: dict[int, float]
    links: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    load_gbps: np.ndarray = field(default_factory=lambda: np.zeros(0))  # time-averaged
    overload_gbps: np.ndarray = field(default_factory=lambda: np.zeros(0))  # time-averaged
    rate_gbps: dict[int, float] = field(default_factory=dict)  # per-flow rate while communicating (fair)
    rate_load_gbps: np.ndarray | None = None  # sum of flow rates per link while all communicate (fair)


def _incidence(demands: list[CommDemand]):
    """Stack the demands into local (job, link, weight) arrays over the links they use."""
    sizes = [len(d.links) for d in demands]
    job = np.repeat(np.arange(len(demands)), sizes)
    all_links = np.concatenate([d.links for d in demands]) if demands else np.zeros(0, dtype=np.int64)
    weight = np.concatenate([d.weights for d in demands]) if demands else np.zeros(0)
    links, local = np.unique(all_links, return_inverse=True)
    return job, local, weight, links


@njit(cache=True)
def _fair(capacity, job, link, weight, caps, flow_bytes, compute, intra, overlap, iso):  # pragma: no cover
    """Max-min rates, then per job iteration/communication times and per link loads (see FairShareNetwork)."""
    n_jobs = flow_bytes.shape[0]
    rate, bottleneck, rate_load = _filling(capacity, job, link, weight, n_jobs, caps)
    it, comm, duty = np.empty(n_jobs), np.empty(n_jobs), np.empty(n_jobs)
    for j in range(n_jobs):
        net = flow_bytes[j] * 8 / (rate[j] * GBIT)
        comm[j] = net + intra[j]
        it[j] = compute[j] + comm[j] - overlap[j] * min(compute[j], comm[j])  # iteration_time, compiled
        duty[j] = net / it[j]
    load, overload = np.zeros(capacity.shape[0]), np.zeros(capacity.shape[0])
    for e in range(job.shape[0]):
        j = job[e]
        load[link[e]] += weight[e] * rate[j] * duty[j]
        if bottleneck[e]:
            overload[link[e]] += weight[e] * max(iso[j] - rate[j], 0.0) * duty[j]
    return rate, it, comm, rate_load, load, overload


class NetworkModel:
    name = "base"
    incremental = False  # True: the fabric re-solves only the changed component (``solve_arrays``), with ``now``

    def forget(self, job_id: int) -> None:
        """A job left the network (models that keep per-job state drop it)."""

    def phase_now(self, job_id: int) -> float | None:
        """Where the job's iterations start now, as a fraction of its period (``phase x period + k x
        period``), for models that move it as jobs interact; None: the phase a policy set still holds."""
        return None

    def solve(self, demands: list[CommDemand], capacity_gbps: np.ndarray) -> NetSolution:  # pragma: no cover
        raise NotImplementedError


@NETWORKS.register("ideal")
class IdealNetwork(NetworkModel):
    """Non-blocking network: every job at its isolated speed."""

    name = "ideal"

    def solve(self, demands, capacity_gbps):
        iter_s = {d.job_id: d.iso_iter_s for d in demands}
        comm = {d.job_id: d.iso_iter_s - d.compute_s for d in demands}
        return NetSolution(iter_s, comm)


@NETWORKS.register("fair")
class FairShareNetwork(NetworkModel):
    """Max-min fair sharing of every link by all running jobs' flows at once."""

    name = "fair"

    def solve(self, demands, capacity_gbps):
        if not demands:
            return NetSolution({}, {})
        job, link, weight, links = _incidence(demands)
        flow_bytes, compute, intra, overlap, caps, iso = np.array(
            [(d.flow_bytes, d.compute_s, d.serial_intra_s, d.overlap, d.rate_cap_gbps, d.iso_rate_gbps)
             for d in demands]).T.copy()
        rate, it, comm, rate_load, load, overload = _fair(
            np.ascontiguousarray(capacity_gbps[links], dtype=np.float64), job, link, weight.astype(np.float64),
            caps, flow_bytes, compute, intra, overlap, iso)
        ids = [d.job_id for d in demands]
        return NetSolution(dict(zip(ids, it.tolist())), dict(zip(ids, comm.tolist())), links, load, overload,
                           dict(zip(ids, rate.tolist())), rate_load)


@NETWORKS.register("phase")
class PhaseNetwork(NetworkModel):
    """On/off communication with phase offsets, solved as a periodic steady state.

    For each group of jobs that share links, the periods are laid on the
    unified circle of :func:`netlab.network.phase.unified_circle`, the same
    one CASSINI's scorer uses (``bins`` steps of the longest period, the LCM
    of the quantised periods capped at ``max_periods`` longest periods;
    beyond the cap the circle is that window, which stands in for the
    drifting overlap of incommensurate periods). In every
    bin the jobs whose communication window covers it share links max-min
    fairly; a job's communication time is its bytes over the mean rate it got
    while communicating. Periods depend on those times, so the computation is
    repeated (damped) until the times settle.

    A job's window starts ``phase * period`` after the circle's origin plus
    its compute time (less the overlapped part). Policies such as CASSINI
    set ``phase`` to interleave jobs.
    """

    name = "phase"

    def __init__(self, bins: int = BINS, max_periods: int = MAX_PERIODS, max_iter: int = 30, tol: float = 1e-3):
        self.bins, self.max_periods, self.max_iter, self.tol = bins, max_periods, max_iter, tol

    def solve(self, demands, capacity_gbps):
        if not demands:
            return NetSolution({}, {})
        job, link, weight, links = _incidence(demands)
        cap = capacity_gbps[links]
        # Groups of jobs connected through shared links.
        from scipy.sparse import coo_matrix
        from scipy.sparse.csgraph import connected_components

        n = len(demands)
        graph = coo_matrix((np.ones(len(job)), (job, n + link)), shape=(n + len(links), n + len(links)))
        _, label = connected_components(graph, directed=False)
        iter_s, comm_s = {}, {}
        load = np.zeros(len(links))
        overload = np.zeros(len(links))
        for group in np.unique(label[:n]):
            members = np.flatnonzero(label[:n] == group)
            sel = np.isin(job, members)
            remap = {m: i for i, m in enumerate(members)}
            g_job = np.array([remap[j] for j in job[sel]], dtype=np.int64)
            g_link = link[sel]
            g_weight = weight[sel]
            out = self._solve_group([demands[m] for m in members], cap, g_job, g_link, g_weight)
            for d, it, cm in zip((demands[m] for m in members), out[0], out[1]):
                iter_s[d.job_id], comm_s[d.job_id] = it, cm
            load += out[2]
            overload += out[3]
        return NetSolution(iter_s, comm_s, links, load, overload)

    def _solve_group(self, ds, cap, job, link, weight):
        n = len(ds)
        caps = np.array([d.rate_cap_gbps for d in ds])
        iso = np.array([d.iso_rate_gbps for d in ds])
        bytes_ = np.array([d.flow_bytes for d in ds])
        compute = np.array([d.compute_s for d in ds])
        intra = np.array([d.serial_intra_s for d in ds])
        overlap = np.array([d.overlap for d in ds])
        phase = np.array([d.phase for d in ds]) % 1.0
        cache: dict[bytes, object] = {}

        def rates_for(active: np.ndarray):
            key = np.packbits(active).tobytes()
            if key not in cache:
                on = active[job]
                sub_jobs = np.flatnonzero(active)
                local = -np.ones(n, dtype=np.int64)
                local[sub_jobs] = np.arange(len(sub_jobs))
                res = max_min(cap, local[job[on]], link[on], weight[on], len(sub_jobs), caps[sub_jobs])
                rate = np.zeros(n)
                rate[sub_jobs] = res.rate
                lost = np.zeros(len(job))
                lost[on] = np.where(res.bottleneck, weight[on] * np.maximum(iso[job[on]] - res.rate[local[job[on]]], 0), 0)
                cache[key] = (rate, res.load, np.bincount(link, weights=lost, minlength=len(cap)))
            return cache[key]

        net = bytes_ * 8 / (iso * GBIT)
        if n == 1:
            rate, ld, ov = rates_for(np.ones(1, dtype=bool))
            net = bytes_ * 8 / (rate * GBIT)
            it = np.array([iteration_time(compute[0], net[0] + intra[0], overlap[0])])
            duty = net / it
            return it, net + intra, ld * duty[0], ov * duty[0]
        for _ in range(self.max_iter):
            comm = net + intra
            period = compute + comm - overlap * np.minimum(compute, comm)
            circle = unified_circle(period, self.bins, self.max_periods)  # the grid CASSINI's scorer uses
            unit, counts, horizon = circle.step_s, circle.counts, circle.bins
            t = (np.arange(horizon) + 0.5) * unit
            qperiod = counts * unit
            start = phase * qperiod + compute - overlap * np.minimum(compute, comm)
            pos = np.mod(t[None, :] - start[:, None], qperiod[:, None])
            active = pos < net[:, None]
            # A window shorter than one bin still communicates: give it its first bin.
            empty = ~active.any(axis=1)
            if empty.any():
                first = np.argmin(pos, axis=1)
                active[empty, first[empty]] = True
            patterns, inverse, counts_p = np.unique(active.T, axis=0, return_inverse=True, return_counts=True)
            rate_sum = np.zeros(n)
            load = np.zeros(len(cap))
            overload = np.zeros(len(cap))
            for p, c in zip(patterns, counts_p):
                rate, ld, ov = rates_for(p)
                rate_sum += rate * c
                load += ld * c
                overload += ov * c
            on_count = active.sum(axis=1)
            mean_rate = rate_sum / on_count
            new_net = bytes_ * 8 / (mean_rate * GBIT)
            change = np.max(np.abs(new_net - net) / np.maximum(net, 1e-12))
            net = 0.5 * net + 0.5 * new_net
            if change < self.tol:
                net = new_net
                break
        comm = net + intra
        it = compute + comm - overlap * np.minimum(compute, comm)
        return it, comm, load / horizon, overload / horizon
