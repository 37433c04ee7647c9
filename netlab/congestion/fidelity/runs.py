"""Stored fidelity runs: the raw per-iteration logs, how they are written and read back, and the
measured iteration time every comparison is made against.

Why a format of its own: the testbed runs once, models are scored offline as
often as wanted, so a run must carry everything a prediction needs. One row per
(``scenario``, ``repeat``, ``job_id``, ``rank``, ``iter``) with the rank's raw
timestamps ``compute_start``, ``allreduce_start``, ``allreduce_end`` (the hosts
of a namespace testbed share one clock), beside the job's hosts, gradient bytes,
compute, offset and iteration count, and the scenario's link rates
(:func:`runs_frame`). :func:`scenarios_from_runs` rebuilds the scenarios from
it, and :func:`steady_iterations` reads the measured target: the mean period
over the window in which every job of the run is past its warm-up.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd

from ...testbed.scenarios import Scenario, ScenarioJob, scenario_rates
from .scenarios import WARMUP, scenario_key

RUN_KEYS = ("scenario", "repeat")


def run_groups(raw: pd.DataFrame):
    """``(key, rows)`` per run of ``raw``; key holds the values of the :data:`RUN_KEYS` it has (``()``: one run)."""
    keys = [k for k in RUN_KEYS if k in raw.columns]
    if not keys:
        yield (), raw
        return
    for key, df in raw.groupby(keys, sort=False):
        yield (key if isinstance(key, tuple) else (key,)), df


def run_dict(raw: pd.DataFrame, key: tuple) -> dict:
    """A run key from :func:`run_groups` as ``{column: value}``."""
    return dict(zip([k for k in RUN_KEYS if k in raw.columns], key))


def rank_rows(df: pd.DataFrame, rank: int = 0) -> pd.DataFrame:
    """One rank's rows of one job, in iteration order."""
    return df[df["rank"] == rank].sort_values("iter")


def run_origin(df: pd.DataFrame) -> float:
    """The run's common start (``start_at``, else its first compute start)."""
    return float(df.start_at.iloc[0]) if "start_at" in df.columns else float(df.compute_start.min())


def run_warmup(run: pd.DataFrame, warmup: int | None) -> int:
    """``warmup`` when given, else the run's ``warmup`` column, else :data:`WARMUP`."""
    if warmup is not None:
        return warmup
    return int(run["warmup"].iloc[0]) if "warmup" in run.columns else WARMUP


def runs_frame(testbed, sc: Scenario, repeat: int, raw: pd.DataFrame, **extra) -> pd.DataFrame:
    """Raw logs of one run with everything needed to predict it offline: per job its hosts, ranks,
    gradient bytes, compute, offset and iteration count; the scenario's link-rate overrides
    (``rates_mbit``, JSON ``[[src, dst, Mbit], ...]`` per cable) and every directed link's rate while
    it ran (``link_rates_mbit``), the topology, ``rate_scale`` and the scenario's key."""
    jobs = pd.DataFrame([dict(job_id=j.job_id, hosts=",".join(j.hosts), n_ranks=len(j.hosts),
                              grad_bytes=int(j.grad_bytes), compute_ms=float(j.compute_ms),
                              offset_ms=float(j.offset_ms), iterations=int(j.iterations)) for j in sc.jobs])
    df = raw.merge(jobs, on="job_id", how="left")
    df.insert(0, "repeat", int(repeat))
    df.insert(0, "scenario", sc.name)
    df["warmup"] = int(sc.warmup)
    df["rates_mbit"] = json.dumps(sorted([a, b, float(r)] for (a, b), r in sc.rates_mbit.items()))
    df["link_rates_mbit"] = json.dumps(sorted([a, b, float(r)] for (a, b), r in scenario_rates(testbed, sc).items()))
    df["topology"] = testbed.topology.name
    df["rate_scale"] = float(testbed.rate_scale)
    df["scenario_key"] = scenario_key(sc)
    for k, v in extra.items():
        df[k] = v
    return df


def scenarios_from_runs(runs: pd.DataFrame) -> dict[tuple, Scenario]:
    """The :class:`Scenario` of every (scenario, repeat) in stored runs."""
    out = {}
    for key, run in runs.groupby(list(RUN_KEYS), sort=False):
        jobs = run.drop_duplicates("job_id").sort_values("job_id")
        rates = {(a, b): float(r) for a, b, r in json.loads(run.rates_mbit.iloc[0])}
        out[key] = Scenario(str(key[0]), tuple(
            ScenarioJob(int(j.job_id), tuple(j.hosts.split(",")), int(j.grad_bytes), float(j.compute_ms),
                        int(j.iterations), float(j.offset_ms)) for j in jobs.itertuples()),
            rates, int(run.warmup.iloc[0]))
    return out


def write_runs(runs: pd.DataFrame, out) -> Path:
    """Stored runs as zstd-compressed parquet, written atomically."""
    from ...fileio import atomic_write

    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    runs = runs.sort_values([*RUN_KEYS, "job_id", "rank", "iter"], kind="stable").reset_index(drop=True)
    atomic_write(out, lambda p: runs.to_parquet(p, index=False, compression="zstd"))
    return out


def steady_window(run: pd.DataFrame, warmup: int, rank: int = 0) -> tuple[float, float]:
    """The common window of one run: from the latest job's ``warmup``-th iteration start to the earliest
    job's last all-reduce end."""
    lo, hi = -np.inf, np.inf
    for _, df in run.groupby("job_id"):
        d = rank_rows(df, rank)
        lo = max(lo, float(d.compute_start.iloc[min(warmup, len(d) - 1)]))
        hi = min(hi, float(d.allreduce_end.iloc[-1]))
    return lo, hi


def steady_iterations(raw: pd.DataFrame, warmup: int | None = None, rank: int = 0) -> pd.DataFrame:
    """Per run and job, the measured iteration time in the steady window.

    ``iter_s`` is the window's mean period, ``(last start - first start) / (starts - 1)`` over the job's
    iterations that start at or after the window's start and end by its end (iteration ``>= warmup``);
    ``iter_median_s`` the median period; ``n_iters`` how many. ``warmup`` defaults to the ``warmup``
    column of the runs (else 10). A job without two iterations in the common window falls back to
    its own steady state (``window`` says which).
    """
    rows = []
    for key, run in run_groups(raw):
        w = run_warmup(run, warmup)
        lo, hi = steady_window(run, w, rank)
        for jid, df in run.groupby("job_id", sort=True):
            d = rank_rows(df, rank)
            d = d[d["iter"] >= w]
            s = d[(d.compute_start >= lo) & (d.allreduce_end <= hi)]
            window = "common"
            if len(s) < 2:
                s, window = d, "own"
            st = s.compute_start.to_numpy(dtype=float)
            per = np.diff(st)
            rows.append(dict(run_dict(raw, key), job_id=int(jid), window=window, n_iters=len(s),
                             iter_s=float((st[-1] - st[0]) / (len(st) - 1)) if len(st) > 1 else float("nan"),
                             iter_median_s=float(np.median(per)) if len(per) else float("nan"),
                             compute_s=float((s.allreduce_start - s.compute_start).mean()),
                             allreduce_s=float((s.allreduce_end - s.allreduce_start).mean()),
                             window_s=float(hi - lo)))
    return pd.DataFrame(rows)
