"""Synthetic Poisson workloads, for controlled sweeps (load, size mix) without a real trace.

Arrivals are a Poisson process; GPUs are drawn from powers of two (1, 2, 4,
...) with the given weights, truncated to the cluster; durations are lognormal
(``duration_median_s``, ``duration_sigma``); models are drawn from ``models``.
In a spec string both lists are ``+``-joined: ``gpus=0+0.3+0.4+0.3,models=vgg16+bert-base``.
With ``load``, the arrival rate is chosen so that the mean offered work,
``rate * E[gpus] * E[duration_s]`` GPU-seconds per second, equals
``load * cluster_gpus``; ``E[gpus]`` is over every job, LLM jobs included, so
the load asked for is the load the trace offers (:func:`offered_load` measures
it on the rows). ``cluster_gpus`` is the cluster the trace is sized for: a trace
spec run on a topology (``netlab simulate --trace synthetic,...``) defaults it to
the topology's GPUs (:func:`netlab.traces.load_trace`'s ``cluster_gpus``), else
64; :func:`fit_warning` says when a trace meets a cluster far from its size.
Each of arrivals, sizes, durations and models has its own stream from
``SeedSequence(seed).spawn(5)``, so changing one (say the model mix) leaves
the others unchanged.

``llm`` (0..1) makes that share of jobs large-model training runs: each such
job (chosen by the fifth stream) takes an LLM from ``llm_models`` (default:
every zoo model with an LLM shape), the ``3d`` pattern and ``tp x pp x dp``
GPUs, ``dp`` a power of two up to the published run's, drawn evenly among the
sizes that fit the cluster (:mod:`netlab.workload.llm`). Its arrival and
duration are the ones the job would have had; its GPUs count in the load.

:func:`poisson_chunks` yields the same trace in pieces of ``chunk_jobs`` rows
(a million-job trace need never be one DataFrame); every stream is drawn in
order, so the pieces concatenate to exactly :func:`poisson_trace`'s rows.
"""

from __future__ import annotations

from typing import Annotated, Optional, Union

import numpy as np
import pandas as pd
from pydantic import BeforeValidator, Field

from ..errors import Float, Int, checked
from .files import register
from .reader import MAX_ROWS
from .schema import COLUMNS, TraceError, finish

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


def _llm_mix(llm_models, cluster_gpus: int):
    """(names, sizes per name) of the LLMs that fit ``cluster_gpus`` at dp=1; a TraceError if none."""
    from ..workload.zoo import ModelZoo

    zoo = ModelZoo.default()
    llms = [n for n in zoo.names() if zoo[n].llm is not None]
    chosen = list(llm_models) or llms
    bad = [m for m in chosen if m not in llms]
    if bad:
        raise TraceError(f"synthetic: field 'llm_models': {bad} are not LLM zoo models (allowed: {', '.join(llms)})")
    names, sizes = [], []
    for name in chosen:
        shape = zoo[name].llm
        dps = 2 ** np.arange(int(np.log2(shape.published_dp)) + 1)
        fit = shape.model_parallel * dps[shape.model_parallel * dps <= cluster_gpus]
        if len(fit):
            names.append(name)
            sizes.append(fit)
    if not names:
        raise TraceError(f"synthetic: field 'llm_models': none of {chosen} fits cluster_gpus={cluster_gpus} "
                         "even at dp=1 (tp x pp GPUs)")
    return names, sizes


@checked(TraceError, "synthetic")
def poisson_chunks(jobs: Int(ge=1, le=MAX_ROWS) = 200, load: Optional[Positive] = None,
                   rate_per_h: Optional[Positive] = None, gpus: Weights = GPU_WEIGHTS,
                   duration_median_s: Positive = 3600.0, duration_sigma: Float(ge=0, le=10) = 1.5,
                   models: Models = MODELS, seed: Int(ge=0, le=2**63 - 1) = 0,
                   cluster_gpus: Int(ge=1, le=2**31 - 1) = 64, llm: Float(ge=0, le=1) = 0.0,
                   llm_models: Annotated[tuple[str, ...], BeforeValidator(_split_plus)] = (),
                   chunk_jobs: Int(ge=1, le=MAX_ROWS) = MAX_ROWS):
    """The synthetic trace as DataFrames of at most ``chunk_jobs`` rows, in submit order (module docstring).

    Chunks carry the schema's columns with absolute ``submit_s`` (the first job at 0); their ``attrs`` hold
    ``rate_per_h``. Parameters are checked before the first chunk: a bad one is a TraceError.
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
    llm_names, llm_sizes = _llm_mix(llm_models, cluster_gpus) if llm > 0 else ([], [])
    if rate_per_h is None:
        load = 0.8 if load is None else load
        mean_gpus = weights @ sizes
        if llm > 0:  # an LLM job's model is drawn evenly, then its size evenly among those that fit (_make_llm)
            mean_gpus = (1 - llm) * mean_gpus + llm * np.mean([np.mean(fit) for fit in llm_sizes])
        mean_work_gpu_s = mean_gpus * np.exp(mu + duration_sigma ** 2 / 2)
        rate_per_s = load * cluster_gpus / mean_work_gpu_s
    else:
        rate_per_s = rate_per_h / 3600.0
    names, probs = _model_mix(models)
    return _chunks(jobs, chunk_jobs, rate_per_s, sizes, weights, mu, duration_sigma, names, probs, llm, llm_names,
                   llm_sizes, seed, cluster_gpus)


def _chunks(jobs, chunk_jobs, rate_per_s, sizes, weights, mu, sigma, names, probs, llm, llm_names, llm_sizes, seed,
            cluster_gpus):
    streams = np.random.SeedSequence(seed).spawn(5)  # the first four are what spawn(4) gave before "llm" existed
    arrivals, size_rng, dur_rng, model_rng, llm_rng = (np.random.default_rng(s) for s in streams)
    clock, first_gap = 0.0, None
    for start in range(0, jobs, chunk_jobs):
        n = min(chunk_jobs, jobs - start)
        gaps_s = arrivals.exponential(1.0 / rate_per_s, size=n)
        if first_gap is None:
            first_gap = gaps_s[0]
        # one running sum over every chunk, in the order np.cumsum would add a single array
        submit = np.cumsum(np.concatenate(([clock], gaps_s)))[1:]
        clock = submit[-1]
        df = pd.DataFrame({
            "job_id": [f"syn-{i:05d}" for i in range(start, start + n)],
            "submit_s": submit - first_gap,
            "gpus": size_rng.choice(sizes, size=n, p=weights),
            "model": model_rng.choice(names, size=n, p=probs).astype(str),
            "duration_s": dur_rng.lognormal(mu, sigma, size=n),
        })
        if llm > 0:
            _make_llm(df, llm_rng, llm, llm_names, llm_sizes)
        else:
            df["pattern"] = "ring"
        df["iterations"], df["source"] = np.nan, "synthetic"
        df = df[list(COLUMNS)]
        if not np.isfinite(df["submit_s"]).all():
            raise TraceError(f"synthetic: arrivals overflow (rate {rate_per_s * 3600:g} per hour): raise load or "
                             "rate_per_h")
        df.attrs["rate_per_h"] = float(rate_per_s * 3600.0)
        df.attrs["cluster_gpus"] = int(cluster_gpus)
        yield df


def _make_llm(df: pd.DataFrame, rng, share: float, names: list, sizes: list) -> None:
    """Turn a ``share`` of ``df``'s rows into LLM jobs, in place (draws: which rows, which model, which size)."""
    n = len(df)
    u = rng.random((n, 3))  # three draws per row, row by row: chunks of any size draw the same numbers
    which = u[:, 0] < share
    pick = np.minimum((u[:, 1] * len(names)).astype(np.int64), len(names) - 1)
    size_draw = u[:, 2]
    idx = np.flatnonzero(which)
    model = df["model"].to_numpy(dtype=object).copy()
    gpus = df["gpus"].to_numpy().copy()
    pattern = np.full(n, "ring", dtype=object)
    for i in idx:
        fits = sizes[pick[i]]
        model[i] = names[pick[i]]
        gpus[i] = fits[int(size_draw[i] * len(fits))]
        pattern[i] = "3d"
    df["model"], df["gpus"], df["pattern"] = model.astype(str), gpus, pattern.astype(str)


def poisson_trace(**params) -> pd.DataFrame:
    """A schema DataFrame of ``jobs`` Poisson arrivals; ``load`` (default 0.8) or ``rate_per_h``.

    Parameters are :func:`poisson_chunks`'s (checked against its signature: a bad one is a TraceError).
    """
    chunks = list(poisson_chunks(**params))
    df = chunks[0] if len(chunks) == 1 else pd.concat(chunks, ignore_index=True)
    attrs = dict(chunks[0].attrs)
    df = finish(df, "synthetic", "<generated>")
    df.attrs.update(attrs)
    return df


def offered_load(df: pd.DataFrame, cluster_gpus: int) -> float | None:
    """The load a trace offers a cluster of ``cluster_gpus`` GPUs: its jobs' GPU-seconds (``gpus x duration_s``)
    per second of its arrival window, per GPU. None if that is unknown (no durations, a single arrival time)."""
    work = (df["gpus"] * df["duration_s"]).to_numpy(dtype=float)
    span = float(df["submit_s"].max() - df["submit_s"].min()) if len(df) else 0.0
    if not span > 0 or not np.isfinite(work).any():
        return None
    return float(np.nansum(work) / span / cluster_gpus)


#: a trace sized for a cluster more than this many times smaller or larger than the topology draws a warning
FIT_RATIO = 2.0


def fit_warning(df: pd.DataFrame, cluster_gpus: int) -> str | None:
    """A warning if ``df`` was generated for a cluster far from ``cluster_gpus`` GPUs (a trace that does not
    record the cluster it was sized for gets none), else None."""
    sized = df.attrs.get("cluster_gpus")
    if not sized or 1 / FIT_RATIO <= cluster_gpus / sized <= FIT_RATIO:
        return None
    offered = offered_load(df, cluster_gpus)
    there = f"; it offers load {offered:.3g} there" if offered is not None else ""
    return (f"the trace was sized for a {sized:,}-GPU cluster and runs on {cluster_gpus:,} GPUs{there}: give "
            f"cluster_gpus={cluster_gpus} in a synthetic spec (or leave it out: it defaults to the topology's GPUs)")


@register("synthetic", "<generated>", needs_shared=False)
@checked(TraceError, "synthetic", skip=("trace_dir", "seed", "skip_bad", "jobs", "load", "rate_per_h",
                                        "duration_median_s", "duration_sigma", "models", "cluster_gpus", "gpus",
                                        "llm", "llm_models"))
def synthetic(trace_dir=None, *, seed: int = 0, skip_bad: bool = False, jobs: int = 200, load: float | None = None,
              rate_per_h: float | None = None, duration_median_s: float = 3600.0, duration_sigma: float = 1.5,
              models=MODELS, cluster_gpus: int | None = None, gpus=GPU_WEIGHTS, llm: float = 0.0,
              llm_models=()) -> pd.DataFrame:
    """Poisson arrivals, power-of-two GPU counts, lognormal durations (load= or rate_per_h=); llm= share of LLM jobs.

    ``cluster_gpus``: the cluster the load is for (default: the topology's GPUs when run on one, else 64)."""
    return poisson_trace(jobs=jobs, load=load, rate_per_h=rate_per_h, gpus=gpus, duration_median_s=duration_median_s,
                         duration_sigma=duration_sigma, models=models, seed=seed,
                         cluster_gpus=64 if cluster_gpus is None else cluster_gpus, llm=llm, llm_models=llm_models)
