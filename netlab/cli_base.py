"""What every ``netlab`` command shares: one way out for bad input, and the output-folder check.

Commands do not catch errors one by one. The root command group
(:class:`Commands`) turns any :class:`netlab.errors.InputError` escaping a
command (a trace, topology, spec, grid or parameter error, an unknown name:
each message names the file, line or field and the allowed values) and any
``StoreError`` (a sweep store that is missing, busy or corrupt) into one
``error:`` line and exit status 2. So is any ``OSError`` a command meets (a
full disk, a folder it may not write, a symlink loop), naming the path, and a
SIGTERM or SIGHUP that stops a sweep (exit status 128 + the signal, after the
worker pool is stopped and the store released). Anything else is a bug and
keeps its traceback.

Nothing here imports the library at start-up (``netlab --help`` stays fast):
the error classes are looked up only when a command has failed.
"""

from __future__ import annotations

import errno
import os
from pathlib import Path
from typing import NoReturn

import typer
from typer.core import TyperGroup


def fail(message: str) -> NoReturn:
    """Print ``error: message`` on stderr and exit with status 2."""
    typer.secho(f"error: {message}", fg=typer.colors.RED, err=True)
    raise typer.Exit(2)


#: what each errno means for the user, said once (the OS's own words are often terse: "Errno 40")
OS_HINTS = {
    errno.ENOSPC: "no space left on the device; free some or write elsewhere (nothing half-written was left)",
    errno.EDQUOT: "disk quota exceeded; free some space or write elsewhere",
    errno.EACCES: "permission denied",
    errno.EPERM: "operation not permitted",
    errno.EROFS: "read-only file system; write elsewhere",
    errno.ELOOP: "too many levels of symbolic links (a symlink loop, or a symlink where netlab follows none)",
    errno.ENAMETOOLONG: "file name too long",
    errno.EISDIR: "is a directory",
    errno.ENOTDIR: "a part of the path is not a directory",
}


def os_error_line(exc: OSError) -> str:
    """``path: what happened`` for an OSError, the path first (both paths of a failed rename)."""
    what = OS_HINTS.get(exc.errno) or exc.strerror or str(exc) or type(exc).__name__
    paths = [p for p in (exc.filename, exc.filename2) if p is not None]
    where = " -> ".join(os.fsdecode(p) if isinstance(p, (bytes, str, os.PathLike)) else str(p) for p in paths)
    return f"{where}: {what}" if where else f"{what} ({exc})"


def is_bad_input(exc: BaseException) -> bool:
    """An error the user can fix from its message (bad input, a bad store), not a bug."""
    from .errors import InputError
    from .sweep.store import StoreError

    return isinstance(exc, (InputError, StoreError))


class Commands(TyperGroup):
    """The root command group: bad input, an OSError or a stop signal from any command, however deep, is one
    ``error:`` line."""

    def invoke(self, ctx):
        from .procguard import Terminated

        try:
            return super().invoke(ctx)
        except Terminated as exc:
            typer.secho(f"error: {exc}; the worker pool was stopped and what was finished is kept (a sweep store "
                        "resumes on re-run)", fg=typer.colors.RED, err=True)
            raise typer.Exit(exc.code) from None
        except Exception as exc:  # noqa: BLE001 - re-raised unless it is bad input or an OSError
            if isinstance(exc, OSError) and not is_bad_input(exc):
                fail(os_error_line(exc))
            if not is_bad_input(exc):
                raise
            fail(str(exc) or type(exc).__name__)


def check_out_dir(out: Path, option: str = "--out") -> None:
    """``out`` must be a directory or creatable as one, outside the installed package, checked before any work
    (nothing written here)."""
    package = Path(__file__).resolve().parent
    where = Path(os.path.realpath(out))  # realpath: a symlink loop is reported below, not raised here
    if where == package or package in where.parents:
        fail(f"{option} {out}: is inside the installed netlab package ({package}); write results elsewhere")
    if out.exists() and not out.is_dir():
        fail(f"{option} {out}: exists and is not a directory; give a directory (it is created if missing)")
    parent = out
    while not parent.exists():
        parent = parent.parent
    if not parent.is_dir():
        fail(f"{option} {out}: {parent} is not a directory")
    if not os.access(parent, os.W_OK | os.X_OK):
        fail(f"{option} {out}: {parent} is not writable")
