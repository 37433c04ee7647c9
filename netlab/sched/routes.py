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
    ``flow_bytes`` (1 for every flow of the uniform patterns)."""
    plan = PATTERNS.get(pattern)().plan_for(tuple(int(g) for g in gpus), model)
    pairs = tuple((int(hosts[s]), int(hosts[d])) for s, d in plan.flows)
    weights = plan.flow_weights if plan.flow_weights is not None else (1.0,) * len(pairs)
    return pairs, tuple(float(w) for w in weights)
