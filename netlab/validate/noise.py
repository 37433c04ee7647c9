"""How much of a model's error against the referee is the referee's own draw-to-draw noise, and how much the model's.

Why: under shallow-buffer Reno one referee run of a scenario is p90 ~20% per contended job from the next run
that differs only in its compute-jitter draw (a retransmission timeout of 200 ms lands in one run's steady window
and not in the other's). A deterministic model scored against one draw pays that noise on top of its own error, so
its p90 against one draw says little about the model until the two parts are told apart. With ``N`` draws of each
scenario (:func:`netlab.validate.sanity.replicate`) they can be:

* per job, the draws give ``y_k = log(model slowdown x draw k's time alone / draw k's iteration time)``, the log of
  one plus the signed error against draw ``k``: their mean ``ybar`` is the error against the draws' (geometric)
  centre, and their sample variance ``s2`` the referee's noise in it;
* **the referee's floor** (:func:`referee_floor`): what a *perfect* model, one predicting every job's centre over
  infinitely many draws, would score against one draw: the APE of each draw about its job's centre, its spread
  corrected for the centre being estimated from the same ``N`` draws (x ``sqrt(N / (N - 1))``);
* **the model's part** (:func:`model_part`): per job ``ybar ** 2`` over-states the squared model error by the noise
  left in a mean of ``N`` draws, ``s2 / N``; ``sqrt(max(ybar ** 2 - s2 / N, 0))`` is the de-noised error (its
  expectation is right for the squares, a single job's value stays noisy: read it as a distribution);
* **against the mean of k draws** (:func:`against_k_draws`), k = 1..N, every k-subset of the draws: how the score
  falls as the reference is averaged, the shape the two parts predict;
* **persistent misses** (:func:`persistent`): the jobs off by more than a threshold against the first draw that are
  off by more than it, the same way, against every draw: the model's, whatever the draw.

Nothing here changes a model or fits anything: it reads one model's unchanged predictions against several draws.
"""

from __future__ import annotations

from itertools import combinations
from collections.abc import Sequence

import numpy as np
import pandas as pd

#: an APE above this against one draw is a miss (the issue's p90 target)
MISS = 0.15


def log_errors(per_draw: Sequence[pd.DataFrame]) -> pd.DataFrame:
    """One row per contended job measured by every draw: ``y0..y{N-1}`` (``log(1 + signed)`` against each draw,
    the rows of :func:`netlab.validate.compare.compare_jobs` of one model, one frame per draw, ``scenario`` and
    ``job_id`` naming the job), their mean ``ybar`` and sample variance ``s2`` (ddof 1), and ``n`` draws."""
    n = len(per_draw)
    if n < 2:
        raise ValueError("need at least two draws to tell the referee's noise from the model's error")
    keys = ["scenario", "job_id"]
    frames = [d.loc[d.contended, keys + ["signed"]].rename(columns={"signed": f"s{k}"}) for k, d in
              enumerate(per_draw)]
    out = frames[0]
    for f in frames[1:]:
        out = out.merge(f, on=keys, how="inner")
    y = np.log1p(out[[f"s{k}" for k in range(n)]].to_numpy(dtype=float))
    out = out[keys].copy()
    for k in range(n):
        out[f"y{k}"] = y[:, k]
    out["ybar"], out["s2"], out["n"] = y.mean(axis=1), y.var(axis=1, ddof=1), n
    return out.reset_index(drop=True)


def _summary(ape: np.ndarray) -> dict:
    ape = np.asarray(ape, dtype=float)
    return dict(n=int(len(ape)), median_ape=float(np.median(ape)), p90_ape=float(np.quantile(ape, 0.9)),
                max_ape=float(ape.max()))


def referee_floor(e: pd.DataFrame) -> dict:
    """What a perfect deterministic model scores against one draw (module doc): over every (job, draw), the APE
    ``|exp((y_k - ybar) x sqrt(N / (N - 1))) - 1|``."""
    n = int(e.n.iloc[0])
    y = e[[f"y{k}" for k in range(n)]].to_numpy(dtype=float)
    dev = (y - e.ybar.to_numpy()[:, None]) * np.sqrt(n / (n - 1))
    return _summary(np.abs(np.expm1(dev)).ravel())


def model_part(e: pd.DataFrame) -> dict:
    """The model's own error with the noise left in the mean of the draws taken out (module doc): per job
    ``|exp(sign(ybar) x sqrt(max(ybar ** 2 - s2 / N, 0))) - 1|``; ``raw``: the same without the correction (the
    APE against the draws' geometric centre)."""
    d2 = np.maximum(e.ybar ** 2 - e.s2 / e.n, 0.0)
    own = np.abs(np.expm1(np.sign(e.ybar) * np.sqrt(d2)))
    return dict(_summary(own), raw=_summary(np.abs(np.expm1(e.ybar))))


def against_k_draws(e: pd.DataFrame) -> dict:
    """Per k = 1..N: the median / p90 APE against the centre of k draws (``exp(mean of their y) - 1``), the mean over
    every k-subset of the N draws (each subset's p90 over the jobs, then averaged)."""
    n = int(e.n.iloc[0])
    y = e[[f"y{k}" for k in range(n)]].to_numpy(dtype=float)
    out = {}
    for k in range(1, n + 1):
        subsets = [_summary(np.abs(np.expm1(y[:, list(c)].mean(axis=1)))) for c in combinations(range(n), k)]
        out[k] = dict(subsets=len(subsets), median_ape=float(np.mean([s["median_ape"] for s in subsets])),
                      p90_ape=float(np.mean([s["p90_ape"] for s in subsets])))
    return out


def persistent(e: pd.DataFrame, miss: float = MISS) -> dict:
    """Of the jobs whose APE against the first draw exceeds ``miss``: how many exceed it with the same sign against
    every draw (the model's misses whatever the draw), and how many against the draws' centre."""
    n = int(e.n.iloc[0])
    lo, hi = np.log1p(-miss), np.log1p(miss)
    y = e[[f"y{k}" for k in range(n)]].to_numpy(dtype=float)
    first = (y[:, 0] > hi) | (y[:, 0] < lo)
    every = (y > hi).all(axis=1) | (y < lo).all(axis=1)
    centre = (e.ybar.to_numpy() > hi) | (e.ybar.to_numpy() < lo)
    return dict(miss=miss, jobs=int(len(e)), missed_on_first_draw=int(first.sum()),
                of_them_missed_on_every_draw=int((first & every).sum()),
                of_them_missed_on_the_centre=int((first & centre).sum()),
                missed_on_every_draw=int(every.sum()))


def noise_split(per_draw: Sequence[pd.DataFrame], miss: float = MISS) -> dict:
    """The whole reading for one model's rows against ``N`` draws (module doc)."""
    e = log_errors(per_draw)
    return dict(draws=len(per_draw), contended_jobs=int(len(e)), referee_floor=referee_floor(e),
                model_part=model_part(e), against_k_draws=against_k_draws(e), persistent=persistent(e, miss))
