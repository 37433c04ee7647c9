"""One cell = one simulation, as a pure top-level function so processes and Dask can pickle it.

:func:`run_cell` raises on error; :func:`execute` never does: it returns an
:class:`Outcome` carrying either the result or the traceback, so a failing
cell is recorded instead of killing the sweep, identically on every backend.
"""

from __future__ import annotations

import functools
import os
import socket
import time
import traceback
from dataclasses import dataclass

import pandas as pd

from .grid import Cell, topology_spec

#: columns of the per-cell summary that measure the machine, not the model
TIMING_COLUMNS = ("wall_s", "cell_s", "worker")


@dataclass
class CellResult:
    jobs: pd.DataFrame
    summary: dict
    links: pd.DataFrame | None = None


@dataclass
class Outcome:
    cell: Cell
    result: CellResult | None = None
    error: str | None = None  # "Type: message"
    traceback: str | None = None
    seconds: float = 0.0
    worker: str = ""

    @property
    def ok(self) -> bool:
        return self.result is not None


@functools.lru_cache(maxsize=8)
def _trace(trace: str, seed: int, max_jobs: int | None) -> pd.DataFrame:
    """Traces are read once per worker process and seed (every policy of a replicate shares it)."""
    from ..traces import load_trace

    return load_trace(trace, seed=seed, max_jobs=max_jobs)


def _flat(summary: dict) -> dict:
    """Scalar summary values; the per-tier byte counts become ``bytes_<tier>`` columns."""
    out = {k: v for k, v in summary.items() if not isinstance(v, dict)}
    out.update({f"bytes_{tier}": v for tier, v in summary.get("tier_bytes", {}).items()})
    # the simulator's own names for what the cell already says (placement name, seed) would clash
    for key in ("ordering", "placement", "preemption", "netpolicy", "network", "topology", "seed"):
        out.pop(key, None)
    return out


def run_cell(cell: Cell) -> CellResult:
    """Simulate one cell. Per-job rows keep the job's hosts as ``allocation`` (``placement`` is the policy)."""
    from ..sim import SimConfig, Simulator
    from ..topology import load_topology
    from ..workload.job import jobs_from_frame

    p = cell.params
    topo = load_topology(topology_spec(p))
    background = float(p.get("background", 0.0))
    if background:  # steady traffic that does not back off occupies this share of every fabric link
        topo = topo.with_capacity({t: 1.0 - background for t in set(topo.link_tier) if t != "host"})
    frame = _trace(p["trace"], cell.workload_seed, p["max_jobs"])
    if p.get("batch"):  # the same jobs, all submitted at once (their order kept by job id)
        frame = frame.assign(submit_s=0.0)
    jobs = jobs_from_frame(frame, topo)
    cfg = SimConfig(network=p["network"], seed=cell.sim_seed, checkpoint_s=p["checkpoint_s"],
                    restore_s=p["restore_s"], backfill=p["backfill"])
    res = Simulator(topo, jobs, p["policy"], p["placement"], p["preemption"], cfg,
                    netpolicy=p.get("netpolicy", "none")).run()
    summary = _flat(res.summary) | {"preemption_policy": res.summary["preemption"],
                                    "placement_used": res.summary["placement"]}
    return CellResult(res.jobs.rename(columns={"placement": "allocation"}), summary,
                      res.links if cell.keep_links else None)


def execute(cell: Cell) -> Outcome:
    """Run a cell and capture any exception with its traceback."""
    worker = f"{socket.gethostname()}:{os.getpid()}"
    t0 = time.perf_counter()
    try:
        result = run_cell(cell)
    except Exception as exc:  # noqa: BLE001  (recorded, never swallowed silently)
        return Outcome(cell, None, f"{type(exc).__name__}: {exc}", traceback.format_exc(),
                       time.perf_counter() - t0, worker)
    return Outcome(cell, result, seconds=time.perf_counter() - t0, worker=worker)
