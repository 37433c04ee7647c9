"""How much of its communication a model hides behind compute, measured from step times: the zoo's ``overlap``.

Data-parallel training (PyTorch DDP, Li et al., VLDB 2020) all-reduces
gradient buckets while the backward pass still runs, so part of the
communication costs no time. netlab's iteration-time rule (one place:
:func:`netlab.network.model.iteration_time`) says how much::

    iter = compute + comm - overlap x min(compute, comm)

A measured profile gives, for one placement, the step time at several
per-GPU batch sizes and the single-GPU step time at the same batch sizes
(the compute: one GPU has nothing to all-reduce). Their difference is the
exposed communication ``E(b) = comm - overlap x min(compute(b), comm)``.
The gradient bytes, hence ``comm``, do not depend on the batch, while
``compute(b)`` does, so a placement measured at several batch sizes pins both
unknowns: :func:`fit_placement` finds the ``(overlap, comm_s)`` pair with the
least squared error on a grid (0.01 in overlap; comm on a log grid). A model's
overlap is the median over its multi-host placements (:func:`model_overlap`);
the benchmark ``benchmarks/bench_overlap.py`` derives it from the Pollux
profiles on one half of the placements and scores it on the other.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

#: the overlap grid (0..1 by 0.01) and the communication grid (seconds, log-spaced) of the least-squares fit
OVERLAP_GRID = np.linspace(0.0, 1.0, 101)
COMM_GRID_S = np.geomspace(1e-4, 100.0, 600)


class PlacementFit(NamedTuple):
    overlap: float  # share of min(compute, comm) hidden
    comm_s: float  # communication seconds per iteration on that placement (batch-independent)
    rms_s: float  # root-mean-square error of the fitted exposed time


def exposed_s(compute_s, comm_s: float, overlap: float):
    """Exposed communication: iteration time less compute under the iteration-time rule."""
    return comm_s - overlap * np.minimum(compute_s, comm_s)


def fit_placement(compute_s, step_s) -> PlacementFit:
    """Least-squares ``(overlap, comm_s)`` for one placement: ``compute_s`` and ``step_s`` at the same batch sizes
    (at least two distinct compute times; otherwise overlap and communication cannot be told apart)."""
    compute = np.asarray(compute_s, dtype=float)
    exposed = np.asarray(step_s, dtype=float) - compute
    if compute.shape != exposed.shape or len(np.unique(compute)) < 2:
        raise ValueError("fit_placement needs step and compute times at two or more batch sizes")
    o = OVERLAP_GRID[:, None, None]
    x = COMM_GRID_S[None, :, None]
    err = ((x - o * np.minimum(compute[None, None, :], x)) - exposed[None, None, :]) ** 2
    sse = err.sum(axis=2)
    i, k = np.unravel_index(int(np.argmin(sse)), sse.shape)
    return PlacementFit(float(OVERLAP_GRID[i]), float(COMM_GRID_S[k]), float(np.sqrt(sse[i, k] / len(compute))))


def fit_comm(compute_s, step_s, overlap: float) -> float:
    """The communication seconds that best explain one placement's step times at a given ``overlap``."""
    compute = np.asarray(compute_s, dtype=float)
    exposed = np.asarray(step_s, dtype=float) - compute
    sse = ((exposed_s(compute[None, :], COMM_GRID_S[:, None], overlap) - exposed[None, :]) ** 2).sum(axis=1)
    return float(COMM_GRID_S[int(np.argmin(sse))])


def profile_fits(profile) -> "pd.DataFrame":  # noqa: F821
    """Per multi-host placement of a Pollux-style profile (columns ``placement`` (a digit per host: its GPUs),
    ``local_bsz``, ``step_time``), the fit of :func:`fit_placement`, its compute taken from placement ``1``."""
    import pandas as pd

    df = profile.assign(placement=profile.placement.astype(str))
    single = df[df.placement == "1"].groupby("local_bsz").step_time.mean()
    rows = []
    for placement, g in df[df.placement.str.len() > 1].groupby("placement", sort=True):
        g = g[g.local_bsz.isin(single.index)]
        if g.local_bsz.nunique() < 2:
            continue
        compute = single[g.local_bsz].to_numpy()
        fit = fit_placement(compute, g.step_time.to_numpy())
        rows.append(dict(placement=placement, hosts=len(placement), points=len(g), **fit._asdict()))
    return pd.DataFrame(rows, columns=["placement", "hosts", "points", "overlap", "comm_s", "rms_s"])


def model_overlap(fits) -> float:
    """A model's overlap: the median of its placements' fits, rounded to the grid's 0.01."""
    return round(float(np.median(fits.overlap)), 2)
