"""Synthetic Poisson workloads, for controlled sweeps (load, size mix) without a real trace.

Arrivals are a Poisson process; GPUs are drawn from powers of two (1, 2, 4,
...) with the given weights, truncated to the cluster; durations are lognormal
(``duration_median_s``, ``duration_sigma``); models are drawn from ``models``.
In a spec string both lists are ``+``-joined: ``gpus=0+0.3+0.4+0.3,models=vgg16+bert-base``.
With ``load``, the arrival rate is chosen so that the mean offered work,
``rate * E[gpus] * E[duration_s]`` GPU-seconds per second, equals
``load * cluster_gpus``. Each of arrivals, sizes, durations and models has its
own stream from ``SeedSequence(seed).spawn(4)``, so changing one (say the
model mix) leaves the others unchanged.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from .files import register
from .schema import finish

GPU_WEIGHTS = (0.55, 0.10, 0.15, 0.12, 0.05, 0.03)  # for 1, 2, 4, 8, 16, 32 GPUs
MODELS = ("resnet18", "resnet50", "vgg16", "bert-base", "transformer", "deepspeech2")


def _model_mix(models) -> tuple[np.ndarray, np.ndarray]:
    """Names and probabilities from a dict (name -> weight), a sequence, or ``"a+b+c"``."""
    if isinstance(models, str):
        models = models.split("+")
    if not isinstance(models, dict):
        models = {m: 1.0 for m in models}
    names = np.array(list(models), dtype=object)
    weights = np.array(list(models.values()), dtype=float)
    return names, weights / weights.sum()


def poisson_trace(jobs: int = 200, load: float | None = None, rate_per_h: float | None = None,
                  gpus=GPU_WEIGHTS, duration_median_s: float = 3600.0, duration_sigma: float = 1.5,
                  models=MODELS, seed: int = 0, cluster_gpus: int = 64) -> pd.DataFrame:
    """A schema DataFrame of ``jobs`` Poisson arrivals; ``load`` (default 0.8) or ``rate_per_h``."""
    if load is not None and rate_per_h is not None:
        raise ValueError("synthetic: give load or rate_per_h, not both")
    if isinstance(gpus, str):  # spec strings give weights as "w1+w2+w4+..."
        gpus = tuple(float(w) for w in gpus.split("+"))
    sizes = 2 ** np.arange(len(gpus))
    weights = np.where(sizes <= cluster_gpus, np.asarray(gpus, dtype=float), 0.0)
    if weights.sum() <= 0:
        raise ValueError(f"synthetic: no GPU size with positive weight fits cluster_gpus={cluster_gpus}")
    weights /= weights.sum()
    mu = np.log(duration_median_s)
    if rate_per_h is None:
        load = 0.8 if load is None else load
        mean_work_gpu_s = (weights @ sizes) * np.exp(mu + duration_sigma ** 2 / 2)
        rate_per_s = load * cluster_gpus / mean_work_gpu_s
    else:
        rate_per_s = rate_per_h / 3600.0
    names, probs = _model_mix(models)
    arrivals, size_rng, dur_rng, model_rng = (np.random.default_rng(s) for s in np.random.SeedSequence(seed).spawn(4))
    gaps_s = arrivals.exponential(1.0 / rate_per_s, size=jobs)
    df = pd.DataFrame({
        "job_id": [f"syn-{i:05d}" for i in range(jobs)],
        "submit_s": np.cumsum(gaps_s) - gaps_s[0] if jobs else gaps_s,
        "gpus": size_rng.choice(sizes, size=jobs, p=weights),
        "model": model_rng.choice(names, size=jobs, p=probs).astype(str),
        "duration_s": dur_rng.lognormal(mu, duration_sigma, size=jobs),
    })
    df = finish(df, "synthetic", "<generated>")
    df.attrs["rate_per_h"] = float(rate_per_s * 3600.0)
    return df


@register("synthetic", "<generated>", needs_shared=False)
def synthetic(trace_dir=None, *, seed: int = 0, skip_bad: bool = False, jobs: int = 200, load: float | None = None,
              rate_per_h: float | None = None, duration_median_s: float = 3600.0, duration_sigma: float = 1.5,
              models=MODELS, cluster_gpus: int = 64, gpus=GPU_WEIGHTS) -> pd.DataFrame:
    """Poisson arrivals, power-of-two GPU counts, lognormal durations (load= or rate_per_h=)."""
    return poisson_trace(jobs=jobs, load=load, rate_per_h=rate_per_h, gpus=gpus, duration_median_s=duration_median_s,
                         duration_sigma=duration_sigma, models=models, seed=seed, cluster_gpus=cluster_gpus)
