"""Dynamics of jobs that share a link, iteration by iteration: the relative-phase series, iteration-time
series and jitter, from the testbed's raw logs or from a model's own run.

Why apart from scoring: an iteration-time error says how far a model is off, not why. For two jobs on
one link the quantity that decides their iteration times is their relative phase: where in the
reference job's iteration the other job starts its own. These series show whether identical jobs
started in step stay there, whether a half-period shift holds and whether jobs of unequal periods lock,
on the testbed and, through :func:`simulated_runs`, in the ``tcp`` model, so the two can be set side by
side (:func:`phase_comparison`).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ...testbed.scenarios import simulated_logs
from .runs import RUN_KEYS, rank_rows, run_dict, run_groups, run_origin, run_warmup, scenarios_from_runs
from .scenarios import HEADER_OVERHEAD


def iteration_series(raw: pd.DataFrame, rank: int = 0) -> pd.DataFrame:
    """Per run, job and iteration (of ``rank``): start time ``t_s`` since the run's common start,
    ``iter_s`` (to the next iteration's start; NaN for the last), ``compute_s`` and ``allreduce_s``."""
    frames = []
    for key, run in run_groups(raw):
        t0 = run_origin(run)
        for jid, df in run.groupby("job_id", sort=True):
            d = rank_rows(df, rank)
            s = d.compute_start.to_numpy(dtype=float)
            out = pd.DataFrame({"job_id": int(jid), "iter": d["iter"].to_numpy(), "t_s": s - t0,
                                "iter_s": np.append(np.diff(s), np.nan),
                                "compute_s": (d.allreduce_start - d.compute_start).to_numpy(),
                                "allreduce_s": (d.allreduce_end - d.allreduce_start).to_numpy()})
            for k, v in reversed(list(run_dict(raw, key).items())):
                out.insert(0, k, v)
            frames.append(out)
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


def relative_phase(ref_starts: np.ndarray, starts: np.ndarray) -> pd.DataFrame:
    """Where each of ``starts`` falls in the reference job's iteration in progress.

    ``ref_iter`` k is the reference iteration with ``ref_starts[k] <= t < ref_starts[k+1]``; ``offset_s``
    is ``t - ref_starts[k]`` and ``phase`` that as a fraction of the reference's period then (0..1).
    Starts before the reference's first or after its last complete iteration get NaN.
    """
    ref = np.asarray(ref_starts, dtype=float)
    t = np.asarray(starts, dtype=float)
    k = np.searchsorted(ref, t, side="right") - 1
    ok = (k >= 0) & (k < len(ref) - 1)
    kk = np.where(ok, k, 0)
    lo = ref[kk] if len(ref) else np.full(len(t), np.nan)
    period = (ref[np.minimum(kk + 1, len(ref) - 1)] - lo) if len(ref) else np.full(len(t), np.nan)
    offset = np.where(ok, t - lo, np.nan)
    period = np.where(ok, period, np.nan)
    with np.errstate(invalid="ignore", divide="ignore"):
        phase = offset / period
    return pd.DataFrame({"ref_iter": np.where(ok, k, -1), "offset_s": offset, "ref_period_s": period,
                         "phase": phase})


def phase_series(raw: pd.DataFrame, rank: int = 0) -> pd.DataFrame:
    """Relative phases of every ordered pair of jobs of every run.

    One row per (run, ``ref_job``, ``job_id``, ``iter`` of ``job_id``): the other job's iteration start
    relative to the reference job's iteration in progress (:func:`relative_phase`), and ``dist``,
    the circular distance from being in step, ``min(phase, 1 - phase)`` (0: in step, 0.5: half shifted).
    """
    frames = []
    for key, run in run_groups(raw):
        t0 = run_origin(run)
        starts = {int(j): rank_rows(df, rank) for j, df in run.groupby("job_id", sort=True)}
        for ref, rdf in starts.items():
            for jid, df in starts.items():
                if jid == ref:
                    continue
                t = df.compute_start.to_numpy(dtype=float)
                ph = relative_phase(rdf.compute_start.to_numpy(dtype=float), t)
                out = pd.DataFrame({"ref_job": ref, "job_id": jid, "iter": df["iter"].to_numpy(), "t_s": t - t0})
                out = pd.concat([out, ph], axis=1)
                out["dist"] = np.minimum(out.phase, 1 - out.phase)
                for k, v in reversed(list(run_dict(raw, key).items())):
                    out.insert(0, k, v)
                frames.append(out)
    cols = [*RUN_KEYS, "ref_job", "job_id", "iter", "t_s", "ref_iter", "offset_s", "ref_period_s", "phase", "dist"]
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=cols)


def circular_mean(phase) -> float:
    """Mean of phases (fractions of a period) on the circle, in [0, 1)."""
    p = np.asarray(phase, dtype=float)
    p = p[np.isfinite(p)]
    if not len(p):
        return float("nan")
    z = np.exp(2j * np.pi * p).mean()
    return float((np.angle(z) / (2 * np.pi)) % 1.0)


def phase_locking(phase) -> float:
    """Mean resultant length of phases on the circle: 1 when every sample has one phase, ~0 when uniform."""
    p = np.asarray(phase, dtype=float)
    p = p[np.isfinite(p)]
    return float(abs(np.exp(2j * np.pi * p).mean())) if len(p) else float("nan")


def phase_summary(phases: pd.DataFrame, window: int = 50, skip: int = 1, hold: int = 10) -> pd.DataFrame:
    """Per run and ordered pair: how the relative phase started, where it ended and how it moved.

    ``phase_start``/``phase_end``: circular means over the first ``window`` samples (after ``skip``) and
    the last ``window``; ``lock_start``/``lock_end``: their mean resultant lengths (1: locked);
    ``offset_ms_*``: the circular distance from in step in ms of the reference's period; ``drift``:
    the mean per-iteration phase step wrapped to [-0.5, 0.5) (cycles per iteration of ``job_id``; a pair
    whose periods differ by 7% and that does not lock drifts about 0.07); ``first_iter_near_half``:
    the first iteration whose phase is within 0.05 of half a period (-1: none); ``frac_in_step``: the
    share of samples within 0.1 of a period of being in step; ``left_step_iter``: the first iteration
    from which the pair stays 0.1 of a period or more out of step for ``hold`` samples in a row (-1: never).
    """
    rows = []
    keys = [k for k in RUN_KEYS if k in phases.columns]
    for key, df in phases.groupby([*keys, "ref_job", "job_id"], sort=False):
        d = df.dropna(subset=["phase"]).sort_values("iter")
        d = d.iloc[skip:].assign(dist=lambda x: np.minimum(x.phase, 1 - x.phase))
        if len(d) < 2:
            continue
        first, last = d.iloc[:window], d.iloc[-window:]
        step = np.diff(d.phase.to_numpy())
        step = (step + 0.5) % 1.0 - 0.5
        near = d[(d.phase - 0.5).abs() < 0.05]
        out = (d.dist >= 0.1).to_numpy()
        run = np.convolve(out, np.ones(hold, dtype=int), mode="valid") == hold if len(out) >= hold else np.array([])
        left = int(d["iter"].iloc[int(np.argmax(run))]) if run.any() else -1

        def offset_ms(x):
            p = circular_mean(x.phase)
            return float(min(p, 1 - p) * x.ref_period_s.median() * 1000.0)

        rows.append(dict(zip([*keys, "ref_job", "job_id"], key), n=len(d),
                         phase_start=circular_mean(first.phase), lock_start=phase_locking(first.phase),
                         offset_ms_start=offset_ms(first),
                         phase_end=circular_mean(last.phase), lock_end=phase_locking(last.phase),
                         offset_ms_end=offset_ms(last), drift=float(step.mean()),
                         first_iter_near_half=int(near["iter"].iloc[0]) if len(near) else -1,
                         frac_in_step=float((d.dist < 0.1).mean()), left_step_iter=left))
    return pd.DataFrame(rows)


def simulated_runs(runs: pd.DataFrame, testbed, model: str = "tcp", wire_overhead: dict | None = None,
                   **network_kwargs) -> pd.DataFrame:
    """The model's own run of every scenario and repeat of ``runs``, in the raw runs' columns (rank 0, times
    from the common start): the logs :func:`phase_series` reads, so the model's relative phases can be set
    beside the testbed's. ``wire_overhead``: per repeat (``score_runs``' fit), else the header overhead."""
    frames = []
    for (name, rep), sc in scenarios_from_runs(runs).items():
        overhead = (wire_overhead or {}).get(int(rep), HEADER_OVERHEAD)
        for jid, log in simulated_logs(testbed, sc, model, overhead, **network_kwargs).items():
            frames.append(log.assign(scenario=name, repeat=rep, job_id=int(jid), start_at=0.0))
    return pd.concat(frames, ignore_index=True)


def phase_comparison(measured: pd.DataFrame, simulated: pd.DataFrame, **summary_kw) -> pd.DataFrame:
    """Per run and ordered pair of jobs, :func:`phase_summary` of the testbed's runs beside the model's
    (suffixes ``_measured``, ``_model``), with ``phase_end_error``: the circular distance (fraction of a
    period, 0..0.5) between where the two relative phases ended, and ``spacing_end_error``: the same for
    their distances from being in step, which does not depend on the order jobs fell into (three jobs
    locked at thirds may take 1-2-3 or 1-3-2). Pairs the model's run lacks are dropped."""
    keys = [*RUN_KEYS, "ref_job", "job_id"]
    m = phase_summary(phase_series(measured), **summary_kw)
    s = phase_summary(phase_series(simulated), **summary_kw)
    both = m.merge(s, on=keys, suffixes=("_measured", "_model"))
    d = (both.phase_end_measured - both.phase_end_model) % 1.0
    both["phase_end_error"] = np.minimum(d, 1.0 - d)
    spacing = {k: np.minimum(both[f"phase_end_{k}"], 1.0 - both[f"phase_end_{k}"]) for k in ("measured", "model")}
    both["spacing_end_error"] = (spacing["measured"] - spacing["model"]).abs()
    return both


def _rcv(x: np.ndarray) -> float:
    """Robust coefficient of variation: 1.4826 x median absolute deviation / median (std/mean for a
    normal sample, but blind to the rare multi-ms scheduling outlier)."""
    med = float(np.median(x))
    return float(1.4826 * np.median(np.abs(x - med)) / med) if med else float("nan")


def compute_jitter(raw: pd.DataFrame, warmup: int | None = None, rank: int = 0) -> pd.DataFrame:
    """Per run and job: mean, std and coefficient of variation (std/mean) of the compute phase (a sleep
    on CPU hosts), of the all-reduce and of the iteration time, over the job's own iterations after
    ``warmup``; ``*_rcv`` are the robust versions (:func:`_rcv`)."""
    rows = []
    for key, run in run_groups(raw):
        w = run_warmup(run, warmup)
        for jid, df in run.groupby("job_id", sort=True):
            d = rank_rows(df, rank)
            comp = (d.allreduce_start - d.compute_start).to_numpy(dtype=float)[w:]
            ar = (d.allreduce_end - d.allreduce_start).to_numpy(dtype=float)[w:]
            per = np.diff(d.compute_start.to_numpy(dtype=float))[w:]
            row = dict(run_dict(raw, key), job_id=int(jid), n=len(per),
                       compute_mean_ms=float(comp.mean() * 1000), compute_std_ms=float(comp.std(ddof=1) * 1000),
                       allreduce_mean_ms=float(ar.mean() * 1000), allreduce_std_ms=float(ar.std(ddof=1) * 1000),
                       iter_mean_ms=float(per.mean() * 1000), iter_std_ms=float(per.std(ddof=1) * 1000))
            row["compute_cv"] = row["compute_std_ms"] / row["compute_mean_ms"]
            row["allreduce_cv"] = row["allreduce_std_ms"] / row["allreduce_mean_ms"]
            row["iter_cv"] = row["iter_std_ms"] / row["iter_mean_ms"]
            row.update(compute_rcv=_rcv(comp), allreduce_rcv=_rcv(ar), iter_rcv=_rcv(per))
            if "compute_ms" in df.columns:
                row["compute_overshoot_ms"] = row["compute_mean_ms"] - float(df.compute_ms.iloc[0])
            rows.append(row)
    return pd.DataFrame(rows)


