"""The results store: one directory per sweep, resumable after any crash.

Layout::

    DIR/manifest.json                configuration, versions, git commit, seeds, cells, runs (start/end)
    DIR/grid.yaml                    the grid document, to re-run: netlab sweep DIR/grid.yaml --out DIR
    DIR/cells/<id>.jobs.parquet      per-job rows of a finished cell
    DIR/cells/<id>.links.parquet     per-link rows (only for cells that keep them)
    DIR/cells/<id>.summary.json      written LAST: its presence marks the cell complete
    DIR/cells/<id>.error.json        a failed cell's error and traceback (retried on re-run)

Every file is written to a temporary name and renamed into place, so a
reader never sees a partial file and a cell appears at most once whatever
moment a SIGKILL lands: a cell without its summary is simply not done and
its files are overwritten on the next run. Stray temporary files of a killed
run are removed before a run starts. Only the driver process writes,
so workers need no shared file system.
"""

from __future__ import annotations

import json
import subprocess
from datetime import datetime, timezone
from importlib import metadata
from pathlib import Path

import pandas as pd
import yaml

from ..sim.metrics import atomic_write
from .cell import Outcome
from .grid import Cell, short_hash

FORMAT = 1
PACKAGES = ("netlab-sched", "numpy", "pandas", "scipy", "pyarrow", "networkx", "sortedcontainers", "matplotlib",
            "seaborn", "pyyaml", "tqdm", "dask", "distributed")


class StoreError(RuntimeError):
    """The directory holds a different sweep, or is not a sweep store."""


def now_iso() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds")


def _json_default(value):
    return value.item() if hasattr(value, "item") else str(value)


def _write_json(path: Path, obj) -> None:
    text = json.dumps(obj, indent=1, default=_json_default)
    atomic_write(path, lambda p: Path(p).write_text(text))


def git_commit() -> str | None:
    """The commit of the checkout netlab runs from (with ``-dirty``), or None outside git."""
    here = Path(__file__).resolve().parents[2]
    try:
        head = subprocess.run(["git", "-C", str(here), "rev-parse", "HEAD"], capture_output=True, text=True,
                              timeout=5)
        if head.returncode != 0:
            return None
        dirty = subprocess.run(["git", "-C", str(here), "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, timeout=5).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    return head.stdout.strip() + ("-dirty" if dirty else "")


def package_versions() -> dict:
    import platform

    out = {"python": platform.python_version(), "platform": platform.platform()}
    for name in PACKAGES:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = None
    return out


def records(outcome: Outcome, at: str | None = None) -> tuple[dict | None, dict | None]:
    """(summary record, error record), one of them None: JSON-ready, saying which cell, seeds, where, how long."""
    cell = outcome.cell
    record = dict(cell_id=cell.id, label=cell.label, params=cell.params, workload_seed=cell.workload_seed,
                  sim_seed=cell.sim_seed, cell_s=outcome.seconds, worker=outcome.worker, at=at or now_iso())
    if outcome.ok:
        return record | dict(summary=outcome.result.summary), None
    return None, record | dict(error=outcome.error, traceback=outcome.traceback)


class MemoryStore:
    """The store's interface without a directory, for sweeps a notebook runs and throws away.

    Records take the same JSON round trip as on disk, so both give equal frames.
    """

    root = None

    def __init__(self):
        self.summaries, self.errors, self.jobs, self.links = {}, {}, {}, {}

    def done_ids(self) -> set[str]:
        return set(self.summaries)

    def error_ids(self) -> set[str]:
        return set(self.errors)

    def write(self, outcome: Outcome, written_at: str | None = None) -> None:
        ok, err = records(outcome, written_at)
        cid = outcome.cell.id
        if err is not None:
            self.errors[cid] = json.loads(json.dumps(err, default=_json_default))
            return
        self.jobs[cid] = outcome.result.jobs
        if outcome.result.links is not None:
            self.links[cid] = outcome.result.links
        self.summaries[cid] = json.loads(json.dumps(ok, default=_json_default))
        self.errors.pop(cid, None)

    def read_summary(self, cell_id: str) -> dict:
        return self.summaries[cell_id]

    def read_error(self, cell_id: str) -> dict:
        return self.errors[cell_id]

    def read_jobs(self, cell_id: str) -> pd.DataFrame:
        return self.jobs[cell_id]

    def read_links(self, cell_id: str) -> pd.DataFrame | None:
        return self.links.get(cell_id)


class Store:
    """A sweep directory (see the module docstring)."""

    def __init__(self, root):
        self.root = Path(root)
        self.cells_dir = self.root / "cells"

    @property
    def manifest_path(self) -> Path:
        return self.root / "manifest.json"

    def _path(self, cell_id: str, kind: str) -> Path:
        return self.cells_dir / f"{cell_id}.{kind}"

    def clean(self) -> None:
        """Create the layout and remove temporary files a killed run left (only before running)."""
        self.cells_dir.mkdir(parents=True, exist_ok=True)
        for folder in (self.root, self.cells_dir):
            for stray in folder.glob(".*.tmp"):
                stray.unlink(missing_ok=True)

    # ------------------------------------------------------------ manifest
    def read_manifest(self) -> dict:
        if not self.manifest_path.exists():
            raise StoreError(f"{self.root}: no manifest.json (not a sweep directory)")
        return json.loads(self.manifest_path.read_text())

    def begin(self, doc: dict, cells: list[Cell], backend: str) -> dict:
        """Create or reopen the manifest and append this run. A different grid in the same directory is an error."""
        config_hash = short_hash(doc)
        if self.manifest_path.exists():
            manifest = self.read_manifest()
            if manifest.get("config_hash") != config_hash:
                raise StoreError(f"{self.root} holds a different sweep ({manifest.get('name')!r}, config "
                                 f"{manifest.get('config_hash')}); use another output directory")
        else:
            manifest = dict(
                format=FORMAT, name=doc.get("name") or self.root.name, config=doc, config_hash=config_hash,
                base_seed=doc.get("base_seed", 0),
                seeding="workload: SeedSequence(base_seed, spawn_key=(seed, 0)); simulation: "
                        "SeedSequence(base_seed, spawn_key=(seed, 1, hash of the cell's other parameters))",
                created_at=now_iso(), started_at=None, ended_at=None,
                cells=[dict(id=c.id, label=c.label, params=c.params, workload_seed=c.workload_seed,
                            sim_seed=c.sim_seed, keep_links=c.keep_links) for c in cells],
                runs=[])
            text = yaml.safe_dump(doc, sort_keys=False)
            atomic_write(self.root / "grid.yaml", lambda p: Path(p).write_text(text))
        started = now_iso()
        manifest.update(netlab_version=_netlab_version(), git_commit=git_commit(), packages=package_versions(),
                        started_at=manifest.get("started_at") or started, ended_at=None)
        manifest["runs"].append(dict(started_at=started, ended_at=None, backend=backend, cells=len(cells)))
        _write_json(self.manifest_path, manifest)
        return manifest

    def end(self, manifest: dict, **stats) -> dict:
        manifest["runs"][-1].update(ended_at=now_iso(), **stats)
        manifest["ended_at"] = manifest["runs"][-1]["ended_at"]
        _write_json(self.manifest_path, manifest)
        return manifest

    # --------------------------------------------------------------- cells
    def done_ids(self) -> set[str]:
        """Cells whose summary (the last file written) is present."""
        return {p.name[: -len(".summary.json")] for p in self.cells_dir.glob("*.summary.json")}

    def error_ids(self) -> set[str]:
        return {p.name[: -len(".error.json")] for p in self.cells_dir.glob("*.error.json")}

    def write(self, outcome: Outcome, written_at: str | None = None) -> None:
        """Per-job (and per-link) tables first, the summary last; a failure writes only its error record."""
        ok, err = records(outcome, written_at)
        cid = outcome.cell.id
        if err is not None:
            _write_json(self._path(cid, "error.json"), err)
            return
        res = outcome.result
        atomic_write(self._path(cid, "jobs.parquet"), lambda p: res.jobs.to_parquet(p, index=False))
        if res.links is not None:
            atomic_write(self._path(cid, "links.parquet"), lambda p: res.links.to_parquet(p, index=False))
        _write_json(self._path(cid, "summary.json"), ok)
        self._path(cid, "error.json").unlink(missing_ok=True)

    def read_summary(self, cell_id: str) -> dict:
        return json.loads(self._path(cell_id, "summary.json").read_text())

    def read_error(self, cell_id: str) -> dict:
        return json.loads(self._path(cell_id, "error.json").read_text())

    def read_jobs(self, cell_id: str) -> pd.DataFrame:
        return pd.read_parquet(self._path(cell_id, "jobs.parquet"))

    def read_links(self, cell_id: str) -> pd.DataFrame | None:
        path = self._path(cell_id, "links.parquet")
        return pd.read_parquet(path) if path.exists() else None


def _netlab_version() -> str:
    from .. import __version__

    return __version__
