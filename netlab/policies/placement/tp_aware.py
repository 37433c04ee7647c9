"""TP-aware placement: every tensor-parallel group of an LLM job inside one host, unless it must span hosts.

Why: a TP group all-reduces activations four times per layer per micro-batch
(:mod:`netlab.workload.llm`), hundreds of GB per iteration that NVLink carries
in a second or two and a NIC in tens. Megatron-LM numbers ranks TP-first, and
netlab numbers a job's GPUs host by host in placement order, so a placement
that gives every host a multiple of ``tp`` GPUs keeps every TP group on one
host; PP stages and DP replicas may then span hosts and racks.

Rule: a base placement policy (``consolidated`` by default; any registered
one) is shown the free GPUs rounded down to whole TP groups per host (for
``tp`` larger than a host: only wholly free hosts). Every count it can then
take is a multiple of ``tp`` (the job's size is one, and so is every free
count it sees), so its placement keeps the groups whole. If the rounded free
GPUs cannot hold the job: with ``split="fallback"`` (default) the base policy
places it on the real free GPUs (a TP group spans hosts because it must);
with ``split="wait"`` the job waits. Jobs without an LLM shape (``tp`` 1) go
to the base policy unchanged.

Why a second implementation of ``consolidated``'s rule for multi-host LLM jobs
(:func:`consolidate_by_prefix`): its greedy rack step scans every host for
every candidate rack, about 50 ms for a 512-GPU job on 131,072 GPUs; the same
rule computed on per-rack prefix sums of sorted free counts takes a few
milliseconds. Both give the same placement (tests/test_llm.py checks them
against each other on random fragmented clusters).
"""

from __future__ import annotations

import copy

import numpy as np

from ...sched import Placement
from ...workload.llm import tp_of
from ...workload.zoo import ModelZoo
from ..base import PLACEMENT, PlacementPolicy

SPLITS = ("fallback", "wait")


@PLACEMENT.register("tp-aware")
class TpAware(PlacementPolicy):
    """Keep each LLM job's TP groups within one host (a base policy over whole TP slots); see the module."""

    name = "tp-aware"

    def __init__(self, base: str = "consolidated", split: str = "fallback"):
        if split not in SPLITS:
            raise ValueError(f"tp-aware: split must be one of {SPLITS}, got {split!r}")
        if base.startswith("tp-"):
            raise ValueError(f"tp-aware: base must be a placement policy that is not itself TP-aware, got {base!r}")
        self.base, self.split = base, split
        self._base = PLACEMENT.create(base)

    def reset(self, rng: np.random.Generator) -> None:
        self.rng = rng
        self._base.reset(rng)

    def retry_at(self, job, view):
        return self._base.retry_at(job, view)

    def place(self, job, view):
        zoo = view.zoo or ModelZoo.default()
        tp = tp_of(zoo[job.job.model]) if job.job.pattern == "3d" else 1
        if tp <= 1:
            return self._base.place(job, view)
        free = np.asarray(view.free_gpus, dtype=np.int64)
        topo = view.topology
        if tp <= int(topo.host_gpus.max()):
            slots = free - free % tp
        else:
            slots = np.where(free == topo.host_gpus, free, 0)
        if int(slots.sum()) >= job.gpus:
            if self.base == "consolidated":
                placement = _consolidated(slots, topo, job.gpus)
            else:
                whole = copy.copy(view)  # the same view, showing only whole TP slots as free
                whole.free_gpus = slots
                whole._free_total = None
                placement = self._base.place(job, whole)
            if placement is not None:
                return placement
        return self._base.place(job, view) if self.split == "fallback" else None


@PLACEMENT.register("tp-topo-bestfit")
class TpTopoBestFit(TpAware):
    """tp-aware over topo-bestfit: whole TP groups per host, racks with the least-loaded uplinks."""

    name = "tp-topo-bestfit"

    def __init__(self, split: str = "fallback"):
        super().__init__("topo-bestfit", split)


@PLACEMENT.register("tp-k8s-netoverhead")
class TpK8sNetOverhead(TpAware):
    """tp-aware over k8s-netoverhead: whole TP groups per host, pods placed by network cost."""

    name = "tp-k8s-netoverhead"

    def __init__(self, split: str = "fallback"):
        super().__init__("k8s-netoverhead", split)


def _consolidated(free: np.ndarray, topo, n: int) -> Placement | None:
    """``consolidated``'s placement of ``n`` GPUs on ``free`` (best fit on one host, else the prefix-sum rule)."""
    fits = np.flatnonzero(free >= n)
    if len(fits):
        h = int(fits[np.argmin(free[fits])])  # fewest free that still fits, lowest index on ties
        return Placement((h,), (n,))
    counts = consolidate_by_prefix(free, topo.host_rack, topo.n_racks, n)
    hosts = np.flatnonzero(counts)
    if not len(hosts):
        return None
    return Placement(tuple(hosts.tolist()), tuple(counts[hosts].tolist()))


def consolidate_by_prefix(free: np.ndarray, rack: np.ndarray, n_racks: int, n: int) -> np.ndarray:
    """GPUs per host by ``consolidated``'s rule for a job no single host holds (netlab.policies.placement.
    consolidated._consolidate), computed on prefix sums; all zero if the free GPUs cannot hold ``n``.

    The greedy rack step asks, for every unchosen rack r, how many GPUs the ``k`` fullest hosts of the chosen
    racks plus r hold. Both host lists sorted fullest first, that is max over j of (the chosen racks' top
    ``k - j``) + (rack r's top ``j``): one small matrix per step instead of a scan of every host per rack.
    """
    n_hosts = len(free)
    counts = np.zeros(n_hosts, dtype=np.int64)
    if free.sum() < n:
        return counts
    idx = np.arange(n_hosts)
    by_free = np.lexsort((idx, -free))  # most free first, index order on ties (as a stable argsort of -free)
    k_global = int(np.searchsorted(np.cumsum(free[by_free]), n)) + 1
    # hosts rack by rack, fullest first; prefix sums per rack padded with each rack's total
    order = np.lexsort((idx, -free, rack))
    r_sorted = rack[order]
    starts = np.searchsorted(r_sorted, np.arange(n_racks))
    sizes = np.diff(np.append(starts, n_hosts))
    width = int(sizes.max())
    pos = np.arange(n_hosts) - starts[r_sorted]
    grid = np.zeros((n_racks, width), dtype=np.int64)
    grid[r_sorted, pos] = free[order]
    prefix = np.concatenate([np.zeros((n_racks, 1), dtype=np.int64), np.cumsum(grid, axis=1)], axis=1)
    rack_free = prefix[:, -1]
    # 2a. the first rack that holds the job on k_global hosts
    feasible = rack_free >= n
    if feasible.any():
        need = (prefix < n).sum(axis=1)  # hosts needed: the first prefix index reaching n
        ok = np.flatnonzero(feasible & (need <= k_global))
        if len(ok):
            r = int(ok[0])
            hs = order[starts[r]:starts[r] + need[r]]
            return _take(free, hs, n, counts)
    # 2b. greedy over racks, as consolidated: the rack that lets k_global hosts of the chosen racks hold most
    chosen = np.zeros(n_racks, dtype=bool)
    rank = np.full(n_racks, n_racks, dtype=np.int64)
    taken = np.zeros(0, dtype=np.int64)  # the chosen racks' free counts, fullest first
    for step in range(n_racks):
        top = np.concatenate(([0], np.cumsum(taken[:k_global])))
        j = np.arange(min(k_global, width) + 1)
        mine = top[np.minimum(k_global - j, len(taken))]
        acc = (prefix[:, j] + mine[None, :]).max(axis=1)
        acc[chosen | (rack_free == 0)] = -1
        best = int(np.argmax(acc))  # the lowest-numbered rack on ties
        chosen[best], rank[best] = True, step
        taken = np.sort(np.concatenate((taken, grid[best, :sizes[best]])))[::-1]
        if acc[best] >= n:
            break
    key = np.lexsort((idx, rank[rack], -free))  # fullest; earlier-chosen racks; index
    return _take(free, key[chosen[rack[key]]], n, counts)


def _take(free, hosts, n, counts):
    """Take ``hosts`` in order until ``n`` GPUs are placed (as consolidated's ``_take_ordered``)."""
    got = np.minimum(free[hosts], np.maximum(n - np.concatenate(([0], np.cumsum(free[hosts])[:-1])), 0))
    counts[hosts] = got
    return counts
