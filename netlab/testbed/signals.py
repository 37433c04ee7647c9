"""Ctrl-C and kill tear a testbed down, then do what the previous handler would have done.

Why apart from the testbed: it is the one piece of the lifecycle that touches process-wide state (signal
handlers belong to the process and can only be set from its main thread), and the rules that keep it
safe are about processes, not networks: a signal the process ignores stays ignored (a script started in
the background, ``nohup`` or ``cmd &`` in a non-interactive shell, inherits SIG_IGN for SIGINT, and a
Ctrl-C meant for the foreground job must not tear its testbed down); a forked child that inherited the
handler (pyroute2 forks helpers without exec, and they get SIGTERM) must not tear down; and on restore a
handler someone installed after ours is left in place, so the chain stays whole.
"""

from __future__ import annotations

import logging
import os
import signal
import threading
from typing import Callable

log = logging.getLogger(__name__)

SIGNALS = (signal.SIGINT, signal.SIGTERM)


class TeardownOnSignal:
    """Handlers for :data:`SIGNALS` that call ``down`` when ``may_run()`` holds, then chain to the previous
    handler (or its default action). ``down`` raising ``error`` is logged, not propagated."""

    def __init__(self, down: Callable[[], None], may_run: Callable[[], bool], error: type[Exception]):
        self._down, self._may_run, self._error = down, may_run, error
        self._installed: dict = {}  # signal -> (previous handler, ours)

    def install(self) -> None:
        if threading.current_thread() is not threading.main_thread():
            return
        for sig in SIGNALS:
            prev = signal.getsignal(sig)
            if prev == signal.SIG_IGN:
                continue

            def handler(signum, frame, prev=prev):
                if self._may_run():
                    try:
                        self._down()
                    except self._error as exc:
                        log.error("%s", exc)
                if callable(prev):
                    prev(signum, frame)
                else:
                    signal.signal(signum, signal.SIG_DFL)
                    os.kill(os.getpid(), signum)

            signal.signal(sig, handler)
            self._installed[sig] = (prev, handler)

    def restore(self) -> None:
        for sig, (prev, mine) in self._installed.items():
            if signal.getsignal(sig) is mine:  # someone installed theirs after ours: leave the chain alone
                signal.signal(sig, prev)
        self._installed = {}
