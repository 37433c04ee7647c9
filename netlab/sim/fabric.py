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

Why slots: under the fair model a re-solve happens every time a multi-host
job starts or stops on a saturated link (~60,000 times on the full Philly
trace, ~50 jobs each). Running jobs therefore live as rows ("slots") of
arrays (their links, weights and parameters), so finding the component,
solving it, writing back link loads and spotting whose time moved are one
compiled call; Python touches only the jobs whose iteration time changed. Other
network models get every running demand and re-solve them all.

Per-link history goes to a :mod:`netlab.sim.history` object at every change
(all segments, per-link loads aggregated at a resolution, or nothing), which
:mod:`netlab.sim.metrics` turns into ``links.parquet``.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from ..network.model import CommDemand, NetworkModel, _fair
from .history import FullHistory, LinkHistory, NoHistory


INCREMENTAL_RTOL = 1e-3  # incremental models: a job's time must move by more to be updated (the mean field's tolerance)


class Fabric:
    def __init__(self, topology, model: NetworkModel, record_links: bool = True, history: LinkHistory | None = None):
        self.topology = topology
        self.model = model
        self.history = history if history is not None else FullHistory() if record_links else NoHistory()
        self.record_links = not isinstance(self.history, NoHistory)
        n = topology.n_links
        self.capacity = np.ascontiguousarray(topology.link_capacity_gbps, dtype=np.float64)
        self.demands: dict[int, CommDemand] = {}
        self.link_count = np.zeros(n, dtype=np.int64)  # network jobs on each link
        self.load_gbps = np.zeros(n)  # time-averaged load (what policies read)
        self.overload_gbps = np.zeros(n)  # time-averaged demand above capacity (ECN proxy)
        self.rate_gbps = np.zeros(n)  # fair model: instantaneous sum of flow rates
        self.offered_gbps = np.zeros(n)  # incremental models: every job at its isolated rate at once
        self.queue_frac = np.zeros(n)  # incremental models: fraction of time the queue is above the ECN threshold
        self.dirty = False
        self._fair = model.name == "fair"
        self._incremental = not self._fair and getattr(model, "incremental", False)
        self._couple_all = np.ones(n, dtype=bool)
        self._touched = np.zeros(n, dtype=bool)  # links whose jobs changed since the last solve
        self._new: set[int] = set()  # jobs waiting for their first rate
        self._slots = _Slots()

    # -------------------------------------------------------------- changes
    def join(self, job_id: int, demand: CommDemand, now: float) -> float | None:
        """Add a job's flows; its per-flow rate if known at once, else None (wait for :meth:`solve`)."""
        self.demands[job_id] = demand
        self.link_count[demand.links] += 1
        slot = self._slots.add(job_id, demand)
        if self._incremental:
            alone = _adds_nonbinding(self.capacity, self.offered_gbps, demand.links, demand.weights, _cap(demand))
            self.offered_gbps[demand.links] += demand.weights * _cap(demand)
            if alone:  # it binds no link: it runs at its isolated rate and nobody else changes
                rate = _cap(demand)
                self._slots.rate[slot], self._slots.iter_s[slot] = rate, demand.iter_s(rate)
                self._set_row_load(np.array([slot]))
                self._record(now)
                return rate
        elif self._fair and self._joins_unsaturated(demand):
            rate = demand.iso_rate_gbps
            self._slots.rate[slot], self._slots.iter_s[slot] = rate, demand.iter_s(rate)
            self._apply(demand, rate, +1, now)
            return rate
        self._touched[demand.links] = True
        self._new.add(job_id)
        self.dirty = True
        return None

    def leave(self, job_id: int, now: float) -> bool:
        """Remove a job's flows; False if it had none."""
        demand = self.demands.pop(job_id, None)
        if demand is None:
            return False
        if self._incremental:
            bound = not _adds_nonbinding(self.capacity, self.offered_gbps, demand.links, demand.weights, 0.0)
            self.offered_gbps[demand.links] -= demand.weights * _cap(demand)
            self._clear_row_load(self._slots.row[job_id])
            self._slots.remove(job_id)
            self.model.forget(job_id)
            self.link_count[demand.links] -= 1
            empty = demand.links[self.link_count[demand.links] == 0]
            self.offered_gbps[empty] = 0.0  # no rounding residue on an empty link
            if bound or job_id in self._new:
                self._touched[demand.links] = True
                self.dirty = True
            else:
                self._record(now)
            self._new.discard(job_id)
            return True
        rate = self._slots.remove(job_id)
        alone = self._fair and job_id not in self._new and self._leaves_unsaturated(demand)
        self.link_count[demand.links] -= 1
        if alone:
            self._apply(demand, rate, -1, now)
        else:
            self._touched[demand.links] = True
            self.dirty = True
        self._new.discard(job_id)
        return True

    def rephase(self, job_id: int, phase: float) -> None:
        self.demands[job_id].phase = phase
        self._slots.phase[self._slots.row[job_id]] = phase
        self._touched[self.demands[job_id].links] = True
        self.dirty = True

    # ------------------------------------------------------------ shortcuts
    def _joins_unsaturated(self, d: CommDemand) -> bool:
        return _joins_unsaturated(self.capacity, self.rate_gbps, d.links, d.weights, d.iso_rate_gbps)

    def _leaves_unsaturated(self, d: CommDemand) -> bool:
        return _leaves_unsaturated(self.capacity, self.rate_gbps, self.link_count, d.links)

    def _apply(self, d: CommDemand, rate: float, sign: int, now: float) -> None:
        duty = d.net_s(rate) / d.iter_s(rate)
        self.load_gbps = self.load_gbps.copy()
        self.rate_gbps[d.links] += sign * d.weights * rate
        self.load_gbps[d.links] += sign * d.weights * rate * duty
        empty = d.links[self.link_count[d.links] == 0]
        self.rate_gbps[empty] = self.load_gbps[empty] = self.overload_gbps[empty] = 0.0
        self._record(now)

    # ---------------------------------------------------------------- solve
    def solve(self, now: float, current_iter_s) -> list[tuple[int, float, float]]:
        """Re-solve what changed; (job, iteration s, communication s) for every job whose time moved.

        ``current_iter_s(job_id)`` gives a job's iteration time before the solve
        (the fair path keeps its own copy in the slots).
        """
        self.dirty = False
        if self._fair:
            updates = self._solve_fair()
        elif self._incremental:
            updates = self._solve_component(now)
        else:
            updates = self._solve_all(current_iter_s)
        self._new.clear()
        self._touched[:] = False
        self._record(now)
        return updates

    def _solve_fair(self) -> list[tuple[int, float, float]]:
        s = self._slots
        self.load_gbps = self.load_gbps.copy()
        rows, it, comm = _resolve(self._touched, s.links, s.weights, s.n_links, s.active, s.params, s.iter_s,
                                  s.rate, self.capacity, self.load_gbps, self.overload_gbps, self.rate_gbps,
                                  self._couple_all)
        return list(zip(s.job[rows].tolist(), it.tolist(), comm.tolist()))

    def _solve_component(self, now: float) -> list[tuple[int, float, float]]:
        """Incremental models (``tcp``): re-solve the jobs on touched links and those joined to them through
        links that can bind; everyone else keeps their times and phase state.

        A job's time-averaged load on each of its links is its bytes per iteration over its period, whatever
        the sharing, so loads are kept per row and updated by difference.
        """
        s = self._slots
        rows, comp_links, job, link, weight, cols, cap = _gather(self._touched, s.links, s.weights, s.n_links, s.active,
                                                                 self.offered_gbps, self.capacity, s.params, s.phase,
                                                                 s.job, s.iter_s)
        if not len(rows):
            return []
        it, comm, _, overload, queue = self.model.solve_arrays(now, cap, job, link, weight, cols)
        self.load_gbps = self.load_gbps.copy()
        ids, it, comm = _write_back(self._touched, comp_links, overload, queue, rows, it, comm, INCREMENTAL_RTOL,
                                    s.iter_s, s.job, s.links, s.weights, s.n_links, s.params, s.row_load,
                                    self.overload_gbps, self.queue_frac, self.load_gbps)
        return list(zip(ids.tolist(), it.tolist(), comm.tolist()))

    def _set_row_load(self, rows: np.ndarray) -> None:
        """Set each row's time-averaged load (flows x Gbit per flow per iteration / iteration s) on its links."""
        s = self._slots
        self.load_gbps = self.load_gbps.copy()
        _row_loads(rows, s.links, s.weights, s.n_links, s.params, s.iter_s, s.row_load, self.load_gbps)

    def _clear_row_load(self, row: int) -> None:
        s = self._slots
        self.load_gbps = self.load_gbps.copy()
        np.add.at(self.load_gbps, s.links[row], -s.row_load[row])
        s.row_load[row] = 0.0
        k = s.n_links[row]
        empty = s.links[row, :k][self.link_count[s.links[row, :k]] <= 1]
        self.load_gbps[empty] = self.overload_gbps[empty] = self.queue_frac[empty] = 0.0

    def _solve_all(self, current_iter_s) -> list[tuple[int, float, float]]:
        ids = list(self.demands)
        sol = self.model.solve([self.demands[j] for j in ids], self.capacity)
        updates = []
        for jid in ids:
            it = sol.iter_s[jid]
            if jid in self._new or abs(it - current_iter_s(jid)) > 1e-12 * max(it, 1.0):
                updates.append((jid, it, sol.comm_s[jid]))
        self._touched |= self.link_count > 0
        self.load_gbps = self.load_gbps.copy()
        self.load_gbps[self._touched] = self.overload_gbps[self._touched] = 0.0
        self.load_gbps[sol.links] = sol.load_gbps
        self.overload_gbps[sol.links] = sol.overload_gbps
        return updates

    # -------------------------------------------------------------- history
    def _record(self, now: float) -> None:
        if self.record_links:
            self.history.record(now, self.load_gbps, self.overload_gbps)

    def close(self, now: float) -> None:
        """End the current segment at ``now`` (and start the next one there)."""
        self.history.close(now)

    @property
    def segments(self) -> list:
        """The full history's segments (start, end, links, load, overload); empty in the other modes."""
        return getattr(self.history, "segments", [])


class _Slots:
    """Running network jobs as rows of growable arrays (a freed row is reused).

    ``params`` columns: flow bytes, compute s, serial intra s, overlap, rate
    cap, isolated rate (``_fair``'s per-job inputs); ``iter_s`` and ``rate``
    hold each job's last solved iteration time and per-flow rate (NaN until
    its first solve).
    """

    def __init__(self, rows: int = 64, width: int = 8):
        self.row: dict[int, int] = {}
        self.free: list[int] = []
        self.used = 0
        self.job = np.full(rows, -1, dtype=np.int64)
        self.active = np.zeros(rows, dtype=bool)
        self.n_links = np.zeros(rows, dtype=np.int64)
        self.links = np.zeros((rows, width), dtype=np.int64)
        self.weights = np.zeros((rows, width))
        self.params = np.zeros((rows, 6))
        self.iter_s = np.full(rows, np.nan)
        self.rate = np.full(rows, np.nan)
        self.phase = np.zeros(rows)
        self.row_load = np.zeros((rows, width))

    def add(self, job_id: int, d: CommDemand) -> int:
        if self.free:
            r = self.free.pop()
        else:
            if self.used == len(self.job):
                self._grow_rows()
            r, self.used = self.used, self.used + 1
        k = len(d.links)
        if k > self.links.shape[1]:
            self._grow_width(k)
        self.row[job_id] = r
        self.job[r], self.active[r], self.n_links[r] = job_id, True, k
        self.links[r, :k], self.weights[r, :k] = d.links, d.weights
        self.params[r] = (d.flow_bytes, d.compute_s, d.serial_intra_s, d.overlap, d.rate_cap_gbps, d.iso_rate_gbps)
        self.iter_s[r] = self.rate[r] = np.nan
        self.phase[r] = d.phase
        self.row_load[r] = 0.0
        return r

    def remove(self, job_id: int) -> float:
        """Free the job's row; its last per-flow rate."""
        r = self.row.pop(job_id)
        self.active[r], self.job[r] = False, -1
        self.free.append(r)
        return float(self.rate[r])

    def _grow_rows(self) -> None:
        n = len(self.job)
        for name, fill in (("job", -1), ("active", False), ("n_links", 0), ("links", 0), ("weights", 0.0),
                           ("params", 0.0), ("iter_s", np.nan), ("rate", np.nan), ("phase", 0.0), ("row_load", 0.0)):
            a = getattr(self, name)
            grown = np.full((2 * n, *a.shape[1:]), fill, dtype=a.dtype)
            grown[:n] = a
            setattr(self, name, grown)

    def _grow_width(self, k: int) -> None:
        w = max(k, 2 * self.links.shape[1])
        for name in ("links", "weights", "row_load"):
            a = getattr(self, name)
            grown = np.zeros((a.shape[0], w), dtype=a.dtype)
            grown[:, :a.shape[1]] = a
            setattr(self, name, grown)


@njit(cache=True)
def _resolve(touched, links, weights, n_links, active, params, iter_s, rate, capacity, load, overload,
             rate_load, couple):  # pragma: no cover  (compiled; tested via the simulator)
    """Re-solve the component of the ``touched`` links, in place; (rows, iteration s, comm s) that moved.

    Writes the component's per-link loads (links a leaving job emptied go to
    0) and each row's new ``iter_s`` and ``rate``. A row whose iteration time
    moves by more than 1e-12 (relative), or that had none yet (NaN), is reported.
    """
    rows, comp_links, job, link, weight = _component(touched, links, weights, n_links, active, couple)
    p = params[rows]
    r, it, comm, comp_rate_load, comp_load, comp_overload = _fair(
        capacity[comp_links], job, link, weight, p[:, 4], p[:, 0], p[:, 1], p[:, 2], p[:, 3], p[:, 5])
    for g in range(touched.shape[0]):
        if touched[g]:
            load[g] = overload[g] = rate_load[g] = 0.0
    for i in range(comp_links.shape[0]):
        g = comp_links[i]
        load[g], overload[g], rate_load[g] = comp_load[i], comp_overload[i], comp_rate_load[i]
    moved = np.zeros(rows.shape[0], dtype=np.bool_)
    for i in range(rows.shape[0]):
        old = iter_s[rows[i]]
        moved[i] = not (abs(it[i] - old) <= 1e-12 * max(it[i], 1.0))  # NaN (a new job) counts as moved
        iter_s[rows[i]], rate[rows[i]] = it[i], r[i]
    return rows[moved], it[moved], comm[moved]


@njit(cache=True)
def _gather(touched, links, weights, n_links, active, offered, capacity, params, phase, job_ids,
            iter_s):  # pragma: no cover  (compiled)
    """An incremental model's component, in one compiled call: :func:`_component` through the links that can
    bind (every job at its isolated rate at once would exceed them), with its links' capacities and its rows'
    columns for ``solve_arrays`` (params, phase, job id, last iteration s)."""
    rows, comp_links, job, link, weight = _component(touched, links, weights, n_links, active,
                                                     offered > capacity * (1 + 1e-9))
    cols = np.empty((rows.shape[0], params.shape[1] + 3))
    for a in range(rows.shape[0]):
        r = rows[a]
        cols[a, :params.shape[1]] = params[r]
        cols[a, -3], cols[a, -2], cols[a, -1] = phase[r], job_ids[r], iter_s[r]
    return rows, comp_links, job, link, weight, cols, capacity[comp_links]


@njit(cache=True)
def _write_back(touched, comp_links, overload, queue, rows, it, comm, rtol, iter_s, job_ids, links, weights, n_links,
                params, row_load, overload_gbps, queue_frac, load):  # pragma: no cover  (compiled)
    """An incremental solve's results into the fabric, in place: the component's link overload and queue
    (touched links cleared first), and the rows whose iteration time moved (their time and loads); those
    rows' (job id, iteration s, comm s).

    A fixed point converges to a tolerance, so unaffected jobs' times wobble by about that much: only a
    change beyond ``rtol`` moves a job (and its completion); the others keep their time.
    """
    for g in range(touched.shape[0]):
        if touched[g]:
            overload_gbps[g] = queue_frac[g] = 0.0
    for b in range(comp_links.shape[0]):
        overload_gbps[comp_links[b]], queue_frac[comp_links[b]] = overload[b], queue[b]
    moved = np.zeros(rows.shape[0], np.bool_)
    for a in range(rows.shape[0]):
        moved[a] = not (abs(it[a] - iter_s[rows[a]]) <= rtol * it[a])  # NaN (a new job) counts as moved
        if moved[a]:
            iter_s[rows[a]] = it[a]
    _row_loads(rows[moved], links, weights, n_links, params, iter_s, row_load, load)
    return job_ids[rows[moved]], it[moved], comm[moved]


@njit(cache=True)
def _row_loads(rows, links, weights, n_links, params, iter_s, row_load, load):  # pragma: no cover  (compiled)
    """Set each row's time-averaged load (flows x Gbit per flow per iteration / iteration s) on its links,
    updating ``load`` by the difference."""
    for r in rows:
        gbit = params[r, 0] * 8 / 1e9
        for k in range(n_links[r]):
            new = weights[r, k] * (gbit / iter_s[r])
            load[links[r, k]] += new - row_load[r, k]
            row_load[r, k] = new


@njit(cache=True)
def _joins_unsaturated(capacity, rate, links, weights, iso_rate):  # pragma: no cover  (compiled)
    """True if a job at its isolated rate overfills none of its links, and every link it
    would saturate carries nothing else: nobody's share changes."""
    for k in range(links.shape[0]):
        cap, before = capacity[links[k]], rate[links[k]]
        after = before + weights[k] * iso_rate
        if after > cap * (1 + 1e-9) or (after > cap * (1 - 1e-9) and before > 1e-9 * cap):
            return False
    return True


@njit(cache=True)
def _leaves_unsaturated(capacity, rate, count, links):  # pragma: no cover  (compiled)
    """True if every saturated link of a leaving job carries it alone: nobody's share changes."""
    for g in links:
        if rate[g] >= capacity[g] * (1 - 1e-9) and count[g] != 1:
            return False
    return True


@njit(cache=True)
def _component(touched, links, weights, n_links, active, couple):  # pragma: no cover  (compiled; tested via the simulator)
    """The rows on the ``touched`` links and those connected to them through shared ``couple`` links:
    (rows, their links, entries).

    Entries are (index into rows, index into their links, weight), ready for
    :func:`~netlab.network.model._fair` on ``capacity[links]``. ``touched`` is
    widened in place to every coupling link of the component. Each sweep adds
    the rows that reach a touched link and touches their coupling links, until
    a sweep adds nothing (a few sweeps: the component's diameter). Under the
    fair model every link couples; under ``tcp`` only links that can bind.
    """
    n_rows = active.shape[0]
    member = np.zeros(n_rows, dtype=np.bool_)
    grew = True
    while grew:
        grew = False
        for r in range(n_rows):
            if not active[r] or member[r]:
                continue
            for k in range(n_links[r]):
                if touched[links[r, k]]:
                    member[r] = True
                    break
            if member[r]:
                grew = True
                for k in range(n_links[r]):
                    if couple[links[r, k]]:
                        touched[links[r, k]] = True
    rows = np.flatnonzero(member)
    local = np.full(touched.shape[0], -1, dtype=np.int64)
    comp_links = np.empty(touched.shape[0], dtype=np.int64)
    n_comp, nnz = 0, 0
    for r in rows:
        nnz += n_links[r]
    job, link, weight = np.empty(nnz, np.int64), np.empty(nnz, np.int64), np.empty(nnz)
    e = 0
    for i in range(rows.shape[0]):
        r = rows[i]
        for k in range(n_links[r]):
            g = links[r, k]
            if local[g] < 0:
                local[g], comp_links[n_comp] = n_comp, g
                n_comp += 1
            job[e], link[e], weight[e] = i, local[g], weights[r, k]
            e += 1
    return rows, comp_links[:n_comp].copy(), job, link, weight


def _cap(d: CommDemand) -> float:
    """A demand's per-flow rate alone: its isolated rate, at most its pattern's cap."""
    return min(d.iso_rate_gbps, d.rate_cap_gbps)


@njit(cache=True)
def _adds_nonbinding(capacity, offered, links, weights, rate):  # pragma: no cover  (compiled)
    """True if, with ``weights x rate`` more offered on ``links``, none of them can bind (offered <= capacity);
    with ``rate`` 0: none of them binds now."""
    for k in range(links.shape[0]):
        if offered[links[k]] + weights[k] * rate > capacity[links[k]] * (1 + 1e-9):
            return False
    return True
