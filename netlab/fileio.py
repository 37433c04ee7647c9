"""Writing files so that a reader or a crash never sees half of one; reading only what is a file.

Why a module of its own: results, sweep stores, datasets and fitted models all
write this way, from layers that must not import each other (the slowdown
model sits below the policies, the simulator above them); the one
implementation lives below all of them.
"""

from __future__ import annotations

import errno
import os
import stat
import tempfile
from pathlib import Path


def atomic_write(path: Path, write) -> None:
    """Write via a temporary file in the same directory, fsync it, rename over ``path``, fsync the directory.

    After a crash or power loss ``path`` holds either the old or the new content, whole.
    """
    path = Path(path)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    os.close(fd)
    try:
        try:
            write(tmp)
        except OSError as exc:
            if exc.filename is None and exc.errno is not None:  # pyarrow's ENOSPC names no file: say which
                raise OSError(exc.errno, os.strerror(exc.errno), str(path)) from exc
            raise
        os.chmod(tmp, 0o644)  # mkstemp makes 0600; results are meant to be shared
        fd = os.open(tmp, os.O_RDONLY)
        try:
            os.fsync(fd)  # the data is on disk before the rename makes it visible
        finally:
            os.close(fd)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    try:
        dfd = os.open(path.parent, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    except OSError:  # a platform that cannot open directories (Windows): the rename is all there is
        return
    try:
        os.fsync(dfd)  # the rename itself is durable
    finally:
        os.close(dfd)


class NotRegularFile(OSError):
    """A path that must be a regular file is a FIFO, a device, a socket or a directory.

    Why refuse before reading: opening a FIFO for reading blocks until a writer comes (forever, for a typo),
    and a device such as ``/dev/zero`` never ends. The check is made on the opened descriptor (opened
    without blocking), so nothing can be swapped in between. ``kind`` says what the path is.
    """

    kind = "not a regular file"


_KINDS = ((stat.S_ISFIFO, "a FIFO (named pipe)"), (stat.S_ISCHR, "a character device"),
          (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"), (stat.S_ISDIR, "a directory"))


def open_regular(path):
    """``path`` opened for binary reading if it is a regular file (symlinks to one are fine); else
    :class:`NotRegularFile` (``errno`` EISDIR for a directory, EINVAL otherwise) naming the path and its kind."""
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            kind = next((what for test, what in _KINDS if test(mode)), "not a regular file")
            code = errno.EISDIR if stat.S_ISDIR(mode) else errno.EINVAL
            err = NotRegularFile(code, f"is {kind}, not a regular file", str(path))
            err.kind = kind
            raise err
        if hasattr(os, "set_blocking"):
            os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise
