"""Netlink access of one testbed: every call on one thread of its own, one cached handle per namespace.

Why: pyroute2's synchronous API drives an asyncio loop of its own, which fails inside a thread that
already runs one (a Jupyter kernel), and a cached IPRoute handle must stay on the loop that made it. So
every method that talks netlink is wrapped in :func:`on_netlink_thread`, which runs it on the testbed's
single netlink thread (calls made on that thread run directly). Signal handlers, by contrast, can only
be set from the main thread, so they stay there. A namespace's handle keeps the namespace alive:
:meth:`Netlink.close_handles` before removing namespaces.
"""

from __future__ import annotations

import functools
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Callable


class Netlink:
    """The thread and the per-namespace handles; ``label()`` names the thread (read when it starts)."""

    def __init__(self, label: Callable[[], str]):
        self._label = label
        self._pool: ThreadPoolExecutor | None = None
        self._ident: int | None = None
        self._ipr: dict = {}

    def _mark(self) -> None:
        self._ident = threading.get_ident()

    def run(self, fn, *args, **kwargs):
        """``fn(*args, **kwargs)`` on the netlink thread, started on first use."""
        if threading.get_ident() == self._ident:
            return fn(*args, **kwargs)
        if self._pool is None:
            self._pool = ThreadPoolExecutor(1, thread_name_prefix=self._label(), initializer=self._mark)
        return self._pool.submit(fn, *args, **kwargs).result()

    def handle(self, ns: str | None):
        """The cached IPRoute of namespace ``ns`` (None: the root namespace); call on the netlink thread."""
        if ns not in self._ipr:
            from pyroute2 import IPRoute

            self._ipr[ns] = IPRoute() if ns is None else IPRoute(netns=ns, flags=0)
        return self._ipr[ns]

    def close_handles(self) -> None:
        for ipr in self._ipr.values():
            ipr.close()
        self._ipr = {}

    def shutdown(self) -> None:
        """Stop the thread (a later call starts a new one)."""
        if self._pool is not None:
            self._pool.shutdown(wait=False)
            self._pool, self._ident = None, None


def on_netlink_thread(method):
    """Run a testbed method (its object has a :class:`Netlink` as ``_netlink``) on the netlink thread."""

    @functools.wraps(method)
    def run(self, *args, **kwargs):
        return self._netlink.run(method, self, *args, **kwargs)

    return run
