"""Child processes that die with their parent, and stop signals that unwind instead of killing.

Why: a process pool outlives a parent killed by SIGKILL, the OOM killer or a
closed terminal. With the forkserver start method each worker holds the
forkserver's "parent alive" pipe and its own task queue's write end, so none
of them ever sees end-of-file: workers, forkserver and resource tracker wait
forever (issue 30 measured 550 MB still held 32 minutes later).

Three guards, each enough alone for its case:

* :func:`worker_init` (a pool's initializer) asks the kernel to SIGKILL the
  worker when its parent dies (``prctl(PR_SET_PDEATHSIG)``, Linux) and starts
  a thread that exits the worker when the pool's owner ends (a pidfd, or a
  poll of the pid where there is none): the owner, not only the parent,
  because with a forkserver the parent is the forkserver;
* :func:`guard_forkserver` makes the forkserver itself die with its parent
  (the same prctl, run when the forkserver imports :mod:`netlab._forkserver_guard`,
  whose handler also removes the socket and folder a killed parent leaves),
  so the chain owner -> forkserver -> workers is enforced by the kernel even
  when a worker is busy in compiled code that holds the GIL;
* :func:`stop_signals_unwind` turns SIGTERM and SIGHUP into a
  :class:`Terminated` exception while a pool runs, so the ``finally`` blocks
  that stop the pool and release the store's lock run (Ctrl-C already does
  this through KeyboardInterrupt).

With the workers gone the resource tracker sees end-of-file on its pipe and
exits by itself. Nothing here signals a process by name: only the calling
process, or processes a pool started and recorded.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import select
import signal
import sys
import threading
import time

PR_SET_PDEATHSIG = 1
#: the module the forkserver imports at start (its import makes the forkserver die with its parent)
FORKSERVER_GUARD = "netlab._forkserver_guard"
STOP_SIGNALS = tuple(s for s in (getattr(signal, "SIGTERM", None), getattr(signal, "SIGHUP", None)) if s)


class Terminated(SystemExit):
    """SIGTERM or SIGHUP arrived while a pool ran; the exit status is 128 + the signal number, as a shell reports."""

    def __init__(self, signum: int):
        self.signum = signum
        self.signame = signal.Signals(signum).name
        super().__init__(128 + signum)

    def __str__(self) -> str:
        return f"stopped by {self.signame}"


def die_with_parent(sig: int = signal.SIGKILL) -> bool:
    """Have the kernel send ``sig`` to this process when the thread that started it exits (Linux only).

    Returns False where there is no such facility (then the watch thread of :func:`worker_init` is the guard).
    """
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(PR_SET_PDEATHSIG, int(sig), 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def _exit_when_gone(pid: int, poll_s: float) -> None:
    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:  # already gone before we looked
        os._exit(1)
    except (AttributeError, OSError):  # no pidfd (not Linux >= 5.3): poll the pid
        fd = None
    if fd is not None:
        select.select([fd], [], [])  # readable once the process has exited
        os._exit(1)
    while True:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            os._exit(1)
        except PermissionError:  # alive, owned by someone else (cannot happen for our own parent)
            pass
        time.sleep(poll_s)


def watch_process(pid: int, poll_s: float = 1.0) -> threading.Thread:
    """Exit this process at once (``os._exit``) when process ``pid`` ends; a daemon thread watches."""
    t = threading.Thread(target=_exit_when_gone, args=(pid, poll_s), name=f"netlab-watch-{pid}", daemon=True)
    t.start()
    return t


def worker_init(owner_pid: int, user_init=None, user_args: tuple = ()) -> None:
    """A pool worker's initializer: die with the parent and with the pool's owner; then ``user_init``."""
    die_with_parent()
    if not _alive(owner_pid):  # the owner died before the guard was set
        os._exit(1)
    watch_process(owner_pid)
    if user_init is not None:
        user_init(*user_args)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def guard_forkserver() -> None:
    """Have a forkserver started from now on import :data:`FORKSERVER_GUARD` (keeping ``__main__``)."""
    from multiprocessing import forkserver

    server = getattr(forkserver, "_forkserver", None)  # the process-wide forkserver (no public accessor)
    current = list(getattr(server, "_preload_modules", None) or ["__main__"])
    if FORKSERVER_GUARD not in current:
        forkserver.set_forkserver_preload(current + [FORKSERVER_GUARD])


def pool_context():
    """The multiprocessing context pools use: forkserver (guarded) where there is one, else spawn.

    Never fork: a parent may hold threads (tqdm's monitor, Jupyter's), and a forked copy of a lock held
    by one of them deadlocks the child.
    """
    import multiprocessing

    if "forkserver" in multiprocessing.get_all_start_methods():
        guard_forkserver()
        return multiprocessing.get_context("forkserver")
    return multiprocessing.get_context("spawn")


def process_pool(workers: int, initializer=None, initargs: tuple = ()):
    """A :class:`~concurrent.futures.ProcessPoolExecutor` whose workers die with this process."""
    from concurrent.futures import ProcessPoolExecutor

    return ProcessPoolExecutor(max_workers=workers, mp_context=pool_context(), initializer=worker_init,
                               initargs=(os.getpid(), initializer, initargs))


def kill_pool(pool) -> None:
    """Kill the worker processes ``pool`` started (no waiting for running tasks), then shut it down.

    For a stop on error or signal: the tasks in flight are lost, which the sweep store tolerates (a re-run
    computes them). The workers are the executor's own records (``_processes``; there is no public list
    before Python 3.14's ``kill_workers``).
    """
    kill = getattr(pool, "kill_workers", None)
    if kill is not None:  # pragma: no cover - Python >= 3.14
        kill()
    else:
        for proc in list((getattr(pool, "_processes", None) or {}).values()):
            with contextlib.suppress(Exception):
                proc.kill()
    pool.shutdown(wait=True, cancel_futures=True)


@contextlib.contextmanager
def stop_signals_unwind():
    """While inside, SIGTERM and SIGHUP raise :class:`Terminated` in the main thread (so ``finally`` runs).

    Only handlers still at their default are replaced (an ignored SIGHUP under nohup stays ignored, a
    handler the application installed stays), and the previous ones come back on exit. Outside the main
    thread (where Python cannot set handlers) this does nothing.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def raise_terminated(signum, frame):
        raise Terminated(signum)

    previous = {}
    for sig in STOP_SIGNALS:
        if signal.getsignal(sig) == signal.SIG_DFL:
            previous[sig] = signal.signal(sig, raise_terminated)
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
