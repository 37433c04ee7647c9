"""Per-link history of a run: every interval, per-link time-weighted load at a resolution, or nothing.

Why a choice: the full history is one row per busy link per interval between
network changes (26.7 M rows, most of a run's memory, at 200,000 jobs); a
million-job run cannot keep it. The table keeps its columns in every mode
(``netlab.sim.metrics.LINK_COLUMNS``), and ``load_gbps x (t_end_s - t_start_s)``
is always the Gbit a link carried in the row's span, so byte counts per tier
and the overload integral are the same from ``full`` and ``aggregate`` (to
float rounding):

* ``full``: one row per busy link per interval (the default, as before);
* ``aggregate``: one row per busy link per ``resolution_s`` bin (bins from
  t = 0, clipped to the recorded span): its time-averaged load and overload
  over the bin. ``resolution_s=inf`` keeps one row per link for the run;
* ``none``: no rows (the summary's ``overload_gbit`` and ``tier_bytes`` are 0
  and empty).

Histories get (now, load, overload) at every change of the loads
(:meth:`record`) and the end time (:meth:`close`).
"""

from __future__ import annotations

import math

from typing import TYPE_CHECKING

import numpy as np

from ..jit import njit  # numba is imported at the first kernel call
from ..network.jit import JIT
from ..registry import Registry

if TYPE_CHECKING:  # imported where a table is built, at the end of a run
    import pandas as pd

HISTORIES: Registry["LinkHistory"] = Registry("link history")


class LinkHistory:
    name = "base"

    def record(self, now: float, load: np.ndarray, overload: np.ndarray) -> None:
        """The loads hold from ``now`` until the next call (or :meth:`close`)."""

    def close(self, now: float) -> None:
        """End the current interval at ``now``."""

    def frame(self, topology) -> pd.DataFrame:
        """The per-link table (``LINK_COLUMNS``)."""
        return empty_links()


LINK_COLUMNS = ("t_start_s", "t_end_s", "link", "src", "dst", "tier", "capacity_gbps", "load_gbps", "utilisation",
                "overload_gbps")


def empty_links() -> pd.DataFrame:
    import pandas as pd

    return pd.DataFrame({c: pd.Series(dtype=object if c in ("src", "dst", "tier") else float) for c in LINK_COLUMNS})


def links_frame(topology, t0, t1, link, load, over) -> pd.DataFrame:
    """The per-link table from column arrays (link ids index ``topology``'s links)."""
    import pandas as pd

    cap = topology.link_capacity_gbps[link]
    src = np.asarray(topology.link_src, dtype=object)[link]
    dst = np.asarray(topology.link_dst, dtype=object)[link]
    return pd.DataFrame(dict(t_start_s=t0, t_end_s=t1, link=link, src=src, dst=dst, tier=topology.link_tier[link],
                             capacity_gbps=cap, load_gbps=load, utilisation=load / cap, overload_gbps=over))


@HISTORIES.register("none")
class NoHistory(LinkHistory):
    """No per-link rows."""

    name = "none"


@HISTORIES.register("full")
class FullHistory(LinkHistory):
    """One row per busy link per interval between changes."""

    name = "full"

    def __init__(self):
        self.segments: list = []  # (start, end, links, load, overload)
        self._seg = None

    def record(self, now, load, overload):
        self.close(now)
        busy = np.flatnonzero(load)
        self._seg = (now, busy, load[busy], overload[busy])

    def close(self, now):
        if self._seg is not None and now > self._seg[0] and len(self._seg[1]):
            self.segments.append((self._seg[0], now, *self._seg[1:]))
        if self._seg is not None:
            self._seg = (now, *self._seg[1:])

    def frame(self, topology):
        segs = [s for s in self.segments if len(s[2])]
        if not segs:
            return empty_links()
        t0 = np.concatenate([np.full(len(s[2]), s[0]) for s in segs])
        t1 = np.concatenate([np.full(len(s[2]), s[1]) for s in segs])
        return links_frame(topology, t0, t1, np.concatenate([s[2] for s in segs]), np.concatenate([s[3] for s in segs]),
                           np.concatenate([s[4] for s in segs]))


@njit(**JIT)
def _integrate(seg_load, seg_over, gbit, over, dt):  # pragma: no cover (compiled; tested through the history)
    """Add ``dt`` seconds of the segment's loads to the busy links' Gbit and overload integrals."""
    for g in range(seg_load.shape[0]):
        if seg_load[g] != 0.0:
            gbit[g] += seg_load[g] * dt
            over[g] += seg_over[g] * dt


@njit(**JIT)
def _snapshot(load, overload, seg_load, seg_over):  # pragma: no cover (compiled; tested through the history)
    """The segment starting now: each link's load and overload where it is busy (load not 0), else 0; the number
    of busy links."""
    busy = 0
    for g in range(load.shape[0]):
        if load[g] != 0.0:
            seg_load[g], seg_over[g] = load[g], overload[g]
            busy += 1
        else:
            seg_load[g] = seg_over[g] = 0.0
    return busy


@njit(**JIT)
def _integrate_snapshot(seg_load, seg_over, gbit, over, dt, load, overload):  # pragma: no cover (compiled)
    """:func:`_integrate` then :func:`_snapshot` in one pass over the links (the segment ends inside its bin)."""
    busy = 0
    for g in range(load.shape[0]):
        if seg_load[g] != 0.0:
            gbit[g] += seg_load[g] * dt
            over[g] += seg_over[g] * dt
        if load[g] != 0.0:
            seg_load[g], seg_over[g] = load[g], overload[g]
            busy += 1
        elif seg_load[g] != 0.0:
            seg_load[g] = seg_over[g] = 0.0
    return busy


@HISTORIES.register("aggregate")
class AggregateHistory(LinkHistory):
    """Per busy link per ``resolution_s`` bin: the time-averaged load and overload.

    The current segment is kept as full-length arrays (zero where a link is idle) and integrated by compiled
    loops, one pass over the links per change: on a 131,072-GPU fabric (~400,000 links) finding the busy
    links and indexing by them cost several times more. Each link adds ``load x dt`` per segment and bin in
    time order, as it would through an index of its busy links, so the sums are the same to the bit.
    """

    name = "aggregate"

    def __init__(self, resolution_s: float = 3600.0):
        if not (resolution_s > 0):
            raise ValueError(f"link history 'aggregate': resolution_s must be > 0 (inf: one bin), got {resolution_s}")
        self.resolution_s = float(resolution_s)
        self._bins: list = []  # (bin index, links, Gbit, overload Gbit-equivalent: Gbit/s x s)
        self._bin = 0
        self._gbit: np.ndarray | None = None
        self._over: np.ndarray | None = None
        self._seg_load: np.ndarray | None = None  # the current segment's load per link (0: idle)
        self._seg_over: np.ndarray | None = None
        self._seg_start: float | None = None
        self._seg_busy = 0  # busy links in the current segment
        self.first_s = self.last_s = None

    def _bin_of(self, t: float) -> int:
        return 0 if math.isinf(self.resolution_s) else int(t // self.resolution_s)

    def _flush(self) -> None:
        busy = np.flatnonzero(self._gbit)
        if len(busy):
            self._bins.append((self._bin, busy, self._gbit[busy], self._over[busy]))
        self._gbit[:] = 0.0
        self._over[:] = 0.0

    def _add(self, start: float, end: float) -> None:
        """Integrate the current segment over [start, end), bin by bin."""
        while end > start:
            b = self._bin_of(start)
            if b != self._bin:
                self._flush()
                self._bin = b
            stop = end if math.isinf(self.resolution_s) else min(end, (b + 1) * self.resolution_s)
            if stop <= start:  # float edge: start sits on a boundary its bin index rounds below
                stop = min(end, np.nextafter((b + 1) * self.resolution_s, math.inf))
            _integrate(self._seg_load, self._seg_over, self._gbit, self._over, stop - start)
            start = stop

    def record(self, now, load, overload):
        if self._gbit is None:
            n = len(load)
            self._gbit, self._over, self._seg_load, self._seg_over = (np.zeros(n) for _ in range(4))
            self._bin = self._bin_of(now)
            self.first_s = now
        start = self._seg_start
        if (start is not None and now > start and self._seg_busy and self._bin_of(start) == self._bin
                and (math.isinf(self.resolution_s) or now <= (self._bin + 1) * self.resolution_s)):
            # the common case, the segment inside the current bin: close and snapshot in one pass
            self._seg_start = self.last_s = now
            self._seg_busy = _integrate_snapshot(self._seg_load, self._seg_over, self._gbit, self._over, now - start,
                                                 np.asarray(load, dtype=np.float64),
                                                 np.asarray(overload, dtype=np.float64))
            return
        self.close(now)
        self._seg_start = now
        self._seg_busy = _snapshot(np.asarray(load, dtype=np.float64), np.asarray(overload, dtype=np.float64),
                                   self._seg_load, self._seg_over)

    def close(self, now):
        if self._seg_start is not None and now > self._seg_start and self._seg_busy:
            self._add(self._seg_start, now)
        if self._seg_start is not None:
            self._seg_start = now
            self.last_s = now

    def frame(self, topology):
        if self._gbit is not None:
            self._flush()
        bins = [b for b in self._bins if len(b[1])]
        if not bins:
            return empty_links()
        res = self.resolution_s
        lo = np.array([self.first_s if math.isinf(res) else max(b * res, self.first_s) for b, *_ in bins])
        hi = np.array([self.last_s if math.isinf(res) else min((b + 1) * res, self.last_s) for b, *_ in bins])
        span = np.maximum(hi - lo, np.finfo(float).tiny)
        sizes = [len(b[1]) for b in bins]
        t0, t1, width = np.repeat(lo, sizes), np.repeat(hi, sizes), np.repeat(span, sizes)
        gbit = np.concatenate([b[2] for b in bins])
        over = np.concatenate([b[3] for b in bins])
        return links_frame(topology, t0, t1, np.concatenate([b[1] for b in bins]), gbit / width, over / width)


def make_history(mode: str, resolution_s: float) -> LinkHistory:
    """The history for ``SimConfig.link_history`` (a HISTORIES name); ``resolution_s`` for ``aggregate``."""
    factory = HISTORIES.get(mode)
    return factory(resolution_s) if factory is AggregateHistory else factory()
