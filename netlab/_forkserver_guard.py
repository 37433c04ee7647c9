"""Imported by the forkserver when it starts (see :func:`netlab.procguard.guard_forkserver`): it then dies with
its parent, and the kernel takes the workers it forked with it (each asks for the same in its initializer).

A parent killed by SIGKILL leaves its multiprocessing temporary folder behind (``pymp-*``, holding the
forkserver's listening socket): its exit handlers never run. So the forkserver asks the kernel for a signal of
its own (:data:`PARENT_GONE`, not SIGKILL, and not SIGTERM, which keeps its default) when its parent goes, and
its handler removes what the parent cannot any more: the socket it was
listening on, and that folder if nothing else is in it. The kernel sends the signal whenever the forkserver is
re-parented, also to another thread of the same process (the thread that started it ended, or a killed
process's threads are ending one by one): the handler acts only once the parent *process* is gone, and keeps
serving otherwise. The forkserver is never busy in compiled code, so its Python handler runs at once.

Imported anywhere else it does nothing: only the import made by ``multiprocessing.forkserver.main`` counts.
"""

import contextlib
import os
import signal
import socket
import sys

from .procguard import die_with_parent

#: the signal the kernel sends the forkserver when it is re-parented (nothing else sends it)
PARENT_GONE = signal.SIGUSR1


def _forkserver_main_frame():
    frame = sys._getframe()
    while frame is not None:
        if frame.f_code.co_name == "main" and frame.f_globals.get("__name__") == "multiprocessing.forkserver":
            return frame
        frame = frame.f_back
    return None


def _listener_path(listener_fd) -> str | None:
    """The filesystem path the forkserver listens on (None for an abstract socket or one we cannot read)."""
    if not isinstance(listener_fd, int) or listener_fd < 0:
        return None
    try:
        sock = socket.socket(socket.AF_UNIX, fileno=listener_fd)
    except OSError:
        return None
    try:
        path = sock.getsockname()
    except OSError:
        return None
    finally:
        sock.detach()  # the forkserver owns the descriptor
    return path if isinstance(path, str) and path and not path.startswith("\0") else None


def _guard(listener_path: str | None) -> None:
    parent_pid = os.getppid()

    def parent_gone(signum, _frame):
        if os.getppid() == parent_pid:  # re-parented to another of the parent's threads: the parent lives on
            return
        if listener_path is not None:
            with contextlib.suppress(OSError):
                os.unlink(listener_path)
            with contextlib.suppress(OSError):  # only if empty: whatever else the parent put there stays
                os.rmdir(os.path.dirname(listener_path))
        os._exit(128 + signum)

    signal.signal(PARENT_GONE, parent_gone)
    # the workers it forks get the default back: the handler is the forkserver's alone
    os.register_at_fork(after_in_child=lambda: signal.signal(PARENT_GONE, signal.SIG_DFL))
    if not die_with_parent(PARENT_GONE):
        return
    if os.getppid() != parent_pid:  # the parent went before the guard was set
        parent_gone(PARENT_GONE, None)


_main = _forkserver_main_frame()
if _main is not None:
    _guard(_listener_path(_main.f_locals.get("listener_fd")))
del _main  # no frame kept alive
