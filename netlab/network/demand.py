"""From a job and a placement to its network demand: one place, used by the
simulator when a job starts and by policies that score candidate placements
(CASSINI, topology-aware best fit, predictors) before anything starts.
"""

from __future__ import annotations

import math

import numpy as np

from ..errors import InputError
from ..workload.patterns import PATTERNS
from .model import CommDemand, iteration_time


def build_demand(topology, model, pattern: str, job_id: int, hosts, gpus, iso_iter_s: float = 0.0,
                 phase: float = 0.0, allocation=None) -> tuple[CommDemand | None, float]:
    """(demand, serial intra-host seconds). The demand is None for a job inside one host.

    Flow ``n`` of job ``j`` is hashed with key ``j * 1024 + n`` under hash ECMP,
    so a job keeps its paths for as long as it keeps its placement. ``allocation``
    (a ``NetAllocation``) goes with the demand; its ``paths``, if set, choose each
    flow's equal-cost path instead (``Topology.route``).
    """
    paths = None if allocation is None else allocation.paths
    hosts = np.asarray(hosts, dtype=np.int64)
    plan = PATTERNS.get(pattern)().plan_for(tuple(int(g) for g in gpus), model)
    intra = float(topology.host_intra_gbps[hosts].min())
    intra_s = plan.serial_intra_bytes * 8 / (intra * 1e9)
    if not plan.flows:
        return None, intra_s
    pairs = tuple((int(hosts[s]), int(hosts[d])) for s, d in plan.flows)
    if paths is not None and len(paths) not in (1, len(pairs)):
        raise InputError(f"job {job_id}: its allocation gives {len(paths)} path choices for its {len(pairs)} flows "
                         "(give one per flow, or one for all)")
    if plan.flow_weights is None:
        uniq, weights = topology.route(pairs, key=job_id * 1024, **({} if paths is None else {"paths": paths}))
    else:
        uniq, weights = _weighted_route(topology, pairs, plan.flow_weights, job_id * 1024, paths)
    cap = intra if plan.ring_intra_cap else math.inf
    iso_rate = min(float(np.min(topology.link_capacity_gbps[uniq] / weights)), cap)
    demand = CommDemand(job_id, uniq, weights, plan.flow_bytes, model.compute_s, intra_s, model.overlap, cap,
                        iso_rate, iso_iter_s, phase, allocation)
    return demand, intra_s


def _weighted_route(topology, pairs, flow_weights, key: int, paths=None) -> tuple[np.ndarray, np.ndarray]:
    """Like ``Topology.route``, flow ``n`` counting ``flow_weights[n]`` on each of its links (bytes relative to
    the plan's ``flow_bytes``)."""
    links, weights = [], []
    for n, ((s, d), w) in enumerate(zip(pairs, flow_weights)):
        path = None if paths is None else paths[n if len(paths) > 1 else 0]
        link, share = topology.flow_links(s, d, key=key + n, **({} if path is None else {"path": path}))
        links.append(link)
        weights.append(share * w)
    per_link = np.bincount(np.concatenate(links), weights=np.concatenate(weights), minlength=topology.n_links)
    ids = np.flatnonzero(per_link)
    return ids, per_link[ids]


def alone_iter_s(topology, model, pattern: str, hosts, gpus) -> float:
    """Iteration time of a job alone on this placement of this topology (no other traffic)."""
    demand, intra_s = build_demand(topology, model, pattern, 0, hosts, gpus)
    if demand is None:
        return iteration_time(model.compute_s, intra_s, model.overlap)
    return demand.iter_s(demand.iso_rate_gbps)
