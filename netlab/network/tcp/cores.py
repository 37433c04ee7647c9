"""Phase-aware cores inside a large ``tcp`` component (opt-in: ``phase_cores``).

Why: a component of more than ``max_exact_jobs`` jobs is solved by the
random-phase mean field, blind to the jobs' phases. What holds such a
component together is mostly links that limit nobody: on Philly's large
components a fifth of the binding links limit any job at the fixed point, and
each slowed job is limited by one link (``benchmarks/results/components.json``).
The jobs one link limits compete there, in phase; everyone else on that link
is held back elsewhere and meets them only on average.

So, after the mean field: the jobs each limiting link limits are joined into
cores (:func:`~netlab.network.tcp.mean_field.limiting_entries`); a core of
2 to ``max_core_jobs`` jobs is simulated by the exact fluid from its jobs'
phase state, weighting bytes by ``core_alpha`` (:data:`~.params.CORE_ALPHA`: in phase, the fluid's byte
weighting at the model's ``alpha`` slows small transfers that the packet-level referee lets through), on its
limiting links only, each link's capacity less the time-averaged throughput (duty x rate) the other jobs on it
have at the mean field's fixed point. Its jobs take the simulated periods and anchors, and
their times count as phase-aware: their sharing with each other used their
phases; what they meet from outside the core is an average. A core of one
job, a larger one, or one whose simulation does not finish keeps the mean
field's answer and stays phase-blind. One pass: the mean field is not solved
again with the cores' new periods.

A core's simulation depends only on its jobs (ids, phases, weights, caps, flows
on its links) and the capacity its links leave it, so its periods are kept
(:class:`CoreCache`) and reused while those stay the same and the capacity
within ``CACHE_RTOL`` of the one simulated: a re-solve elsewhere in the
component, which moves the background only a little, then costs a look-up, and
the jobs keep their positions under the kept periods (a job of equal period
keeps its offset, which is what the simulation found for it).

What a core costs grows with its size: it runs until its slowest job has made
``CORE_HORIZON`` iterations, so its events grow with its jobs times the ratio of
their periods, and each event passes over its jobs. On full Philly, whose later
components are of ~110 jobs, cores of 33-64 jobs are a tenth of the simulations
and over half their time, and most simulations are of a core one job joined or
left (a new set of jobs: nothing to look up). Such a core is *warm* (its other
jobs start from the pattern their core settled into) and is simulated over
``WARM_HORIZON`` iterations only, leaving ``WARM_WARMUP`` out.
"""

from __future__ import annotations

import numpy as np

from ...jit import njit  # numba is imported at the first kernel call
from ..jit import JIT
from ..slots import Entries, Jobs, Rows
from .components import Alone, Components, share_weights
from .core_fluid import simulate_core
from .mean_field import MeanFieldCounts, MeanFieldJobs, limiting_entries
from .params import TcpParams
from .state import keep_positions

CACHE_RTOL = 0.05  # a core's kept periods are reused while the capacity its links leave it moves by less
CORE_HORIZON, CORE_WARMUP = 24, 12  # iterations a core is simulated for, and left out of its mean period
#: ... when the core is *warm*: all its jobs but one at most sat in one core at their last solve (which had at most
#: one job more), so they start from the pattern that core settled into (its anchors and periods) and only the
#: change has to settle
WARM_HORIZON, WARM_WARMUP = 12, 4
CACHE_ENTRIES = 4096  # kept cores at most (the oldest go first): memory bounded whatever the run's length


class CoreCache:
    """Simulated periods per core, by the simulation's inputs but the capacity its links leave it, kept with that
    capacity and reused while the capacity now is within ``CACHE_RTOL`` of it on every link.

    Why not the capacity rounded into the key: a capacity wobbling across a rounding boundary missed though it
    had moved by a fraction of the tolerance; here the worst case is the same (5% between the capacity
    simulated and the one the periods are used at), and a capacity moves that far before it misses.

    ``warm``: the jobs whose phase state a core set at their last solve (simulated or kept), so that they sit
    in the pattern their core settled into (:data:`WARM_HORIZON`).
    """

    def __init__(self, entries: int = CACHE_ENTRIES):
        self.entries = entries
        self._kept: dict[bytes, tuple[np.ndarray, np.ndarray]] = {}
        self.warm: dict[int, tuple[int, int]] = {}  # job id -> (its core's serial, that core's jobs)
        self._serial = 0
        self.hits = self.misses = 0

    def is_warm(self, ids: list[int]) -> bool:
        """Whether the jobs ``ids`` sat in one core at their last solve, all but one at most, and that core had
        at most one job more (one job joined or left: the rest start from its settled pattern)."""
        seen: dict[int, int] = {}
        size = {}
        for j in ids:
            w = self.warm.get(j)
            if w is not None:
                seen[w[0]] = seen.get(w[0], 0) + 1
                size[w[0]] = w[1]
        if not seen:
            return False
        s = max(seen, key=seen.get)
        return seen[s] >= len(ids) - 1 and size[s] - seen[s] <= 1

    def settled(self, ids: list[int], cores: list[list[int]]) -> None:
        """After a solve of the jobs ``ids``: those in ``cores`` are warm (each core under a new serial), the
        others not."""
        if self.warm:  # (none warm: nothing to forget)
            for j in ids:
                self.warm.pop(j, None)
        for core in cores:
            self._serial += 1
            for j in core:
                self.warm[j] = (self._serial, len(core))

    @staticmethod
    def signatures(jobs: Jobs, phi: np.ndarray) -> np.ndarray:
        """Per job of a solve, what its core's simulation reads of it (id, phase, weight, caps, compute, bytes,
        intra-host phase, overlap, own queue), one row each: a core's key is its jobs' rows and its flows."""
        return np.column_stack([jobs.job_id, jobs.phase, phi, jobs.rate_cap_gbps, jobs.iso_rate_gbps, jobs.compute_s,
                                jobs.flow_bytes, jobs.intra_s, jobs.overlap, jobs.own_queue]).astype(float)

    @staticmethod
    def key(signatures: np.ndarray, flows: np.ndarray) -> bytes:
        """The key of a core of jobs with these :meth:`signatures` rows and ``flows`` (jobs x its links)."""
        return b"|".join((np.ascontiguousarray(signatures).tobytes(), np.ascontiguousarray(flows, float).tobytes(),
                          np.array(flows.shape, np.int64).tobytes()))

    def get(self, key: bytes, left: np.ndarray) -> np.ndarray | None:
        kept = self._kept.get(key)
        if kept is not None and (np.abs(np.log(left / kept[0])) <= np.log1p(CACHE_RTOL)).all():
            self.hits += 1
            return kept[1]
        self.misses += 1
        return None

    def put(self, key: bytes, left: np.ndarray, period: np.ndarray) -> None:
        self._kept.pop(key, None)  # kept anew at the end: the oldest go first
        if len(self._kept) >= self.entries:
            self._kept.pop(next(iter(self._kept)))
        self._kept[key] = (left.copy(), period)


def limited_cores(e: Entries, cap_link: np.ndarray, mf_jobs: MeanFieldJobs, rate: np.ndarray, duty: np.ndarray):
    """(per entry: its link limits its job; per job: its core's label, -1 if no link limits it). Jobs the
    same link limits are in one core (a job limited by two links joins both)."""
    lim = limiting_entries(e, cap_link, mf_jobs, rate, duty)
    return lim, core_labels(e.job, e.link, lim, rate.shape[0], cap_link.shape[0])


@njit(**JIT)
def core_labels(job, link, lim, n, m):
    """Per job, the least job of its core (union-find over the limiting entries), -1 if no link limits it."""
    parent = np.arange(n)
    first = np.full(m, -1, np.int64)  # per link: the first job it limits
    limited = np.zeros(n, np.bool_)
    for x in range(job.shape[0]):
        if not lim[x]:
            continue
        j = job[x]
        limited[j] = True
        if first[link[x]] < 0:
            first[link[x]] = j
            continue
        a, b = j, first[link[x]]
        while parent[a] != a:
            a = parent[a]
        while parent[b] != b:
            b = parent[b]
        if a != b:
            parent[max(a, b)] = min(a, b)
    label = np.full(n, -1, np.int64)
    for j in range(n):
        if limited[j]:
            r = j
            while parent[r] != r:
                r = parent[r]
            label[j] = r
    return label


@njit(**JIT)
def used_links(link: np.ndarray, m: int) -> tuple[np.ndarray, np.ndarray]:
    """``np.unique(link, return_inverse=True)`` for link indices below ``m``, by a mask instead of a sort: the
    links used (ascending) and each entry's place among them. Why: on every re-solve with cores the sort of the
    component's binding entries was a twentieth of a full-Philly run."""
    place = np.full(m, -1, np.int64)
    for g in link:
        place[g] = 0
    n = 0
    for g in range(m):
        if place[g] == 0:
            place[g] = n
            n += 1
    used = np.empty(n, np.int64)
    for g in range(m):
        if place[g] >= 0:
            used[place[g]] = g
    out = np.empty(link.shape[0], np.int64)
    for x in range(link.shape[0]):
        out[x] = place[link[x]]
    return used, out


@njit(**JIT)
def candidate_cores(e: Entries, cap_link, large, binding, it, al: Alone, phi, max_core_jobs):
    """:func:`refine_cores`' first steps, compiled: the large jobs' entries on binding links (jobs, links
    renumbered ascending over those used, weights), those links' capacities, each job's mean-field rate and duty,
    which entries limit their job and each job's core (:func:`limited_cores`), and whether any core has 2 to
    ``max_core_jobs`` jobs (none: nothing to simulate). Why compiled: with ``phase_cores`` on, these ran after
    every mean-field re-solve in a dozen numpy calls, whether or not a core was then simulated (a fifth of a
    20k-job Philly run at ``max_core_jobs`` 1). The same operations in the same order as the numpy ones."""
    n_e = e.job.shape[0]
    sel = np.zeros(n_e, np.bool_)
    for x in range(n_e):
        sel[x] = large[e.job[x]] and binding[e.link[x]]
    ej, ew = e.job[sel], e.weight[sel].astype(np.float64)
    blinks, el = used_links(e.link[sel], cap_link.shape[0])
    c = cap_link[blinks]
    n = it.shape[0]
    rate, duty = np.empty(n), np.empty(n)
    for i in range(n):
        v = it[i] - al.pre_s[i] - al.tail_s[i]
        net = 0.0 if v < 0.0 else v  # np.maximum(v, 0.0)
        rate[i] = al.gbit[i] / net if net > 0 else al.cap_gbps[i]
        duty[i] = net / (it[i] if it[i] >= 1e-300 else 1e-300)
    kept = Entries(ej, el, ew)
    lim = limiting_entries(kept, c, MeanFieldJobs(al.cap_gbps, phi, al.gbit, al.pre_s, al.tail_s), rate, duty)
    label = core_labels(ej, el, lim, n, c.shape[0])
    size = np.zeros(n, np.int64)
    for j in range(n):
        if label[j] >= 0:
            size[label[j]] += 1
    some = False
    for j in range(n):
        if 2 <= size[j] <= max_core_jobs:
            some = True
            break
    return ej, el, ew, c, rate, duty, lim, label, some


@njit(**JIT)
def core_inputs(ej, el, ew, c, rate, duty, lim, label, max_core_jobs):
    """Per core of 2 to ``max_core_jobs`` jobs whose limiting links leave it capacity (in the order of its label,
    :func:`candidate_cores`' values): its jobs (ascending), what each of its limiting links leaves it (ascending
    links: capacity less the others' duty x rate there, summed in entry order) and its jobs' flows on them (jobs x
    links), concatenated: (jobs, their offsets, capacities left, their offsets, flows, their offsets).

    Why compiled: these were a dozen numpy calls per core in Python, about a sixth of a Philly run with cores of
    up to 16 jobs. The same sums in the same order as the numpy ones (``np.add.at`` adds in entry order)."""
    n, m, n_e = label.shape[0], c.shape[0], ej.shape[0]
    core_of_link = np.full(m, -1, np.int64)
    for x in range(n_e):
        if lim[x]:
            core_of_link[el[x]] = label[ej[x]]
    size = np.zeros(n, np.int64)
    for j in range(n):
        if label[j] >= 0:
            size[label[j]] += 1
    # the entries on each core's limiting links in entry order, the jobs of each core ascending (counting sorts)
    per_core = np.zeros(n + 1, np.int64)
    for x in range(n_e):
        if core_of_link[el[x]] >= 0:
            per_core[core_of_link[el[x]] + 1] += 1
    per_core = np.cumsum(per_core)
    on, fill = np.empty(per_core[n], np.int64), per_core[:n].copy()
    for x in range(n_e):
        k = core_of_link[el[x]]
        if k >= 0:
            on[fill[k]] = x
            fill[k] += 1
    job_start = np.zeros(n + 1, np.int64)
    for j in range(n):
        if label[j] >= 0:
            job_start[label[j] + 1] += 1
    job_start = np.cumsum(job_start)
    by_core, fill = np.empty(job_start[n], np.int64), job_start[:n].copy()
    for j in range(n):
        if label[j] >= 0:
            by_core[fill[label[j]]] = j
            fill[label[j]] += 1
    members_at, left_at, flows_at = np.empty(job_start[n], np.int64), np.empty(per_core[n]), np.empty(0)
    mem_off, link_off, flow_off = [0], [0], [0]
    place = np.full(m, -1, np.int64)  # a link's place among the core's links
    pos = np.full(n, -1, np.int64)  # a job's place among the core's jobs
    n_mem = n_left = 0
    chunks = []
    for core in range(n):
        if per_core[core + 1] == per_core[core] or not 2 <= size[core] <= max_core_jobs:
            continue
        xs = on[per_core[core]:per_core[core + 1]]
        links = np.unique(el[xs])
        for b in range(links.shape[0]):
            place[links[b]] = b
        background = np.zeros(links.shape[0])
        for x in xs:
            if label[ej[x]] != core:
                background[place[el[x]]] += ew[x] * duty[ej[x]] * rate[ej[x]]
        left = c[links] - background
        ok = True
        for b in range(links.shape[0]):
            if not left[b] > 0:
                ok = False
        if ok:
            members = by_core[job_start[core]:job_start[core + 1]]
            for a in range(members.shape[0]):
                pos[members[a]] = a
            flows = np.zeros((members.shape[0], links.shape[0]))
            for x in xs:
                if label[ej[x]] == core:
                    flows[pos[ej[x]], place[el[x]]] += ew[x]
            members_at[n_mem:n_mem + members.shape[0]] = members
            left_at[n_left:n_left + links.shape[0]] = left
            n_mem += members.shape[0]
            n_left += links.shape[0]
            chunks.append(flows.ravel())
            mem_off.append(n_mem)
            link_off.append(n_left)
            flow_off.append(flow_off[-1] + flows.size)
        for b in range(links.shape[0]):
            place[links[b]] = -1
    if len(chunks):
        flows_at = np.empty(flow_off[-1])
        for q in range(len(chunks)):
            flows_at[flow_off[q]:flow_off[q + 1]] = chunks[q]
    return (members_at[:n_mem], np.array(mem_off, np.int64), left_at[:n_left], np.array(link_off, np.int64),
            flows_at, np.array(flow_off, np.int64))


def refine_cores(now_s: float, e: Entries, cap_link: np.ndarray, comps: Components, jobs: Jobs, al: Alone,
                 t: Rows, rows: np.ndarray, it: np.ndarray, p: TcpParams,
                 cache: CoreCache | None = None, counts: MeanFieldCounts | None = None) -> np.ndarray:
    """The cores of the mean field's large jobs simulated with phase (see the module doc), in place: ``it``
    and the rows' phase state of the jobs of every core simulated (or found in ``cache``). Returns those
    jobs (local indices).

    Each core is simulated by :func:`~.core_fluid.simulate_core` (the fluid's rules, compiled from set-up to
    periods). Network allocations in classes (priorities) are left to the mean field.
    """
    large = comps.large
    if not large.any() or jobs.priority[large].min() != jobs.priority[large].max():
        if cache is not None:
            cache.settled(jobs.job_id.tolist(), [])
        return np.empty(0, np.int64)
    phi = share_weights(al.gbit, p.alpha) * jobs.share  # (numpy's power: its bits, not numba's)
    ej, el, ew, c, rate, duty, lim, label, some = candidate_cores(e, cap_link, large, comps.binding, it, al, phi,
                                                                  p.max_core_jobs)
    if not some:  # no core to simulate
        if cache is not None:
            cache.settled(jobs.job_id.tolist(), [])
        return np.empty(0, np.int64)
    members_at, mem_off, left_at, link_off, flows_at, flow_off = core_inputs(ej, el, ew, c, rate, duty, lim, label,
                                                                           p.max_core_jobs)
    # the cores' fluid shares by its own byte weighting (params.CORE_ALPHA), over its own horizon
    in_core = p._replace(alpha=p.core_alpha, horizon=CORE_HORIZON, warmup=CORE_WARMUP)
    in_warm = p._replace(alpha=p.core_alpha, horizon=WARM_HORIZON, warmup=WARM_WARMUP)
    sig = CoreCache.signatures(jobs, phi) if cache is not None else None
    done, kept, kept_periods = [], [], []
    for q in range(len(mem_off) - 1):  # each core to simulate or look up, in its inputs' order
        members, left = members_at[mem_off[q]:mem_off[q + 1]], left_at[link_off[q]:link_off[q + 1]]
        flows = flows_at[flow_off[q]:flow_off[q + 1]].reshape(len(members), len(left))
        key = CoreCache.key(sig[members], flows) if cache is not None else None
        period = cache.get(key, left) if cache is not None else None
        if period is not None:  # the same core on the same capacity: each job keeps its position (below)
            it[members] = period
            kept.append(members)
            kept_periods.append(period)
            done.append(members)
            continue
        warm = cache is not None and cache.is_warm(jobs.job_id[members].tolist())
        res = simulate_core(now_s, members, flows, left, jobs, al, t, rows, in_warm if warm else in_core, counts)
        if res is None:
            continue
        period, anchor = res[0], res[1]
        if cache is not None:
            cache.put(key, left, period.copy())
        it[members] = period
        r = rows[members]
        t.anchor_s[r], t.period_s[r], t.anchor_phase[r] = anchor, period, jobs.phase[members]
        done.append(members)
    if kept:  # in one compiled call: the cores are disjoint, and a simulation reads its own jobs' rows only
        kept = np.concatenate(kept)
        keep_positions(now_s, rows[kept], np.concatenate(kept_periods), jobs.phase[kept], t)
    if cache is not None:
        cache.settled(jobs.job_id.tolist(), [jobs.job_id[d].tolist() for d in done])
    return np.concatenate(done) if done else np.empty(0, np.int64)
