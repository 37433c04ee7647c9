"""The job-model zoo: compute time per iteration and gradient bytes per model.

Numbers come from ``netlab/data/zoo.csv``; every row cites where its two
numbers come from (``grad_source``, ``time_source``). The primary references
are collected in the project's ``shared/reference/job-zoo.md``:

* gradient sizes: fp32 parameters x 4 bytes (ResNet, Inception, AlexNet, VGG,
  BERT, GPT-2 rows of the job-zoo table);
* iteration times: the Blox model zoo (single GPU), the Pollux throughput
  traces (T4), Muri (VGG16 on 8 GPUs) and Crux (a 64-GPU GPT-3 variant).

Rows marked "assumption" are scaled by FLOPs or parameters from a measured
neighbour; treat them as such.

``overlap`` is the share of ``min(compute, comm)`` a model hides by
overlapping its gradient all-reduce with the backward pass (the
iteration-time rule, :func:`netlab.network.model.iteration_time`), with its
source in ``overlap_source``: fitted to the Pollux artifact's measured step
times for the six models it profiled (:mod:`netlab.workload.overlap`,
``benchmarks/bench_overlap.py``), 0 (every byte exposed) where no measured
figure exists. ``grad_dtype`` is the precision the gradients cross the network
in (``fp32``, ``fp16``, ``bf16``): ``grad_mb`` is ``params_m`` times its
bytes, and for LLM rows it must agree with ``bytes_per_elem``, which the ``3d``
pattern uses for the data-parallel gradient bytes. Both columns may be left
out of a user's table (0 and ``fp32``).

LLM rows (GPT-3 175B, Llama 2 70B, Llama 3 8B and 70B) also fill the columns
layers, hidden, seq_len, micro_batch, micro_batches, tp, pp, bytes_per_elem,
dp and llm_source: the shape and split of a published training configuration
(:class:`~netlab.workload.llm.LlmShape`), run with the ``3d`` pattern; their
compute time is :func:`netlab.workload.llm.compute_s`. Other rows leave those
columns empty. ``compute_s`` is per iteration at a fixed
per-GPU batch (weak scaling): data parallelism does not change it.
"""

from __future__ import annotations

import csv
import math
from dataclasses import dataclass, replace
from functools import lru_cache
from importlib import resources
from typing import Iterable, Mapping

from ..errors import UnknownNameError, unknown_name
from .llm import LlmShape, shape_from_row

MB = 1e6
#: bytes per gradient element of each precision a zoo row may name in ``grad_dtype``
DTYPE_BYTES = {"fp32": 4, "fp16": 2, "bf16": 2}


@dataclass(frozen=True)
class JobModel:
    name: str
    compute_s: float  # compute time per iteration on one GPU
    grad_bytes: float  # gradient bytes all-reduced per iteration
    params_m: float = 0.0
    overlap: float = 0.0  # share of min(compute, comm) hidden by overlapping them (0..1)
    grad_source: str = ""
    time_source: str = ""
    grad_dtype: str = "fp32"  # precision of the gradients on the wire (a DTYPE_BYTES key)
    overlap_source: str = ""
    llm: "LlmShape | None" = None  # transformer shape and TP/PP split (the "3d" pattern); None for other models

    @property
    def half_precision(self) -> bool:
        """Trained in fp16/bf16 (its gradients cross the network in 2 bytes)?"""
        return DTYPE_BYTES[self.grad_dtype] == 2

    @property
    def comm_compute_ratio(self) -> float:
        """Gradient bits per second of compute at 100 Gbit/s: a scale-free sensitivity hint."""
        return self.grad_bytes * 8 / 100e9 / self.compute_s


class ModelZoo:
    """A name -> :class:`JobModel` table. ``ModelZoo.default()`` reads the bundled CSV."""

    def __init__(self, models: dict[str, JobModel]):
        self._models = dict(models)

    @classmethod
    def default(cls) -> "ModelZoo":
        """The bundled zoo, read once per process (a ModelZoo is immutable)."""
        return _default_zoo()

    @classmethod
    def from_frame(cls, df) -> "ModelZoo":
        """A zoo from a DataFrame with the columns of ``zoo.csv``."""
        return cls.from_rows(df.to_dict("records"))

    @classmethod
    def from_rows(cls, rows: Iterable[Mapping]) -> "ModelZoo":
        """A zoo from mappings with the columns of ``zoo.csv`` (numbers as numbers or text; empty LLM columns
        as None or NaN)."""
        models = {}
        for row in rows:
            name = row["model"]
            overlap = _given(row.get("overlap"), 0.0)
            try:
                overlap = float(overlap)
            except (TypeError, ValueError):
                overlap = math.nan
            if not 0.0 <= overlap <= 1.0:
                raise ValueError(f"zoo model {name!r}: overlap must be a number in [0, 1], got {row.get('overlap')!r}")
            dtype = _given(row.get("grad_dtype"), "fp32")
            if dtype not in DTYPE_BYTES:
                raise ValueError(f"zoo model {name!r}: grad_dtype must be one of {sorted(DTYPE_BYTES)}, got {dtype!r}")
            llm = shape_from_row(row)
            if llm is not None and llm.bytes_per_elem != DTYPE_BYTES[dtype]:
                raise ValueError(f"zoo model {name!r}: bytes_per_elem {llm.bytes_per_elem} disagrees with grad_dtype "
                                 f"{dtype!r} ({DTYPE_BYTES[dtype]} bytes)")
            models[name] = JobModel(
                name=name, compute_s=float(row["compute_s"]), grad_bytes=float(row["grad_mb"]) * MB,
                params_m=float(row["params_m"]), overlap=overlap, grad_source=row["grad_source"],
                time_source=row["time_source"], grad_dtype=dtype, overlap_source=_given(row.get("overlap_source"), ""),
                llm=llm,
            )
        return cls(models)

    def __getitem__(self, name: str) -> JobModel:
        try:
            return self._models[name]
        except (KeyError, TypeError):
            raise UnknownNameError(unknown_name("model", name, sorted(self._models))) from None

    def __contains__(self, name: str) -> bool:
        return name in self._models

    def __iter__(self):
        return iter(sorted(self._models))

    def names(self) -> list[str]:
        return sorted(self._models)

    def with_model(self, model: JobModel) -> "ModelZoo":
        return ModelZoo({**self._models, model.name: model})

    def with_overlap(self, overlap: float) -> "ModelZoo":
        return ModelZoo({n: replace(m, overlap=overlap) for n, m in self._models.items()})

    def frame(self):
        """One row per model (a DataFrame)."""
        import pandas as pd

        return pd.DataFrame([
            dict(model=m.name, params_m=m.params_m, grad_mb=m.grad_bytes / MB, compute_s=m.compute_s,
                 grad_dtype=m.grad_dtype, overlap=m.overlap, grad_source=m.grad_source, time_source=m.time_source,
                 overlap_source=m.overlap_source)
            for m in (self._models[n] for n in self.names())
        ])


def _given(value, default):
    """A table cell, or ``default`` where it is empty (None, NaN or missing)."""
    if value is None or (isinstance(value, float) and math.isnan(value)) or value == "":
        return default
    return value


@lru_cache(maxsize=1)
def _default_zoo() -> ModelZoo:
    """Read with the csv module, not pandas: a simulation needs the zoo long before it needs a DataFrame."""
    with resources.files("netlab.data").joinpath("zoo.csv").open(newline="") as fh:
        rows = [{k: (v if v != "" else None) for k, v in row.items()} for row in csv.DictReader(fh)]
    return ModelZoo.from_rows(rows)
