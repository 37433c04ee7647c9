"""How the simulator carries out a network policy's allocations.

The network model honours them (``netlab.network.model``'s module doc): it
declares the kinds it honours (``Capabilities.allocations``) and refuses the
others (``NetworkModel.check_allocation``), naming the model, the job and the
kind, before anything changes; a model without contention (``ideal``)
ignores them. A new class, weight or cap is changed in place
(``Fabric.reallocate``); a new path choice changes which links the job's
flows load, so its demand is built again with the allocation
(``build_demand(..., allocation=...)``) and re-joins the fabric. A job that
starts in a pass joins the fabric only after the policy has decided in that
pass, once, with its allocation (never first on the fabric's ECMP).
"""

from __future__ import annotations

import numpy as np

from ..errors import InputError
from ..jit import njit
from ..network.demand import ChosenFlowPaths, build_demand
from ..network.model import CommDemand, UnsupportedAllocation
from ..sched import JobState, NetAllocation, PolicyError
from ..sched.routes import placement_paths
from ..topology.routing import accumulate


class AllocationRefused(UnsupportedAllocation, PolicyError, InputError):
    """The network model cannot honour a network policy's allocation: the policy and the model do not fit
    together (a choice of the run, reported as bad input naming the model, the job and the kind)."""


def check_allocation(model, job_id: int, alloc: NetAllocation) -> None:
    """Refuse what ``model`` cannot honour of ``alloc`` (:class:`AllocationRefused`, naming model, job, kind)."""
    try:
        model.check_allocation(alloc, job_id)
    except UnsupportedAllocation as exc:
        raise AllocationRefused(str(exc)) from None


def rerouted(topology, zoo, js: JobState, alloc: NetAllocation, memo: dict | None = None):
    """``js``'s demand built again with ``alloc`` (its paths; the fabric's ECMP where ``paths`` is None).

    ``memo`` (a dict the caller keeps for one run on one topology): a network policy moves a trace's jobs
    between a few path choices of the same host sets thousands of times, and a path choice changes only the
    route (links, flows per link, the rate alone there) of the demand the job already has on its placement.
    So each choice's route is memoised (the placement's flows and their candidate paths are the layout the
    path-choosing policy read, ``routes.placement_paths``, memoised with the topology), a new choice's route
    summed in one compiled call as ``build_demand`` sums it (``Topology.route`` with the paths: the same links
    and sums; a trace's jobs with tens of flows meet thousands of new choices, each a loop over the flows in
    Python there), and the rest (bytes, compute, overlap, intra-host time, pattern cap, steps) copied from the
    job's demand: the values ``build_demand`` gives. A path choice of None (hash ECMP keys flows by job id), or
    one of the wrong length (``build_demand`` refuses it), takes ``build_demand``."""
    p, old = js.placement, js.demand
    if memo is None or alloc.paths is None:
        return _built(topology, zoo, js, alloc)
    key = (js.job.model, js.job.pattern, p.hosts, p.gpus, alloc.paths)
    route = memo.get(key)
    if route is None:
        cands = placement_paths(topology, zoo[js.job.model], js.job.pattern, p.hosts, p.gpus)
        if len(alloc.paths) not in (1, len(cands.flow_w)):
            return _built(topology, zoo, js, alloc)
        links, weights, iso = _chosen_route(cands.flow_first, cands.path_start, cands.links, cands.flow_w,
                                            np.asarray(alloc.paths, dtype=np.int64), topology.router.scratch,
                                            topology.link_capacity_gbps)
        if len(memo) >= 100_000:  # bounded, as the topology's route memos
            memo.clear()
        route = memo[key] = (links, weights, min(iso, old.rate_cap_gbps),  # each flow's path: found if read
                             ChosenFlowPaths(cands.flow_first, cands.path_start, cands.links,
                                             np.asarray(alloc.paths, dtype=np.int64)))
    return CommDemand(js.job_id, route[0], route[1], old.flow_bytes, old.compute_s, old.serial_intra_s, old.overlap,
                      old.rate_cap_gbps, route[2], js.iso_iter_s, old.phase, alloc, old.steps, flow_paths=route[3])


@njit(cache=True)
def _chosen_route(flow_first, path_start, path_links, flow_w, picks, scratch, capacity):  # pragma: no cover
    """``Topology.route(pairs, paths=picks, flow_weights=...)`` of a placement's flows (``PlacementPaths``):
    flow ``f`` takes its path ``picks[f]`` (one pick: every flow's), modulo its number of paths; each of its
    links counts its weight. The links and weights are laid out flow by flow and summed by ``accumulate`` (the
    same sums in the same order); also the least ``capacity / weight`` over them (the rate alone, uncapped)."""
    n = flow_w.shape[0]
    total = 0
    for f in range(n):
        a = flow_first[f]
        q = a + picks[f if picks.shape[0] > 1 else 0] % (flow_first[f + 1] - a)
        total += path_start[q + 1] - path_start[q]
    links = np.empty(total, dtype=np.int64)
    weights = np.empty(total)
    e = 0
    for f in range(n):
        a = flow_first[f]
        q = a + picks[f if picks.shape[0] > 1 else 0] % (flow_first[f + 1] - a)
        for x in range(path_start[q], path_start[q + 1]):
            links[e], weights[e] = path_links[x], flow_w[f]
            e += 1
    ids, sums = accumulate(links, weights, scratch)
    iso = np.inf
    for k in range(ids.shape[0]):
        iso = min(iso, capacity[ids[k]] / sums[k])
    return ids, sums, iso


def _built(topology, zoo, js: JobState, alloc: NetAllocation):
    """``js``'s demand from ``build_demand`` with ``alloc``."""
    p = js.placement
    return build_demand(topology, zoo[js.job.model], js.job.pattern, js.job_id, p.hosts, p.gpus, js.iso_iter_s,
                        js.demand.phase, allocation=alloc)[0]
