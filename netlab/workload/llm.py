"""Large-model training jobs: what tensor (TP), pipeline (PP) and data (DP) parallelism send per iteration.

A zoo model with an :class:`LlmShape` (layers, hidden size, sequence length,
micro-batch size and count, TP and PP degrees, bytes per element) runs with the
``3d`` communication pattern. Its DP degree follows from its GPU count:
``dp = gpus / (tp * pp)``. Ranks are laid out as Megatron-LM does (TP fastest,
then DP, then PP): rank ``r = k + tp * (d + dp * i)`` is TP rank ``k`` of DP
replica ``d`` in pipeline stage ``i``; GPUs are numbered by walking the
placement's hosts in order, so a placement that gives each host a multiple of
``tp`` GPUs keeps every TP group inside one host.

Per iteration (``m`` micro-batches of ``b`` sequences of ``s`` tokens per
pipeline, hidden size ``h``, ``L`` layers, ``P`` parameters, ``e`` bytes per
element), each GPU sends:

* **TP** (Shoeybi et al. 2019, "Megatron-LM", section 3): every transformer
  layer all-reduces a ``b x s x h`` activation twice in the forward pass (after
  self-attention and after the MLP) and twice in the backward pass. A ring
  all-reduce of ``S`` bytes over ``t`` ranks sends ``2 (t-1)/t x S`` per rank,
  so ``4 x (L/p) x m x 2 (t-1)/t x b s h e``. Activation recomputation (a
  second forward pass, two more all-reduces) is not counted.
* **PP** (Narayanan et al. 2021, "Efficient large-scale language model training
  on GPU clusters using Megatron-LM", SC'21, sections 2.2 and 4.1): between
  consecutive stages, each micro-batch's ``b x s x h`` activation goes forward
  and its gradient comes back. With the scatter/gather optimisation (4.1) each
  of the ``t`` TP ranks sends ``1/t`` of it to its peer in the next (forward) or
  previous (backward) stage: ``m x b s h e / t`` per peer and direction.
* **DP** (Narayanan et al. 2021, section 3.1; ring all-reduce as above): each
  (TP rank, stage) group of ``dp`` ranks all-reduces its gradient shard of
  ``P / (t p)`` parameters: ``2 (dp-1)/dp x P e / (t p)`` per rank. A
  reduce-scatter plus all-gather (distributed optimizer, ZeRO) moves the same
  bytes (``(dp-1)/dp`` each), so one formula covers both. Embedding
  imbalance between stages is ignored (parameters are taken as evenly sharded).

Transfers between two GPUs of one host go over NVLink: they make the job's
serial intra-host phase (the largest per-GPU NVLink bytes over
``intra_gbps``). Transfers between hosts become host-to-host flows; a flow's
bytes are the sum of the GPU transfers between that pair. All of one
iteration's network bytes share one communication phase: flows carry
different bytes, so each is routed with a weight proportional to its bytes
(:attr:`~netlab.workload.patterns.CommPlan.flow_weights`) and all finish
together at the job's rate, the slowest flow setting the pace. The ``3d``
pattern (:class:`netlab.workload.patterns.ThreeD`) turns :func:`traffic` into
a plan; :func:`netlab.workload.traffic.placement_traffic` sums a run's bytes.

Compute time per iteration per GPU (zoo ``compute_s`` of the ``3d`` rows):
``6 x P x b m s / (t p)`` FLOPs (forward plus backward, two FLOPs per
parameter per token: Kaplan et al. 2020) at ``ACHIEVED_TFLOPS``. Like every
zoo time it is per iteration at a fixed per-replica batch: DP does not change
it. A different split is a different model: :func:`variant`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from functools import lru_cache

import numpy as np

#: per-GPU achieved throughput behind the zoo's LLM compute times: Narayanan et al. 2021 (abstract) report
#: 502 PFLOP/s on 3,072 A100s, 163 TFLOP/s per GPU (52% of peak). An assumption for other models and GPUs.
ACHIEVED_TFLOPS = 502e3 / 3072
#: the zoo columns that describe an LLM (all present, or the row is not an LLM)
COLUMNS = ("layers", "hidden", "seq_len", "micro_batch", "micro_batches", "tp", "pp", "bytes_per_elem")
DIMENSIONS = ("tp", "pp", "dp")


@dataclass(frozen=True)
class LlmShape:
    """A transformer's shape and its model-parallel split, as a training run declares them."""

    layers: int
    hidden: int
    seq_len: int
    micro_batch: int  # b: sequences per micro-batch
    micro_batches: int  # m: micro-batches per pipeline per iteration
    tp: int = 1
    pp: int = 1
    bytes_per_elem: int = 2  # activations and gradients (bf16)
    # the DP degree of the published run (zoo column ``dp``): the size synthetic traces draw up to. A job's own DP
    # degree follows from its GPU count (dp_of).
    published_dp: int = 1

    def __post_init__(self):
        for name in COLUMNS + ("published_dp",):
            value = getattr(self, name)
            if not isinstance(value, (int, np.integer)) or isinstance(value, bool) or value < 1:
                raise ValueError(f"LLM shape: field {name!r} must be an integer >= 1, got {value!r}")

    @property
    def model_parallel(self) -> int:
        """GPUs of one model replica: tp x pp."""
        return self.tp * self.pp

    def dp_of(self, gpus: int) -> int:
        """The DP degree of a job on ``gpus`` GPUs; a ValueError naming the allowed sizes if it does not divide."""
        if gpus % self.model_parallel:
            raise ValueError(f"an LLM job with tp={self.tp}, pp={self.pp} needs a multiple of "
                             f"{self.model_parallel} GPUs (tp x pp x dp), got {gpus}")
        return gpus // self.model_parallel

    def activation_bytes(self) -> float:
        """One micro-batch's activation: b x s x h elements."""
        return float(self.micro_batch * self.seq_len * self.hidden * self.bytes_per_elem)


def per_gpu_bytes(shape: LlmShape, params: float, dp: int) -> dict[str, float]:
    """Bytes one GPU sends per iteration in each dimension (module docstring); ``pp`` is per peer and direction."""
    t, p, m = shape.tp, shape.pp, shape.micro_batches
    act = shape.activation_bytes()
    return {
        "tp": 4 * (shape.layers / p) * m * 2 * (t - 1) / t * act,
        "pp": m * act / t if p > 1 else 0.0,
        "dp": 2 * (dp - 1) / dp * params * shape.bytes_per_elem / (t * p),
    }


def job_bytes(shape: LlmShape, params: float, dp: int) -> dict[str, float]:
    """Bytes the whole job moves per iteration in each dimension (wherever they travel)."""
    g = per_gpu_bytes(shape, params, dp)
    n = shape.model_parallel * dp
    return {"tp": n * g["tp"], "pp": 2 * (shape.pp - 1) * dp * shape.tp * g["pp"], "dp": n * g["dp"]}


def compute_s(shape: LlmShape, params: float, tflops: float = ACHIEVED_TFLOPS) -> float:
    """Compute seconds per iteration per GPU: 6 P b m s / (t p) FLOPs at ``tflops`` TFLOP/s."""
    tokens = shape.micro_batch * shape.micro_batches * shape.seq_len
    return 6 * params * tokens / shape.model_parallel / (tflops * 1e12)


def _transfers(shape: LlmShape, params: float, n: int):
    """Every GPU-to-GPU transfer of one iteration: (source rank, destination rank, bytes, dimension index)."""
    t, p = shape.tp, shape.pp
    dp = shape.dp_of(n)
    g = per_gpu_bytes(shape, params, dp)
    r = np.arange(n)
    k, d, i = r % t, (r // t) % dp, r // (t * dp)
    src, dst, nbytes, dim = [], [], [], []

    def add(s, e, b, which):
        src.append(s)
        dst.append(e)
        nbytes.append(np.full(len(s), b))
        dim.append(np.full(len(s), which))

    if t > 1:  # ring over the TP group's ranks
        add(r, r - k + (k + 1) % t, g["tp"], 0)
    if p > 1:  # activations forward, their gradients backward
        fwd = r[i < p - 1]
        add(fwd, fwd + t * dp, g["pp"], 1)
        bwd = r[i > 0]
        add(bwd, bwd - t * dp, g["pp"], 1)
    if dp > 1:  # ring over the (TP rank, stage) group's replicas
        add(r, k + t * ((d + 1) % dp) + t * dp * i, g["dp"], 2)
    if not src:
        return (np.zeros(0, np.int64),) * 2 + (np.zeros(0), np.zeros(0, np.int64))
    return np.concatenate(src), np.concatenate(dst), np.concatenate(nbytes), np.concatenate(dim)


@dataclass(frozen=True)
class Traffic:
    """One placement's per-iteration traffic: host-to-host flows and NVLink bytes."""

    flows: tuple[tuple[int, int], ...]  # (source, destination) indices into the placement's hosts
    flow_bytes: tuple[float, ...]  # bytes per flow
    nvlink_gpu_bytes: float  # the most any GPU sends to GPUs of its own host
    network_bytes: dict  # dimension -> bytes over the network
    nvlink_bytes: dict  # dimension -> bytes over NVLink


def _host_transfers(shape: LlmShape, params: float, gpus_per_host: tuple[int, ...]):
    """The transfers of :func:`_transfers` between hosts: (per host pair, in ascending ``src x k + dst`` order: the
    source and destination host indices and the bytes; the most any GPU sends inside its host; then every
    transfer's bytes, dimension index and whether it stays inside a host)."""
    n = sum(gpus_per_host)
    src, dst, nbytes, dim = _transfers(shape, params, n)
    host = np.repeat(np.arange(len(gpus_per_host)), gpus_per_host)
    hs, hd = host[src], host[dst]
    local = hs == hd
    nvlink = np.bincount(src[local], weights=nbytes[local], minlength=n) if n else np.zeros(0)
    k = len(gpus_per_host)
    keys, inverse = np.unique(hs[~local] * k + hd[~local], return_inverse=True)
    pair_bytes = np.bincount(inverse.ravel(), weights=nbytes[~local], minlength=len(keys))
    return keys // k, keys % k, pair_bytes, float(nvlink.max()) if n else 0.0, nbytes, dim, local


def network_flows(shape: LlmShape, params: float, gpus_per_host: tuple[int, ...]):
    """:func:`traffic`'s host-to-host flows as arrays: ((n, 2) int64 source and destination host indices, the
    bytes of each, as floats), and its ``nvlink_gpu_bytes``; the same values in the same order. Why: a start of a
    large job reads them as arrays (``netlab.network.demand``), and building :func:`traffic`'s tuples of
    hundreds of flows, and its bytes per dimension, cost more than finding them."""
    src, dst, pair_bytes, nvlink, *_ = _host_transfers(shape, params, gpus_per_host)
    return np.stack((src, dst), axis=1), pair_bytes, nvlink


@lru_cache(maxsize=4096)
def traffic(shape: LlmShape, params: float, gpus_per_host: tuple[int, ...]) -> Traffic:
    """The traffic of a job with ``gpus_per_host`` GPUs on each host, in placement order."""
    src, dst, pair_bytes, nvlink, nbytes, dim, local = _host_transfers(shape, params, gpus_per_host)
    per_dim = lambda mask: {name: float(nbytes[mask & (dim == j)].sum())  # noqa: E731
                            for j, name in enumerate(DIMENSIONS)}
    flows = tuple(zip(src.tolist(), dst.tolist()))
    return Traffic(flows, tuple(pair_bytes.tolist()), nvlink, per_dim(~local), per_dim(local))


def tp_of(model) -> int:
    """A model's TP degree (1 for models without an LLM shape)."""
    shape = getattr(model, "llm", None)
    return shape.tp if shape is not None else 1


def variant(model, name: str | None = None, tflops: float = ACHIEVED_TFLOPS, **changes):
    """The zoo model with a different split or batch (``tp=8, pp=8, micro_batches=16``), compute time redone.

    Add it to a zoo with ``ModelZoo.with_model``; its name says the split unless given.
    """
    if model.llm is None:
        raise ValueError(f"model {model.name!r} has no LLM shape to vary")
    shape = replace(model.llm, **changes)
    params = float(model.params_m) * 1e6
    label = name or f"{model.name}-tp{shape.tp}pp{shape.pp}m{shape.micro_batches}"
    return replace(model, name=label, llm=shape, compute_s=compute_s(shape, params, tflops),
                   time_source=f"6 P b m s / (t p) at {tflops:.0f} TFLOP/s (netlab.workload.llm.variant)")


def shape_from_row(row) -> LlmShape | None:
    """The LLM shape of a zoo CSV row (a mapping or namedtuple), or None if its LLM columns are empty."""
    get = row.get if hasattr(row, "get") else lambda c, default=None: getattr(row, c, default)
    values = [get(c, None) for c in COLUMNS]
    if all(v is None or (isinstance(v, float) and math.isnan(v)) for v in values):
        return None
    if any(v is None or (isinstance(v, float) and math.isnan(v)) for v in values):
        missing = [c for c, v in zip(COLUMNS, values) if v is None or (isinstance(v, float) and math.isnan(v))]
        raise ValueError(f"zoo model {get('model', '?')!r}: LLM column(s) {missing} empty; give all of "
                         f"{', '.join(COLUMNS)} or none")
    bad = [c for c, v in zip(COLUMNS, values) if float(v) != int(float(v))]
    if bad:
        raise ValueError(f"zoo model {get('model', '?')!r}: LLM column(s) {bad} must be whole numbers")
    dp = get("dp", None)
    dp = 1 if dp is None or (isinstance(dp, float) and math.isnan(dp)) else int(dp)
    return LlmShape(*(int(float(v)) for v in values), published_dp=dp)
