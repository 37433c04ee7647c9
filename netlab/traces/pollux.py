"""Pollux (OSDI'21) and Sia (SOSP'23) 8-hour workloads: ``name,time,application,num_replicas,batch_size``.

Arrivals are real (sampled from Philly / Helios), the application comes from
the job's GPU-time bucket, GPUs (``num_replicas``) and ``batch_size`` from the
application's configurations. Applications map to zoo models (:data:`MODELS`).

The workloads store no duration: a job runs until its application reaches its
target. ``iterations`` comes from Pollux's measured training curves
``throughput-profiles/<app>/validation-<B>.csv``: take the file whose global
batch ``B`` is nearest the job's ``batch_size`` on a log scale (ties: the
smaller ``B``) and use its last row's ``iteration``, the step at which that run
reached its target. Every batch size in the shipped workloads has an exact
file, so the nearest-match rule only matters for other inputs. ``duration_s``
is NaN; run time follows from the zoo model's iteration time.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

import numpy as np
import pandas as pd

from ..errors import Int, Name, checked
from .files import find_trace_dir, register, shared_file
from .reader import Table
from .schema import TraceError, TraceNotFound, finish

HEADER = ("name", "time", "application", "num_replicas", "batch_size")
PROFILES = "pollux/throughput-profiles"

#: Pollux/Sia application -> zoo model
MODELS = {"imagenet": "resnet50", "bert": "bert-base", "cifar10": "resnet18", "deepspeech2": "deepspeech2",
          "yolov3": "yolov3", "ncf": "ncf"}


@lru_cache(maxsize=8)
def iterations_to_target(profiles_dir: str) -> dict[str, pd.Series]:
    """application -> Series (global batch size -> iterations to reach the target)."""
    out = {}
    for app in MODELS:
        files = sorted(Path(profiles_dir, app).glob("validation-*.csv"))
        if not files:
            raise TraceNotFound(f"no validation-*.csv profiles in {Path(profiles_dir, app)}")
        out[app] = pd.Series({int(f.stem.split("-")[1]): float(pd.read_csv(f)["iteration"].iloc[-1]) for f in files}
                             ).sort_index()
    return out


def nearest_iterations(apps: pd.Series, batch: pd.Series, table: dict[str, pd.Series]) -> np.ndarray:
    """Iterations to target for each (application, batch size), nearest profiled batch in log2."""
    out = np.full(len(apps), np.nan)
    for app, curve in table.items():
        rows = (apps == app).to_numpy() & batch.notna().to_numpy() & (batch > 0).to_numpy()
        dist = np.abs(np.log2(batch.to_numpy(float)[rows, None]) - np.log2(curve.index.to_numpy(float)[None, :]))
        out[rows] = curve.to_numpy()[dist.argmin(axis=1)]
    return out


def read_pollux(path, *, trace_dir=None, skip_bad: bool = False, source: str = "pollux") -> pd.DataFrame:
    """Load a Pollux/Sia workload file; iterations from the Pollux profiles in ``trace_dir``."""
    def rows(t: Table) -> pd.DataFrame:
        apps = t.frame["application"].str.strip()
        batch = t.number("batch_size", integer=True, positive=True)
        return pd.DataFrame({
            "job_id": t.frame["name"].str.strip(),
            "submit_s": t.number("time", nonnegative=True),
            "gpus": t.number("num_replicas", integer=True, positive=True),
            "model": t.mapped("application", MODELS, "application"),
            "application": apps,
            "batch_size": batch,
            "line": t.frame["line"],
        })

    df, skipped = Table(path, required=HEADER, skip_bad=skip_bad).load(rows)
    table = iterations_to_target(str(find_trace_dir(trace_dir) / PROFILES))
    df["iterations"] = nearest_iterations(df["application"], df["batch_size"], table)
    df["batch_size"] = df["batch_size"].astype("int64")
    return finish(df, source, path, skipped)


@register("pollux", "pollux/workloads/workloads/workload-1.csv")
@checked(TraceError, "pollux", skip=("trace_dir", "seed", "skip_bad"))
def pollux(trace_dir=None, *, seed: int = 0, skip_bad: bool = False, set: Name = "workloads",
           n: Int(ge=1, le=10_000) = 1) -> pd.DataFrame:
    """Pollux 8-hour Philly-sampled workload, 160 jobs (iterations from Pollux's training curves)."""
    path = shared_file(trace_dir, f"pollux/workloads/{set}/workload-{n}.csv")
    return read_pollux(path, trace_dir=trace_dir, skip_bad=skip_bad)


@register("sia", "sia-workloads/philly/workload-1.csv")
@checked(TraceError, "sia", skip=("trace_dir", "seed", "skip_bad"))
def sia(trace_dir=None, *, seed: int = 0, skip_bad: bool = False, set: Name = "philly", n: Int(ge=1, le=10_000) = 1) -> pd.DataFrame:
    """Sia 8-hour workload from Philly or Helios-Saturn, 160 jobs (iterations as for pollux)."""
    path = shared_file(trace_dir, f"sia-workloads/{set}/workload-{n}.csv")
    return read_pollux(path, trace_dir=trace_dir, skip_bad=skip_bad, source="sia")
