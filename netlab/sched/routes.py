"""A running job's flows: what a network policy's path choice is about.

A network policy that chooses paths (``NetAllocation.paths``) reads a job's
flows with :func:`job_flows` and each flow's candidates with
``Topology.paths``. Flow ``n`` is the ``n``-th flow of the job's
communication plan (``netlab.workload.patterns``), the order the demand is
built in (``build_demand``), so an index means the same flow to the policy,
the simulator and the testbed.
"""

from __future__ import annotations

from ..workload.patterns import PATTERNS


def job_flows(model, pattern: str, hosts, gpus) -> tuple[tuple[tuple[int, int], ...], tuple[float, ...]]:
    """The job's flows as (source host, destination host) pairs and each flow's bytes relative to the plan's
    ``flow_bytes`` (1 for every flow of the uniform patterns).

    The plan's flows (between the placement's host positions) and weights depend only on the model, the pattern
    and the GPUs per host: memoised by them (a network policy asks for thousands of placements of a trace, most
    of a few sizes), the hosts put in at each call."""
    key = (model, pattern, tuple(int(g) for g in gpus))
    hit = _PLANS.get(key)
    if hit is None:
        plan = PATTERNS.get(pattern)().plan_for(key[2], model)
        weights = plan.flow_weights if plan.flow_weights is not None else (1.0,) * len(plan.flows)
        if len(_PLANS) >= 10_000:  # bounded
            _PLANS.clear()
        hit = _PLANS[key] = (tuple(plan.flows), tuple(float(w) for w in weights))
    flows, weights = hit
    return tuple((int(hosts[s]), int(hosts[d])) for s, d in flows), weights


_PLANS: dict = {}  # (model, pattern, GPUs per host) -> (the plan's flows by host position, their weights)
