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
from typing import TYPE_CHECKING

from ..run import RunParams, load_frame, run_one
from .grid import Cell

if TYPE_CHECKING:
    import pandas as pd

#: columns of the per-cell summary that measure the machine, not the model
TIMING_COLUMNS = ("wall_s", "cell_s", "worker")


@dataclass
class CellResult:
    jobs: "pd.DataFrame"
    summary: dict
    links: "pd.DataFrame | None" = None


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


#: traces are read once per worker process and seed (every policy of a replicate shares it)
_trace = functools.lru_cache(maxsize=8)(load_frame)


def _flat(summary: dict) -> dict:
    """Scalar summary values; the per-tier byte counts become ``bytes_<tier>`` columns."""
    out = {k: v for k, v in summary.items() if not isinstance(v, dict)}
    out.update({f"bytes_{tier}": v for tier, v in summary.get("tier_bytes", {}).items()})
    # the simulator's own names for what the cell already says (placement name, seed) would clash
    for key in ("ordering", "placement", "preemption", "netpolicy", "migration", "network", "topology", "seed"):
        out.pop(key, None)
    return out


def run_cell(cell: Cell) -> CellResult:
    """Simulate one cell (:func:`netlab.run.run_one` with the cell's derived workload and simulation seeds)."""
    p = dict(cell.params)
    del p["base_seed"]
    p.pop("regime", None)  # expand() set the regime's network beside it
    params = RunParams(**p | dict(seed=cell.sim_seed, workload_seed=cell.workload_seed))
    res = run_one(params, load=_trace)
    summary = _flat(res.summary) | {"preemption_policy": res.summary["preemption"],
                                    "placement_used": res.summary["placement"]}
    return CellResult(res.jobs, summary, res.links if cell.keep_links else None)


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
