"""From a job and a placement to its network demand: one place, used by the
simulator when a job starts and by policies that score candidate placements
(CASSINI, topology-aware best fit, predictors) before anything starts.

A demand is routed when its links are first read, not when it is made: a
network model that never reads them (``ideal``) never routes a flow. (When the
simulator asks the network model whether it needs demands at all, it can skip
them; until then this keeps the ideal network free of routing.)
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence

import numpy as np

from ..errors import InputError
from ..jit import njit  # numba is imported at the first kernel call
from ..workload.patterns import PATTERNS
from .jit import JIT
from .model import CommDemand, iteration_time


@njit(**JIT)
def _least_ratio(capacity, links, weights):
    """``np.min(capacity[links] / weights)`` (the same quotients, so the same least one) in one compiled call: a
    start's isolated rate without three numpy calls and two temporary arrays."""
    least = np.inf
    for k in range(links.shape[0]):
        q = capacity[links[k]] / weights[k]
        if q < least:
            least = q
    return least


class _Routed:
    """One of a :class:`RoutedDemand`'s route fields: routes the demand when first read. A non-data descriptor,
    so once routed the instance's own attribute answers every later read without a call."""

    def __init__(self, index: int):
        self.index = index

    def __get__(self, demand, owner=None):
        if demand is None:
            return self
        return demand._routed()[self.index]


class _FlowPaths:
    """A :class:`RoutedDemand`'s ``flow_paths``: found when first read (non-data, as :class:`_Routed`)."""

    def __get__(self, demand, owner=None):
        return self if demand is None else demand._flow_paths()


class RoutedDemand(CommDemand):
    """A :class:`CommDemand` whose route (``links``, ``weights``, ``iso_rate_gbps``) is found when first read.

    Pickles as the plain CommDemand it stands for, and ``dataclasses.replace`` (which calls the class with every
    field) makes that plain CommDemand too, routed, with the changes.
    """

    def __new__(cls, *args, **kwargs):
        if "links" in kwargs:  # dataclasses.replace: the fields of a routed demand
            return CommDemand(**kwargs)
        return super().__new__(cls)

    def __init__(self, topology, pairs: np.ndarray, key: int, flow_weights, job_id: int, flow_bytes: float,
                 compute_s: float, serial_intra_s: float, overlap: float, rate_cap_gbps: float, iso_iter_s: float,
                 phase: float, allocation=None, paths=None, steps: int = 1):
        self.job_id, self.flow_bytes, self.compute_s, self.steps = job_id, flow_bytes, compute_s, steps
        self.serial_intra_s, self.overlap, self.rate_cap_gbps = serial_intra_s, overlap, rate_cap_gbps
        self.iso_iter_s, self.phase, self.allocation = iso_iter_s, phase, allocation
        self._pending = (topology, pairs, key, flow_weights, paths)
        self._flow_source = (topology, pairs, key, paths)  # for flow_paths, read only by a model that needs it
        self._route = None

    def _routed(self) -> tuple[np.ndarray, np.ndarray, float]:
        if self._route is None:
            topology, pairs, key, flow_weights, paths = self._pending
            links, weights = topology.route(pairs, key=key, flow_weights=flow_weights, paths=paths)
            iso = min(_least_ratio(topology.link_capacity_gbps, links, weights), self.rate_cap_gbps)
            self._route, self._pending = (links, weights, iso), None
            # plain attributes from now on: the network model reads them per join, leave and re-solve
            self.__dict__.update(links=links, weights=weights, iso_rate_gbps=iso)
        return self._route

    def _flow_paths(self) -> tuple:
        """Per flow, its links and the share of it on each (``Topology.flow_links``, flow ``n`` keyed as
        :meth:`Topology.route` keys it), kept as a plain attribute once found."""
        topology, pairs, key, paths = self._flow_source
        out = tuple(topology.flow_links(s, d, key=key + n, path=None if paths is None else
                                        paths[n if len(paths) > 1 else 0])
                    for n, (s, d) in enumerate(pairs.tolist()))
        self.__dict__["flow_paths"] = out
        return out

    links = _Routed(0)
    weights = _Routed(1)
    iso_rate_gbps = _Routed(2)
    flow_paths = _FlowPaths()

    def __reduce__(self):
        return CommDemand, tuple(getattr(self, f.name) for f in dataclasses.fields(CommDemand))


class ChosenFlowPaths(Sequence):
    """A re-routed demand's ``flow_paths`` (a path choice: ``netlab.sim.netalloc.rerouted``), found when first read:
    per flow, the links of its chosen path and the share of the flow on each (all of it), as a
    :class:`RoutedDemand` routed with the same choice gives them (``Topology.flow_links(..., path=...)``).

    From the placement's flat layout of flows and equal-cost paths (``netlab.sched.routes.PlacementPaths``: flow
    ``f``'s paths are ``flow_first[f]`` to ``flow_first[f + 1]``, path ``q``'s links ``links[path_start[q]:
    path_start[q + 1]]``, in ``Topology.paths`` order) and the choice ``picks`` (one per flow, or one for all,
    modulo the flow's paths). Why on first read: a path-choosing policy re-routes jobs thousands of times, and
    only a model that reads single flows' paths (``dctcp``'s beat-down) needs them."""

    __slots__ = ("_layout", "_found")

    def __init__(self, flow_first: np.ndarray, path_start: np.ndarray, links: np.ndarray, picks: np.ndarray):
        self._layout, self._found = (flow_first, path_start, links, picks), None

    def __len__(self) -> int:
        return len(self._layout[0]) - 1

    def __getitem__(self, i):
        if self._found is None:
            flow_first, path_start, links, picks = self._layout
            out = []
            for f in range(len(flow_first) - 1):
                a = int(flow_first[f])
                q = a + int(picks[f if len(picks) > 1 else 0]) % int(flow_first[f + 1] - a)
                path = links[path_start[q]:path_start[q + 1]]
                out.append((path, np.ones(len(path))))
            self._found = tuple(out)
        return self._found[i]


#: _flat_plan's memo: (pattern class, id(model), GPUs per host) -> (model, FlatPlan); bounded
_FLAT_PLANS: dict = {}


def _flat_plan(cls, model, gpus):
    """The :class:`~netlab.workload.patterns.FlatPlan` of pattern class ``cls`` for ``model`` on ``gpus`` GPUs
    per host (its flows and weights as arrays, shared: read-only).

    Memoised by the pattern, the model (by identity: a zoo model is frozen; the entry holds it, so its id is not
    reused while the entry lives) and the GPUs per host, all a plan depends on: a busy trace starts the same few
    shapes on the same per-host counts again and again, and flattening a large job's hundreds of flows into an
    array, and its weights, cost more per start than routing them."""
    gpus = gpus if type(gpus) is tuple else tuple(int(g) for g in gpus)
    key = (cls, id(model), gpus)
    hit = _FLAT_PLANS.get(key)
    if hit is not None and hit[0] is model:
        return hit[1]
    flat = cls().flat_for(gpus, model)
    for a in (flat.flows, flat.flow_weights):
        if a is not None:
            a.flags.writeable = False
    if len(_FLAT_PLANS) >= 4096:
        _FLAT_PLANS.clear()
    _FLAT_PLANS[key] = (model, flat)
    return flat


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
    plan = _flat_plan(PATTERNS.get(pattern), model, gpus)
    intra = float(topology.host_intra_gbps[hosts].min())
    intra_s = plan.serial_intra_bytes * 8 / (intra * 1e9)
    if plan.flows is None:
        return None, intra_s
    pairs = hosts[plan.flows]  # (src host, dst host) per flow
    if paths is not None and len(paths) not in (1, len(pairs)):
        raise InputError(f"job {job_id}: its allocation gives {len(paths)} path choices for its {len(pairs)} flows "
                         "(give one per flow, or one for all)")
    cap = intra if plan.ring_intra_cap else math.inf
    weights = plan.flow_weights  # an array (a route reads it so), a tuple for a path choice (memoised by it)
    if paths is not None and weights is not None:
        weights = tuple(weights.tolist())
    demand = RoutedDemand(topology, pairs, job_id * 1024, weights, job_id, plan.flow_bytes,
                          model.compute_s, intra_s, model.overlap, cap, iso_iter_s, phase, allocation, paths,
                          plan.steps)
    return demand, intra_s


def alone_iter_s(topology, model, pattern: str, hosts, gpus) -> float:
    """Iteration time of a job alone on this placement of this topology (no other traffic)."""
    demand, intra_s = build_demand(topology, model, pattern, 0, hosts, gpus)
    if demand is None:
        return iteration_time(model.compute_s, intra_s, model.overlap)
    return demand.iter_s(demand.iso_rate_gbps)
