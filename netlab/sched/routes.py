"""A running job's flows: what a network policy's path choice is about.

A network policy that chooses paths (``NetAllocation.paths``) reads a job's
flows with :func:`job_flows` and each flow's candidates with
``Topology.paths``. Flow ``n`` is the ``n``-th flow of the job's
communication plan (``netlab.workload.patterns``), the order the demand is
built in (``build_demand``), so an index means the same flow to the policy,
the simulator and the testbed.
"""

from __future__ import annotations

import weakref
from typing import NamedTuple

import numpy as np

from ..jit import njit
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


class PlacementPaths(NamedTuple):
    """A placement's flows and their equal-cost paths, flat: flow ``f`` (of :func:`job_flows`, in its order) has
    ``n_paths[f]`` paths (in ``Topology.paths`` order), paths ``flow_first[f]`` to ``flow_first[f + 1]`` of all;
    path ``q``'s links are ``links[path_start[q]:path_start[q + 1]]``, so ``links`` lists them flow by flow,
    path by path; each of flow ``f``'s paths has ``hops[f]`` links (equal cost); ``flow_w``: each flow's bytes
    relative to the plan's; ``multi``: some flow has a choice of paths."""

    n_paths: np.ndarray
    hops: np.ndarray
    flow_first: np.ndarray
    path_start: np.ndarray
    links: np.ndarray
    flow_w: np.ndarray
    multi: bool


def placement_paths(topology, model, pattern: str, hosts, gpus) -> PlacementPaths:
    """:class:`PlacementPaths` of a job of ``model`` and ``pattern`` on ``hosts`` with ``gpus`` on each.

    Why one layout, memoised per topology: a network policy that picks paths (``crux``) lays a started job's
    candidates out to choose among them, and the simulator lays the same placement's out again to route the
    choice it gets (``netalloc.rerouted``); a trace starts thousands of placements. Memoised by the model, the
    pattern and the placement for as long as the topology lives (bounded), each host pair's paths once."""
    memo = _memo_of(topology)
    key = (model, pattern, tuple(hosts), tuple(gpus))
    hit = memo.get(key)
    if hit is None:
        pairs, weights = job_flows(model, pattern, hosts, gpus)
        hit = lay_out(topology, pairs, weights, memo)
        if len(memo) >= 100_000:  # bounded, as the topology's route memos
            memo.clear()
        memo[key] = hit
    return hit


def lay_out(topology, pairs, weights, memo: dict | None = None) -> PlacementPaths:
    """:class:`PlacementPaths` of flows between host ``pairs`` with relative bytes ``weights``; each pair's paths
    (their number, each one's length, their links) memoised in ``memo`` by the pair, if given."""
    memo = {} if memo is None else memo
    new = [pair for pair in dict.fromkeys(pairs) if pair not in memo]  # (a pair never equals a 4-tuple key)
    if new:
        _walk_pairs(topology, _with_whole_rows(topology, new, memo), memo, len(new))
    per_pair = [memo[pair] for pair in pairs]
    n_paths = np.array([p[0] for p in per_pair], dtype=np.int64)
    lengths = np.concatenate([p[1] for p in per_pair])
    hops, flow_first, path_start, multi = _index(n_paths, lengths)
    return PlacementPaths(n_paths, hops, flow_first, path_start, np.concatenate([p[2] for p in per_pair]),
                          np.array(weights, dtype=np.float64), multi)


@njit(cache=True)
def _index(n_paths, lengths):  # pragma: no cover  (compiled; tested through lay_out)
    """:class:`PlacementPaths`' index of flows with ``n_paths`` paths of ``lengths`` links each (path by path,
    flow by flow): each flow's hops (its first path's length), ``flow_first`` and ``path_start`` (the running
    sums from 0), and whether some flow has a choice. Why one call: a started placement not met before made
    seven small numpy operations here, thousands of times a trace (integers: the same values)."""
    n = n_paths.shape[0]
    flow_first = np.zeros(n + 1, dtype=np.int64)
    hops = np.empty(n, dtype=np.int64)
    multi = False
    for f in range(n):
        flow_first[f + 1] = flow_first[f] + n_paths[f]
        hops[f] = lengths[flow_first[f]]
        multi = multi or n_paths[f] > 1
    path_start = np.zeros(lengths.shape[0] + 1, dtype=np.int64)
    for q in range(lengths.shape[0]):
        path_start[q + 1] = path_start[q] + lengths[q]
    return hops, flow_first, path_start, multi


#: on a topology of at most this many hosts a source's paths to every host are walked when its first pair is met
WHOLE_ROW_HOSTS = 128


def _with_whole_rows(topology, new: list, memo: dict) -> list:
    """``new`` (host pairs not in ``memo``), and on a topology of at most :data:`WHOLE_ROW_HOSTS` hosts every other
    pair from their sources not in ``memo`` yet. Why: a trace's placements meet a cluster's host pairs a few at a
    time, thousands of walks of a few pairs each (two calls into the router and a dozen numpy operations each);
    a source's whole row is a few hundred pairs at most, walked once. The pairs' paths are the same either way."""
    n = topology.n_hosts
    if n > WHOLE_ROW_HOSTS:
        return new
    row = dict.fromkeys(new)
    for s in dict.fromkeys(src for src, _ in new):
        for d in range(n):
            if d != s and (s, d) not in memo:
                row[s, d] = None
    return list(row)


def _walk_pairs(topology, pairs: list, memo: dict, asked: int | None = None) -> None:
    """Every equal-cost path of each host pair, as ``Topology.paths`` gives them (the router's walk of path 0, 1,
    ... of the pair), into ``memo`` by the pair: (their number, each one's length, their links). Why not
    ``Topology.paths`` per pair: a started placement meets tens of pairs not seen yet, and two calls into the
    router for all of them cost less than two per pair (the same walk, path by path). The first ``asked`` pairs
    (None: all) must have a path (else the topology's own "no path" error); a later one without is left out."""
    asked = len(pairs) if asked is None else asked
    src = np.array([p[0] for p in pairs], dtype=np.int64)
    dst = np.array([p[1] for p in pairs], dtype=np.int64)
    router = topology.router
    counts = router.count(src, dst)
    if asked and counts[:asked].min() == 0:
        topology.paths(*pairs[int(np.argmin(counts[:asked]))])  # raises the topology's own "no path" error
    index = np.arange(int(counts.sum())) - np.repeat(np.cumsum(counts) - counts, counts)
    links, ptr, _ = router.walk(np.repeat(src, counts), np.repeat(dst, counts), index)
    lengths = np.diff(ptr)
    first = 0
    for pair, n in zip(pairs, counts.tolist()):
        if n:
            memo[pair] = (n, lengths[first:first + n], links[ptr[first]:ptr[first + n]])
        first += n


def _memo_of(topology) -> dict:
    """The placement layouts of ``topology`` (kept while it lives: a topology is not hashable, so by its id, the
    entry dropped when the topology is collected)."""
    key = id(topology)
    hit = _LAYOUTS.get(key)
    if hit is None:
        hit = _LAYOUTS[key] = {}
        weakref.finalize(topology, _LAYOUTS.pop, key, None)
    return hit


_LAYOUTS: dict[int, dict] = {}  # id(topology) -> its placement layouts and host pairs' paths
