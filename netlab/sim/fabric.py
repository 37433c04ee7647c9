"""The simulator's flow-level bookkeeping: which running jobs load which links, at what rate.

The simulator tells the fabric when a multi-host job joins or leaves; the
fabric decides what must be re-solved and hands back new iteration times.
Three rules keep that cheap and exact:

* Only the connected component of the links touched since the last solve is
  re-solved: max-min shares depend on nothing outside it.
* A job that joins links which stay unsaturated even at its isolated rate (or
  that it saturates alone) changes nobody's share: it runs at its isolated
  rate at once. Likewise a job that leaves links on which it was alone, or
  that were not saturated. (Fair model only; in the phase model offsets couple
  every job that shares a link.)
* Loads seen by policies are copied on write, so a view handed out earlier
  never changes under a policy's feet.

Per-link history is kept as segments (start, end, links, load, overload)
between changes, which :mod:`netlab.sim.metrics` turns into ``links.parquet``.
"""

from __future__ import annotations

import numpy as np

from ..network.model import CommDemand, NetworkModel

SMALL = 64  # below this many running network jobs, re-solving everything beats finding the component


class Fabric:
    def __init__(self, topology, model: NetworkModel, record_links: bool = True):
        self.topology = topology
        self.model = model
        self.record_links = record_links
        n = topology.n_links
        self.demands: dict[int, CommDemand] = {}
        self.link_jobs: dict[int, set[int]] = {}  # link -> network jobs on it
        self.load_gbps = np.zeros(n)  # time-averaged load (what policies read)
        self.overload_gbps = np.zeros(n)  # time-averaged demand above capacity (ECN proxy)
        self.rate_gbps = np.zeros(n)  # fair model: instantaneous sum of flow rates
        self.job_rate_gbps: dict[int, float] = {}
        self.dirty = False
        self._shortcut = model.name == "fair"
        self._touched: set[int] = set()  # links whose jobs changed since the last solve
        self._new: set[int] = set()  # jobs waiting for their first rate
        self.segments: list = []
        self._seg = None

    # -------------------------------------------------------------- changes
    def join(self, job_id: int, demand: CommDemand, now: float) -> float | None:
        """Add a job's flows; its per-flow rate if known at once, else None (wait for :meth:`solve`)."""
        self.demands[job_id] = demand
        for link in demand.links.tolist():
            self.link_jobs.setdefault(link, set()).add(job_id)
        if self._shortcut and self._joins_unsaturated(demand):
            self._apply(job_id, demand, demand.iso_rate_gbps, +1, now)
            return demand.iso_rate_gbps
        self._touched.update(demand.links.tolist())
        self._new.add(job_id)
        self.dirty = True
        return None

    def leave(self, job_id: int, now: float) -> bool:
        """Remove a job's flows; False if it had none."""
        demand = self.demands.pop(job_id, None)
        if demand is None:
            return False
        alone = self._shortcut and job_id in self.job_rate_gbps and self._leaves_unsaturated(demand)
        for link in demand.links.tolist():
            self.link_jobs[link].discard(job_id)
        if alone:
            self._apply(job_id, demand, self.job_rate_gbps[job_id], -1, now)
        else:
            self._touched.update(demand.links.tolist())
            self.dirty = True
        self.job_rate_gbps.pop(job_id, None)
        self._new.discard(job_id)
        return True

    def rephase(self, job_id: int, phase: float) -> None:
        self.demands[job_id].phase = phase
        self._touched.update(self.demands[job_id].links.tolist())
        self.dirty = True

    # ------------------------------------------------------------ shortcuts
    def _joins_unsaturated(self, d: CommDemand) -> bool:
        cap = self.topology.link_capacity_gbps[d.links]
        before = self.rate_gbps[d.links]
        after = before + d.weights * d.iso_rate_gbps
        tight = after > cap * (1 - 1e-9)
        return bool(np.all(after <= cap * (1 + 1e-9)) and np.all(before[tight] <= 1e-9 * cap[tight]))

    def _leaves_unsaturated(self, d: CommDemand) -> bool:
        cap = self.topology.link_capacity_gbps[d.links]
        saturated = self.rate_gbps[d.links] >= cap * (1 - 1e-9)
        return all(len(self.link_jobs[l]) == 1 for l in d.links[saturated].tolist())

    def _apply(self, job_id: int, d: CommDemand, rate: float, sign: int, now: float) -> None:
        if sign > 0:
            self.job_rate_gbps[job_id] = rate
        duty = d.net_s(rate) / d.iter_s(rate)
        self.load_gbps = self.load_gbps.copy()
        self.rate_gbps[d.links] += sign * d.weights * rate
        self.load_gbps[d.links] += sign * d.weights * rate * duty
        empty = [l for l in d.links.tolist() if not self.link_jobs[l]]
        self.rate_gbps[empty] = self.load_gbps[empty] = self.overload_gbps[empty] = 0.0
        self._record(now)

    # ---------------------------------------------------------------- solve
    def _component(self) -> list[int]:
        """Jobs connected, through shared links, to the links touched since the last solve."""
        links = set(self._touched)
        jobs: set[int] = set()
        frontier = list(links)
        while frontier:
            found = set()
            for link in frontier:
                found |= self.link_jobs.get(link, set())
            found -= jobs
            jobs |= found
            frontier = []
            for jid in found:
                for link in self.demands[jid].links.tolist():
                    if link not in links:
                        links.add(link)
                        frontier.append(link)
        self._touched = links
        return sorted(jobs)

    def solve(self, now: float, current_iter_s) -> list[tuple[int, float, float]]:
        """Re-solve what changed; (job, iteration s, communication s) for every job whose time moved.

        ``current_iter_s(job_id)`` gives a job's iteration time before the solve.
        """
        self.dirty = False
        if not self._shortcut or len(self.demands) <= SMALL:
            ids = list(self.demands)
            self._touched |= {l for l, jobs in self.link_jobs.items() if jobs}
        else:
            ids = self._component()
        sol = self.model.solve([self.demands[j] for j in ids], self.topology.link_capacity_gbps)
        updates = []
        for jid in ids:
            it = sol.iter_s[jid]
            if jid in self._new or abs(it - current_iter_s(jid)) > 1e-12 * max(it, 1.0):
                updates.append((jid, it, sol.comm_s[jid]))
        self._new.clear()
        touched = np.fromiter(self._touched, dtype=np.int64, count=len(self._touched))
        self._touched = set()
        self.load_gbps = self.load_gbps.copy()
        for arr in (self.load_gbps, self.overload_gbps):
            arr[touched] = 0.0
        self.load_gbps[sol.links] = sol.load_gbps
        self.overload_gbps[sol.links] = sol.overload_gbps
        if sol.rate_load_gbps is not None:
            self.rate_gbps[touched] = 0.0
            self.rate_gbps[sol.links] = sol.rate_load_gbps
            self.job_rate_gbps.update(sol.rate_gbps)
        self._record(now)
        return updates

    # -------------------------------------------------------------- history
    def _record(self, now: float) -> None:
        if self.record_links:
            self.close(now)
            busy = np.flatnonzero(self.load_gbps)
            self._seg = (now, busy, self.load_gbps[busy], self.overload_gbps[busy])

    def close(self, now: float) -> None:
        """End the current segment at ``now`` (and start the next one there)."""
        if self._seg is not None and now > self._seg[0] and len(self._seg[1]):
            self.segments.append((self._seg[0], now, *self._seg[1:]))
        if self._seg is not None:
            self._seg = (now, *self._seg[1:])
