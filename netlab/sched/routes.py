"""A running job's flows and the equal-cost paths each may take: what path choice is about.

A network policy that chooses paths (``NetAllocation.paths``) reads a job's
flows with :func:`job_flows` and each flow's candidates with
``Topology.paths``; the simulator routes the chosen paths with
:func:`route_paths`. Flow ``n`` is the ``n``-th flow of the job's
communication plan (``netlab.workload.patterns``), the same order the demand
is built in, so an index means the same flow to the policy, the simulator and
the testbed.
"""

from __future__ import annotations

import numpy as np

from ..workload.patterns import PATTERNS
from .decision import PolicyError


def job_flows(model, pattern: str, hosts, gpus) -> tuple[tuple[tuple[int, int], ...], tuple[float, ...]]:
    """The job's flows as (source host, destination host) pairs and each flow's bytes relative to the plan's
    ``flow_bytes`` (1 for every flow of the uniform patterns)."""
    plan = PATTERNS.get(pattern)().plan_for(tuple(int(g) for g in gpus), model)
    pairs = tuple((int(hosts[s]), int(hosts[d])) for s, d in plan.flows)
    weights = plan.flow_weights if plan.flow_weights is not None else (1.0,) * len(pairs)
    return pairs, tuple(float(w) for w in weights)


def chosen_path(topology, src: int, dst: int, paths: tuple[int, ...], n: int, job_id: int) -> tuple[int, ...]:
    """The link ids flow ``n`` (``src`` -> ``dst``) takes under the choice ``paths`` (one index per flow, or a
    single index for every flow, taken modulo each flow's number of paths)."""
    candidates = topology.paths(src, dst)
    if len(paths) == 1:
        return candidates[paths[0] % len(candidates)]
    idx = paths[n]
    if idx >= len(candidates):
        raise PolicyError(f"job {job_id}: path choice {idx} for flow {n} (host {src} -> {dst}), which has "
                          f"{len(candidates)} equal-cost path(s) (indices 0..{len(candidates) - 1})")
    return candidates[idx]


def route_paths(topology, pairs, flow_weights, paths: tuple[int, ...], job_id: int
                ) -> tuple[np.ndarray, np.ndarray]:
    """Links the flows load (sorted ids) and the flows' weight on each, every flow on its chosen path."""
    if len(paths) not in (1, len(pairs)):
        raise PolicyError(f"job {job_id}: a path choice needs one index per flow ({len(pairs)}) or one for "
                          f"all, got {len(paths)}")
    links, weights = [], []
    for n, ((s, d), w) in enumerate(zip(pairs, flow_weights)):
        p = chosen_path(topology, s, d, paths, n, job_id)
        links.append(np.asarray(p, dtype=np.int64))
        weights.append(np.full(len(p), w))
    per_link = np.bincount(np.concatenate(links), weights=np.concatenate(weights), minlength=topology.n_links)
    ids = np.flatnonzero(per_link)
    return ids, per_link[ids]
