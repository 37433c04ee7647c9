"""The referee's best estimate of a job's iteration time over several ns-3 draws of one scenario.

Two ns-3 runs of the same scenario that differ only in the compute-jitter draw
(:func:`netlab.validate.sanity.replicate`) are close under deep Reno and DCQCN, but under DCTCP and shallow Reno they
are p90 13-29% apart per contended job on 8:1 components (``referee.json`` ``sanity.noise``). A deterministic model
scored against one draw cannot do better than about that spread over sqrt 2 there; the referee's best estimate of
what a model should predict is the mean over draws. This module turns several draws' records into that estimate (per
job: the mean iteration time and the mean time alone, over the draws that have the job), the draws' own spread, and
scores the models' unchanged predictions against it (:func:`netlab.validate.compare.compare_jobs`, so ``heavy`` is
the *mean's* slowdown >= 2x).

Heavy jobs are chosen by the referee's own slowdown (>= 2x), so a job whose draw happened to be slow (a timeout,
an unlucky window) is both chosen and, against that same draw, under-predicted: the heavy-job bias read on one draw
carries a selection bias of the draw's own noise. :func:`cross_heavy` reads it without that: heavy by one draw,
the error against another, independent one.

Nothing here fits anything: it changes the reference a model is scored against, never a model.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import pandas as pd

from .compare import compare_jobs
from .scenario import RefereeScenario

#: (steady iteration s per job id, iteration alone s per job id) of one draw (:func:`netlab.validate.runs.record_times`)
Draw = tuple[Mapping[int, float], Mapping[int, float]]


def mean_of_draws(draws: Sequence[Draw]) -> tuple[dict[int, float], dict[int, float], dict[int, int]]:
    """Per job id: the mean steady iteration time and the mean time alone over the draws that measured the job, and
    how many draws did. A job missing from one draw (the referee gave it no steady window there) is averaged over the
    others, never counted as zero; its count says so."""
    if not draws:
        raise ValueError("no draws to average")
    jobs = sorted({j for it, _ in draws for j in it})
    iter_s, alone_s, count = {}, {}, {}
    for j in jobs:
        its = [it[j] for it, _ in draws if j in it]
        alones = [al[j] for _, al in draws if j in al]
        iter_s[j] = sum(its) / len(its)
        if alones:
            alone_s[j] = sum(alones) / len(alones)
        count[j] = len(its)
    return iter_s, alone_s, count


def draw_spread(draws: Sequence[Draw]) -> dict[int, float]:
    """Per job id in the first draw: the largest ``|later draw / first draw - 1|`` of its steady iteration time over
    the later draws that measured it (with two draws, ``referee.json`` ``sanity.noise``'s per-job measure). Jobs
    that no later draw measured are left out."""
    first = draws[0][0]
    out = {}
    for j, a in first.items():
        later = [it[j] for it, _ in draws[1:] if j in it]
        if later:
            out[j] = max(abs(b / a - 1.0) for b in later)
    return out


def rescore(sc: RefereeScenario, rows: pd.DataFrame, ref_iter_s: Mapping[int, float],
            ref_alone_s: Mapping[int, float]) -> pd.DataFrame:
    """``rows`` (:func:`compare_jobs` of the models against one draw) compared again against another reference: the
    models' own iteration times (``iter_s``, ``cpu_s``) unchanged, everything referee-side (slowdown, heavy, errors)
    recomputed from ``ref_iter_s`` / ``ref_alone_s``."""
    preds = rows[[c for c in ("model", "job_id", "iter_s", "cpu_s") if c in rows.columns]].reset_index(drop=True)
    out = compare_jobs(sc, dict(ref_iter_s), dict(ref_alone_s), preds)
    for c in ("family", "seed", "half", "regime"):
        if c in rows.columns:
            out[c] = rows[c].iloc[0]
    return out


def cross_heavy(per_draw: Sequence[pd.DataFrame]) -> pd.DataFrame:
    """The heavy-job bias without its selection bias: for every ordered pair of different draws (i, k), draw ``k``'s
    rows (:func:`compare_jobs` against draw k: its ``signed`` error) with ``heavy`` as draw ``i`` classified the job.

    A job that one draw slows 2x by its noise alone is then judged against a draw whose noise is independent of the
    choice, so the median signed error over these rows' heavy jobs measures the model, not the draw's luck. With one
    draw there is no pair: an empty frame. ``per_draw``: one frame per draw, the same (model, job) rows in each (the
    first draw's rows and :func:`rescore` of them against each later draw). A job a draw did not measure is not
    heavy by it and has no error against it (NaN, left out of the medians).
    """
    frames = []
    for i, chooser in enumerate(per_draw):
        chosen = chooser[["model", "job_id", "heavy"]].rename(columns={"heavy": "heavy_by"})
        for k, scored in enumerate(per_draw):
            if k == i:
                continue
            r = scored.drop(columns="heavy").merge(chosen, on=["model", "job_id"], how="left")
            r["heavy"] = r.pop("heavy_by").fillna(False).astype(bool)
            r["chosen_by"], r["scored_on"] = i, k
            frames.append(r)
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()
