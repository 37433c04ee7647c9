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

"""

from __future__ import annotations

import copy

import numpy as np

from ...workload.llm import tp_of
from ...workload.zoo import ModelZoo
from ..base import PLACEMENT, PlacementPolicy
from .consolidated import consolidate

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
                placement, _ = consolidate(slots, topo, job.gpus)
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
