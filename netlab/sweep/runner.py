"""Run a sweep, load a stored one, list stored ones.

:func:`run_sweep` expands the grid, skips the cells the store already has,
hands the rest to a backend, writes every outcome as it arrives (so a kill
loses only the cells in flight) and returns the frames read back from the
store: what a run returns and what :func:`load_sweep` returns later are the
same by construction, and ordered by the grid, not by completion, so every
backend gives the same frames.
"""

from __future__ import annotations

import sys
import time
import warnings
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from ..network.model import ideal_networks
from ..procguard import stop_signals_unwind
from ..run import tag_jobs
from .backends import BACKENDS, Backend
from .grid import DEFAULTS, NETWORK_PARAMS, OPTIONAL, Cell, expand, grid_source, read_grid
from .store import MemoryStore, Store, StoreError

PARAM_COLUMNS = tuple(DEFAULTS)


@dataclass
class SweepResult:
    jobs: pd.DataFrame  # one row per job per finished cell; the cell's parameters as columns (placement_policy)
    summary: pd.DataFrame  # one row per finished cell (+ jct_vs_ideal when the grid has network=ideal)
    links: pd.DataFrame  # per-link rows of the cells that keep them
    errors: pd.DataFrame  # one row per failed cell, with its traceback
    manifest: dict | None = None
    path: Path | None = None

    @property
    def ok(self) -> bool:
        return self.errors.empty


def _tags(cell: Cell) -> dict:
    return dict(cell_id=cell.id, label=cell.label, **cell.params)


def add_ideal_ratio(summary: pd.DataFrame) -> pd.DataFrame:
    """``jct_vs_ideal``: a cell's average JCT over the same cell's on the ideal network."""
    if summary.empty or "network" not in summary or not (ideal := summary.network.isin(ideal_networks())).any():
        return summary
    # optional parameters a grid sets are part of the match too (else batch and trace-time cells would pair up)
    keys = [c for c in PARAM_COLUMNS + tuple(OPTIONAL) if c not in NETWORK_PARAMS and c in summary]
    if "oversub" in keys and summary.loc[ideal, "oversub"].isna().all():
        keys.remove("oversub")  # ideal cells without an oversub (non-blocking: it cannot matter) pair with every one
    ideal = summary.loc[ideal, keys + ["avg_jct_s"]].rename(columns={"avg_jct_s": "_ideal"})
    merged = summary.merge(ideal, on=keys, how="left")
    summary = summary.copy()
    summary["jct_vs_ideal"] = (merged.avg_jct_s / merged._ideal).to_numpy()
    return summary


def assemble(cells: list[Cell], source) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """(jobs, summary, links, errors) from a store, in grid order."""
    done, failed = source.done_ids(), source.error_ids()
    jobs, rows, links, errors = [], [], [], []
    for cell in cells:
        tags = _tags(cell)
        if cell.id in done:
            rec = source.read_summary(cell.id)
            rows.append(tags | dict(workload_seed=rec["workload_seed"], sim_seed=rec["sim_seed"], **rec["summary"],
                                    cell_s=rec["cell_s"], worker=rec["worker"]))
            jobs.append(tag_jobs(source.read_jobs(cell.id), tags))  # the job's hosts stay its 'placement'
            cell_links = source.read_links(cell.id)
            if cell_links is not None:
                links.append(cell_links.assign(**tags))
        elif cell.id in failed:
            rec = source.read_error(cell.id)
            errors.append(tags | {k: rec[k] for k in ("error", "traceback", "worker", "at")})

    def frame(parts, concat):
        return (pd.concat(parts, ignore_index=True) if concat else pd.DataFrame(parts)) if parts else pd.DataFrame()

    summary = add_ideal_ratio(frame(rows, False))
    return frame(jobs, True), summary, frame(links, True), frame(errors, False)


def _progress(iterable, total: int, initial: int, enabled: bool | None):
    from ..progress import tqdm

    return tqdm(iterable, total=total, initial=initial, desc="cells", unit="cell",
                disable=None if enabled is None else not enabled, smoothing=0.1)


def run_sweep(grid, out=None, backend: str | Backend | None = None, progress: bool | None = True,
              max_cells: int | None = None, **backend_options) -> SweepResult:
    """Run every cell of ``grid`` (dict, YAML path or text) not yet in ``out``; return the frames.

    ``backend``: "serial", "processes", "dask" or a :class:`Backend` instance;
    by default "dask" when ``client``, ``cluster`` or ``address`` is given, else
    "serial". ``out=None`` keeps everything in memory (nothing is resumable).
    Failing cells never stop the sweep: see ``result.errors``. A grid over
    ``max_cells`` cells (default: ``NETLAB_MAX_CELLS`` or 10,000) is refused.
    """
    doc = read_grid(grid)
    cells = expand(doc, grid_source(grid), max_cells)  # the whole grid is checked here, before anything is written
    if backend is None:
        dask_given = any(backend_options.get(k) is not None for k in ("client", "cluster", "address"))
        backend = "dask" if dask_given else "serial"
    if isinstance(backend, str):
        BACKENDS.get(backend)  # an unknown backend fails here, before the store is created
    if out is None:
        return _run(cells, MemoryStore(), None, backend, progress, backend_options)
    store = Store(out)
    # one run at a time, and only in a new folder or a store: a second run or a foreign folder fails here,
    # before anything is touched
    with store.lock():
        manifest = store.begin(doc, cells, backend if isinstance(backend, str) else backend.name)
        store.clean()
        run = manifest["runs"][-1]
        strays = store.strays([c.id for c in cells])
        if strays:  # files of no cell of this sweep: set aside (renamed, not deleted), as --check reports them
            where = store.set_aside_strays(strays)
            run["set_aside_stray"] = dict(files=[p.name for p in strays], moved_to=str(where))
            warnings.warn(f"{store.root}: {len(strays)} file(s) in cells/ belong to no cell of this sweep; set "
                          f"aside in {where}", stacklevel=2)
        stale = sorted(store.done_ids()) if run["previous_code_hash"] != run["code_hash"] else []
        if stale:  # computed by other code: set aside (renamed, not deleted) and computed again below
            where = store.set_aside(stale, why="stale")
            run["set_aside_stale"] = dict(cells=len(stale), moved_to=str(where), code_hash=run["previous_code_hash"])
            warnings.warn(f"{store.root}: {len(stale)} finished cell(s) were computed by other netlab code (source "
                          f"hash {run['previous_code_hash'] or 'not recorded'}, now {run['code_hash']}); set aside in "
                          f"{where} and computed again, so the result does not mix two versions", stacklevel=2)
        stored = store.done_ids() | store.error_ids()
        corrupt = store.corrupt_cells([c.id for c in cells if c.id in stored])
        if corrupt:  # set aside (renamed, not deleted) and computed again below
            where = store.set_aside(corrupt)
            manifest["runs"][-1]["set_aside"] = dict(cells=corrupt, moved_to=str(where))
            for cid, why in corrupt.items():
                warnings.warn(f"{store.root}: cell {cid} was corrupt ({why}); set aside in {where} and recomputed",
                              stacklevel=2)
        return _run(cells, store, manifest, backend, progress, backend_options)


def _run(cells, store, manifest, backend, progress, backend_options) -> SweepResult:
    done = store.done_ids()
    todo = [c for c in cells if c.id not in done]
    if progress is not False:  # the size of the run, before it starts
        where = f" in {store.root}" if store.root is not None else ""
        print(f"sweep: {len(cells):,} cells{where}, {len(cells) - len(todo):,} already stored, {len(todo):,} to run",
              file=sys.stderr, flush=True)
    t0 = time.perf_counter()
    ran = failed = 0
    cell_s = 0.0
    if todo:
        runner = BACKENDS.create(backend, **backend_options) if isinstance(backend, str) else backend
        owned = isinstance(backend, str)  # a backend handed in stays open for its owner
        try:
            with stop_signals_unwind(), \
                    _progress(runner.run(todo), len(cells), len(cells) - len(todo), progress) as bar:
                for outcome in bar:
                    store.write(outcome)
                    ran += 1
                    failed += not outcome.ok
                    cell_s += outcome.seconds
                    if failed:
                        bar.set_postfix(failed=failed, refresh=False)
        except BaseException:  # a store error, Ctrl-C, SIGTERM: stop the cells in flight, do not wait for them
            if owned:
                runner.abort()
            raise
        if owned:
            runner.close()
    if manifest is not None:
        manifest = store.end(manifest, ran=ran, failed=failed, skipped=len(cells) - len(todo),
                             wall_s=time.perf_counter() - t0, cells_s=cell_s)
    jobs, summary, links, errors = assemble(cells, store)
    return SweepResult(jobs, summary, links, errors, manifest, store.root)


@dataclass
class StoreCheck:
    """What ``netlab results DIR --check`` finds: every stored cell read back in full against its hashes."""

    path: Path
    stored: int  # cells of the sweep with a summary or an error record
    corrupt: dict  # cell id -> why it cannot be read back
    strays: list  # paths in cells/ that belong to no cell of the sweep

    @property
    def ok(self) -> bool:
        return not self.corrupt and not self.strays


def check_store(path) -> StoreCheck:
    """Read back every stored cell of the sweep at ``path``; list the corrupt ones and the stray files.

    :func:`repair_store` fixes exactly what this reports, so the two never disagree.
    """
    store = Store(path)
    ids = [c["id"] for c in store.read_manifest()["cells"]]
    stored = sorted(set(ids) & (store.done_ids() | store.error_ids()))
    return StoreCheck(store.root, len(stored), store.corrupt_cells(stored), store.strays(ids))


def repair_store(path) -> tuple[StoreCheck, SweepResult | None]:
    """Set aside what :func:`check_store` reports (never deleted) and compute those cells again.

    Returns the check and the resumed run (None when there was nothing to repair).
    """
    check = check_store(path)
    if check.ok:
        return check, None
    with warnings.catch_warnings():  # the run's warnings say what the caller prints from the manifest
        warnings.simplefilter("ignore")
        return check, run_sweep(Store(path).read_manifest()["config"], out=path, progress=False)


def _cells_of(manifest: dict) -> list[Cell]:
    return [Cell(c["id"], c["params"], c["workload_seed"], c["sim_seed"], c.get("keep_links", False), c["label"])
            for c in manifest["cells"]]


def load_sweep(path) -> SweepResult:
    """The frames of a stored sweep (finished cells only; failed ones in ``errors``)."""
    store = Store(path)
    manifest = store.read_manifest()
    jobs, summary, links, errors = assemble(_cells_of(manifest), store)
    return SweepResult(jobs, summary, links, errors, manifest, store.root)


def list_sweeps(root=".", depth: int = 3) -> pd.DataFrame:
    """One row per sweep directory under ``root`` (a manifest.json at most ``depth`` levels down)."""
    root = Path(root)
    found = [root / "manifest.json"] + [p for d in range(1, depth + 1) for p in root.glob("/".join(["*"] * d)
                                                                                             + "/manifest.json")]
    rows, seen = [], set()
    for path in found:
        if not path.is_file() or path.resolve() in seen:  # symlinked folders list a sweep once
            continue
        seen.add(path.resolve())
        store = Store(path.parent)
        try:
            m = store.read_manifest()
            ids = {c["id"] for c in m["cells"]}
        except (StoreError, ValueError, KeyError):
            continue
        runs = m.get("runs", [])
        rows.append(dict(path=str(path.parent), name=m.get("name"), cells=len(ids),
                         done=len(ids & store.done_ids()), failed=len(ids & store.error_ids() - store.done_ids()),
                         runs=len(runs), backend=runs[-1]["backend"] if runs else None,
                         started_at=m.get("started_at"), ended_at=m.get("ended_at"),
                         netlab=m.get("netlab_version"),
                         commit=(m.get("git_commit") or "")[:12] + ("-dirty" if "dirty" in str(m.get("git_commit")) else "")))
    return pd.DataFrame(rows, columns=["path", "name", "cells", "done", "failed", "runs", "backend", "started_at",
                                       "ended_at", "netlab", "commit"])
