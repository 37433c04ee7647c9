"""Communication patterns: what a placed job sends per iteration.

A pattern turns a placement (GPUs per host, in ring order) and a gradient size
S into a :class:`CommPlan`: the host-to-host flows, the bytes each flow carries
per iteration (all flows of one job carry the same bytes, so they progress in
lock-step and the job's rate is one number), and the bytes that cross the
intra-host interconnect in a phase of their own.

Byte counts follow nccl-tests conventions (``shared/reference/anchors.md``):
a ring all-reduce over n ranks puts 2(n-1)/n x S on every ring hop.

* ``ring``: one ring over all n GPUs, hosts visited in placement order, the
  GPUs of a host adjacent. k hosts give k inter-host hops (h0->h1->...->h0),
  each carrying 2(n-1)/n x S; intra-host hops run concurrently over
  NVLink/PCIe and cap the ring's rate at ``intra_gbps``.
* ``hierarchical``: reduce-scatter inside each host, an all-reduce across the
  k hosts (2(k-1)/k x S per host NIC), then all-gather inside the host. The
  two intra-host phases cost 2(g-1)/g x S over the interconnect, serially.
* ``3d``: tensor, pipeline and data parallelism of an LLM zoo model
  (:mod:`netlab.workload.llm`); its flows carry different bytes
  (``CommPlan.flow_weights``).
* ``ps``: a parameter server on the placement's first host. Every other host
  pushes S and pulls S (after local aggregation), so the server's NIC carries
  k-1 flows each way.

A job on one host sends nothing over the network: 2(n-1)/n x S over the
interconnect.
"""

from __future__ import annotations

import functools
import itertools
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from ..registry import Registry
from .llm import COLUMNS, network_flows

PATTERNS: Registry["CommPattern"] = Registry("communication pattern")


@dataclass(frozen=True)
class CommPlan:
    flows: tuple[tuple[int, int], ...]  # (src, dst) as indices into the placement's hosts
    flow_bytes: float  # bytes per flow per iteration
    serial_intra_bytes: float  # bytes over the intra-host interconnect in their own phase
    ring_intra_cap: bool  # True if intra-host hops run alongside the flows and cap their rate
    # Flow n carries flow_weights[n] x flow_bytes (None: every flow carries flow_bytes). A flow is routed with that
    # weight, so at the job's rate r it moves at weights[n] x r and every flow finishes together.
    flow_weights: tuple[float, ...] | None = None
    steps: int = 1  # the all-reduce's sequential steps over the network (ring: 2(n - 1)), each flow_bytes / steps


class FlatPlan(NamedTuple):
    """A :class:`CommPlan` as a start reads it (``netlab.network.demand``): its numbers, its flows as arrays."""

    flows: np.ndarray | None  # (n, 2) int64 (src, dst) placement host indices; None: no flows
    flow_bytes: float
    serial_intra_bytes: float
    ring_intra_cap: bool
    flow_weights: np.ndarray | None  # per flow, as CommPlan.flow_weights (None: every flow carries flow_bytes)
    steps: int


class CommPattern:
    name = "base"

    def plan(self, gpus_per_host: tuple[int, ...], grad_bytes: float) -> CommPlan:  # pragma: no cover
        raise NotImplementedError

    def plan_for(self, gpus_per_host: tuple[int, ...], model) -> CommPlan:
        """The plan for a zoo model (:class:`~netlab.workload.zoo.JobModel`); most patterns need only its
        gradient bytes, the ``3d`` pattern its LLM shape."""
        return self.plan(gpus_per_host, model.grad_bytes)

    def flat_for(self, gpus_per_host: tuple[int, ...], model) -> FlatPlan:
        """:meth:`plan_for` as a :class:`FlatPlan` (the same numbers; its flows and weights as arrays)."""
        plan = self.plan_for(gpus_per_host, model)
        flows = weights = None
        if plan.flows:
            flows = np.fromiter(itertools.chain.from_iterable(plan.flows), dtype=np.int64,
                                count=2 * len(plan.flows)).reshape(-1, 2)
            if plan.flow_weights is not None:
                weights = np.asarray(plan.flow_weights, dtype=float)
        return FlatPlan(flows, plan.flow_bytes, plan.serial_intra_bytes, plan.ring_intra_cap, weights, plan.steps)

    @staticmethod
    def _single_host(n: int, grad_bytes: float) -> CommPlan:
        return CommPlan((), 0.0, 2 * (n - 1) / n * grad_bytes if n > 1 else 0.0, False)


@PATTERNS.register("ring")
class Ring(CommPattern):
    """Flat ring all-reduce over all GPUs (NCCL's ring)."""

    name = "ring"

    def plan(self, gpus_per_host, grad_bytes):
        n, k = sum(gpus_per_host), len(gpus_per_host)
        if k == 1:
            return self._single_host(n, grad_bytes)
        flows = tuple((i, (i + 1) % k) for i in range(k))
        return CommPlan(flows, 2 * (n - 1) / n * grad_bytes, 0.0, max(gpus_per_host) > 1, steps=2 * (n - 1))


def _intra_phases_bytes(gpus_per_host, grad_bytes: float) -> float:
    """Reduce-scatter plus all-gather inside the fullest host: 2(g-1)/g x S over the interconnect."""
    g = max(gpus_per_host)
    return 2 * (g - 1) / g * grad_bytes if g > 1 else 0.0


@PATTERNS.register("hierarchical")
class Hierarchical(CommPattern):
    """Reduce inside each host, all-reduce across hosts, broadcast inside."""

    name = "hierarchical"

    def plan(self, gpus_per_host, grad_bytes):
        n, k = sum(gpus_per_host), len(gpus_per_host)
        if k == 1:
            return self._single_host(n, grad_bytes)
        flows = tuple((i, (i + 1) % k) for i in range(k))
        return CommPlan(flows, 2 * (k - 1) / k * grad_bytes, _intra_phases_bytes(gpus_per_host, grad_bytes), False,
                        steps=2 * (k - 1))


@PATTERNS.register("ps")
class ParameterServer(CommPattern):
    """Parameter server on the first host; workers push and pull S each iteration."""

    name = "ps"

    def plan(self, gpus_per_host, grad_bytes):
        n, k = sum(gpus_per_host), len(gpus_per_host)
        if k == 1:
            return self._single_host(n, grad_bytes)
        flows = tuple(f for h in range(1, k) for f in ((h, 0), (0, h)))
        return CommPlan(flows, grad_bytes, _intra_phases_bytes(gpus_per_host, grad_bytes), False)


@PATTERNS.register("3d")
class ThreeD(CommPattern):
    """Tensor, pipeline and data parallelism of a zoo LLM (Megatron-LM layout; see netlab.workload.llm)."""

    name = "3d"

    def plan(self, gpus_per_host, grad_bytes):
        raise ValueError("the '3d' pattern needs the job's model (an LLM zoo row): use plan_for")

    def plan_for(self, gpus_per_host, model) -> CommPlan:
        shape = getattr(model, "llm", None)
        if shape is None:
            raise ValueError(f"model {model.name!r} has no LLM shape (zoo columns {', '.join(COLUMNS)}); "
                             "the '3d' pattern needs one")
        return _plan_3d(shape, float(model.params_m) * 1e6, tuple(int(g) for g in gpus_per_host))

    def flat_for(self, gpus_per_host, model) -> FlatPlan:
        """:meth:`plan_for`'s numbers with the flows and weights built as arrays from the start
        (:func:`~netlab.workload.llm.network_flows`), not as the plan's tuples: the same values (a weight is a
        flow's bytes over the largest flow's, one division in either), at about half the cost of a plan for a
        large job on a split of hosts met for the first time (busy traces meet thousands)."""
        shape = getattr(model, "llm", None)
        if shape is None:
            return super().flat_for(gpus_per_host, model)  # (plan_for says why not)
        return _flat_3d(shape, float(model.params_m) * 1e6, tuple(int(g) for g in gpus_per_host))


@functools.lru_cache(maxsize=256)
def _plan_3d(shape, params: float, gpus_per_host: tuple[int, ...]) -> CommPlan:
    """The ``3d`` plan of an LLM shape with ``params`` parameters on ``gpus_per_host``, memoised: it depends on
    these alone and cannot change (a frozen plan of tuples), and a busy trace starts the same few shapes on the
    same per-host counts again and again (building it cost ~7% of a 16,384-GPU busy run). Small: a few popular
    keys take nearly every hit, and each plan holds a weight per flow (hundreds on a large job)."""
    flat = _flat_3d(shape, params, gpus_per_host)
    if flat.flows is None:
        return CommPlan((), 0.0, flat.serial_intra_bytes, False)
    return CommPlan(tuple(map(tuple, flat.flows.tolist())), flat.flow_bytes, flat.serial_intra_bytes, False,
                    tuple(flat.flow_weights.tolist()))


def _flat_3d(shape, params: float, gpus_per_host: tuple[int, ...]) -> FlatPlan:
    """The ``3d`` plan as arrays, the one place it is made (:func:`_plan_3d` is its tuples): the host-to-host
    flows of :func:`~netlab.workload.llm.network_flows`, each weighted by its bytes over the largest flow's."""
    flows, flow_bytes, nvlink = network_flows(shape, params, gpus_per_host)
    if not len(flows):
        return FlatPlan(None, 0.0, nvlink, False, None, 1)
    top = float(flow_bytes.max())
    return FlatPlan(flows, top, nvlink, False, flow_bytes / top, 1)
