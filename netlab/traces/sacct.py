"""Slurm accounting (``sacct``) dumps: an operator replays their own cluster's history.

Make the dump with::

    sacct --allusers --parsable2 --allocations --starttime 2024-01-01 \\
          --format=JobID,JobName,Submit,Start,End,State,AllocTRES,NodeList > jobs.txt

and load it with ``load_trace("sacct,path=jobs.txt")`` (or ``netlab import
sacct jobs.txt``). ``--parsable2`` separates fields by ``|`` with no trailing
``|``; ``--allocations`` leaves out job steps (one line per job). The first
line is the header sacct prints; columns may come in any order and others
(Partition, User, Elapsed, ...) are kept as extra columns.

==============  =========================================================  ====================
sacct field     meaning (Slurm's sacct man page)                           netlab column
==============  =========================================================  ====================
``JobID``       job id (``123``, array ``123_4``, het ``123+0``)           ``job_id``
``Submit``      time the job was submitted                                 ``submit_s`` (first = 0)
``Start``       time the job started; ``Unknown``/``None`` if it never did ``start_s``, ``wait_s``
``End``         time the job ended; ``Unknown`` while it runs             ``duration_s`` = End - Start
``State``       COMPLETED, FAILED, TIMEOUT, CANCELLED by N, ...            ``state``
``AllocTRES``   allocated trackable resources, ``cpu=2,gres/gpu=4,node=1`` ``gpus``
``NodeList``    allocated nodes as a Slurm hostlist                        ``nodes`` (expanded, comma-joined)
``JobName``     (optional) the job's name                                  ``name``
==============  =========================================================  ====================

Times are sacct's default ISO format (``2024-05-01T12:00:00``, local time of
the cluster, no zone; ``SLURM_TIME_FORMAT`` must not be changed). GPUs are the
``gres/gpu=N`` entry of ``AllocTRES``; where only typed entries are given
(``gres/gpu:a100=4``) their sum. ``gpu_tres="cpu"`` takes the ``cpu=N`` count
instead, for clusters whose accounting does not track GPUs (each CPU standing
for a GPU); say so beside any result.

Documented filters (counted in ``df.attrs["filtered"]``, not errors): jobs that
never started (Start not a time: pending or cancelled before starting), jobs
still running (End ``Unknown``), jobs with no GPU in AllocTRES (CPU-only), and
jobs that ran for no time (End <= Start). Everything else that is malformed,
above all an ``AllocTRES`` entry that is not ``name=count`` with a whole count,
is a :class:`TraceError` naming the file, the line and the field. There are no
model names in sacct, so models are seeded (:func:`assign_models`).
"""

from __future__ import annotations

from importlib import resources
from typing import Literal

import numpy as np
import pandas as pd

from ..errors import Float, checked, short
from ..hostlist import HostlistError, expand
from .files import register
from .models import assign_models
from .reader import MAX_INT, Table
from .schema import TraceError, finish

REQUIRED = ("JobID", "Submit", "Start", "End", "State", "AllocTRES", "NodeList")
FORMAT = "JobID,JobName,Submit,Start,End,State,AllocTRES,NodeList"
TIME = "%Y-%m-%dT%H:%M:%S"
NEVER_STARTED = "jobs that never started (Start not a time)"
STILL_RUNNING = "jobs still running (End not a time)"
NO_GPU = "jobs with no GPU in AllocTRES (CPU-only)"
NO_RUN_TIME = "jobs with End <= Start"
SAMPLE = "sacct-sample.txt"


def parse_tres(text: str) -> dict[str, int]:
    """``cpu=2,gres/gpu=4,mem=8G`` -> counts; memory-like values with a unit suffix are kept only as present.

    Raises ValueError naming the bad entry: a TRES entry must be ``name=count``.
    """
    out: dict[str, int] = {}
    text = text.strip()
    if not text:
        return out
    for entry in text.split(","):
        name, sep, value = entry.partition("=")
        if not sep or not name.strip() or not value.strip():
            raise ValueError(f"TRES entry {entry!r} is not name=count")
        name, value = name.strip(), value.strip()
        if name.startswith(("mem", "fs/", "energy", "bb/", "vmem", "pages")):  # sizes such as 8G: not counted here
            out[name] = -1
            continue
        if not value.isdigit():
            raise ValueError(f"TRES entry {entry!r}: count {value!r} is not a whole number")
        if int(value) > MAX_INT:
            raise ValueError(f"TRES entry {entry!r}: count over {MAX_INT:,}")
        out[name] = int(value)
    return out


def gpus_from_tres(tres: dict[str, int], gpu_tres: str = "gres/gpu") -> int:
    """GPUs in a parsed AllocTRES (see the module docstring); 0 if none."""
    if gpu_tres == "cpu":
        return tres.get("cpu", 0)
    if "gres/gpu" in tres:
        return tres["gres/gpu"]
    return sum(v for k, v in tres.items() if k.startswith("gres/gpu:") and v > 0)


def read_sacct(path, *, seed: int = 0, skip_bad: bool = False, gpu_tres: str = "gres/gpu",
               source: str = "sacct", time_scale: float = 1.0) -> pd.DataFrame:
    """Load a ``sacct --parsable2 --allocations`` dump (see the module docstring). ``time_scale`` stretches every
    time (submits, waits, run times) by that factor: the history's arrival pattern and job sizes at another time
    scale, e.g. a sample of short test jobs replayed as training jobs that run long enough for placement to
    matter (say so beside any result)."""
    def rows(t: Table) -> pd.DataFrame:
        submit = t.timestamp("Submit", TIME)
        start_text = t.frame["Start"].str.strip()
        end_text = t.frame["End"].str.strip()
        start = pd.to_datetime(start_text, format=TIME, errors="coerce")
        end = pd.to_datetime(end_text, format=TIME, errors="coerce")
        for col, stamps, text, allowed in (("Start", start, start_text, ("Unknown", "None")),
                                           ("End", end, end_text, ("Unknown", "None"))):
            t.bad(stamps.isna() & ~text.isin(allowed), col, f"not a timestamp in format {TIME!r} nor one of {allowed}")
        gpus = np.zeros(len(t.frame), dtype=np.int64)
        nodes = []
        for i, (line, tres, nodelist) in enumerate(zip(t.frame["line"], t.frame["AllocTRES"], t.frame["NodeList"])):
            try:
                gpus[i] = gpus_from_tres(parse_tres(tres), gpu_tres)
            except ValueError as exc:
                t._add(line, "AllocTRES", f"{exc} (value {short(tres)}; expected e.g. 'cpu=2,gres/gpu=4,node=1')")
            text = nodelist.strip()
            try:
                nodes.append(",".join(expand(text)) if text and text != "None assigned" else "")
            except HostlistError as exc:
                t._add(line, "NodeList", str(exc))
                nodes.append("")
        return pd.DataFrame({
            "job_id": t.frame["JobID"].str.strip(),
            "submit": submit,
            "start": start,
            "gpus": gpus,
            "duration_s": (end - start).dt.total_seconds(),
            "state": t.frame["State"].str.strip(),
            "nodes": nodes,
            "name": t.frame["JobName"].str.strip() if "JobName" in t.frame else "",
            "line": t.frame["line"],
        })

    df, skipped = Table(path, required=REQUIRED, sep="|", skip_bad=skip_bad).load(rows)
    submit, start = df.pop("submit"), df.pop("start")
    df.insert(1, "submit_s", (submit - submit.min()).dt.total_seconds())
    df.insert(2, "start_s", (start - submit.min()).dt.total_seconds())
    never = df["start_s"].isna()
    running = ~never & df["duration_s"].isna()
    no_gpu = ~never & ~running & (df["gpus"] <= 0)
    no_run = ~never & ~running & ~no_gpu & ~(df["duration_s"] > 0)
    filtered = {NEVER_STARTED: int(never.sum()), STILL_RUNNING: int(running.sum()), NO_GPU: int(no_gpu.sum()),
                NO_RUN_TIME: int(no_run.sum())}
    df = df[~(never | running | no_gpu | no_run)].copy()
    if len(df):  # times relative to the first job kept, as every trace
        first = df["submit_s"].min()
        df["submit_s"] -= first
        df["start_s"] -= first
    df["wait_s"] = df["start_s"] - df["submit_s"]
    for col in ("submit_s", "start_s", "wait_s", "duration_s"):
        df[col] = df[col] * time_scale
    df["n_nodes"] = df["nodes"].map(lambda s: len(s.split(",")) if s else 0)
    df = assign_models(df, seed)
    return finish(df, source, path, skipped, filtered)


@register("sacct", "<path>", needs_shared=False)
@checked(TraceError, "sacct", skip=("trace_dir", "seed", "skip_bad"))
def sacct(trace_dir=None, *, seed: int = 0, skip_bad: bool = False, path: str = "",
          gpu_tres: Literal["gres/gpu", "cpu"] = "gres/gpu", time_scale: Float(gt=0, le=1e6) = 1.0) -> pd.DataFrame:
    """A ``sacct --parsable2 --allocations`` dump (``sacct,path=jobs.txt``): real submits, run times, GPUs, nodes."""
    if not path:
        raise TraceError("sacct: give the dump's path, e.g. 'sacct,path=jobs.txt' (fields: see netlab.traces.sacct)")
    from pathlib import Path

    if not Path(path).exists():
        from .schema import TraceNotFound

        raise TraceNotFound(f"sacct dump {path!r} not found")
    return read_sacct(path, seed=seed, skip_bad=skip_bad, gpu_tres=gpu_tres, time_scale=time_scale)


@register("sacct-sample", SAMPLE, needs_shared=False)
@checked(TraceError, "sacct-sample", skip=("trace_dir", "seed", "skip_bad"))
def sacct_sample(trace_dir=None, *, seed: int = 0, skip_bad: bool = False,
                 time_scale: Float(gt=0, le=1e6) = 1.0) -> pd.DataFrame:
    """Sleep jobs a real Slurm 22.05 ran under netlab's placement advisor (bundled; see netlab/data);
    ``time_scale=N`` replays them N times longer (arrivals too)."""
    with resources.as_file(resources.files("netlab.data").joinpath(SAMPLE)) as path:
        return read_sacct(path, seed=seed, skip_bad=skip_bad, source="sacct-sample", time_scale=time_scale)
