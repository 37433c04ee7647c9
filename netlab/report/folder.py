"""A report folder is replaced whole: a reader (or a kill) sees the old report or the new one, never a mix.

:func:`replace_folder` builds the new folder beside the old one, under a hidden
staging name that carries the builder's process id (``.report.<random>.<pid>.tmp``),
then swaps the two in one step: ``renameat2(RENAME_EXCHANGE)`` on Linux (both
names stay valid throughout), a plain rename where nothing was there yet. Only
then is the old folder (now under the staging name) removed. A build that fails
or is interrupted (an exception, Ctrl-C, SIGTERM) removes its staging folder; one
killed outright (SIGKILL) leaves it, and the next build beside it removes it once
its process is gone. Where the exchange is not available (another OS, a file
system without it), the old folder is renamed aside first and the new one renamed
in: a kill between the two renames leaves no folder under the name for that moment,
never a mixed one.

A folder is only ever replaced if it is a report (it holds :data:`MARKER`) or
empty: ``--out ~/`` must not delete a home directory.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import re
import shutil
import signal
import tempfile
import threading
from collections.abc import Callable
from pathlib import Path

from ..errors import InputError

#: the file that makes a folder a netlab report (and so replaceable)
MARKER = "report.json"
_STAGING = re.compile(r"^\.(?P<name>.+)\.[^.]+\.(?P<pid>\d+)\.tmp$")
_RENAME_EXCHANGE = 2
_AT_FDCWD = -100


class ReportFolderError(InputError):
    """The report's destination exists and is not a report folder."""


def _renameat2():
    try:
        fn = ctypes.CDLL(None, use_errno=True).renameat2
    except (AttributeError, OSError):  # not glibc >= 2.28
        return None
    fn.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
    fn.restype = ctypes.c_int
    return fn


_EXCHANGE = _renameat2()


def exchange(a: Path, b: Path) -> bool:
    """Swap two existing paths in one step (Linux ``renameat2(RENAME_EXCHANGE)``); False if unsupported."""
    if _EXCHANGE is None:
        return False
    if _EXCHANGE(_AT_FDCWD, os.fsencode(a), _AT_FDCWD, os.fsencode(b), _RENAME_EXCHANGE) == 0:
        return True
    err = ctypes.get_errno()
    if err in (22, 38, 95):  # EINVAL, ENOSYS, EOPNOTSUPP: this file system or kernel cannot exchange
        return False
    raise OSError(err, os.strerror(err), str(a), None, str(b))


def check_destination(dest: Path) -> None:
    """Refuse a destination that exists and is neither empty nor a report folder (before anything runs)."""
    if dest.is_symlink() or (dest.exists() and not dest.is_dir()):
        raise ReportFolderError(f"{dest}: exists and is not a folder; the report is a folder (report.html, CSVs, "
                                "figures), replaced whole")
    if dest.is_dir() and not (dest / MARKER).is_file() and any(dest.iterdir()):
        raise ReportFolderError(f"{dest}: exists, is not empty and is not a netlab report (no {MARKER}); a report "
                                "folder is replaced whole, so give a new or empty folder")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process
        return True
    return True


def stale_staging(parent: Path, name: str) -> list[Path]:
    """Staging folders of ``name`` in ``parent`` whose builder process is gone (killed before it cleaned up)."""
    out = []
    for p in parent.glob(f".{name}.*.tmp"):
        m = _STAGING.match(p.name)
        if m and m["name"] == name and p.is_dir() and not p.is_symlink() and not _alive(int(m["pid"])):
            out.append(p)
    return out


@contextlib.contextmanager
def _sigterm_raises():
    """SIGTERM as SystemExit while building, so the staging folder is removed (only in the main thread)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def stop(signum, frame):
        raise SystemExit(128 + signum)

    old = signal.signal(signal.SIGTERM, stop)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, old)


@contextlib.contextmanager
def _sigterm_held():
    """A SIGTERM during the block is noted and acted on after it (by the handler in place before), so the block
    runs whole. (Blocking the signal would not do: a library's thread may take it, and Python's handler then runs
    in the main thread all the same.)"""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    caught = []
    old = signal.signal(signal.SIGTERM, lambda signum, frame: caught.append(signum))
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, old)
        if caught:
            signal.raise_signal(signal.SIGTERM)


def replace_folder(dest, build: Callable[[Path], object]) -> Path:
    """Run ``build(staging)`` to fill a fresh folder, then swap it in for ``dest`` whole (see the module)."""
    dest = Path(dest).absolute()
    check_destination(dest)
    dest.parent.mkdir(parents=True, exist_ok=True)
    for old in stale_staging(dest.parent, dest.name):
        shutil.rmtree(old, ignore_errors=True)
    with _sigterm_raises():  # from before the staging folder exists to after it is gone
        staging = None
        try:
            with _sigterm_held():  # its name is known before a SIGTERM can stop the build
                staging = Path(tempfile.mkdtemp(prefix=f".{dest.name}.", suffix=f".{os.getpid()}.tmp",
                                                dir=dest.parent))
            build(staging)
            os.chmod(staging, 0o755)  # mkdtemp makes it 0700; a report folder is as readable as any other
            if not dest.exists():
                os.rename(staging, dest)
            elif not exchange(staging, dest):
                aside = Path(tempfile.mkdtemp(prefix=f".{dest.name}.", suffix=f".{os.getpid()}.tmp",
                                              dir=dest.parent))
                os.rename(dest, aside / "old")
                os.rename(staging, dest)
                staging = aside
        finally:
            with _sigterm_held():  # a SIGTERM now waits until the removal is done, then stops the build
                if staging is not None:  # the old report after a swap, the partial one else
                    shutil.rmtree(staging, ignore_errors=True)
    return dest
