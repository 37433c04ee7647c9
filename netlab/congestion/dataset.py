"""Slowdown datasets: simulator rows with the registry's placement styles, parquet persistence.

The rows themselves (schema, randomised co-locations, the network model's
exact iteration times) are built in :mod:`netlab.slowdown.samples`, below the
policy layer, so the ``predictive`` placement can fit its default model
without reaching the simulator; this module feeds it the registered placement
policies and reads/writes datasets. Testbed rows (same columns) come from
:mod:`netlab.congestion.testbed_data`.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from ..fileio import atomic_write
from ..policies import PLACEMENT
from ..slowdown.samples import check_frame
from ..slowdown import samples as _samples
from ..workload.zoo import ModelZoo


def experiment_rows(topo, rng, experiment_id: int, max_jobs: int = 16, prefill: tuple[float, float] = (0.0, 0.6),
                    zoo: ModelZoo | None = None, models=None) -> list[dict]:
    """:func:`netlab.slowdown.samples.experiment_rows` with the registered placement policies."""
    return _samples.experiment_rows(topo, rng, experiment_id, PLACEMENT.create, max_jobs, prefill, zoo, models)


def simulator_dataset(topology, n_experiments: int = 200, seed: int = 0, max_jobs: int = 16,
                      prefill: tuple[float, float] = (0.0, 0.6), zoo: ModelZoo | None = None,
                      models=None) -> pd.DataFrame:
    """``n_experiments`` randomised co-locations on ``topology`` (a Topology, a spec, or a list:
    one is drawn per experiment), in the dataset schema; see :func:`netlab.slowdown.samples.simulator_dataset`.
    """
    return _samples.simulator_dataset(topology, PLACEMENT.create, n_experiments, seed, max_jobs, prefill, zoo, models)


def save_dataset(df: pd.DataFrame, path) -> Path:
    """Parquet, written atomically (a reader never sees half a file)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    check_frame(df)
    atomic_write(path, lambda tmp: df.to_parquet(tmp, index=False))
    return path


def load_dataset(path) -> pd.DataFrame:
    return check_frame(pd.read_parquet(path))
