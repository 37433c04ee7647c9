"""``phase``: communication is on/off within each iteration; jobs collide only while their windows overlap.

Each job has a phase offset (a fraction of its period, settable by
policies). Solved as a periodic steady state on the unified circle of
:mod:`netlab.network.circle` (see :class:`PhaseNetwork`). It has no
incremental solver of its own: the simulator's changes re-solve every running
job through :meth:`PhaseNetwork.solve` (:class:`~netlab.network.model.NetworkModel`'s
generic way).
"""

from __future__ import annotations

import numpy as np

from .circle import BINS, MAX_PERIODS, unified_circle
from .maxmin import max_min
from .model import GBIT, NETWORKS, Capabilities, NetSolution, NetworkModel, incidence, iteration_time


@NETWORKS.register("phase")
class PhaseNetwork(NetworkModel):
    """On/off communication with phase offsets, solved as a periodic steady state.

    For each group of jobs that share links, the periods are laid on the
    unified circle of :func:`netlab.network.circle.unified_circle`, the same
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

    Network allocations: weights (shares inside every bin), caps and path
    choice are honoured; priority classes are refused. Its windows are fixed
    on the circle, so a lower class whose window lies under a higher class's
    would get nothing in every bin it communicates in and never finish; the
    model cannot push its transfer into the gaps as a strict-priority link
    does (``tcp``'s fluid does).
    """

    name = "phase"
    capabilities = Capabilities(uses_phase=True, allocations=frozenset({"weight", "rate_cap", "path"}))

    def __init__(self, bins: int = BINS, max_periods: int = MAX_PERIODS, max_iter: int = 30, tol: float = 1e-3):
        self.bins, self.max_periods, self.max_iter, self.tol = bins, max_periods, max_iter, tol

    def fresh(self) -> PhaseNetwork:
        return PhaseNetwork(self.bins, self.max_periods, self.max_iter, self.tol)

    def solve(self, demands, capacity_gbps):
        if not demands:
            return NetSolution({}, {})
        for d in demands:
            self.check_allocation(d.allocation, d.job_id)
        job, link, weight, links = incidence(demands)
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
        caps = np.array([d.flow_cap_gbps for d in ds])
        share = np.array([d.share for d in ds])
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
                res = max_min(cap, local[job[on]], link[on], weight[on], len(sub_jobs), caps[sub_jobs], share[sub_jobs])
                rate = np.zeros(n)
                rate[sub_jobs] = res.rate
                lost = np.zeros(len(job))
                short = np.maximum(iso[job[on]] - res.rate[local[job[on]]], 0)
                lost[on] = np.where(res.bottleneck, weight[on] * short, 0)
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
