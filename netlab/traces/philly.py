"""Microsoft Philly (2017) via Pollux's per-job CSV, and a small bundled sample.

``philly.csv``: ``timestamp`` (wall clock ``YYYY-MM-DD HH:MM:SS``, no time
zone), ``duration`` (s), ``num_gpus``, ``gpu_time``, ``cluster`` (hashed VC).
Rows are not in time order; the loader sorts them. The wall clock is taken as
uniform time (the zone and any daylight-saving jump are unknown). There are
no model names, so models come from :func:`netlab.traces.models.assign_models`;
``duration_s`` is the real run time and ``iterations`` is left NaN.
Job ids are ``philly-<line>``; ``vc`` keeps the cluster column, which is also
the job's ``tenant`` (fair-share ordering shares the cluster between VCs).

``philly-sample`` is 500 contiguous jobs bundled in ``netlab/data`` (see
``NOTICE-philly-sample.md`` there), so examples and tests run without the
shared traces.
"""

from __future__ import annotations

from importlib import resources

import pandas as pd

from ..errors import checked
from .files import register, shared_file
from .models import assign_models
from .reader import Table
from .schema import TraceError, finish

HEADER = ("timestamp", "duration", "num_gpus", "cluster")
FILE = "microsoft-philly/philly.csv"


def read_philly(path, *, seed: int = 0, skip_bad: bool = False, source: str = "philly") -> pd.DataFrame:
    """Load a file in ``philly.csv`` format."""
    def rows(t: Table) -> pd.DataFrame:
        return pd.DataFrame({  # no job id yet: made from the line below, it is not held per chunk
            "stamp": t.timestamp("timestamp", "%Y-%m-%d %H:%M:%S"),
            "gpus": t.number("num_gpus", integer=True, positive=True),
            "duration_s": t.number("duration", positive=True),
            "vc": t.frame["cluster"].str.strip(),
            "line": t.frame["line"],
        })

    df, skipped = Table(path, required=HEADER, skip_bad=skip_bad).load(rows)
    df["tenant"] = df["vc"]
    stamps = df.pop("stamp")
    df.insert(0, "job_id", source + "-" + df["line"].astype(str))
    df.insert(1, "submit_s", (stamps - stamps.min()).dt.total_seconds())
    df = assign_models(df, seed)
    return finish(df, source, path, skipped)


@register("philly", FILE)
@checked(TraceError, "philly", skip=("trace_dir", "seed", "skip_bad"))
def philly(trace_dir=None, *, seed: int = 0, skip_bad: bool = False) -> pd.DataFrame:
    """Microsoft Philly 2017, 82,247 jobs (real arrivals, durations, GPUs; seeded models)."""
    return read_philly(shared_file(trace_dir, FILE), seed=seed, skip_bad=skip_bad)


@register("philly-sample", "philly_sample.csv", needs_shared=False)
@checked(TraceError, "philly-sample", skip=("trace_dir", "seed", "skip_bad"))
def philly_sample(trace_dir=None, *, seed: int = 0, skip_bad: bool = False) -> pd.DataFrame:
    """500 contiguous Philly jobs bundled with netlab (41% multi-GPU); needs no shared dir."""
    with resources.as_file(resources.files("netlab.data").joinpath("philly_sample.csv")) as path:
        return read_philly(path, seed=seed, skip_bad=skip_bad, source="philly-sample")
