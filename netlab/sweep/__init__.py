"""Declarative sweeps: a grid of configurations, one simulation per cell, a resumable store.

>>> res = run_sweep({"trace": "philly-sample", "max_jobs": 50,
...                  "grid": {"policy": ["fifo", "tiresias"], "seed": [0, 1]}}, progress=False)
>>> len(res.summary)
4

* :mod:`.grid`: the grid document, cell ids and per-cell seeds;
* :mod:`.cell`: one simulation, a pure function workers can run;
* :mod:`.store`: the results directory (manifest, per-cell files, atomic writes);
* :mod:`.backends`: serial, processes, Dask;
* :mod:`.runner`: :func:`run_sweep`, :func:`load_sweep`, :func:`list_sweeps`.
"""

from .backends import BACKENDS, Backend
from .cell import TIMING_COLUMNS, CellResult, Outcome, execute, run_cell
from .grid import Cell, GridError, demo_grid, expand, read_grid
from .runner import SweepResult, list_sweeps, load_sweep, run_sweep
from .store import Store, StoreError

__all__ = ["BACKENDS", "Backend", "Cell", "CellResult", "GridError", "Outcome", "Store", "StoreError",
           "SweepResult", "TIMING_COLUMNS", "demo_grid", "execute", "expand", "list_sweeps", "load_sweep",
           "read_grid", "run_cell", "run_sweep"]
