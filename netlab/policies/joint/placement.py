"""``joint`` placement: the candidate that adds the most GPU utilisation, bandwidth re-shared (:mod:`.program`).

Candidates as ``predictive``/``oracle`` take them (a job that fits on one host goes there, best fit; else
the picks of ``consolidated``, ``topo-bestfit``, ``k8s-netoverhead`` and seeded random samples). A candidate
is worth what it adds to the program's objective once the bandwidth is re-shared: the optimum over the running
jobs connected to it through shared links, with the job on it, less the optimum without it. That counts the
job's own work (its speed alone on the candidate, slowed by its share) *and* the work it takes from the jobs
it shares links with, which ``oracle`` leaves out. The most wins (the first within ``tie_tol``, so locality
wins noise-level ties).
"""

from __future__ import annotations

from ...network.demand import build_demand
from ...network.model import iteration_time
from ...workload.zoo import ModelZoo
from ..base import PLACEMENT
from ..placement.predictive import ScoredPlacement, _Links
from .program import MIN_SPEED, job_of, solve


@PLACEMENT.register("joint")
class JointPlacement(ScoredPlacement):
    """Candidates scored by the GPU utilisation they add with the bandwidth re-shared (the most wins)."""

    name = "joint"

    def __init__(self, n_candidates: int = 8, tie_tol: float = 0.01, single_host: bool = True,
                 min_speed: float = MIN_SPEED):
        super().__init__(n_candidates, tie_tol, single_host)
        self.min_speed = min_speed

    def score(self, job, candidates, view):
        """Minus the utilisation each candidate adds (ScoredPlacement takes the least)."""
        index = self.cached(view, _Links)
        cap = view.topology.link_capacity_gbps
        model = (view.zoo or ModelZoo.default())[job.job.model]
        gpus = {jid: js.gpus for jid, js in view.running.items()}
        out = []
        for p in candidates:
            d, intra_s = build_demand(view.topology, model, job.job.pattern, job.job_id, p.hosts, p.gpus,
                                      job.iso_iter_s)
            new = job_of(job.job_id, job.gpus, d)
            if new is None:
                out.append(-job.gpus * model.compute_s / iteration_time(model.compute_s, intra_s, model.overlap))
                continue
            others = [x for x in (job_of(o.job_id, gpus[o.job_id], o) for o in index.component(d.links))
                      if x is not None]
            with_job = solve(others + [new], cap, self.min_speed).gpu_util
            out.append(solve(others, cap, self.min_speed).gpu_util - with_job)
        return out
