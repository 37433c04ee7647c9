"""Gavel's per-VC Philly traces (``seed0/<vc>.trace``): arrivals and GPUs from Philly,
Gavel job types and step counts.

Tab-separated, no header, 7 fields: job_type, command, num_steps_arg,
needs_data_dir, total_steps, arrival_time (s), scale_factor (GPUs). GPUs =
scale_factor; the submit time is arrival_time truncated to whole seconds
(the traces hold whole seconds already). The job type
``"<Model> (batch size <b>)"`` maps to a zoo model (:data:`MODELS`);
``batch_size`` is kept; ``total_steps`` is kept as ``trace_iterations``.

Gavel made ``total_steps`` from the Philly duration at *its* V100 throughput,
which differs from the zoo's iteration time (e.g. ResNet-18 batch 16 runs 32
steps/s in Gavel, 0.64 s per iteration in the zoo). So ``duration_s`` is filled
with Gavel's own estimate, ``total_steps / v100 throughput`` for the job's type
and GPU count: the V100 ``null`` (running alone) entry of
``simulation_throughputs.json`` beside ``seed0/``. The table has 1, 2, 4 and
8 GPUs (some types only 1), so a job uses the largest GPU count in the table
not above its own (an estimate, longer than Gavel's). These are the input
rules of the cross-validation against Tiresias' simulator
(``shared/reference/cross-validation.md``, ``tests/test_reference.py``).

Default ``use="duration"``: the job runs that duration on the zoo model
(``iterations`` NaN), so a Gavel job lasts about as long as Gavel meant and
not weeks longer at the zoo's slower iteration time. ``use="iterations"``
keeps ``total_steps`` as the work instead.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd

from typing import Literal

from ..errors import Name, checked
from .files import register, shared_file
from .reader import Table
from .schema import TraceError, finish

NAMES = ("job_type", "command", "num_steps_arg", "needs_data_dir", "total_steps", "arrival_time", "scale_factor")

#: Gavel model name (before " (batch size ...)") -> zoo model
MODELS = {"ResNet-18": "resnet18", "ResNet-50": "resnet50", "Transformer": "transformer", "LM": "lm",
          "Recommendation": "recommendation", "CycleGAN": "cyclegan", "A3C": "a3c"}


def v100_steps_per_s(throughputs_json) -> pd.DataFrame:
    """Columns job_type, gpus, steps_per_s: V100, running alone, consolidated, from Gavel's table."""
    table = json.loads(Path(throughputs_json).read_text())["v100"]
    rows = []
    for key, value in table.items():
        job_type, _, scale = key.strip("()").rpartition(",")
        rows.append((job_type.strip().strip("'"), int(scale), float(value["null"])))
    return pd.DataFrame(rows, columns=["job_type", "gpus", "steps_per_s"])


def gavel_duration_s(df: pd.DataFrame, rates: pd.DataFrame) -> pd.Series:
    """total_steps / steps_per_s at the largest tabled GPU count <= the job's; NaN if none."""
    left = df[["job_type", "gpus"]].assign(row=np.arange(len(df)), gpus=df["gpus"].fillna(0).astype("int64"))
    left = left.sort_values("gpus", kind="stable")
    merged = pd.merge_asof(left, rates.sort_values("gpus"), on="gpus", by="job_type", direction="backward")
    rate = merged.set_index("row")["steps_per_s"].reindex(np.arange(len(df))).to_numpy()
    return pd.Series(df["iterations"].to_numpy() / rate, index=df.index)


def read_gavel(path, *, skip_bad: bool = False, use: str = "duration", source: str = "gavel") -> pd.DataFrame:
    """Load one Gavel ``.trace`` file."""
    if use not in ("iterations", "duration"):
        raise TraceError(f"gavel: field 'use' is not one of the allowed values, got {use!r} (allowed: one of "
                         "'iterations', 'duration')")
    path = Path(path)
    table = path.parent.parent / "simulation_throughputs.json"
    rates = v100_steps_per_s(table) if table.exists() else None

    def rows(t: Table) -> pd.DataFrame:
        parts = t.frame["job_type"].str.strip().str.extract(r"^(?P<name>[^(]+?)\s*(?:\(batch size (?P<bsz>\d+)\))?$")
        model = t.mapped("job_type", dict(zip(t.frame["job_type"].str.strip(), parts["name"].map(MODELS))),
                         "Gavel job type")
        steps = t.number("total_steps", positive=True)
        gpus = t.number("scale_factor", integer=True, positive=True)
        df = pd.DataFrame({
            "job_id": f"{source}-{path.stem}-" + t.frame["line"].astype(str),
            "submit_s": np.floor(t.number("arrival_time", nonnegative=True)),  # truncated to whole seconds
            "gpus": gpus,
            "model": model,
            "iterations": steps,
            "batch_size": pd.to_numeric(parts["bsz"]).astype("Int64"),
            "job_type": t.frame["job_type"].str.strip(),
            "vc": path.stem,
            "line": t.frame["line"],
        })
        if rates is not None:
            df["duration_s"] = gavel_duration_s(df, rates)
        return df

    df, skipped = Table(path, names=NAMES, sep="\t", skip_bad=skip_bad).load(rows)
    if use == "duration":
        df = df.assign(trace_iterations=df["iterations"], iterations=np.nan)
    return finish(df, source, path, skipped)


@register("gavel", "gavel-philly-vc/seed0/b436b2.trace")
@checked(TraceError, "gavel", skip=("trace_dir", "seed", "skip_bad"))
def gavel(trace_dir=None, *, seed: int = 0, skip_bad: bool = False, vc: Name = "b436b2",
          use: Literal["duration", "iterations"] = "duration") -> pd.DataFrame:
    """Gavel per-VC Philly trace (real arrivals and GPUs; Gavel's random job types and steps)."""
    return read_gavel(shared_file(trace_dir, f"gavel-philly-vc/seed0/{vc}.trace"), skip_bad=skip_bad, use=use)
