"""``fair``: all running jobs' flows share every link max-min fairly at once.

Their communication phases are taken to coincide: the worst case, and the
classic flow-level model. Rates come from progressive filling
(:mod:`netlab.network.maxmin`); a job's iteration time follows from its rate.

Per-job network allocations (:mod:`netlab.network.model`'s doc) are honoured:
inside a class, rates grow in proportion to the jobs' weights; a cap bounds a
job's per-flow rate; classes are filled one after the other from class 0,
each on what the classes before it leave of every link *on average*: a job of
a higher class takes its rate only while it communicates (its duty, the
communication share of its iteration), so the next class gets the capacity
less the higher classes' time-averaged load. (Taking the coinciding phases
literally, a lower class would get nothing while a higher one communicates and
never finish; a work-conserving strict-priority link lets it send in the
gaps.)

Incrementally, three rules keep the simulator's re-solves cheap and exact:

* only the connected component of the links a change touched is re-solved:
  max-min shares depend on nothing outside it (:func:`~netlab.network.slots.component`);
* a job that joins links which stay unsaturated even at its isolated rate
  (or that it saturates alone) changes nobody's share: it runs at its
  isolated rate at once. Likewise a job that leaves links on which it was
  alone, or that were not saturated;
* the running jobs are rows of a :class:`~netlab.network.slots.SlotTable`, so
  finding the component, solving it, writing the link loads and spotting
  whose time moved are one compiled call.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from ..jit import njit  # numba is imported at the first kernel call
from .jit import JIT
from .links import LinkArrays, LinkState
from .maxmin import _filling
from .model import (ALLOCATION_KINDS, GBIT, NETWORKS, Capabilities, CommDemand, Moved, NetSolution, NetworkModel,
                    _same_paths, _treatment, incidence)
from .slots import Entries, Jobs, Rows, SlotTable, component, jobs_at, jobs_of


class FairTimes(NamedTuple):
    """A max-min solve: per job its per-flow rate and times; per link the loads."""

    rate_gbps: np.ndarray  # per flow, while communicating
    iter_s: np.ndarray
    comm_s: np.ndarray
    rate_load_gbps: np.ndarray  # sum of flow rates while all communicate
    load_gbps: np.ndarray  # time-averaged
    overload_gbps: np.ndarray  # time-averaged demand above capacity of the jobs it bottlenecks


@njit(**JIT)
def _times(jobs: Jobs, rate, j):
    """Job ``j``'s (iteration s, communication s, duty) at per-flow ``rate``."""
    net = jobs.flow_bytes[j] * 8 / (rate * GBIT)
    comm = net + jobs.intra_s[j]
    compute, overlap = jobs.compute_s[j], jobs.overlap[j]
    it = compute + comm - overlap * min(compute, comm)  # iteration_time, compiled
    return it, comm, net / it


@njit(**JIT)
def _classes(capacity, e: Entries, jobs: Jobs):
    """Weighted max-min rates class by class (0 first), each class on the capacity the classes before it
    leave on average (see the module doc): (rate, bottleneck per entry, sum of flow rates per link)."""
    n_jobs, nnz = jobs.flow_bytes.shape[0], e.job.shape[0]
    rate, bottleneck, rate_load = np.zeros(n_jobs), np.zeros(nnz, np.bool_), np.zeros(capacity.shape[0])
    left = capacity.copy()
    local = np.full(n_jobs, -1, np.int64)
    for c in np.unique(jobs.priority):
        members = np.flatnonzero(jobs.priority == c)
        local[members] = np.arange(members.shape[0])
        sel = np.flatnonzero(jobs.priority[e.job] == c)
        r, b, rl = _filling(left, local[e.job[sel]], e.link[sel], e.weight[sel], members.shape[0],
                            jobs.rate_cap_gbps[members], jobs.share[members])
        rate[members] = r
        bottleneck[sel] = b
        rate_load += rl
        for x in sel:
            j = e.job[x]
            duty = _times(jobs, rate[j], j)[2]
            left[e.link[x]] = max(left[e.link[x]] - e.weight[x] * rate[j] * duty, 0.0)
    return rate, bottleneck, rate_load


@njit(**JIT)
def fair_times(capacity, e: Entries, jobs: Jobs) -> FairTimes:
    """Max-min rates (weighted, class by class: the module doc), then per job iteration/communication times
    and per link loads."""
    n_jobs = jobs.flow_bytes.shape[0]
    if n_jobs > 0 and jobs.priority.min() != jobs.priority.max():
        rate, bottleneck, rate_load = _classes(capacity, e, jobs)
    else:
        rate, bottleneck, rate_load = _filling(capacity, e.job, e.link, e.weight, n_jobs, jobs.rate_cap_gbps,
                                               jobs.share)
    it, comm, duty = np.empty(n_jobs), np.empty(n_jobs), np.empty(n_jobs)
    for j in range(n_jobs):
        it[j], comm[j], duty[j] = _times(jobs, rate[j], j)
    load, overload = np.zeros(capacity.shape[0]), np.zeros(capacity.shape[0])
    for x in range(e.job.shape[0]):
        j = e.job[x]
        load[e.link[x]] += e.weight[x] * rate[j] * duty[j]
        if bottleneck[x]:
            overload[e.link[x]] += e.weight[x] * max(jobs.iso_rate_gbps[j] - rate[j], 0.0) * duty[j]
    return FairTimes(rate, it, comm, rate_load, load, overload)


@NETWORKS.register("fair")
class FairShareNetwork(NetworkModel):
    """Max-min fair sharing of every link by all running jobs' flows at once."""

    name = "fair"
    capabilities = Capabilities(incremental=True, allocations=frozenset(ALLOCATION_KINDS))

    def solve(self, demands, capacity_gbps):
        if not demands:
            return NetSolution({}, {})
        for d in demands:
            self.check_allocation(d.allocation, d.job_id)
        job, link, weight, links = incidence(demands)
        sol = fair_times(np.ascontiguousarray(capacity_gbps[links], dtype=np.float64),
                         Entries(job, link, weight.astype(np.float64)), jobs_of(demands))
        ids = [d.job_id for d in demands]
        return NetSolution(dict(zip(ids, sol.iter_s.tolist())), dict(zip(ids, sol.comm_s.tolist())), links,
                           sol.load_gbps, sol.overload_gbps, dict(zip(ids, sol.rate_gbps.tolist())),
                           sol.rate_load_gbps)

    # ---------------------------------------------------------- incremental
    def attach(self, links: LinkState) -> None:
        n = len(links.capacity_gbps)
        self._links = links
        self._slots = SlotTable()
        self._demands: dict[int, CommDemand] = {}
        self._rate_load = np.zeros(n)  # per link: the sum of flow rates while all communicate
        self._touched = np.zeros(n, dtype=bool)  # links whose jobs changed since the last solve
        self._couple = np.ones(n, dtype=bool)  # every link couples the jobs on it
        self._new: set[int] = set()  # jobs waiting for their first rate
        self.pending = False

    def join(self, job_id, demand, now_s):
        self.check_allocation(demand.allocation, job_id)
        row = self._slots.add(job_id, demand)
        self._demands[job_id] = demand
        rate = min(demand.iso_rate_gbps, demand.allocation_cap_gbps)  # its rate alone (the pattern's cap is in iso)
        if _joins_unsaturated(self._links.capacity_gbps, self._rate_load, demand.links, demand.weights, rate):
            t = self._slots.rows
            t.rate_gbps[row], t.iter_s[row] = rate, demand.iter_s(rate)
            self._apply(demand, rate, +1)
            return rate
        self._await_resolve(demand, job_id)
        return None

    def leave(self, job_id, now_s):
        demand = self._demands.pop(job_id)
        rate = float(self._slots.rows.rate_gbps[self._slots.remove(job_id)])
        links = self._links
        if job_id not in self._new and _leaves_unsaturated(links.capacity_gbps, self._rate_load, links.jobs,
                                                           demand.links):
            self._apply(demand, rate, -1)
        else:
            self._await_resolve(demand)
        self._new.discard(job_id)

    def change(self, job_id, now_s, *, phase=None, allocation=None):
        """Max-min ignores phases; a new allocation (class, weight, cap) re-solves the job's component."""
        if allocation is None:
            return
        demand = self._demands[job_id]
        self.check_allocation(allocation, job_id)
        _same_paths(demand, allocation, job_id)
        before = _treatment(demand.allocation)
        demand.allocation = allocation
        if _treatment(allocation) != before:
            self._slots.rewrite(job_id, demand)
            self._await_resolve(demand)

    def resolve(self, now_s):
        self.pending = False
        self._links.write()
        ids, it, comm = _resolve(self._touched, tuple(self._slots.rows), tuple(self._links.arrays()),
                                 self._rate_load, self._couple)
        self._new.clear()
        self._touched[:] = False
        return Moved(ids.tolist(), it.tolist(), comm.tolist())

    def _apply(self, d: CommDemand, rate: float, sign: int) -> None:
        """A job joins (+1) or leaves (-1) at ``rate`` without moving anyone: add or remove its loads."""
        links = self._links
        duty = d.net_s(rate) / d.iter_s(rate)
        links.write()
        self._rate_load[d.links] += sign * d.weights * rate
        links.load_gbps[d.links] += sign * d.weights * rate * duty
        empty = d.links[links.jobs[d.links] == 0]
        self._rate_load[empty] = links.load_gbps[empty] = links.overload_gbps[empty] = 0.0


@njit(**JIT)
def _resolve(touched, t: Rows, links: LinkArrays, rate_load, couple):
    """Re-solve the component of the ``touched`` links, in place; (job ids, iteration s, comm s) that moved.

    Writes the component's per-link loads (links a leaving job emptied go to 0) and each row's new
    ``iter_s`` and ``rate_gbps``. A row whose iteration time moves by more than 1e-12 (relative), or that
    had none yet (NaN), is reported. Named tuples or plain ones (``jit.py``).
    """
    t, links = Rows(*t), LinkArrays(*links)
    comp = component(touched, t, couple)
    sol = fair_times(links.capacity_gbps[comp.links], comp.entries, jobs_at(t, comp.rows))
    for g in range(touched.shape[0]):
        if touched[g]:
            links.load_gbps[g] = links.overload_gbps[g] = rate_load[g] = 0.0
    for i in range(comp.links.shape[0]):
        g = comp.links[i]
        links.load_gbps[g], links.overload_gbps[g], rate_load[g] = \
            sol.load_gbps[i], sol.overload_gbps[i], sol.rate_load_gbps[i]
    rows = comp.rows
    moved = np.zeros(rows.shape[0], dtype=np.bool_)
    for i in range(rows.shape[0]):
        old, it = t.iter_s[rows[i]], sol.iter_s[i]
        moved[i] = not (abs(it - old) <= 1e-12 * max(it, 1.0))  # NaN (a new job) counts as moved
        t.iter_s[rows[i]], t.rate_gbps[rows[i]] = it, sol.rate_gbps[i]
    return t.job_id[rows[moved]], sol.iter_s[moved], sol.comm_s[moved]


@njit(**JIT)
def _joins_unsaturated(capacity, rate, links, weights, iso_rate):
    """True if a job at its isolated rate overfills none of its links, and every link it
    would saturate carries nothing else: nobody's share changes."""
    for k in range(links.shape[0]):
        cap, before = capacity[links[k]], rate[links[k]]
        after = before + weights[k] * iso_rate
        if after > cap * (1 + 1e-9) or (after > cap * (1 - 1e-9) and before > 1e-9 * cap):
            return False
    return True


@njit(**JIT)
def _leaves_unsaturated(capacity, rate, jobs_left, links):
    """True if every saturated link of a leaving job carried it alone (no job is left on it): nobody's
    share changes."""
    for g in links:
        if rate[g] >= capacity[g] * (1 - 1e-9) and jobs_left[g] != 0:
            return False
    return True
