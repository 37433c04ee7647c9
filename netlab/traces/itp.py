"""Microsoft ITP 2021 clusters (ElasticFlow's release): ``raw/`` and the augmented ``elasticflow/``.

``raw/clusterNN.csv``: ``job_id, submission_time`` (s), ``duration`` (s),
``num_gpu``, all real. No models, so :func:`assign_models` draws them.

``elasticflow/clusterNN.csv`` adds ElasticFlow's *randomly generated*
``model_name``, ``num_iteration``, ``batch_size`` and ``deadline``. The model
maps to the zoo (:data:`MODELS`); ``duration_s`` stays the real duration and
``iterations`` NaN, because the generated iteration count has no tie to the
real run time; it is kept as ``trace_iterations`` (with ``batch_size`` and
``deadline_s``, relative to the first submission like ``submit_s``).
"""

from __future__ import annotations

import pandas as pd

from typing import Annotated

from pydantic import BeforeValidator, Field

from ..errors import _label, checked
from .files import register, shared_file
from .models import assign_models
from .reader import Table
from .schema import TraceError, finish

#: a cluster number as written (``2``, ``02``)
Cluster = Annotated[str, BeforeValidator(_label), Field(pattern=r"^[0-9]{1,2}$", description="a cluster number, 1 or 2 digits (02, 2)")]

RAW_HEADER = ("job_id", "submission_time", "duration", "num_gpu")
EF_HEADER = RAW_HEADER + ("model_name", "num_iteration", "batch_size", "deadline")

#: ElasticFlow model_name -> zoo model
MODELS = {"resnet50": "resnet50", "vgg16": "vgg16", "bert": "bert-base", "inception3": "inception3",
          "deepspeech2": "deepspeech2", "gpt2": "gpt2"}


def _base(t: Table) -> pd.DataFrame:
    return pd.DataFrame({
        "job_id": t.frame["job_id"].str.strip(),
        "submit_s": t.number("submission_time", nonnegative=True),
        "gpus": t.number("num_gpu", integer=True, positive=True),
        "duration_s": t.number("duration", positive=True),
        "line": t.frame["line"],
    })


def read_itp(path, *, seed: int = 0, skip_bad: bool = False, source: str = "itp") -> pd.DataFrame:
    """Load a raw ITP cluster file (models drawn by the seeded rule)."""
    df, skipped = Table(path, required=RAW_HEADER, skip_bad=skip_bad).load(_base)
    return finish(assign_models(df, seed), source, path, skipped)


def read_elasticflow(path, *, skip_bad: bool = False, source: str = "elasticflow") -> pd.DataFrame:
    """Load an ElasticFlow-augmented ITP file (its generated models, real durations)."""
    def rows(t: Table) -> pd.DataFrame:
        return _base(t).assign(
            model=t.mapped("model_name", MODELS, "model_name"),
            trace_iterations=t.number("num_iteration", positive=True),
            batch_size=t.number("batch_size", integer=True, positive=True),
            deadline_s=t.number("deadline"),
        )

    df, skipped = Table(path, required=EF_HEADER, skip_bad=skip_bad).load(rows)
    df["deadline_s"] -= df["submit_s"].min() if len(df) else 0.0
    df["batch_size"] = df["batch_size"].astype("int64")
    return finish(df, source, path, skipped)


def _cluster(cluster) -> str:  # noqa: D401
    """``2``, ``"2"`` and ``"02"`` all name cluster02 (spec strings turn ``02`` into 2)."""
    return f"{int(cluster):02d}"


@register("itp", "microsoft-itp-elasticflow/raw/cluster02.csv")
@checked(TraceError, "itp", skip=("trace_dir", "seed", "skip_bad"))
def itp(trace_dir=None, *, seed: int = 0, skip_bad: bool = False, cluster: Cluster = "02") -> pd.DataFrame:
    """Microsoft ITP 2021 raw cluster trace (real arrivals, durations, GPUs; seeded models)."""
    path = shared_file(trace_dir, f"microsoft-itp-elasticflow/raw/cluster{_cluster(cluster)}.csv")
    return read_itp(path, seed=seed, skip_bad=skip_bad)


@register("elasticflow", "microsoft-itp-elasticflow/elasticflow/cluster02.csv")
@checked(TraceError, "elasticflow", skip=("trace_dir", "seed", "skip_bad"))
def elasticflow(trace_dir=None, *, seed: int = 0, skip_bad: bool = False, cluster: Cluster = "02") -> pd.DataFrame:
    """ITP trace as augmented by ElasticFlow (generated models and iterations; real durations)."""
    path = shared_file(trace_dir, f"microsoft-itp-elasticflow/elasticflow/cluster{_cluster(cluster)}.csv")
    return read_elasticflow(path, skip_bad=skip_bad)
