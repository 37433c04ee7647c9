"""Gradient compression as a job attribute: fewer bytes on the wire for more compute per step.

A compressor changes two things about a data-parallel job: the bytes its all-reduce moves per iteration
(``byte_ratio``: compressed over uncompressed) and the compute each step costs (``overhead``: extra compute
per step as a fraction of the model's compute time: encoding, decoding, error feedback). A compressed job is
the same job on a derived model, ``<model>+<compressor>`` (:func:`compressed_model`), so every part of
netlab that reads a job's model (network demands, placement scores, policies) sees the compressed one without
knowing about compression. :func:`with_compression` turns it on for a job list; a run turns it on with
``compression`` (``netlab simulate --compression powersgd-r2``, and the sweep key of the same name).

The presets and where their figures come from (*unverified*: taken from memory of the paper and not found again
in the sources reachable this session; *derived*: follows from the format or the algorithm, not a measurement):

* ``powersgd-r2``: PowerSGD rank 2 (Vogels, Karimireddy, Jaggi, "PowerSGD: Practical Low-Rank Gradient
  Compression for Distributed Optimization", NeurIPS 2019, arXiv 1905.13727). Rank ``r`` sends, for each
  layer's ``n x m`` gradient matrix, the two factors ``P`` (``n x r``) and ``Q`` (``m x r``) that its
  Algorithm 1 all-reduces: ``r (n + m) / (n m)`` of the values (derived; it depends on the layer shapes, so
  the figure below is one model's). ResNet-18 on CIFAR-10, 16 GPUs: 136x less data per step (unverified; the
  stored copies of the paper searched this session, arXiv/ar5iv and the NeurIPS page, give its abstract and
  not its tables). Step time: the paper reports the average time per batch, not a compute overhead broken
  out (its NeurIPS reviews, paper 8002, discuss its "Tables 6 and 7" of time per batch, and that for the
  LSTM a 10x reduction gave a 2x speed-up: verified there, as the reviewers' reading); rank-2 steps 23%
  faster than uncompressed SGD's with NCCL (unverified). The 5% of compute overhead is an assumption.
* ``qsgd-8bit``: QSGD with an 8-bit budget and buckets of 128 values, as GRACE implements it (Xu et al.,
  "GRACE: A Compressed Communication Framework for Distributed Machine Learning", ICDCS 2021): 8 of 32 bits
  per value plus one 32-bit norm per bucket, 8/32 + 1/128 of the bytes (derived). Overhead 10% of compute
  (assumption: GRACE reports quantisation costs but its figures were not re-read).
* ``topk-1pct``: top-k sparsification keeping 1% of the values, sending each value and its 32-bit index
  (GRACE's ``topk``): 2% of the bytes (derived). A sparse gradient cannot be summed along a ring, so real
  top-k uses all-gather and moves more as workers are added; modelled as a ring all-reduce of 2% of the
  bytes, which is optimistic for it. Overhead 20% of compute (assumption: top-k selection is the costly one
  of the three in GRACE's measurements, figures not re-read).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from ..errors import InputError
from ..registry import Registry
from .job import Job
from .zoo import JobModel, ModelZoo


@dataclass(frozen=True)
class Compression:
    """A gradient compressor as a job sees it: bytes sent per byte of gradient, extra compute per step."""

    name: str
    byte_ratio: float  # compressed bytes / uncompressed bytes, in (0, 1]
    overhead: float  # extra compute per step as a fraction of the model's compute time, >= 0
    source: str = ""

    def __post_init__(self):
        if not (isinstance(self.byte_ratio, (int, float)) and 0 < self.byte_ratio <= 1):
            raise InputError(f"compression {self.name!r}: field 'byte_ratio' must be in (0, 1], "
                             f"got {self.byte_ratio!r}")
        if not (isinstance(self.overhead, (int, float)) and math.isfinite(self.overhead) and self.overhead >= 0):
            raise InputError(f"compression {self.name!r}: field 'overhead' must be a finite number >= 0, "
                             f"got {self.overhead!r}")


COMPRESSIONS: Registry[Compression] = Registry("gradient compression")


def _preset(c: Compression) -> None:
    COMPRESSIONS.register(c.name, c.source)(lambda: c)


_preset(Compression("powersgd-r2", 1 / 136, 0.05, "Vogels et al., NeurIPS 2019 (PowerSGD rank 2, ResNet-18)"))
_preset(Compression("qsgd-8bit", 8 / 32 + 1 / 128, 0.10,
                    "Xu et al., ICDCS 2021 (GRACE's QSGD, 8 bits, buckets of 128)"))
_preset(Compression("topk-1pct", 0.02, 0.20, "Xu et al., ICDCS 2021 (GRACE's top-k, 1% with 32-bit indices)"))


def compressed_model(model: JobModel, c: Compression) -> JobModel:
    """The model as a job running ``c`` sees it: ``<name>+<compressor>``, fewer gradient bytes, more compute."""
    return replace(model, name=f"{model.name}+{c.name}", grad_bytes=model.grad_bytes * c.byte_ratio,
                   compute_s=model.compute_s * (1 + c.overhead),
                   grad_source=f"{model.grad_source} x {c.byte_ratio:.4g} ({c.source})".strip(),
                   time_source=f"{model.time_source} x {1 + c.overhead:.4g} ({c.source})".strip())


def with_compression(jobs: list[Job], zoo: ModelZoo, compression: str | Compression,
                     min_gpus: int = 2) -> tuple[list[Job], ModelZoo]:
    """Jobs of ``min_gpus`` or more GPUs (a single GPU all-reduces nothing) run ``compression``: each moves to
    its compressed model, added to the returned zoo. Jobs already compressed, or with a model the zoo lacks,
    are refused with one error before anything changes."""
    c = compression if isinstance(compression, Compression) else COMPRESSIONS.create(compression)
    out, extra = [], {}
    for j in jobs:
        if j.gpus < min_gpus:
            out.append(j)
            continue
        if "+" in j.model:
            raise InputError(f"job {j.job_id}: model {j.model!r} is already compressed; compress a job once")
        base = zoo[j.model]  # an unknown model is refused here, naming the known ones
        m = extra.get(j.model) or compressed_model(base, c)
        extra[j.model] = m
        out.append(replace(j, model=m.name))
    for m in extra.values():
        zoo = zoo.with_model(m)
    return out, zoo
