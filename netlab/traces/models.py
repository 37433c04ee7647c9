"""Seeded model assignment for traces that record no model (Philly, ITP, Alibaba).

Rule ``"gpu-hours"`` (default), after Pollux's workload generator, which picks an
application from the job's GPU-time bucket: a job's size in GPU-hours
(``gpus * duration_s / 3600``) says roughly how heavy its model is. Buckets:

* under 1 GPU-hour: ``resnet18``, ``mobilenet``, ``shufflenet``;
* 1 to 100 GPU-hours: ``resnet50``, ``bert-base``, ``transformer``, ``deepspeech2``;
* 100 GPU-hours or more: ``vgg16``, ``bert-large``, ``gpt2-xl``.

Rule ``"uniform"``: every job draws from all the models above.

Within its bucket a job's model is drawn uniformly, one uniform number per row
in row order from ``numpy.random.default_rng(SeedSequence(seed))``. The same
seed and rows give the same models; the seed is the only knob, so a sweep over
seeds is a sweep over model mixes. The draw is not a fact about the trace.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

SMALL = ("resnet18", "mobilenet", "shufflenet")
MEDIUM = ("resnet50", "bert-base", "transformer", "deepspeech2")
LARGE = ("vgg16", "bert-large", "gpt2-xl")

#: rule -> [(upper GPU-hour bound of the bucket, models in it)], buckets in increasing order
RULES: dict[str, list[tuple[float, tuple[str, ...]]]] = {
    "gpu-hours": [(1.0, SMALL), (100.0, MEDIUM), (np.inf, LARGE)],
    "uniform": [(np.inf, SMALL + MEDIUM + LARGE)],
}


def assign_models(df: pd.DataFrame, seed: int = 0, rule: str = "gpu-hours") -> pd.DataFrame:
    """A copy of ``df`` (needs ``gpus`` and ``duration_s``) with a seeded ``model`` column."""
    try:
        buckets = RULES[rule]
    except KeyError:
        raise KeyError(f"unknown model-assignment rule {rule!r}; known: {', '.join(RULES)}") from None
    gpu_hours = df["gpus"].to_numpy(float) * df["duration_s"].to_numpy(float) / 3600.0
    bounds = np.array([b for b, _ in buckets])
    bucket = np.minimum(np.searchsorted(bounds, gpu_hours, side="right"), len(buckets) - 1)
    u = np.random.default_rng(np.random.SeedSequence(seed)).random(len(df))
    model = np.empty(len(df), dtype=object)
    for k, (_, names) in enumerate(buckets):
        rows = bucket == k
        model[rows] = np.asarray(names, dtype=object)[(u[rows] * len(names)).astype(int)]
    out = df.copy()
    out["model"] = model.astype(str)
    return out
