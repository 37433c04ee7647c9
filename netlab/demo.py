"""The main job (``netlab demo``): the demo sweep, its table and verdicts on stdout, its report folder."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from .report import comparison, comparison_table, pick_baseline, print_table, print_verdicts, readable_table
from .report import render_report


def policy_grid(policies, trace="philly-sample", topology=None, oversub=None, seeds: int | None = None, max_jobs=None,
                ideal: bool = True, name: str = "policies", regimes=None) -> dict:
    """The main job's sweep (:func:`netlab.sweep.demo_grid`) with other policies: ``policies`` as (ordering,
    placement) pairs (placement None: the policy's own) or (ordering, placement, network policy) triples, every one
    on the same jobs per seed, in each of ``regimes`` (default :data:`netlab.sweep.grid.DEMO_REGIMES`)."""
    from .sweep import demo_grid
    from .sweep.grid import DEMO_OVERSUB, DEMO_REGIMES, DEMO_SEEDS, DEMO_TOPOLOGY

    grid = demo_grid(trace=trace, max_jobs=max_jobs, topology=topology or DEMO_TOPOLOGY, seeds=seeds or DEMO_SEEDS,
                     ideal=ideal, oversub=tuple(oversub or DEMO_OVERSUB), regimes=tuple(regimes or DEMO_REGIMES))
    grid["grid"]["scheduler"] = [_scheduler(*entry) for entry in policies]
    return dict(grid, name=name)


def _scheduler(ordering, placement=None, netpolicy=None) -> dict:
    """One entry of the grid's ``scheduler`` axis (placement None: the ordering's own; netpolicy None: none)."""
    out = dict(policy=ordering)
    if placement is not None:
        out["placement"] = placement
    if netpolicy not in (None, "none"):
        out["netpolicy"] = netpolicy
    return out


def demo_report(out, trace="philly-sample", topology=None, seeds: int | None = None, max_jobs=None, backend="processes",
                workers=None, ideal: bool = True, progress: bool | None = True, oversub=None,
                baseline: str | None = None, regimes=None, **backend_options) -> Path:
    """The demo sweep (:func:`netlab.sweep.demo_grid`: classic and network-aware schedulers, congested leaf-spine in
    each transport regime of ``regimes`` (default :data:`netlab.sweep.grid.DEMO_REGIMES`: the default network's
    and the rate-fair one), ideal network once per scheduler and seed) into the store ``out``; the summary table,
    the answer and the verdicts against ``baseline`` (default :data:`netlab.sweep.grid.DEMO_BASELINE`), each
    naming the regime it was computed for, on stdout; the report folder ``out/report``. Returns its
    ``report.html``. The process backend runs the first cell in this process first (numba compiles once, the
    workers load its cache)."""
    from .sweep import demo_grid, expand, run_sweep
    from .sweep.grid import DEMO_BASELINE, DEMO_OVERSUB, DEMO_REGIMES, DEMO_SEEDS, DEMO_TOPOLOGY

    seeds = seeds or DEMO_SEEDS
    regimes = tuple(regimes or DEMO_REGIMES)
    grid = demo_grid(trace=trace, max_jobs=max_jobs, topology=topology or DEMO_TOPOLOGY, seeds=seeds, ideal=ideal,
                     oversub=tuple(oversub or DEMO_OVERSUB), regimes=regimes)
    labels = pd.DataFrame({"label": sorted({c.label for c in expand(grid)})})
    base = pick_baseline(labels, baseline or DEMO_BASELINE)  # a bad --baseline fails here, before anything runs
    if backend == "processes":
        backend_options.setdefault("warm_up", True)
    res = run_sweep(grid, out=out, backend=backend, progress=progress, workers=workers, **backend_options)
    oversubs = ", ".join(f"{o:g}:1" for o in (oversub or DEMO_OVERSUB))
    print_table(readable_table(comparison_table(res.summary), columns=None),
                f"\ntrace={trace} topology={grid['topology']} oversub={oversubs} regimes={', '.join(regimes)} "
                f"(+ ideal network) seeds={seeds} "
                f"cells={len(res.summary)} failed={len(res.errors)} (mean ± sd over seeds)")
    print_verdicts(comparison(res.summary, base))
    return render_report(res, baseline=base)
