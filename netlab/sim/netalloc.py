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
from ..network.demand import build_demand
from ..network.model import CommDemand, UnsupportedAllocation
from ..sched import JobState, NetAllocation, PolicyError
from ..sched.routes import job_flows


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
    So the placement's flows (``job_flows``) and each choice's route are memoised, the route found as
    ``build_demand`` finds it (``Topology.route`` with the paths), and the rest (bytes, compute, overlap,
    intra-host time, pattern cap, steps) copied from the job's demand: the values ``build_demand`` gives. A
    path choice of None (hash ECMP keys flows by job id), or one of the wrong length (``build_demand`` refuses
    it), takes ``build_demand``."""
    p, old = js.placement, js.demand
    if memo is None or alloc.paths is None:
        return _built(topology, zoo, js, alloc)
    place = (js.job.model, js.job.pattern, p.hosts, p.gpus)
    key = (*place, alloc.paths)
    route = memo.get(key)
    if route is None:
        flows = memo.get(place)  # (a 4-tuple never equals a route's 5-tuple key)
        if flows is None:
            flows = memo[place] = job_flows(zoo[js.job.model], js.job.pattern, p.hosts, p.gpus)
        pairs, flow_weights = flows
        if len(alloc.paths) not in (1, len(pairs)):
            return _built(topology, zoo, js, alloc)
        links, weights = topology.route(pairs, paths=alloc.paths, flow_weights=flow_weights)
        iso = min(float(np.min(topology.link_capacity_gbps[links] / weights)), old.rate_cap_gbps)
        if len(memo) >= 100_000:  # bounded, as the topology's route memos
            memo.clear()
        route = memo[key] = (links, weights, iso)
    return CommDemand(js.job_id, route[0], route[1], old.flow_bytes, old.compute_s, old.serial_intra_s, old.overlap,
                      old.rate_cap_gbps, route[2], js.iso_iter_s, old.phase, alloc, old.steps)


def _built(topology, zoo, js: JobState, alloc: NetAllocation):
    """``js``'s demand from ``build_demand`` with ``alloc``."""
    p = js.placement
    return build_demand(topology, zoo[js.job.model], js.job.pattern, js.job_id, p.hosts, p.gpus, js.iso_iter_s,
                        js.demand.phase, allocation=alloc)[0]
