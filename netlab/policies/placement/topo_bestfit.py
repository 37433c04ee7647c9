"""Topology-aware best fit: keep a job's bytes off the oversubscribed tiers, and off busy uplinks.

Why: on an oversubscribed fabric the links above the hosts (ToR uplinks,
spine, aggregation, core) are where jobs slow each other down. Consolidation
alone (fewest hosts, then fewest racks) ignores which racks' uplinks are
already loaded; this policy keeps consolidation's order of preference and, when
a job must span racks, picks the racks whose uplinks carry the least traffic.

Rule, in order (each step only if the previous cannot hold the job):

1. one host: best fit (the host with the fewest free GPUs that still fits,
   lowest index on ties): nothing crosses the network;
2. one rack: the rack needing the fewest hosts (hosts with the most free GPUs
   first); ties to the rack with the fewest free GPUs (best fit, keeping
   empty racks for large jobs), then the least-utilised uplinks: only host
   links are crossed;
3. several racks: a few candidate rack orders (fewest racks; least-utilised
   uplinks first; the least-utilised among the racks big enough to need the
   fewest racks), hosts rack by rack, most free GPUs first, the ring visiting
   each rack's hosts together. Each candidate is scored by its cross-tier
   bytes per iteration (``view.demand_for``: flows x bytes on every link whose
   tier is not ``host``) weighted by ``1 + utilisation`` of each such link
   (``view.link_load_gbps() / capacity``): bytes count once for crossing an
   oversubscribed tier and again in proportion to how busy the link already
   is. The cheapest wins (ties: the earlier candidate).

Vectorised over hosts and racks; only step 3 builds demands, for at most
three candidates.
"""

from __future__ import annotations

import numpy as np

from ...network.demand import build_demand
from ...sched import Placement
from ...topology.info import ANY, HOST, RACK, _TopoInfo, topo_info
from ...workload.zoo import ModelZoo
from ..base import PLACEMENT, PlacementPolicy
from .consolidated import take


def level_of(placement: Placement, topo) -> int:
    """Locality level of a placement: one host, one rack, or several racks."""
    if len(placement.hosts) == 1:
        return HOST
    racks = topo.host_rack[list(placement.hosts)]
    return RACK if (racks == racks[0]).all() else ANY


def rack_utilisation(view, info: _TopoInfo) -> np.ndarray:
    """Share of each rack's uplink+downlink capacity in use now (0 where a rack has none)."""
    load = view.link_load_gbps()[info.uplinks]
    used = np.bincount(info.uplink_rack, weights=load, minlength=len(info.rack_cap))
    return np.divide(used, info.rack_cap, out=np.zeros_like(used), where=info.rack_cap > 0)


def _demand(job, placement: Placement, view):
    if view.zoo is not None:
        return view.demand_for(job, placement)
    # No zoo in the view: the bundled one, read once (demand_for would re-read it on every call).
    model = ModelZoo.default()[job.job.model]
    return build_demand(view.topology, model, job.job.pattern, job.job_id, placement.hosts, placement.gpus,
                        job.iso_iter_s)[0]


def cross_tier_cost(job, placement: Placement, view, info: _TopoInfo) -> float:
    """Bytes per iteration on oversubscribed-tier links, each weighted by 1 + its utilisation."""
    d = _demand(job, placement, view)
    if d is None:
        return 0.0
    mask = info.oversub[d.links]
    links = d.links[mask]
    if not len(links):
        return 0.0
    cap = view.topology.link_capacity_gbps[links]
    util = view.link_load_gbps()[links] / cap
    return float(d.flow_bytes * np.sum(d.weights[mask] * (1.0 + util)))


def place_best(job, view, info: _TopoInfo | None = None) -> Placement | None:
    """The topology-aware best-fit placement (see the module docstring), or None if too few GPUs are free."""
    free = view.free_gpus
    n = job.gpus
    fits = np.flatnonzero(free >= n)
    if len(fits):
        counts = np.zeros_like(free)
        counts[fits[np.argmin(free[fits])]] = n
        return Placement.from_counts(counts)
    if int(free.sum()) < n:
        return None
    topo = view.topology
    info = info or topo_info(topo)
    rack = topo.host_rack
    n_racks = topo.n_racks
    order = np.lexsort((-free, rack))  # hosts by rack, most free first
    f, r = free[order], rack[order]
    rack_free = np.bincount(rack, weights=free, minlength=n_racks)
    util = rack_utilisation(view, info)
    feasible = rack_free >= n
    if feasible.any():
        cs = np.cumsum(f)
        starts = np.searchsorted(r, np.arange(n_racks))
        base = np.concatenate(([0], cs))[starts]
        within = cs - base[r]
        k = np.bincount(r[within < n], minlength=n_racks) + 1  # hosts needed in each rack
        cand = np.flatnonzero(feasible)
        best = cand[np.lexsort((cand, util[cand], rack_free[cand], k[cand]))[0]]
        hs = order[starts[best]:starts[best] + k[best]]
        return Placement.from_counts(take(free, hs, n), order=hs)
    return _spread(job, view, info, free, rack_free, util)


def _spread(job, view, info, free, rack_free, util) -> Placement:
    rack = view.topology.host_rack
    n = job.gpus
    racks = np.arange(len(rack_free))
    by_free = np.lexsort((racks, util, -rack_free))
    m = int(np.searchsorted(np.cumsum(rack_free[by_free]), n)) + 1  # fewest racks that hold the job
    big = rack_free >= rack_free[by_free[m - 1]]
    orders = [by_free, np.lexsort((racks, -rack_free, util)), np.lexsort((racks, -rack_free, util, ~big))]
    best, best_cost, seen = None, np.inf, set()
    for ro in orders:
        rank = np.empty_like(ro)
        rank[ro] = np.arange(len(ro))
        hs = np.lexsort((-free, rank[rack]))
        hs = hs[free[hs] > 0]
        counts = take(free, hs, n)
        key = counts.tobytes()
        if key in seen:
            continue
        seen.add(key)
        p = Placement.from_counts(counts, order=hs)
        cost = cross_tier_cost(job, p, view, info)
        if cost < best_cost:
            best, best_cost = p, cost
    return best


@PLACEMENT.register("topo-bestfit")
class TopoBestFit(PlacementPolicy):
    """Topology-aware best fit: one host, else one rack, else the racks with the least-loaded uplinks."""

    name = "topo-bestfit"

    def place(self, job, view):
        return place_best(job, view)
