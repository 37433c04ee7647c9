"""Writing files so that a reader or a crash never sees half of one.

Why a module of its own: results, sweep stores, datasets and fitted models all
write this way, from layers that must not import each other (the slowdown
model sits below the policies, the simulator above them); the one
implementation lives below all of them.
"""

from __future__ import annotations

import os
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
        write(tmp)
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
