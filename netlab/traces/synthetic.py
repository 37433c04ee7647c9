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

from typing import Annotated, Optional, Union

import numpy as np
import pandas as pd
from pydantic import BeforeValidator, Field

from ..errors import Float, Int, checked
from .files import register
from .reader import MAX_ROWS
from .schema import TraceError, finish

GPU_WEIGHTS = (0.55, 0.10, 0.15, 0.12, 0.05, 0.03)  # for 1, 2, 4, 8, 16, 32 GPUs
MODELS = ("resnet18", "resnet50", "vgg16", "bert-base", "transformer", "deepspeech2")


def _split_plus(value):
    """Spec strings give lists as ``a+b+c``."""
    return value.split("+") if isinstance(value, str) else value


#: weights for 1, 2, 4, ... GPUs (at most 2**20 GPUs)
Weights = Annotated[tuple[Float(ge=0, le=1e12), ...], BeforeValidator(_split_plus),
                    Field(min_length=1, max_length=21, description="1 to 21 weights >= 0 for 1, 2, 4, ... GPUs, "
                                                                   "'+'-joined in a spec string")]
#: model names (equal weights) or name -> weight
Models = Annotated[Union[dict[str, Float(ge=0, le=1e12)], tuple[str, ...]], BeforeValidator(_split_plus),
                   Field(description="zoo model names, '+'-joined in a spec string, or a mapping name -> weight")]
Positive = Float(gt=0, le=1e12)


def _model_mix(models) -> tuple[np.ndarray, np.ndarray]:
    """Names and probabilities from a dict (name -> weight), a sequence, or ``"a+b+c"``."""
    if isinstance(models, str):
        models = models.split("+")
    if not isinstance(models, dict):
        models = {m: 1.0 for m in models}
    names = np.array(list(models), dtype=object)
    weights = np.array(list(models.values()), dtype=float)
    return names, weights / weights.sum()


@checked(TraceError, "synthetic")
def poisson_trace(jobs: Int(ge=1, le=MAX_ROWS) = 200, load: Optional[Positive] = None,
                  rate_per_h: Optional[Positive] = None, gpus: Weights = GPU_WEIGHTS,
                  duration_median_s: Positive = 3600.0, duration_sigma: Float(ge=0, le=10) = 1.5,
                  models: Models = MODELS, seed: Int(ge=0, le=2**63 - 1) = 0,
                  cluster_gpus: Int(ge=1, le=2**31 - 1) = 64) -> pd.DataFrame:
    """A schema DataFrame of ``jobs`` Poisson arrivals; ``load`` (default 0.8) or ``rate_per_h``.

    Parameters are checked against this signature (:func:`netlab.errors.checked`): a bad one is a TraceError.
    """
    from ..workload.zoo import ModelZoo

    if load is not None and rate_per_h is not None:
        raise TraceError("synthetic: give load or rate_per_h, not both")
    zoo = ModelZoo.default().names()
    unknown = [m for m in models if m not in zoo]
    if unknown:
        raise TraceError(f"synthetic: field 'models': unknown model(s) {unknown} (allowed: {', '.join(zoo)})")
    if isinstance(models, dict) and not sum(models.values()) > 0:
        raise TraceError("synthetic: field 'models': the weights must not all be 0")
    if not models:
        raise TraceError(f"synthetic: field 'models': empty (allowed: {', '.join(zoo)})")
    sizes = 2 ** np.arange(len(gpus))
    weights = np.where(sizes <= cluster_gpus, np.asarray(gpus, dtype=float), 0.0)
    if weights.sum() <= 0:
        raise TraceError(f"synthetic: field 'gpus': no GPU size with positive weight fits cluster_gpus={cluster_gpus}")
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
    if not np.isfinite(df["submit_s"]).all():
        raise TraceError(f"synthetic: arrivals overflow (rate {rate_per_s * 3600:g} per hour): raise load or "
                         "rate_per_h")
    df = finish(df, "synthetic", "<generated>")
    df.attrs["rate_per_h"] = float(rate_per_s * 3600.0)
    return df


@register("synthetic", "<generated>", needs_shared=False)
@checked(TraceError, "synthetic", skip=("trace_dir", "seed", "skip_bad", "jobs", "load", "rate_per_h",
                                        "duration_median_s", "duration_sigma", "models", "cluster_gpus", "gpus"))
def synthetic(trace_dir=None, *, seed: int = 0, skip_bad: bool = False, jobs: int = 200, load: float | None = None,
              rate_per_h: float | None = None, duration_median_s: float = 3600.0, duration_sigma: float = 1.5,
              models=MODELS, cluster_gpus: int = 64, gpus=GPU_WEIGHTS) -> pd.DataFrame:
    """Poisson arrivals, power-of-two GPU counts, lognormal durations (load= or rate_per_h=)."""
    return poisson_trace(jobs=jobs, load=load, rate_per_h=rate_per_h, gpus=gpus, duration_median_s=duration_median_s,
                         duration_sigma=duration_sigma, models=models, seed=seed, cluster_gpus=cluster_gpus)
