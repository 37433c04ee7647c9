"""The ``tcp`` network model (the rules: :mod:`netlab.network.tcp`): batch and incremental solves, phase state."""

from __future__ import annotations

import numpy as np

from ..links import LinkState
from ..model import (ALLOCATION_KINDS, NETWORKS, Capabilities, CommDemand, Moved, NetSolution, NetworkModel,
                     _same_paths, _treatment, incidence)
from ..slots import Entries, Jobs, SlotTable, jobs_at, jobs_of
from .beatdown import beaten_capabilities, beaten_solve
from .beatdown_resolve import FlowPathTable, TwoPass
from .components import Solved, alone, binding_components
from .core_resolve import resolve_cores
from .cores import CoreCache
from .exposed import exposed_s
from .goodput import effective_capacity, link_flows_offered
from .incremental import binding_component, resolve_touched, update_binding, write_back
from .joinleave import join_alone, join_sums, leave_sums
from .mean_field import mean_field_counts
from .params import (ALPHA, BEATDOWN_BETA, BEATDOWN_INCREMENTAL, BUFFER_PACKETS, BUFFER_US, CORE_ALPHA, CUT_K, DRAWS,
                     ECN_THRESHOLD_US, GOODPUT_K, HORIZON, JITTER, LEAD, MAX_CORE_JOBS, MAX_EVENTS, MAX_EXACT_JOBS,
                     PHASE_CORES, REPORT_RTOL, RTO_BDP_SHARE, RTO_IDLE, RTO_K, RTO_MIN_S, RTO_RAMP_PACKETS, RTT_US,
                     SEGMENT_BYTES, SLOW_K, STRETCH, WARMUP, TcpParams)
from .ratecut import cut_s
from .reclass import reclass_rows
from .relink import relink_in_place
from .rto import idle_demands, solved_share, tail_s
from .scenarios import simulate_starts
from .slowest import slowest_s
from .solve import SolveCode, solve_component, solve_unless_exact
from .tails import TailBook, alone_share, has_tails


@NETWORKS.register("tcp")
class TcpNetwork(NetworkModel):
    """TCP-like sharing by bytes in flight, work-conserving, with per-job phase kept across events (fluid).

    Network allocations: a job's weight multiplies its bytes-in-flight weight ``phi``; its cap bounds its
    per-flow rate (its rate alone, so it also decides which links can bind); its class is served strictly
    first in the fluid (a lower class gets what the higher ones leave at each moment) and, in the mean
    field, each class sees the capacity less the higher classes' time-averaged load.
    """

    name = "tcp"
    capabilities = Capabilities(uses_phase=True, moves_phase=True, incremental=True,
                                allocations=frozenset(ALLOCATION_KINDS), relinks=True)

    def __init__(self, alpha: float = ALPHA, jitter: float = JITTER, lead: float = LEAD, horizon: int = HORIZON,
                 warmup: int = WARMUP, max_exact_jobs: int = MAX_EXACT_JOBS, max_events: int = MAX_EVENTS,
                 ecn_threshold_us: float = ECN_THRESHOLD_US, buffer_us: float = BUFFER_US, draws: int = DRAWS,
                 stretch: float = STRETCH, goodput_k: float = GOODPUT_K, buffer_packets: float = BUFFER_PACKETS,
                 phase_cores: bool = PHASE_CORES, rto_k: float = RTO_K, rto_min_s: float = RTO_MIN_S,
                 segment_bytes: float = SEGMENT_BYTES, rtt_us: float = RTT_US,
                 max_core_jobs: int = MAX_CORE_JOBS, core_alpha: float | None = CORE_ALPHA, cut_k: float = CUT_K,
                 slow_k: float = SLOW_K, beatdown_beta: float = BEATDOWN_BETA, rto_idle: bool = RTO_IDLE,
                 beatdown_incremental: bool = BEATDOWN_INCREMENTAL, rto_ramp_packets: float = RTO_RAMP_PACKETS,
                 rto_bdp_share: float = RTO_BDP_SHARE):
        """Parameters: see :mod:`~netlab.network.tcp.params` (one ValueError if any is out of range)."""
        self.params = TcpParams.checked(alpha=alpha, jitter=jitter, lead=lead, horizon=horizon, warmup=warmup,
                                        max_exact_jobs=max_exact_jobs, max_events=max_events,
                                        ecn_threshold_us=ecn_threshold_us, buffer_us=buffer_us, draws=draws,
                                        stretch=stretch, goodput_k=goodput_k, buffer_packets=buffer_packets,
                                        phase_cores=phase_cores, rto_k=rto_k, rto_min_s=rto_min_s,
                                        segment_bytes=segment_bytes, rtt_us=rtt_us,
                                        max_core_jobs=max_core_jobs, core_alpha=core_alpha, cut_k=cut_k,
                                        slow_k=slow_k, beatdown_beta=beatdown_beta, rto_idle=rto_idle,
                                        beatdown_incremental=beatdown_incremental,
                                        rto_ramp_packets=rto_ramp_packets, rto_bdp_share=rto_bdp_share)
        # two solves a change, every job, no phase state kept (beatdown.py, unless beatdown_incremental:
        # beatdown_resolve.py; the idle timeout tail, rto.py, likewise)
        p = self.params
        if (p.beatdown_beta > 0.0 and not p.beatdown_incremental) or (p.rto_idle and p.rto_k > 0.0):
            self.capabilities = beaten_capabilities(type(self).capabilities)
        self._slots = SlotTable()  # every job's row: its demand, last time and phase state
        self.exact_solves = self.mean_field_solves = 0
        self.counts = mean_field_counts()  # over mean-field solves (MeanFieldCounts)
        self._core_cache = CoreCache()  # phase cores' simulated periods, by their inputs (cores.py)

    @property
    def draws(self) -> int:
        """Jitter draws a scenario prediction averages over (what testbed predictions ask every model)."""
        return self.params.draws

    def fresh(self) -> TcpNetwork:
        return type(self)(**self.params._asdict())

    def simulate_starts(self, demands, capacity_gbps, start_s: dict, iterations: dict, draw: int = 0) -> dict:
        """Iteration start times per job from given start times (see
        :func:`~netlab.network.tcp.scenarios.simulate_starts`)."""
        return simulate_starts(self, demands, capacity_gbps, start_s, iterations, draw)

    # ----------------------------------------------------------- phase state
    def forget(self, job_id: int) -> None:
        """The job left the network: drop its phase state (and row)."""
        self._slots.remove(job_id)
        self._core_cache.warm.pop(job_id, None)

    def phase_now(self, job_id: int) -> float | None:
        """The job's anchor on its current period (its iterations start at ``phase x period + k x period``):
        where the model has moved it, e.g. two jobs started in step that have separated into turns."""
        r = self._slots.row(job_id)
        t = self._slots.rows
        if r is None or not (t.period_s[r] > 0 and np.isfinite(t.anchor_s[r])):
            return None
        return float(t.anchor_s[r] % t.period_s[r] / t.period_s[r])

    def mean_field_stats(self) -> dict:
        """Counters over the mean-field solves so far, by name (and the phase cores' look-ups: ``core_cache_*``)."""
        out = {name: int(c[0]) for name, c in zip(self.counts._fields, self.counts)}
        return out | {"core_cache_hits": self._core_cache.hits, "core_cache_misses": self._core_cache.misses}

    # ----------------------------------------------------------------- batch
    def solve(self, demands, capacity_gbps, now_s: float = 0.0) -> NetSolution:
        if self.params.beatdown_beta > 0.0 and demands:  # DCTCP's beat-down: two solves (beatdown.py)
            return beaten_solve(self, demands, capacity_gbps)
        return self.solve_once(demands, capacity_gbps, now_s)

    def solve_once(self, demands, capacity_gbps, now_s: float = 0.0) -> NetSolution:
        """One solve of ``demands`` as they are (the beat-down's weights, if any, already in their allocations)."""
        if not demands:
            return NetSolution({}, {})
        for d in demands:
            self.check_allocation(d.allocation, d.job_id)
        job, link, weight, links = incidence(demands)
        rows = self._slots.claim(demands)
        e = Entries(job, link, weight.astype(float))
        cap = np.ascontiguousarray(capacity_gbps[links], dtype=np.float64)
        if self.params.goodput_k > 0.0:  # a lossy binding link delivers less (goodput.py)
            rate = np.array([d.alone_rate_gbps for d in demands])
            cap = effective_capacity(cap, *link_flows_offered(e, len(cap), rate), self.params.goodput_k,
                                     self.params.buffer_packets)
        blind = np.zeros(len(demands), dtype=bool)
        out = self.solve_rows(now_s, rows, e, cap, jobs_of(demands), blind)
        ids = [d.job_id for d in demands]
        tails, p = None, self.params
        if has_tails(p):  # rto.py, ratecut.py, slowest.py: each job at its
            shares = list(map(solved_share, out.iter_s, out.comm_s))  # share of the iteration as solved
            tails = tail_s(demands, capacity_gbps, p, shares) if p.rto_k > 0.0 else [0.0] * len(demands)
            if p.rto_idle and p.rto_k > 0.0:  # the tail as idle time, inside a second solve (rto.idle_demands)
                demands = idle_demands(demands, tails)
                out = self.solve_rows(now_s, rows, e, cap, jobs_of(demands))
                tails = [0.0] * len(demands)
            net = [max(c - d.serial_intra_s, 0.0) for d, c in zip(demands, out.comm_s.tolist())]
            if p.cut_k > 0.0:
                tails = [t + c for t, c in zip(tails, cut_s(demands, capacity_gbps, p, shares, net))]
            if p.slow_k > 0.0:
                tails = [t + c for t, c in zip(tails, slowest_s(demands, capacity_gbps, p, net))]
        it, comm = self._stretched(demands, out.iter_s.tolist(), out.comm_s.tolist(), tails)
        return NetSolution(dict(zip(ids, it)), dict(zip(ids, comm)), links, out.load_gbps, out.overload_gbps,
                           queue_frac=out.queue_frac, phase_blind=dict(zip(ids, blind.tolist())))

    def _stretched(self, demands, iter_s: list, comm_s: list, tails: list | None = None) -> tuple[list, list]:
        """Each job's delay beyond its time alone stretched by ``1 + stretch`` (``params.STRETCH``) plus its
        expected timeout tail and rate cut (``tails``, :mod:`~.rto`, :mod:`~.ratecut`), the extra time counted as
        communication, its iteration lengthened by what its overlapped compute cannot hide (:mod:`~.exposed`);
        unchanged (the same lists) when ``stretch`` is 0 and there is no tail."""
        k = self.params.stretch
        if k == 0.0 and tails is None:
            return iter_s, comm_s
        it, comm = [], []
        for n, (d, t, c) in enumerate(zip(demands, iter_s, comm_s)):
            extra = k * max(t - d.iter_s(d.alone_rate_gbps), 0.0) + (tails[n] if tails is not None else 0.0)
            it.append(t + exposed_s(d.compute_s, c, d.overlap, extra))  # what the overlap cannot hide (exposed.py)
            comm.append(c + extra)
        return it, comm

    def solve_rows(self, now_s: float, rows: np.ndarray, e: Entries, cap_link: np.ndarray, jobs: Jobs,
                   blind: np.ndarray | None = None) -> Solved:
        """Solve the jobs of ``rows`` (local job ``i`` is row ``rows[i]``; ``jobs`` their parameters, ``e`` the
        incidence over ``cap_link``), updating their phase state; ``blind`` (per job, if given): set to whether its
        time came from the mean field (contended, in a component over ``max_exact_jobs``)."""
        t = self._slots.rows
        if not self.params.phase_cores:  # (phase cores: the solve in Python around the mean field, below)
            code, out = solve_unless_exact(now_s, e, cap_link, jobs, t, rows, self.params.max_exact_jobs,
                                           self.params.alpha, self.counts)
            if code != SolveCode.EXACT_NEEDED:  # no component small enough for the exact simulation
                self.mean_field_solves += code == SolveCode.MEAN_FIELD
                if blind is not None and code == SolveCode.MEAN_FIELD:  # (the components found again: no exact one)
                    comps = binding_components(e, cap_link, alone(jobs).cap_gbps, self.params.max_exact_jobs)
                    blind[:] = comps.contended & comps.large
                return out
        out, exact, mean_field = solve_component(now_s, e, cap_link, jobs, t, rows, self.params, self.counts, blind,
                                                 cache=self._core_cache)
        self.exact_solves += exact
        self.mean_field_solves += mean_field
        return out

    # ----------------------------------------------------------- incremental
    def attach(self, links: LinkState) -> None:
        n = len(links.capacity_gbps)
        self._links = links
        self._slots = SlotTable()
        self._core_cache = CoreCache()
        self._demands: dict[int, CommDemand] = {}
        self._offered = np.zeros(n)  # per link: every job on it at its isolated rate at once
        self._binding = np.zeros(n, dtype=bool)  # per link: it can bind (offered above capacity)
        self._may_bind = np.zeros(n, dtype=bool)  # per link: a solve may find it binding (incremental.py)
        self._solved = np.zeros(n, dtype=bool)  # per link: a solve wrote its overload and queue (write_back)
        self._keep = np.zeros(n, dtype=bool)  # per link: may_bind or solved, the rows' kept places (incremental.py)
        # per link: what a binding link delivers (goodput.py), kept where offered and flows change
        self._capacity_eff = links.capacity_gbps.copy()
        self._touched_links: list[np.ndarray] = []  # the links set in _touched, by change
        self._flows = np.zeros(n)  # per link: flows on it (the goodput term's count)
        self._active = np.zeros(n)  # per link: flows on it x their jobs' shares of the iteration (rto.py) ...
        self._share: dict[int, float] = {}  # ... each job's: alone until solved, then as last solved
        self._touched = np.zeros(n, dtype=bool)  # links whose jobs changed since the last solve
        self._new: set[int] = set()  # jobs waiting for their first time
        self.pending = False
        # DCTCP's beat-down: each row's flows' paths, and the component's two solves (beatdown_resolve.py)
        self._paths = FlowPathTable(n) if self.params.beatdown_beta > 0.0 else None
        self._two_pass = TwoPass(self._paths) if self._paths is not None else None
        # the tails after the solve, found again wherever their inputs changed (tails.py); None: no tail
        self._tails = TailBook(n) if has_tails(self.params) else None

    def join(self, job_id, demand, now_s):
        self.check_allocation(demand.allocation, job_id)
        slots = self._slots
        row = slots.add(job_id, demand, keep=self._keep, index=False)  # indexed by join_sums
        self._demands[job_id] = demand
        if self._paths is not None:
            self._paths.put(row, demand.flow_paths)
        links, rate = self._links, demand.alone_rate_gbps
        self._share[job_id] = share = alone_share(demand)
        # its places on may_bind or solved links kept; the sums; whether it can bind (one call: joinleave.py)
        alone = join_sums(row, demand.links, demand.weights, rate, share, links.capacity_gbps, links.jobs,
                          self._offered, self._flows, self._active, self._binding, self._may_bind, self._solved,
                          self._keep, tuple(slots.rows))
        if self.params.goodput_k:
            self._deliver(demand.links)
        return self._joined(job_id, row, demand, rate, alone)

    def _joined(self, job_id: int, row: int, demand: CommDemand, rate: float, alone: bool) -> float | None:
        """A job's row joined (or re-routed): if it binds no link (``alone``) it runs at its isolated ``rate`` and
        nobody else changes (that rate, its load written); else it waits for :meth:`resolve` (None)."""
        if alone:
            self._links.write(demand.links)
            join_alone(row, rate, demand.iter_s(rate), tuple(self._slots.rows), self._links.load_gbps)
            if self._tails is not None:
                self._tails.alone(job_id, demand, rate)
            return rate
        self._await_resolve(demand, job_id)
        return None

    def _moved(self, ids: np.ndarray) -> None:
        """The offered load (and flows) on links ``ids`` moved: whether they can bind, and what they deliver."""
        update_binding(self._binding, self._may_bind, ids, self._offered, self._links.capacity_gbps,
                       self._links.jobs, tuple(self._slots.rows), self._solved, self._keep)
        if self.params.goodput_k:
            self._deliver(ids)

    def _deliver(self, ids: np.ndarray) -> None:
        """What binding links ``ids`` deliver, now their offered load and flows moved (the goodput term)."""
        cap, p = self._links.capacity_gbps, self.params
        self._capacity_eff[ids] = effective_capacity(cap[ids], self._flows[ids], self._offered[ids], p.goodput_k,
                                                     p.buffer_packets)

    def _await_resolve(self, demand: CommDemand, new_job: int | None = None) -> None:
        super()._await_resolve(demand, new_job)
        self._touched_links.append(demand.links)

    def leave(self, job_id, now_s):
        demand = self._demands.pop(job_id)
        links, slots = self._links, self._slots
        row = slots.row(job_id)
        links.write(demand.links)
        # the sums off its links (an emptied link's to zero: no rounding residue), its load off, the row off its
        # links' lists, whether each link can bind; whether one could bind before (one call: joinleave.py)
        bound = leave_sums(row, demand.alone_rate_gbps, self._share.pop(job_id), tuple(links.arrays()),
                           self._offered, self._flows, self._active, self._binding, self._may_bind, self._solved,
                           self._keep, tuple(slots.rows))
        if self._paths is not None:
            self._paths.drop(row)
        slots.remove(job_id)
        self._core_cache.warm.pop(job_id, None)
        if self._tails is not None:
            self._tails.drop(job_id)
        if self.params.goodput_k:
            self._deliver(demand.links)
        if bound or job_id in self._new:
            self._await_resolve(demand)
        self._new.discard(job_id)

    def relink(self, job_id, demand, now_s):
        """A re-route in place: what :meth:`leave` and :meth:`join` again would do, bit for bit (the same row,
        the same sums in the same order: ``relink.py``), without their bookkeeping twice over. The fabric has
        checked the allocation (``Fabric.reallocate``), before it moved the job's count onto the new links."""
        old = self._demands[job_id]
        slots, links = self._slots, self._links
        r, t = slots.row(job_id), slots.rows
        links.write(old.links)
        share = self._share[job_id]
        self._share[job_id] = new_share = alone_share(demand)
        rate = demand.alone_rate_gbps
        # the sums, and the row moved in place with its kept places if it holds the new links (one call)
        bound, alone, moved = relink_in_place(r, t.n_links[r], old.alone_rate_gbps, share, demand.links,
                                              demand.weights, rate, new_share, tuple(links.arrays()), self._offered,
                                              self._flows, self._active, self._binding, self._may_bind,
                                              self._solved, self._keep, tuple(t))
        if self.params.goodput_k:  # what leave and join's _moved also keep (update_binding ran in relink_sums)
            self._moved(old.links)
            self._moved(demand.links)
        self._core_cache.warm.pop(job_id, None)
        if bound or job_id in self._new:
            self._await_resolve(old)
        self._new.discard(job_id)
        self._demands[job_id] = demand
        if moved:
            slots.rewrite(job_id, demand)
        else:  # the row must grow: removed and added again (the same row)
            slots.remove(job_id)
            slots.add(job_id, demand, keep=self._keep)
        if self._paths is not None:
            self._paths.put(r, demand.flow_paths)
        return self._joined(job_id, r, demand, rate, alone)

    def change_allocations(self, changes, now_s):
        """:meth:`change` of each ``(job id, allocation)`` in ``changes``, in order, bit for bit (``reclass.py``):
        every allocation checked before anything changes, then the changes that move a class, weight or cap in
        one compiled call (their offered loads, binding tests and rows), their links touched for the re-solve."""
        moving = []
        for job_id, allocation in changes:
            demand = self._demands[job_id]
            self.check_allocation(allocation, job_id)
            _same_paths(demand, allocation, job_id)
            if _treatment(allocation) != _treatment(demand.allocation):
                moving.append((demand, allocation))
        rows, old_rate = [], []
        for demand, allocation in moving:
            rows.append(self._slots.row(demand.job_id))
            old_rate.append(demand.alone_rate_gbps)
            demand.allocation = allocation
        for job_id, allocation in changes:
            self._demands[job_id].allocation = allocation
        if not moving:
            return
        demands = [d for d, _ in moving]
        links = np.concatenate([d.links for d in demands])
        starts = np.zeros(len(demands) + 1, dtype=np.int64)
        np.cumsum([len(d.links) for d in demands], out=starts[1:])
        lk = self._links
        reclass_rows(np.array(rows, dtype=np.int64), starts, links, np.concatenate([d.weights for d in demands]),
                     np.array(old_rate), np.array([d.alone_rate_gbps for d in demands]),
                     np.array([d.flow_cap_gbps for d in demands]), np.array([d.share for d in demands]),
                     np.array([d.priority for d in demands], dtype=np.int64),
                     np.array([d.own_queue for d in demands], dtype=np.bool_), self._offered, lk.capacity_gbps,
                     lk.jobs, self._binding, self._may_bind, self._solved, self._keep, tuple(self._slots.rows))
        p = self.params
        if p.goodput_k:  # (a function of each link's final sums: the values _moved left job by job)
            self._capacity_eff[links] = effective_capacity(lk.capacity_gbps[links], self._flows[links],
                                                           self._offered[links], p.goodput_k, p.buffer_packets)
        for d in demands:
            self._await_resolve(d)

    def change(self, job_id, now_s, *, phase=None, allocation=None):
        if allocation is not None:
            demand = self._demands[job_id]
            self.check_allocation(allocation, job_id)
            _same_paths(demand, allocation, job_id)
            if _treatment(allocation) != _treatment(demand.allocation):
                self._offered[demand.links] -= demand.weights * demand.alone_rate_gbps
                demand.allocation = allocation
                self._offered[demand.links] += demand.weights * demand.alone_rate_gbps
                self._moved(demand.links)
                self._slots.rewrite(job_id, demand)
                self._await_resolve(demand)
            demand.allocation = allocation
        if phase is None:
            return
        demand = self._demands[job_id]
        demand.phase = phase
        self._slots.rows.phase[self._slots.row(job_id)] = phase
        self._await_resolve(demand)

    def resolve(self, now_s):
        self.pending = False
        links, t, p = self._links, self._slots.rows, self.params
        links.write(np.zeros(0, dtype=np.int64))  # the links written are named below
        # a lossy binding link delivers less (goodput.py): kept per link as changes come (_moved)
        arrays = links.arrays()._replace(capacity_gbps=self._capacity_eff)
        seeds = np.concatenate(self._touched_links) if self._touched_links else np.zeros(0, dtype=np.int64)
        self._touched_links.clear()
        cored = None
        if p.phase_cores and self._two_pass is None:  # the compiled re-solve's steps, the cores between them
            cored = resolve_cores(now_s, self._touched, seeds, t, arrays, self._binding, p, REPORT_RTOL, self.counts,
                                  self._solved, self._may_bind, self._keep, self._core_cache)  # (core_resolve.py)
            code, ids, it, comm, rows, written = cored[:5] + (cored.written,)
        elif p.phase_cores:  # every solve in Python, where the cores are simulated after the mean field
            comp = binding_component(seeds, self._touched, t, self._binding)
            code = SolveCode.EXACT_NEEDED if len(comp.rows) else SolveCode.NOTHING
            ids = it = comm = np.empty(0)
            rows, comp_links = comp.rows, comp.links  # (every link of the rows)
            sub, kept = comp.entries, np.arange(len(comp.links))  # the cores read every link
            written = np.zeros(0, dtype=np.int64)
        elif self._two_pass is not None:  # DCTCP's beat-down: the component solved twice (beatdown_resolve.py)
            code, ids, it, comm, rows, comp_links, sub, kept, written = self._two_pass.resolve_touched(
                now_s, self._touched, seeds, tuple(t), tuple(arrays), self._binding, p, REPORT_RTOL,
                tuple(self.counts), self._solved, self._may_bind, self._keep)
        else:  # (the component and its binding part come back for the exact path: not found a second time)
            code, ids, it, comm, rows, comp_links, sub, kept, written = resolve_touched(
                now_s, self._touched, seeds, tuple(t), tuple(arrays), self._binding,
                p.max_exact_jobs, p.alpha, REPORT_RTOL, tuple(self.counts), self._solved, self._may_bind, self._keep)
        if cored is not None:
            self.exact_solves += cored.exact
            self.mean_field_solves += cored.mean_field
            blind, phase_blind = cored.blind, None  # per job, below
        elif code == SolveCode.EXACT_NEEDED:
            blind = np.zeros(len(rows), dtype=bool)
            cap, jobs = arrays.capacity_gbps[comp_links[kept]], jobs_at(t, rows)
            if self._two_pass is not None:
                out, exact, mean_field = self._two_pass(now_s, sub, cap, comp_links[kept], jobs, t, rows, p,
                                                        self.counts, blind, self._core_cache)
            else:
                out, exact, mean_field = solve_component(now_s, sub, cap, jobs, t, rows, p, self.counts, blind,
                                                         self._core_cache)
            self.exact_solves += exact
            self.mean_field_solves += mean_field
            ids, it, comm, written = write_back(self._touched, seeds, rows, comp_links, kept, out, REPORT_RTOL, t,
                                                links.arrays(), self._solved, self._may_bind, self._keep)
            phase_blind = None  # per job, below
        else:
            self.mean_field_solves += code == SolveCode.MEAN_FIELD
            phase_blind = bool(code == SolveCode.MEAN_FIELD)  # the whole component by the mean field
        self._new.clear()
        # what was written (write_back): the links it cleared, those the solve wrote and the moved rows' links,
        # not every link of the component (the aggregated history reads each link named)
        links.mark(written)
        self._touched[seeds] = False
        if self._tails is not None:  # rto.py, ratecut.py, slowest.py: every job whose tail inputs changed (tails.py)
            ids, it, comm = self._tails.refresh(t, rows, seeds, ids, it, comm, self._demands, self._share,
                                                self._offered, self._active, self._links.capacity_gbps, p,
                                                self._stretched, REPORT_RTOL)
        else:  # (the moved jobs' demands only for the stretch: by default no list built per re-solve)
            ids = ids.tolist()
            moved = [self._demands[j] for j in ids] if p.stretch != 0.0 else None
            it, comm = self._stretched(moved, it.tolist(), comm.tolist())
        if not isinstance(phase_blind, bool):
            by_id = dict(zip(t.job_id[rows].tolist(), blind.tolist()))
            phase_blind = [by_id[j] for j in ids]
        return Moved(ids, it, comm, phase_blind)
