"""How the simulator carries out a network policy's allocations.

Path choice is routing, done here before any model sees the flows: the job's
flows are routed on the paths chosen (:func:`netlab.sched.routes.route_paths`)
and its demand re-joins the fabric, so every contended model honours it.
Priority classes, weights and rate caps are the network model's to honour: a
model declares the kinds it honours (``Capabilities.allocations``), receives
them through ``NetworkModel.change(job, now, allocation=...)`` and refuses
the others (``check_allocation``); a model that declares nothing honours none
of them, and the refusal names the model, the job and the kind. A model
without contention (``ideal``) ignores every allocation.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from ..errors import InputError
from ..network.demand import build_demand
from ..network.model import UnsupportedAllocation
from ..sched import JobState, NetAllocation, PolicyError
from ..sched.routes import job_flows, route_paths

#: kinds the simulator honours itself, whatever the model (path choice is routing)
ROUTED_KINDS = frozenset({"path"})


class AllocationRefused(UnsupportedAllocation, PolicyError, InputError):
    """The network model cannot honour a network policy's allocation: the policy and the model do not fit
    together (a choice of the run, reported as bad input naming the model, the job and the kind)."""


def check_allocation(model, js: JobState, alloc: NetAllocation) -> frozenset:
    """The kinds of ``alloc`` the model must honour (path choice is the simulator's own); refuse, naming the
    model, the job and the kind (``NetworkModel.check_allocation``), those it cannot."""
    asked = alloc.kinds() - ROUTED_KINDS
    try:
        model.check_allocation(asked)
    except UnsupportedAllocation as exc:
        raise AllocationRefused(f"{exc}; asked for job {js.job_id} ({alloc})") from None
    return asked


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
