"""How the simulator carries out a network policy's allocations.

Path choice is routing, done here before any model sees the flows: the job's
flows are routed on the paths chosen (:func:`netlab.sched.routes.route_paths`)
and its demand re-joins the fabric, so every contended model honours it.
Priority classes, weights and rate caps are the network model's to honour: a
model declares the kinds it honours (``Capabilities.allocations``) and
refuses the others (``check_allocation``); a model that declares nothing
honours none of them, and the refusal names the model, the job and the kind.
A model without contention (``ideal``) ignores every allocation.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from ..errors import InputError
from ..network.demand import build_demand
from ..sched import JobState, NetAllocation, PolicyError
from ..sched.routes import job_flows, route_paths

#: kinds the simulator honours itself, whatever the model (path choice is routing)
ROUTED_KINDS = frozenset({"path"})


class AllocationRefused(PolicyError, InputError):
    """The network model cannot honour a network policy's allocation: the policy and the model do not fit
    together (a choice of the run, reported as bad input naming the model, the job and the kind)."""


def model_allocations(model) -> frozenset:
    """The allocation kinds ``model`` honours (its ``Capabilities.allocations``; none if it declares nothing)."""
    caps = getattr(model, "capabilities", None)
    return frozenset(getattr(caps, "allocations", ()))


def check_allocation(model, js: JobState, alloc: NetAllocation) -> None:
    """Refuse, naming the model, the job and the kind, an allocation the model cannot honour."""
    asked = alloc.kinds() - ROUTED_KINDS
    missing = asked - model_allocations(model)
    if missing:
        have = ", ".join(sorted(model_allocations(model) | ROUTED_KINDS))
        raise AllocationRefused(f"network model {model.name!r} cannot honour a per-job {', '.join(sorted(missing))} "
                          f"allocation for job {js.job_id} ({alloc}); it honours: {have}")


def rerouted(topology, zoo, js: JobState, alloc: NetAllocation):
    """``js``'s demand with its flows on the paths ``alloc`` chooses (the fabric's ECMP if ``paths`` is None)."""
    p, model = js.placement, zoo[js.job.model]
    if alloc.paths is None:
        return build_demand(topology, model, js.job.pattern, js.job_id, p.hosts, p.gpus, js.iso_iter_s,
                            js.demand.phase)[0]
    pairs, weights = job_flows(model, js.job.pattern, p.hosts, p.gpus)
    links, per_link = route_paths(topology, pairs, weights, alloc.paths, js.job_id)
    iso = min(float(np.min(topology.link_capacity_gbps[links] / per_link)), js.demand.rate_cap_gbps)
    return dataclasses.replace(js.demand, links=links, weights=per_link, iso_rate_gbps=iso)
