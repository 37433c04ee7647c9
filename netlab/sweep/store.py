"""The results store: one directory per sweep, resumable after any crash.

Layout::

    DIR/manifest.json                configuration, versions, git commit, seeds, cells, runs (start/end)
    DIR/grid.yaml                    the grid document, to re-run: netlab sweep DIR/grid.yaml --out DIR
    DIR/cells/<id>.jobs.parquet      per-job rows of a finished cell
    DIR/cells/<id>.links.parquet     per-link rows (only for cells that keep them)
    DIR/cells/<id>.summary.json      written LAST: its presence marks the cell complete
    DIR/cells/<id>.error.json        a failed cell's error and traceback (retried on re-run)
    DIR/.lock, DIR/.lock.holder      one run at a time: a file lock and who holds it (pid, host, since)
    DIR/corrupt/<time>/...           cell files found unreadable, set aside (never deleted); the cell is re-run
    DIR/stale/<time>/...             cells computed by other netlab code, set aside the same way on resume

Every file is written to a temporary name and renamed into place, so a
reader never sees a partial file and a cell appears at most once whatever
moment a SIGKILL lands: a cell without its summary is simply not done and
its files are overwritten on the next run. Stray temporary files of a killed
run are removed before a run starts. Only the driver process writes,
so workers need no shared file system. Every write is fsynced (file, then
directory). A run holds the store's lock (:meth:`Store.lock`) from before it
cleans until it ends: a second run on the same directory fails at once naming
the holder, and never touches the first one's files.

A cell file that cannot be read back (a disk fault, a copy cut short) is
found by :meth:`Store.corrupt_cells`; :meth:`Store.set_aside` moves the cell's
files to ``DIR/corrupt/`` so a re-run computes it again (``netlab results DIR
--repair``; a resumed run does both itself).

Cells are resumed only if the same code computed them: the manifest records a
hash of netlab's source files (:func:`code_hash`), and a run whose code differs
sets every finished cell aside in ``DIR/stale/`` and computes it again, so one
result never mixes two versions of the simulator (a model change between runs
would otherwise leave the old cells' numbers in place without a sign).
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import os
import socket
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
    """The directory holds a different sweep, is not a sweep store, is in use, or holds a corrupt cell."""


class StoreBusy(StoreError):
    """Another run holds the store's lock."""


class CorruptCell(StoreError):
    """A stored cell file cannot be read back."""

    def __init__(self, root, cell_id: str, file: str, reason: str):
        self.cell_id, self.file, self.reason = cell_id, file, reason
        super().__init__(f"{root}: cell {cell_id} is corrupt: {file}: {reason}; run `netlab results {root} "
                         f"--repair` (or re-run the sweep) to set it aside and recompute it")


#: the kinds of file a cell can have, the summary last (it marks the cell complete)
CELL_FILES = ("jobs.parquet", "links.parquet", "error.json", "summary.json")


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

    @property
    def lock_path(self) -> Path:
        return self.root / ".lock"

    @property
    def holder_path(self) -> Path:
        return self.root / ".lock.holder"

    def holder(self) -> dict | None:
        """Who holds (or last held) the lock, as it wrote: pid, host, since; None if unknown."""
        try:
            return json.loads(self.holder_path.read_text())
        except (OSError, ValueError):
            return None

    @contextlib.contextmanager
    def lock(self):
        """Hold the store for one run (creates the directory). Raises :class:`StoreBusy` at once if another
        process holds it, naming the store and the holder; nothing else in the store is touched then."""
        from filelock import FileLock, Timeout

        self.root.mkdir(parents=True, exist_ok=True)
        flock = FileLock(str(self.lock_path), timeout=0)
        try:
            flock.acquire()
        except Timeout:
            who = self.holder()
            desc = (f"pid {who.get('pid')} on {who.get('host')}, since {who.get('since')}" if who
                    else "another process (it has not yet written its pid)")
            raise StoreBusy(f"{self.root}: the sweep store is in use by {desc}; wait for that run to end or "
                            f"use another --out (lock: {self.lock_path})") from None
        try:
            _write_json(self.holder_path, dict(pid=os.getpid(), host=socket.gethostname(), since=now_iso()))
            yield self
        finally:
            self.holder_path.unlink(missing_ok=True)
            flock.release()

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
        previous = manifest.get("code_hash")  # None: none recorded (a new store, or one older than the hash)
        manifest.update(netlab_version=_netlab_version(), git_commit=git_commit(), packages=package_versions(),
                        code_hash=code_hash(), started_at=manifest.get("started_at") or started, ended_at=None)
        manifest["runs"].append(dict(started_at=started, ended_at=None, backend=backend, cells=len(cells),
                                     code_hash=manifest["code_hash"], previous_code_hash=previous))
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

    def _read(self, cell_id: str, kind: str, read):
        """``read(path)``; a file that cannot be read back is a :class:`StoreError` naming the cell and file."""
        path = self._path(cell_id, kind)
        try:
            return read(path)
        except Exception as exc:  # noqa: BLE001 - pyarrow, json and the OS each have their own errors
            raise CorruptCell(self.root, cell_id, path.name, f"{type(exc).__name__}: {exc}") from None

    def read_summary(self, cell_id: str) -> dict:
        return self._read(cell_id, "summary.json", lambda p: _json_object(p))

    def read_error(self, cell_id: str) -> dict:
        return self._read(cell_id, "error.json", lambda p: _json_object(p))

    def read_jobs(self, cell_id: str) -> pd.DataFrame:
        return self._read(cell_id, "jobs.parquet", pd.read_parquet)

    def read_links(self, cell_id: str) -> pd.DataFrame | None:
        path = self._path(cell_id, "links.parquet")
        return self._read(cell_id, "links.parquet", pd.read_parquet) if path.exists() else None

    # -------------------------------------------------------- check/repair
    def check_cell(self, cell_id: str) -> str | None:
        """Why a stored cell cannot be read back (every file read in full), or None if it can."""
        try:
            if cell_id in self.done_ids():
                self.read_summary(cell_id)
                self.read_jobs(cell_id)
                self.read_links(cell_id)
            elif self._path(cell_id, "error.json").exists():
                self.read_error(cell_id)
        except CorruptCell as exc:
            return f"{exc.file}: {exc.reason}"
        return None

    def corrupt_cells(self, cell_ids=None) -> dict[str, str]:
        """{cell id: reason} of the finished or failed cells that cannot be read back."""
        ids = sorted(self.done_ids() | self.error_ids()) if cell_ids is None else cell_ids
        found = {}
        for cid in ids:
            why = self.check_cell(cid)
            if why is not None:
                found[cid] = why
        return found

    def set_aside(self, cell_ids, why: str = "corrupt") -> Path | None:
        """Move every file of these cells to ``DIR/<why>/<time>/`` (renamed, never deleted), the summary
        first, so the cells are no longer done and the next run computes them again."""
        cell_ids = list(cell_ids)
        if not cell_ids:
            return None
        dest = self.root / why / datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%S.%fZ")
        dest.mkdir(parents=True, exist_ok=True)
        for cid in cell_ids:
            for kind in reversed(CELL_FILES):  # summary first: a crash here leaves the cell merely not done
                path = self._path(cid, kind)
                if path.exists():
                    os.replace(path, dest / path.name)
        _fsync_dir(self.cells_dir)
        _fsync_dir(dest)
        return dest


def _json_object(path: Path) -> dict:
    obj = json.loads(Path(path).read_text(encoding="utf-8"))
    if not isinstance(obj, dict):
        raise ValueError("not a JSON object")
    return obj


def _fsync_dir(path: Path) -> None:
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    except OSError:
        return
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


@functools.lru_cache(maxsize=1)
def code_hash() -> str:
    """A hash of netlab's own source files (paths and contents): which code computed a store's cells,
    whether netlab runs from a checkout (edited or not) or an installed copy."""
    root = Path(__file__).resolve().parents[1]
    h = hashlib.sha256()
    for path in sorted(root.rglob("*.py")):
        h.update(path.relative_to(root).as_posix().encode() + b"\0" + path.read_bytes() + b"\0")
    return h.hexdigest()[:16]


def _netlab_version() -> str:
    from .. import __version__

    return __version__
