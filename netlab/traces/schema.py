"""The trace schema: what every loader in :mod:`netlab.traces` returns.

One pandas DataFrame per trace, sorted by ``submit_s`` (ties keep file order),
index reset, with these columns:

==============  ========  ====================================================
column          dtype     meaning
==============  ========  ====================================================
``job_id``      str       the trace's job id (or ``<source>-<line>`` if none); unique
``submit_s``    float     submission time in seconds; the first job submits at 0
``gpus``        int       GPUs the job asks for, > 0
``model``       str       a name in :meth:`ModelZoo.default`
``duration_s``  float     run time alone in seconds, > 0; may be NaN when
                          ``iterations`` is given
``iterations``  float     iterations to run, > 0, or NaN; when NaN,
                          :func:`netlab.workload.job.jobs_from_frame` converts
                          ``duration_s`` at the model's isolated speed
``pattern``     str       communication pattern (``"ring"`` unless the trace says)
``source``      str       the trace name (``philly``, ``gavel``, ...)
==============  ========  ====================================================

Extra columns are allowed and kept (``vc``, ``batch_size``, ``trace_iterations``,
``line`` = the row's 1-based line in the source file, ...). Three of them reach
the job when a loader gives them: ``priority`` (int, larger first: Alibaba's
QoS class), ``deadline_s`` (float on the trace's clock, NaN for none: the ITP
trace ElasticFlow released) and ``tenant`` (str: Philly's virtual cluster), read
by the ``priority``, ``edf`` and ``fair-share`` orderings.

``df.attrs`` carries provenance, so a result can say what it was made from:

* ``source_file``: the path read (``importlib.resources`` path for bundled data);
* ``skipped``: ``{"line", "field", "reason"}`` of the first rows dropped with
  ``skip_bad=True`` (at most :data:`netlab.traces.reader.MAX_REPORTED`; the
  warning says how many were dropped; empty normally: bad rows are an error
  by default);
* ``filtered``: ``{filter description: rows removed}`` for the *documented*
  filters a loader applies to valid rows (e.g. CPU-only pods in Alibaba).

Bad input raises :class:`TraceError` naming the file, the line (as a text
editor shows it, header = line 1) and the field, because a silently dropped or
mis-parsed row would change simulation results without anyone noticing.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..errors import InputError, short

COLUMNS = ("job_id", "submit_s", "gpus", "model", "duration_s", "iterations", "pattern", "source")


class TraceError(InputError):
    """A trace file is malformed; the message names the file, line and field."""


class TraceNotFound(TraceError, FileNotFoundError):
    """A trace file or the shared trace directory does not exist (both a TraceError and a FileNotFoundError)."""


def finish(df: pd.DataFrame, source: str, source_file: str, skipped: list | None = None,
           filtered: dict | None = None) -> pd.DataFrame:
    """Put a loader's frame into schema form: defaults, dtypes, order, attrs; then validate."""
    df = df.copy()
    df["source"] = source
    if "pattern" not in df.columns:
        df["pattern"] = "ring"
    for col in ("duration_s", "iterations"):
        if col not in df.columns:
            df[col] = np.nan
    df = df.astype({"job_id": str, "submit_s": float, "gpus": "int64", "model": str,
                    "duration_s": float, "iterations": float, "pattern": str})
    _unique_ids(df, source_file)
    if len(df):
        df["submit_s"] = df["submit_s"] - df["submit_s"].min()
    df = df.sort_values("submit_s", kind="stable").reset_index(drop=True)
    extra = [c for c in df.columns if c not in COLUMNS]
    df = df[list(COLUMNS) + extra]
    df.attrs = {"source_file": str(source_file), "skipped": list(skipped or []), "filtered": dict(filtered or {})}
    validate(df, source)
    return df


def _unique_ids(df: pd.DataFrame, where) -> None:
    """Refuse a trace that gives one job id to several jobs, naming the lines (or rows) of the first such id.

    Why: results are reported per job id, and a scheduler or a join that keys on it would silently merge them.
    """
    dup = df["job_id"].duplicated(keep=False).to_numpy()
    if not dup.any():
        return
    first = df["job_id"].to_numpy()[dup][0]
    at = np.flatnonzero((df["job_id"] == first).to_numpy())
    where_ = (f"lines {', '.join(str(int(x)) for x in df['line'].to_numpy()[at][:10])}" if "line" in df
              else f"rows {', '.join(str(int(x)) for x in at[:10])}")
    ids = int(df.loc[dup, "job_id"].nunique())
    raise TraceError(f"{where}, {where_}: job id {short(first)} is given to {len(at)} jobs; job ids must be unique "
                     f"({ids} id(s) are repeated)")


def validate(df: pd.DataFrame, source: str = "trace") -> pd.DataFrame:
    """Check ``df`` against the schema above; raise :class:`TraceError` saying what is wrong.

    This checks the *result* of a loader (or a hand-made frame), so problems are
    reported by row index, not by file line.
    """
    from ..workload.zoo import ModelZoo

    missing = [c for c in COLUMNS if c not in df.columns]
    if missing:
        raise TraceError(f"{source}: missing column(s) {missing}")
    problems = []
    if not pd.api.types.is_integer_dtype(df["gpus"]):
        problems.append(f"gpus has dtype {df['gpus'].dtype}, expected int")
    for col in ("submit_s", "duration_s", "iterations"):
        if not pd.api.types.is_float_dtype(df[col]):
            problems.append(f"{col} has dtype {df[col].dtype}, expected float")
    for col in ("job_id", "model", "pattern", "source"):
        if not pd.api.types.is_string_dtype(df[col]):
            problems.append(f"{col} has dtype {df[col].dtype}, expected str")
    if problems:
        raise TraceError(f"{source}: " + "; ".join(problems))

    def first_bad(mask, what):
        if mask.any():
            i = int(np.flatnonzero(np.asarray(mask))[0])
            raise TraceError(f"{source}: row {i} (job {df['job_id'].iloc[i]}): {what}; {int(mask.sum())} such row(s)")

    if len(df):
        first_bad(~np.isfinite(df["submit_s"]), "submit_s is not finite")
        if df["submit_s"].min() != 0:
            raise TraceError(f"{source}: submit_s must start at 0, starts at {df['submit_s'].min()}")
        first_bad(df["submit_s"].diff().fillna(0) < 0, "not sorted by submit_s")
        if not df.index.equals(pd.RangeIndex(len(df))):
            raise TraceError(f"{source}: index is not reset (expected 0..{len(df) - 1})")
    first_bad(df["gpus"] <= 0, "gpus must be > 0")
    dur, its = df["duration_s"], df["iterations"]
    first_bad(~(dur > 0) & dur.notna(), "duration_s must be > 0 or NaN")
    first_bad(np.isinf(dur), "duration_s is not finite")
    first_bad(~(its > 0) & its.notna(), "iterations must be > 0 or NaN")
    first_bad(np.isinf(its), "iterations is not finite")
    first_bad(dur.isna() & its.isna(), "needs duration_s or iterations")
    zoo = ModelZoo.default()
    first_bad(~df["model"].isin(zoo.names()), f"model not in the zoo ({', '.join(zoo.names())})")
    return df
