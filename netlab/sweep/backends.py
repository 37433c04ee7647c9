"""Execution backends: serial, local processes, Dask. Looked up by name in :data:`BACKENDS`.

A backend is a context manager whose :meth:`Backend.run` takes cells and
yields one :class:`~netlab.sweep.cell.Outcome` per cell in completion order.
Workers only compute (:func:`~netlab.sweep.cell.execute`); the driver
writes the store, so a Dask cluster on other machines needs netlab installed
there but no shared file system. If the machinery itself fails (a worker
process dies), the affected cells come back as failed outcomes too: the
sweep goes on and a re-run retries them.

A run that stops early (an error writing the store, Ctrl-C, SIGTERM) calls
:meth:`Backend.abort`, which stops the work in flight instead of waiting for
it; local worker processes also die with their parent if it is killed
outright (:mod:`netlab.procguard`).
"""

from __future__ import annotations

import os
import shutil
import tempfile
import traceback
import uuid
from concurrent.futures import as_completed
from typing import Iterable, Iterator

from ..procguard import kill_pool, process_pool
from ..registry import Registry
from .cell import Outcome, execute
from .grid import Cell

BACKENDS: Registry["Backend"] = Registry("sweep backend")


def _lost(cell: Cell, exc: BaseException) -> Outcome:
    text = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
    return Outcome(cell, None, f"{type(exc).__name__}: {exc}", text, worker="<backend>")


class Backend:
    name = "base"

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False

    def close(self) -> None:
        """Release what this backend created (never what the caller handed in)."""

    def abort(self) -> None:
        """Stop at once, dropping the cells in flight (the run is stopping early); then release as close()."""
        self.close()

    def run(self, cells: Iterable[Cell]) -> Iterator[Outcome]:
        raise NotImplementedError


@BACKENDS.register("serial")
class SerialBackend(Backend):
    """One cell after another in this process."""

    name = "serial"

    def __init__(self, **_ignored):
        pass

    def run(self, cells):
        for cell in cells:
            yield execute(cell)


@BACKENDS.register("processes")
class ProcessBackend(Backend):
    """A local process pool (concurrent.futures), one worker per core by default."""

    name = "processes"

    def __init__(self, workers: int | None = None, warm_up: bool = False, **_ignored):
        self.workers = workers or os.cpu_count() or 1
        # warm_up: see warm_up_plan; numba compiles each kernel once, here, and caches it on disk (cache=True)
        self.warm_up = warm_up
        # forkserver/spawn, never fork; workers die with this process (netlab.procguard)
        self.pool = process_pool(self.workers)

    def run(self, cells):
        cells = list(cells)
        futures = {}
        if self.warm_up and len(cells) > 1:
            here, beside, cells = warm_up_plan(cells)
            futures = {self.pool.submit(execute, cell): cell for cell in beside}
            for cell in here:
                yield execute(cell)
        futures.update({self.pool.submit(execute, cell): cell for cell in cells})
        for fut in as_completed(futures):
            cell = futures.pop(fut)
            exc = fut.exception()
            yield _lost(cell, exc) if exc is not None else fut.result()

    def close(self):
        self.pool.shutdown(wait=True, cancel_futures=True)

    def abort(self):
        kill_pool(self.pool)


def warm_up_plan(cells: list[Cell]) -> tuple[list[Cell], list[Cell], list[Cell]]:
    """Split ``cells`` into (run in this process first, run in the workers meanwhile, run after).

    Why: most of a cold start is numba compiling, and every worker that calls a kernel before it is in the
    on-disk cache compiles it again. So this process runs, first,
    one cell of each (network, network policy) pair whose network has contention: together they call every
    kernel the other cells call (a network policy such as crux reaches kernels of the network model that a
    cell without it does not). Meanwhile the workers run the cells on a network without contention, which
    call few kernels of their own and would otherwise leave the other cores idle during the compile; those
    with a network policy go last, so that its kernels are more likely compiled here before a worker needs
    them. A grid of ideal-network cells only warms up with its first cell."""
    from ..network.model import is_ideal

    def policies(cell):  # the policies that reach kernels of their own ("none": not set)
        return tuple(cell.params.get(k) if cell.params.get(k) != "none" else None for k in ("netpolicy", "migration"))

    def key(cell):
        return cell.params.get("network"), policies(cell)

    contended = [c for c in cells if not is_ideal(c.params.get("network"))]
    if not contended:
        return cells[:1], [], cells[1:]
    here, seen = [], set()
    for cell in contended:
        if key(cell) not in seen:
            seen.add(key(cell))
            here.append(cell)
    chosen = {id(c) for c in here}
    beside = sorted((c for c in cells if is_ideal(c.params.get("network"))),
                    key=lambda c: any(policies(c)))
    return here, beside, [c for c in contended if id(c) not in chosen]


@BACKENDS.register("dask")
class DaskBackend(Backend):
    """Dask distributed: a LocalCluster by default, a scheduler ``address``, or your own ``client``/``cluster``."""

    name = "dask"

    def __init__(self, address: str | None = None, client=None, cluster=None, workers: int | None = None,
                 **_ignored):
        try:
            from distributed import Client, LocalCluster
        except ImportError as exc:  # pragma: no cover - depends on the install
            raise ImportError("the dask backend needs dask[distributed]: pip install 'netlab-sched[dask]'") from exc
        self._own, self._scratch = [], None
        if client is None:
            if cluster is None and address is None:
                # the cluster's scratch space in a folder of our own, removed on close: dask's default,
                # <tmp>/dask-scratch-space, outlives the run (its workers and nannies read the config)
                import dask

                self._scratch = tempfile.mkdtemp(prefix="netlab-dask-")
                with dask.config.set({"temporary-directory": self._scratch}):
                    cluster = LocalCluster(n_workers=workers or os.cpu_count() or 1, threads_per_worker=1,
                                           processes=True, dashboard_address=None, host="127.0.0.1",
                                           local_directory=self._scratch)
                self._own.append(cluster)
            client = Client(address if address is not None else cluster)
            self._own.insert(0, client)
        self.client = client

    def run(self, cells):
        from distributed import as_completed as dask_completed

        cells = list(cells)
        token = uuid.uuid4().hex[:8]  # two runs of one sweep on a shared cluster never share task keys
        futures = self.client.map(execute, cells, key=[f"netlab-cell-{c.id}-{token}" for c in cells], pure=False)
        by_key = {f.key: c for f, c in zip(futures, cells)}
        for fut in dask_completed(futures):
            cell = by_key[fut.key]
            if fut.status == "finished":
                yield fut.result()
            else:
                yield _lost(cell, fut.exception())
            fut.release()

    def close(self):
        for thing in self._own:  # the client first, then the cluster it talks to
            thing.close()
        self._own.clear()
        if self._scratch is not None:
            shutil.rmtree(self._scratch, ignore_errors=True)
            self._scratch = None
