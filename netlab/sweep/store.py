"""The results store: one directory per sweep, resumable after any crash.

One idea in one module although it is over 500 lines: the store's on-disk contract (make, lock, write, verify,
repair) is kept together so the rules that keep a store consistent are read, and changed, side by side.

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
    DIR/stray/<time>/...             files in cells/ that belong to no cell of this sweep, set aside by a run

A store is made only in a new or empty folder, and reopened only where its
``manifest.json`` says it is one (:meth:`Store.check_folder`): ``--out`` given
a folder of other files is refused before anything is written there. The
store's own names (``cells``, ``.lock``, the manifest, ...) must not be
symbolic links, so nothing outside the folder is ever written, deleted or
read as a cell (:meth:`Store.check_layout`; the lock file is opened with
``O_NOFOLLOW``).

Every file is written to a temporary name and renamed into place, so a
reader never sees a partial file and a cell appears at most once whatever
moment a SIGKILL lands: a cell without its summary is simply not done and
its files are overwritten on the next run. The temporary files a killed run
left (the store's own names only) are removed before a run starts. Only the driver process writes,
so workers need no shared file system. Every write is fsynced (file, then
directory). A run holds the store's lock (:meth:`Store.lock`) from before it
cleans until it ends: a second run on the same directory fails at once naming
the holder, and never touches the first one's files.

Each cell's summary (written last) records the SHA-256 of its parquet files
and of its own record, so a flipped bit that still parses (a changed number)
is found as surely as a file cut short: a cell file that cannot be read back
or does not match its hash is found by :meth:`Store.corrupt_cells` (and by
every read: a changed value is never returned); :meth:`Store.set_aside` moves
the cell's files to ``DIR/corrupt/`` so a re-run computes it again (``netlab
results DIR --repair``; a resumed run does both itself). Cells written before
the hashes existed are read without them.

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
import io
import json
import os
import re
import socket
import stat
import subprocess
from datetime import datetime, timezone
from importlib import metadata
from pathlib import Path

import pandas as pd
import yaml

from ..fileio import atomic_write
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
#: the names in DIR the store writes; none may be a symbolic link
LAYOUT = ("manifest.json", "grid.yaml", "cells", ".lock", ".lock.holder", "corrupt", "stale", "stray")
#: what a run writes before its manifest (a folder holding only these is a store whose first run was cut short)
BEFORE_MANIFEST = (".lock", ".lock.holder", "grid.yaml", "cells")
#: the key of a record that holds the hashes of the cell's files and of the record itself
HASHES = "sha256"
_CELL_NAME = re.compile(r"(?P<id>[0-9a-f]{12})\.(?P<kind>" + "|".join(map(re.escape, CELL_FILES)) + r")")


def _own_tmp(name: str, targets) -> bool:
    """Whether ``name`` is an atomic write's temporary file (``.<target>.<random>.tmp``) for one of ``targets``."""
    return name.startswith(".") and name.endswith(".tmp") and any(name.startswith(f".{t}.") for t in targets)


def _cell_tmp(name: str) -> bool:
    if not (name.startswith(".") and name.endswith(".tmp")):
        return False
    m = _CELL_NAME.match(name[1:])
    return m is not None and name[1 + m.end()] == "."


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def record_hash(record: dict) -> str:
    """The hash of a summary or error record without its hashes entry, over canonical JSON (so a record read
    back from disk hashes as it did when written)."""
    body = {k: v for k, v in record.items() if k != HASHES}
    return _sha256(json.dumps(body, sort_keys=True, separators=(",", ":"), default=_json_default).encode())


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

    # ------------------------------------------------------------- safety
    def check_layout(self) -> None:
        """Refuse a store whose own names (``cells``, ``.lock``, the manifest, ...) are symbolic links: writing,
        deleting or reading through one would reach outside the store's folder."""
        for name in LAYOUT:
            path = self.root / name
            if path.is_symlink():
                kind = "file" if "." in name else "folder"
                raise StoreError(f"{path}: is a symbolic link (to {os.readlink(path)}); a sweep store follows none "
                                 f"out of its folder: replace it with the real {kind} or use another --out")

    def check_folder(self) -> None:
        """A store is made only in a new or empty folder, or reopened where its manifest says it is one.

        Raises :class:`StoreError` (nothing written) for a file, or for a folder holding anything but a store
        or the first files of a store whose first run was cut short (:data:`BEFORE_MANIFEST`).
        """
        if not self.root.exists():
            if self.root.is_symlink():
                raise StoreError(f"{self.root}: is a symbolic link that leads nowhere (a loop, or a missing "
                                 "folder); give a real folder for the store")
            return
        if not self.root.is_dir():
            raise StoreError(f"{self.root}: exists and is not a folder; give a new or empty folder for the store")
        self.check_layout()
        if self.manifest_path.exists():
            self.read_manifest()  # raises unless it is a sweep manifest
            return
        foreign = sorted(p.name for p in self.root.iterdir()
                         if not (p.name in BEFORE_MANIFEST or _own_tmp(p.name, ("manifest.json", "grid.yaml",
                                                                                ".lock.holder"))))
        if self.cells_dir.is_dir():
            foreign += sorted(f"cells/{p.name}" for p in self.cells_dir.iterdir()
                              if not (_CELL_NAME.fullmatch(p.name) or _cell_tmp(p.name)))
        if foreign:
            shown = ", ".join(foreign[:5]) + (f" and {len(foreign) - 5} more" if len(foreign) > 5 else "")
            raise StoreError(f"{self.root}: not empty and not a sweep store (no manifest.json; it holds {shown}); "
                             "give a new or empty folder for --out (a sweep store is never made over other files)")

    @contextlib.contextmanager
    def lock(self):
        """Hold the store for one run (creates the directory). Raises :class:`StoreBusy` at once if another
        process holds it, naming the store and the holder; nothing else in the store is touched then."""
        self.check_folder()
        self.root.mkdir(parents=True, exist_ok=True)
        release = self._acquire()
        try:
            self.check_folder()  # again, now that no other run can change it
            _write_json(self.holder_path, dict(pid=os.getpid(), host=socket.gethostname(), since=now_iso()))
            yield self
        finally:
            self.holder_path.unlink(missing_ok=True)
            release()

    def _busy(self) -> StoreBusy:
        who = self.holder()
        desc = (f"pid {who.get('pid')} on {who.get('host')}, since {who.get('since')}" if who
                else "another process (it has not yet written its pid)")
        return StoreBusy(f"{self.root}: the sweep store is in use by {desc}; wait for that run to end or "
                         f"use another --out (lock: {self.lock_path})")

    def _acquire(self):
        """Take the lock file's exclusive lock without waiting; return the function that releases it.

        Opened with ``O_NOFOLLOW`` so a ``.lock`` swapped for a symlink is refused, not followed (POSIX; elsewhere
        the :mod:`filelock` package, after :meth:`check_layout`).
        """
        try:
            import fcntl
        except ImportError:  # pragma: no cover - Windows
            from filelock import FileLock, Timeout

            flock = FileLock(str(self.lock_path), timeout=0)
            try:
                flock.acquire()
            except Timeout:
                raise self._busy() from None
            return flock.release
        try:
            fd = os.open(self.lock_path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
        except OSError:
            if self.lock_path.is_symlink():
                self.check_layout()
            raise
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise self._busy() from None
        except BaseException:
            os.close(fd)
            raise

        def release():
            fcntl.flock(fd, fcntl.LOCK_UN)
            os.close(fd)
        return release

    def clean(self) -> None:
        """Create the layout and remove the temporary files a killed run left (the store's own names only,
        only before running)."""
        self.check_layout()
        self.cells_dir.mkdir(exist_ok=True)
        for folder, own in ((self.root, lambda n: _own_tmp(n, ("manifest.json", "grid.yaml", ".lock.holder"))),
                            (self.cells_dir, _cell_tmp)):
            for path in folder.iterdir():
                if own(path.name) and not path.is_dir():
                    path.unlink(missing_ok=True)

    # ------------------------------------------------------------ manifest
    def read_manifest(self) -> dict:
        """The manifest (after :meth:`check_layout`); a :class:`StoreError` if it is missing or not a sweep's."""
        self.check_layout()
        if not self.manifest_path.exists():
            raise StoreError(f"{self.root}: no manifest.json (not a sweep directory)")
        try:
            manifest = _json_object(self.manifest_path)
        except (OSError, ValueError) as exc:
            raise StoreError(f"{self.manifest_path}: not a readable sweep manifest ({exc})") from None
        if not isinstance(manifest.get("cells"), list) or "config_hash" not in manifest:
            raise StoreError(f"{self.manifest_path}: not a netlab sweep manifest (no 'cells' or 'config_hash'); "
                             "this folder is not a sweep store")
        return manifest

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
            err[HASHES] = {"record": record_hash(err)}
            _write_json(self._path(cid, "error.json"), err)
            return
        res = outcome.result
        hashes = {}
        for kind, frame in (("jobs.parquet", res.jobs), ("links.parquet", res.links)):
            if frame is not None:
                data = _parquet_bytes(frame)
                hashes[kind] = _sha256(data)
                atomic_write(self._path(cid, kind), lambda p, data=data: Path(p).write_bytes(data))
        # the record is hashed as it reads back (through JSON), so numpy values hash as the numbers they become
        ok = json.loads(json.dumps(ok, default=_json_default))
        ok[HASHES] = dict(hashes, record=record_hash(ok))
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
        return self._read(cell_id, "summary.json", _checked_record)

    def read_error(self, cell_id: str) -> dict:
        return self._read(cell_id, "error.json", _checked_record)

    def _read_parquet(self, cell_id: str, kind: str) -> pd.DataFrame:
        expected = (self.read_summary(cell_id).get(HASHES) or {}).get(kind)

        def read(path):
            data = _regular_bytes(path)
            if expected is not None and _sha256(data) != expected:
                raise ValueError(f"checksum mismatch (SHA-256 {_sha256(data)[:12]}..., the cell recorded "
                                 f"{expected[:12]}...): the file changed after it was written")
            return pd.read_parquet(io.BytesIO(data))

        return self._read(cell_id, kind, read)

    def read_jobs(self, cell_id: str) -> pd.DataFrame:
        return self._read_parquet(cell_id, "jobs.parquet")

    def read_links(self, cell_id: str) -> pd.DataFrame | None:
        path = self._path(cell_id, "links.parquet")
        if not path.exists() and not path.is_symlink():
            if "links.parquet" in (self.read_summary(cell_id).get(HASHES) or {}):  # the cell wrote one
                raise CorruptCell(self.root, cell_id, path.name, "missing (the cell recorded one)")
            return None
        return self._read_parquet(cell_id, "links.parquet")

    # -------------------------------------------------------- check/repair
    def check_cell(self, cell_id: str) -> str | None:
        """Why a stored cell cannot be read back (every file read in full), or None if it can."""
        try:
            if self._path(cell_id, "summary.json").exists():
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

    def strays(self, cell_ids) -> list[Path]:
        """Entries of ``cells/`` that belong to none of ``cell_ids`` (a copied file, a cell of another sweep),
        besides the temporary files of a killed run (a run removes those itself)."""
        ids = set(cell_ids)
        if not self.cells_dir.is_dir():
            return []
        out = []
        for path in sorted(self.cells_dir.iterdir()):
            m = _CELL_NAME.fullmatch(path.name)
            if (m is None or m["id"] not in ids or path.is_dir() or path.is_symlink()) and not _cell_tmp(path.name):
                out.append(path)
        return out

    def set_aside_strays(self, paths) -> Path | None:
        """Move stray entries of ``cells/`` to ``DIR/stray/<time>/`` (renamed, never deleted)."""
        paths = list(paths)
        if not paths:
            return None
        dest = self._aside_folder("stray")
        for path in paths:
            os.replace(path, dest / path.name)
        _fsync_dir(self.cells_dir)
        _fsync_dir(dest)
        return dest

    def _aside_folder(self, why: str) -> Path:
        self.check_layout()
        dest = self.root / why / datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%S.%fZ")
        dest.mkdir(parents=True, exist_ok=True)
        return dest

    def set_aside(self, cell_ids, why: str = "corrupt") -> Path | None:
        """Move every file of these cells to ``DIR/<why>/<time>/`` (renamed, never deleted), the summary
        first, so the cells are no longer done and the next run computes them again."""
        cell_ids = list(cell_ids)
        if not cell_ids:
            return None
        dest = self._aside_folder(why)
        for cid in cell_ids:
            for kind in reversed(CELL_FILES):  # summary first: a crash here leaves the cell merely not done
                path = self._path(cid, kind)
                if path.exists():
                    os.replace(path, dest / path.name)
        _fsync_dir(self.cells_dir)
        _fsync_dir(dest)
        return dest


def _regular_bytes(path: Path) -> bytes:
    """The bytes of a regular file, opened without following a symlink (a cell file never points elsewhere)."""
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0))
    with open(fd, "rb") as fh:
        if not stat.S_ISREG(os.fstat(fh.fileno()).st_mode):
            raise ValueError("not a regular file")
        return fh.read()


def _json_object(path: Path) -> dict:
    obj = json.loads(_regular_bytes(path).decode("utf-8"))
    if not isinstance(obj, dict):
        raise ValueError("not a JSON object")
    return obj


def _checked_record(path: Path) -> dict:
    """A summary or error record, checked against the hash it carries (records written before hashes carry none)."""
    rec = _json_object(path)
    recorded = (rec.get(HASHES) or {}).get("record") if isinstance(rec.get(HASHES), dict) else None
    if recorded is not None and record_hash(rec) != recorded:
        raise ValueError("checksum mismatch: the record changed after it was written")
    return rec


def _parquet_bytes(frame: pd.DataFrame) -> bytes:
    buf = io.BytesIO()
    frame.to_parquet(buf, index=False)
    return buf.getvalue()


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
