"""CASSINI as a placement policy: the host's short list, scored by link compatibility, phases shifted.

Why: a network-aware placement usually avoids shared links; CASSINI (NSDI
2024) instead accepts sharing when the jobs' communication can be
interleaved in time, and tells the jobs when to communicate. It sits on a
host scheduler, which keeps deciding where a job may go and proposes its
short list; CASSINI picks the candidate whose shared links are most
compatible.

Decision for a job, step by step:

1. Candidates (:func:`.candidates.shortlist`): the ``host`` placement
   policy's own pick, then up to ``n_candidates - 1`` alternatives with no
   more racks and hosts than it (the host's locality is kept).
2. A candidate inside one host, or sharing no link with a running multi-host
   job, scores 1.
3. Otherwise the new job's phase is chosen first, with running jobs at
   their current phases: on each shared link every shift of the new job is
   scored (:func:`score.scan`); among the phases that maximise the worst
   link's score (then the mean) the centre of the widest run wins, and if
   every phase is equally good none is set (see :func:`plateau_centre`).
4. Candidates are scored fewest shared links first; one whose worst link
   already falls below the best score so far is abandoned (``exact`` False,
   its score an upper bound): it cannot beat the winner's step-3 score.
   For every candidate scored exactly (or only the ``rephase_top`` best, to
   bound the cost) with a shared link still below 1, the affinity walk
   (:mod:`.affinity`), rooted at the new job at its step-3 phase, re-phases
   up to ``max_rephase`` running jobs of its component. The re-phasing is
   kept only if it raises the candidate's score and lowers no other link
   the moved jobs use below its current score (a shift never buys the new
   job's speed with a neighbour's). An abandoned candidate is not
   re-phased, so in rare cases one that re-phasing would have lifted past
   the winner is missed.
5. Score of a candidate = the **minimum** compatibility over the contended
   links it shares (a ring all-reduce runs at the pace of its slowest link,
   so the worst link is what the job feels); ties by the mean, then no
   sharing before sharing, then fewer racks, fewer hosts, the host's order
   (so with nothing to gain CASSINI takes the host's own pick).

Periods: running jobs use their current ``iter_s``; the new job its
isolated iteration on the candidate (``demand.iter_s(demand.iso_rate_gbps)``).
Phases (``Placement.phase`` and ``Placement.shifts``) are returned only on
networks where a phase takes effect (``view.network.capabilities.uses_phase``:
the ``phase`` and ``tcp`` models, and the testbed, where
:class:`~netlab.testbed.cluster.TestbedCluster` with ``start_delay_s`` starts
each job at its phase; it cannot move running jobs, so run CASSINI there with
``max_rephase=0``); elsewhere (``fair``, ``ideal``) the policy still ranks by
compatibility (CASSINI's placement benefit) and returns neither.
"""

from __future__ import annotations

from collections import ChainMap
from dataclasses import dataclass, field

import numpy as np

from ...sched import Placement
from ..base import PLACEMENT, PlacementPolicy
from .affinity import assign_phases
from .candidates import shortlist
from .decision import Decision
from .index import LinkIndex, key_of
from ...network.circle import BINS, MAX_PERIODS
from .score import wave_row

EPS = 1e-9


@dataclass
class Scored:
    """One candidate and how it ranks."""

    placement: Placement
    score: float = 1.0
    mean_score: float = 1.0
    shared_links: int = 0
    racks: int = 1
    hosts: int = 1
    index: int = 0
    phase: float | None = None  # the new job's phase (None: nothing to interleave with)
    shifts: dict[int, float] = field(default_factory=dict)  # running jobs to re-phase
    exact: bool = True  # False: scoring stopped early, ``score`` is an upper bound below the best
    _ctx: tuple | None = field(default=None, repr=False)  # what step 4 needs (set by Cassini.prepare)

    @property
    def key(self) -> tuple:
        return (-round(self.score, 9), -round(self.mean_score, 9), self.shared_links > 0, self.racks, self.hosts,
                self.index)


def plateau_centre(ok: np.ndarray) -> int | None:
    """Centre of the longest circular run of True bins; None if all are True.

    Why the centre: real windows stretch when a link is busy, so the phase
    with the most room on both sides is the safest of equally good ones.
    Why None when every phase is as good: the phase does not matter on
    these links, and a fixed choice (say 0) would line up every such job
    with the next one that comes along; the simulator's default phase (when
    the job starts) spreads them.
    """
    if ok.all():
        return None
    first_gap = int(np.argmin(ok))
    run = np.roll(ok, -first_gap).astype(np.int64)
    edges = np.diff(np.concatenate(([0], run, [0])))
    starts, ends = np.flatnonzero(edges == 1), np.flatnonzero(edges == -1)
    i = int(np.argmax(ends - starts))
    return (int(starts[i] + ends[i] - 1) // 2 + first_gap) % len(ok)


def _differs(a: float, b: float | None) -> bool:
    if b is None:
        return True
    d = abs(a - b) % 1.0
    return min(d, 1.0 - d) > EPS


@PLACEMENT.register("cassini")
class Cassini(PlacementPolicy):
    """CASSINI: rank candidate placements by link compatibility and interleave communication phases."""

    name = "cassini"

    def __init__(self, host="consolidated", n_candidates: int = 4, bins: int = BINS,
                 max_periods: int = MAX_PERIODS, max_rephase: int = 8, rephase_top: int | None = None):
        if n_candidates < 1 or bins < 2 or max_periods < 1 or max_rephase < 0 or (rephase_top or 0) < 0:
            raise ValueError("cassini: need n_candidates >= 1, bins >= 2, max_periods >= 1, max_rephase >= 0, "
                             "rephase_top >= 0")
        self._host = PLACEMENT.create(host) if isinstance(host, str) else host
        self.host = host if isinstance(host, str) else getattr(host, "name", type(host).__name__)
        self.n_candidates, self.bins, self.max_periods = n_candidates, bins, max_periods
        self.max_rephase, self.rephase_top = max_rephase, rephase_top
        self._index: LinkIndex | None = None
        self.reset(np.random.default_rng(0))

    def reset(self, rng: np.random.Generator) -> None:
        self.rng = rng
        self._index = None
        self._host.reset(np.random.default_rng(int(rng.integers(2**63))))

    # ------------------------------------------------------------ decision
    def place(self, job, view):
        ranked = self.rank(job, view)
        if not ranked:
            return None
        best = ranked[0]
        phase_net = view.network.capabilities.uses_phase
        p = best.placement
        return Placement(p.hosts, p.gpus, best.phase if phase_net else None,
                         tuple(sorted(best.shifts.items())) if phase_net else ())

    def rank(self, job, view) -> list[Scored]:
        """Every candidate, scored, best first."""
        cands = self.propose(job, view)
        if not cands:
            return []
        dec = self.decision(view)
        scored = [self.prepare(job, p, view, dec, i) for i, p in enumerate(cands)]
        bar = -np.inf
        for s in sorted(scored, key=lambda s: (s.shared_links, s.index)):  # cheap ones first raise the bar
            self.phase_score(s, dec, bar)
            if s.exact:
                bar = max(bar, s.score)
        scored.sort(key=lambda s: s.key)
        for s in scored[:self.rephase_top]:
            self.rephase(s, dec)
        return sorted(scored, key=lambda s: s.key)

    def link_index(self, view) -> LinkIndex:
        if self._index is None or self._index.key != key_of(view.running):
            self._index = LinkIndex(view.running)
        return self._index

    def propose(self, job, view) -> list[Placement]:
        """The host's short list (step 1)."""
        return shortlist(self._host, job, view, self.n_candidates)

    # ------------------------------------------------------------- scoring
    def decision(self, view, index: LinkIndex | None = None) -> Decision:
        return Decision(view, index or self.link_index(view), self.bins, self.max_periods)

    def score(self, job, p: Placement, view, dec: Decision | None = None, i: int = 0) -> Scored:
        """Score one candidate exactly (steps 2, 3 and 5 of the module doc; step 4 is :meth:`rephase`)."""
        dec = dec or self.decision(view)
        s = self.prepare(job, p, view, dec, i)
        self.phase_score(s, dec)
        return s

    def prepare(self, job, p: Placement, view, dec: Decision, i: int = 0) -> Scored:
        """The candidate's demand and its shared links; scores 1 if it shares none (step 2)."""
        index = dec.index
        s = Scored(p, hosts=len(p.hosts), index=i,
                   racks=len(set(view.topology.host_rack[list(p.hosts)].tolist())))
        demand = view.demand_for(job, p)
        if demand is None:
            return s
        root_w = dict(zip(demand.links.tolist(), demand.weights.tolist()))
        shared = [l for l in root_w if l in index.link_jobs]
        s.shared_links = len(shared)
        if not shared:
            return s
        base = wave_row(demand, demand.iter_s(demand.iso_rate_gbps))
        rows = {}
        for l in shared:
            rows[l] = base.copy()
            rows[l][3] *= root_w[l]
        seen, links = set(), []
        for l in shared:  # one link per distinct (capacity, jobs, weights, new job's weight)
            key = (dec.capacity[l], index.signature(l), round(root_w[l], 12))
            if key not in seen:
                seen.add(key)
                links.append(l)
        links.sort(key=lambda l: -len(index.link_jobs[l]))  # busiest first: the worst link shows up early
        s._ctx = (job.job_id, links, shared, rows)
        return s

    def phase_score(self, s: Scored, dec: Decision, bar: float = -np.inf) -> None:
        """Step 3: the new job's phase against running jobs where they are.

        ``bar``: the best score found so far. Adding a link can only lower
        the best worst-link score over phases, so once it falls below the bar
        the candidate cannot win: it stops there with ``exact=False`` and its
        score is that upper bound.
        """
        if s._ctx is None:
            return
        _, links, _, rows = s._ctx
        grid = np.arange(self.bins) / self.bins
        table = []
        worst = np.ones(self.bins)
        for l in links:
            sc, c = dec.root_scan(l, rows[l])
            table.append(sc[np.rint(grid * c).astype(np.int64) % c])
            worst = np.minimum(worst, table[-1])
            if worst.max() < bar - EPS:
                s.score, s.mean_score, s.exact = float(worst.max()), float(worst.max()), False
                return
        mean = np.array(table).mean(axis=0)
        ok = worst >= worst.max() - EPS
        ok &= mean >= mean[ok].max() - EPS
        k = plateau_centre(ok)
        s.score, s.mean_score = float(worst[ok][0]), float(mean[ok][0])
        s.phase = None if k is None else float(grid[k])

    def rephase(self, s: Scored, dec: Decision) -> None:
        """Step 4: the affinity walk; keep its shifts only if they help and hurt no one."""
        if s._ctx is None or not s.exact or s.score >= 1 - EPS or self.max_rephase == 0:
            return
        root, links, shared, rows = s._ctx
        index = dec.index
        link_jobs = ChainMap({l: index.link_jobs[l] + (root,) for l in shared}, index.link_jobs)
        job_links = ChainMap({root: list(shared)}, index.job_links)
        root_phase = 0.0 if s.phase is None else s.phase
        asg = assign_phases(root, link_jobs, lambda l: dec.waves(l, rows.get(l)), dec.capacity.__getitem__,
                            dec.phase, root_phase, 1 + self.max_rephase, self.bins, self.max_periods, job_links)
        moved = {j: ph for j, ph in asg.phases.items()
                 if j != root and j not in asg.frozen and _differs(ph, dec.phase.get(j))}
        if not moved:
            return
        after = [dec.score_at(l, moved, rows[l], root_phase) for l in links]
        if min(after) <= s.score + EPS:
            return
        touched, seen = [], set()
        for l in sorted({l for j in moved for l in index.job_links[j] if len(index.link_jobs[l]) >= 2} - set(shared)):
            key = (dec.capacity[l], index.signature(l))
            if key not in seen:
                seen.add(key)
                touched.append(l)
        for l in touched:
            if dec.score_at(l, moved) < dec.current_score(l) - EPS:
                return
        s.score, s.mean_score, s.phase = float(min(after)), float(np.mean(after)), root_phase
        s.shifts = {j: float(ph) for j, ph in moved.items()}
