"""Predictive and oracle placement: score candidate placements by the job's slowdown there.

Why: consolidation and topology heuristics guess where a job will be slowed
by what already runs; a slowdown model (:mod:`netlab.slowdown`) predicts
it from the same information a real cluster has (topology, running jobs,
link utilisation, telemetry), and the exact network model says what the
simulator would do. Both policies share everything but the scorer, so the
comparison predictor vs oracle isolates the prediction error.

Rule (both):

1. a job that fits on one host goes there (best fit, as ``consolidated``):
   it sends nothing over the network, so there is nothing to predict and no
   placement can be faster (``single_host=False`` scores it like any other);
2. otherwise up to ``n_candidates`` distinct candidates: what
   ``consolidated``, ``topo-bestfit`` and ``k8s-netoverhead`` would do, then
   seeded random packed / scattered / rack-ordered samples (CASSINI's
   candidate generator, :func:`netlab.policies.cassini.candidates.propose`);
3. each candidate is scored by the job's slowdown (iteration time over its
   isolated iteration time): ``predictive`` with one batched ``predict`` of
   a fitted model, ``oracle`` by solving the network model with the running
   jobs plus the candidate (over the candidate's connected component of
   shared links, which max-min sharing cannot see past);
4. the first candidate (in the order above, which favours locality) whose
   score is within ``tie_tol`` of the best wins, so noise-level differences
   do not trade locality away.

Only the new job's own slowdown is scored, not the slowdown it inflicts on
running jobs. ``predictive`` takes a fitted model (an object or a path for
:func:`netlab.slowdown.models.load_model`); without one it fits a default
(``gbrt`` on a small simulator dataset of the cluster's topology) on first
use and caches it per topology for the process.
"""

from __future__ import annotations

import numpy as np

from ...network.model import iteration_time
from ...workload.zoo import ModelZoo
from ..base import PLACEMENT, PlacementPolicy
from ..cassini.candidates import propose
from .consolidated import Consolidated

CANDIDATE_POLICIES = ("consolidated", "topo-bestfit", "k8s-netoverhead")


class ScoredPlacement(PlacementPolicy):
    """Shared rule of ``predictive`` and ``oracle``; subclasses give :meth:`score`."""

    def __init__(self, n_candidates: int = 8, tie_tol: float = 0.01, single_host: bool = True):
        if n_candidates < 1 or tie_tol < 0:
            raise ValueError(f"{self.name}: need n_candidates >= 1 and tie_tol >= 0")
        self.n_candidates, self.tie_tol, self.single_host = n_candidates, tie_tol, single_host
        self._policies = [PLACEMENT.create(c) for c in CANDIDATE_POLICIES]
        self._consolidated = Consolidated()
        self._cache_key, self._cache = None, None
        self.reset(np.random.default_rng(0))

    def reset(self, rng: np.random.Generator) -> None:
        self.rng = rng
        self._cache_key, self._cache = None, None
        for p in self._policies:
            p.reset(np.random.default_rng(int(rng.integers(2**63))))

    def candidates(self, job, view) -> list:
        return propose(self._policies, self.rng, self.n_candidates, job, view)

    def score(self, job, candidates, view) -> np.ndarray:  # pragma: no cover
        """Slowdown of ``job`` on each candidate (smaller is better)."""
        raise NotImplementedError

    def place(self, job, view):
        free = view.free_gpus
        if int(free.sum()) < job.gpus:
            return None
        if self.single_host and (free >= job.gpus).any():
            return self._consolidated.place(job, view)
        cands = self.candidates(job, view)
        if not cands:
            return None
        scores = np.asarray(self.score(job, cands, view), dtype=float)
        best = float(scores.min())
        return cands[int(np.flatnonzero(scores <= best + self.tie_tol * abs(best))[0])]

    def cached(self, view, build):
        """``build(view)`` once per cluster state (running jobs, their rate versions, link loads).

        A view without link loads returns fresh zeros on every call, so all-zero loads count as one state
        (keying them by identity rebuilt the cache on every decision).
        """
        load = view.link_load_gbps()
        key = (id(view.topology), id(load) if load.any() else None,
               frozenset((jid, js.version) for jid, js in view.running.items()))
        if key != self._cache_key:
            self._cache_key, self._cache = key, build(view)
        return self._cache


# ------------------------------------------------------------------ predictor
_DEFAULT_MODELS: dict = {}


def default_model(topology, n_experiments: int = 120, seed: int = 0):
    """A ``gbrt`` slowdown model fitted on a small simulator dataset of ``topology``, cached per topology.

    The rows come from :mod:`netlab.slowdown.samples` (the network model's exact
    iteration times for randomised co-locations placed by the registered
    policies): the same rows as ``netlab.congestion.simulator_dataset``, built
    without reaching the simulator.
    """
    from ...slowdown.models import make_model
    from ...slowdown.samples import simulator_dataset

    key = (topology.name, repr(sorted(topology.params.items())), topology.n_links,
           float(topology.link_capacity_gbps.sum()), n_experiments, seed)
    if key not in _DEFAULT_MODELS:
        df = simulator_dataset(topology, PLACEMENT.create, n_experiments=n_experiments, seed=seed)
        _DEFAULT_MODELS[key] = make_model("gbrt", n_estimators=150).fit(df, df["slowdown"])
    return _DEFAULT_MODELS[key]


@PLACEMENT.register("predictive")
class Predictive(ScoredPlacement):
    """Candidate placements scored by a fitted slowdown model's prediction; the smallest wins."""

    name = "predictive"

    def __init__(self, model=None, n_candidates: int = 8, tie_tol: float = 0.01, single_host: bool = True):
        super().__init__(n_candidates, tie_tol, single_host)
        self.model = model if isinstance(model, str) or model is None else type(model).__name__
        self._model = model if model is not None and not isinstance(model, str) else None
        if isinstance(model, str):
            from ...slowdown.models import load_model

            self._model = load_model(model)

    def fitted_model(self, view):
        if self._model is None:
            self._model = default_model(view.topology)
        return self._model

    def score(self, job, candidates, view):
        from ...slowdown.features import Background, placement_frame

        background = self.cached(view, Background.from_view)
        frame = placement_frame(background, job, candidates, view.zoo)
        return self.fitted_model(view).predict(frame)


# --------------------------------------------------------------------- oracle
class _Links:
    """Running jobs' demands and which jobs use each link, for connected components."""

    def __init__(self, view):
        self.demands = {}
        self.link_jobs: dict[int, list[int]] = {}
        for jid, js in view.running.items():
            d = js.demand
            if d is None and js.placement is not None and len(js.placement.hosts) > 1:
                d = view.demand_for(js, js.placement)
            if d is None:
                continue
            self.demands[jid] = d
            for link in d.links.tolist():
                self.link_jobs.setdefault(link, []).append(jid)

    def component(self, links) -> list:
        """Running demands connected to ``links`` through shared links."""
        seen_links, jobs = set(), set()
        frontier = [int(l) for l in links]
        while frontier:
            nxt = []
            for link in frontier:
                if link in seen_links:
                    continue
                seen_links.add(link)
                for jid in self.link_jobs.get(link, ()):
                    if jid not in jobs:
                        jobs.add(jid)
                        nxt.extend(self.demands[jid].links.tolist())
            frontier = nxt
        return [self.demands[j] for j in sorted(jobs)]


@PLACEMENT.register("oracle")
class Oracle(ScoredPlacement):
    """Candidate placements scored by the exact slowdown from the network model; the smallest wins."""

    name = "oracle"

    def score(self, job, candidates, view):
        from ...network.demand import build_demand

        index = self.cached(view, _Links)
        net = view.network.fresh()  # the model in force, without the run's jobs (a live backend: its stand-in)
        model = (view.zoo or ModelZoo.default())[job.job.model]
        cap = view.topology.link_capacity_gbps
        out = []
        for p in candidates:
            d, intra_s = build_demand(view.topology, model, job.job.pattern, job.job_id, p.hosts, p.gpus,
                                      job.iso_iter_s)
            if d is None:
                it = iteration_time(model.compute_s, intra_s, model.overlap)
            else:
                it = net.solve(index.component(d.links) + [d], cap).iter_s[job.job_id]
            out.append(it / job.iso_iter_s)
        return np.array(out)
