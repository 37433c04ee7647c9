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

from ..errors import InputError
from ..network.demand import build_demand
from ..network.model import UnsupportedAllocation
from ..sched import JobState, NetAllocation, PolicyError


class AllocationRefused(UnsupportedAllocation, PolicyError, InputError):
    """The network model cannot honour a network policy's allocation: the policy and the model do not fit
    together (a choice of the run, reported as bad input naming the model, the job and the kind)."""


def check_allocation(model, job_id: int, alloc: NetAllocation) -> None:
    """Refuse what ``model`` cannot honour of ``alloc`` (:class:`AllocationRefused`, naming model, job, kind)."""
    try:
        model.check_allocation(alloc, job_id)
    except UnsupportedAllocation as exc:
        raise AllocationRefused(str(exc)) from None


def rerouted(topology, zoo, js: JobState, alloc: NetAllocation):
    """``js``'s demand built again with ``alloc`` (its paths; the fabric's ECMP where ``paths`` is None)."""
    p = js.placement
    return build_demand(topology, zoo[js.job.model], js.job.pattern, js.job_id, p.hosts, p.gpus, js.iso_iter_s,
                        js.demand.phase, allocation=alloc)[0]
