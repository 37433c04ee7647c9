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

Histories get (now, load, overload) at every change of the loads, with the
ids of the links that changed when the network model names them
(:meth:`record`), and the end time (:meth:`close`).
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

    reads_changed = False  # record() reads ``changed`` (else the fabric need not track it)

    def record(self, now: float, load: np.ndarray, overload: np.ndarray, changed: np.ndarray | None = None) -> None:
        """The loads hold from ``now`` until the next call (or :meth:`close`); ``changed``: the ids of the links
        whose loads may differ from the previous call's (None: any)."""

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
    """The per-link table from column arrays (link ids index ``topology``'s links).

    The table takes the arrays as its columns (``copy=False``; the callers pass arrays made for it): pandas
    otherwise stacks the six float columns into one new block, a copy of the whole table (millions of rows
    on a long trace) for the same values and dtypes."""
    import pandas as pd

    cap = topology.link_capacity_gbps[link]
    src, dst, tier = (_names(names, link) for names in (topology.link_src, topology.link_dst, topology.link_tier))
    return pd.DataFrame(dict(t_start_s=t0, t_end_s=t1, link=link, src=src, dst=dst, tier=tier,
                             capacity_gbps=cap, load_gbps=load, utilisation=load / cap, overload_gbps=over),
                        copy=False)


def _names(names, link: np.ndarray):
    """``names[link]`` as the column pandas makes of those strings. Where pandas keeps strings in Arrow (pandas
    3), by one take in Arrow: converting one Python string per row cost most of a full-history table's build
    (tens of millions of rows on full Philly); else as before, an object array."""
    import pandas as pd

    dtype = pd.Series(np.asarray(names[:1], dtype=object)).dtype
    if isinstance(dtype, pd.StringDtype) and dtype.storage == "pyarrow" and len(names):
        import pyarrow as pa

        return pd.array(pa.array(list(names), type=pa.large_string()).take(pa.array(link)), dtype=dtype)
    return np.asarray(names, dtype=object)[link]


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

    def record(self, now, load, overload, changed=None):
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
        rows = [len(s[2]) for s in segs]
        t0 = np.repeat(np.array([s[0] for s in segs], dtype=float), rows)
        t1 = np.repeat(np.array([s[1] for s in segs], dtype=float), rows)
        return links_frame(topology, t0, t1, np.concatenate([s[2] for s in segs]), np.concatenate([s[3] for s in segs]),
                           np.concatenate([s[4] for s in segs]))


@njit(**JIT)
def _integrate_to(seg_load, seg_over, since, gbit, over, t):  # pragma: no cover (compiled; tested through it)
    """Every busy link's load and overload since its last change, integrated up to ``t`` (then counted from t)."""
    for g in range(seg_load.shape[0]):
        if seg_load[g] != 0.0:
            dt = t - since[g]
            gbit[g] += seg_load[g] * dt
            over[g] += seg_over[g] * dt
            since[g] = t


@njit(**JIT)
def _change(g, now, load, overload, seg_load, seg_over, since, gbit, over):  # pragma: no cover (compiled)
    """Link ``g``'s loads may change at ``now``: if its load or overload did change, its old load is integrated
    since its last change and it takes the new one; the change in the number of busy links (load not 0).

    One integration for both passes below. A link whose values are the same keeps integrating from its last
    change (it adds ``load x 0``, exactly nothing, and keeps its start), so the sums depend on the loads alone,
    not on which links a writer names (a re-solve names every link of its component; on rail 131k about 4% of
    them change). Written without a branch on whether the link changed: a pass over consecutive ids then runs
    as vector code (~0.7 ms on 400,000 links against ~3 ms with the branch, which mispredicts where the few
    changed links fall)."""
    new_load = load[g]
    old_load = seg_load[g]
    new_over = overload[g] if new_load != 0.0 else 0.0
    old_over = seg_over[g]
    moved = (new_load != old_load) | (new_over != old_over)
    start = since[g]
    dt = (now - start) if moved else 0.0
    gbit[g] += old_load * dt
    over[g] += old_over * dt
    seg_load[g] = new_load
    seg_over[g] = new_over
    since[g] = now if moved else start
    return int(new_load != 0.0) - int(old_load != 0.0)


@njit(**JIT)
def _change_links(changed, now, load, overload, seg_load, seg_over, since, gbit, over):  # pragma: no cover
    """:func:`_change` for the ``changed`` links (repeats harmless: a repeat finds its values unchanged)."""
    d = 0
    for g in changed:
        d += _change(g, now, load, overload, seg_load, seg_over, since, gbit, over)
    return d


@njit(**JIT)
def _change_all(now, load, overload, seg_load, seg_over, since, gbit, over):  # pragma: no cover (compiled)
    """:func:`_change` for every link."""
    d = 0
    for g in range(load.shape[0]):
        d += _change(g, now, load, overload, seg_load, seg_over, since, gbit, over)
    return d


@HISTORIES.register("aggregate")
class AggregateHistory(LinkHistory):
    """Per busy link per ``resolution_s`` bin: the time-averaged load and overload.

    Each link keeps its current load and overload and the time they started (full-length arrays, compiled
    loops); a record integrates and replaces only the links whose load or overload changed, among those the
    fabric's link state names (all links if the network model did not), so a change costs in proportion to
    the links it reaches, not to the fabric (~400,000 links on 131,072 GPUs), and the sums do not depend on
    how many more links a writer names than it changed. At a bin's end, and at :meth:`close`,
    every busy link is integrated up to it. A link adds ``load x (time the load held inside the bin)``:
    the same sums as adding each interval between changes of any link, up to float rounding.
    """

    name = "aggregate"
    reads_changed = True  # record() takes the ids of the links that changed

    def __init__(self, resolution_s: float = 3600.0):
        if not (resolution_s > 0):
            raise ValueError(f"link history 'aggregate': resolution_s must be > 0 (inf: one bin), got {resolution_s}")
        self.resolution_s = float(resolution_s)
        self._bins: list = []  # (bin index, links, Gbit, overload Gbit-equivalent: Gbit/s x s)
        self._bin = 0
        self._gbit: np.ndarray | None = None
        self._over: np.ndarray | None = None
        self._seg_load: np.ndarray | None = None  # each link's load since its last change (0: idle)
        self._seg_over: np.ndarray | None = None
        self._since: np.ndarray | None = None  # when that load started (or its bin, or the last close)
        self._busy = 0  # busy links now
        self.first_s = self.last_s = None

    def _bin_of(self, t: float) -> int:
        return 0 if math.isinf(self.resolution_s) else int(t // self.resolution_s)

    def _flush(self) -> None:
        busy = np.flatnonzero(self._gbit)
        if len(busy):
            self._bins.append((self._bin, busy, self._gbit[busy], self._over[busy]))
        self._gbit[:] = 0.0
        self._over[:] = 0.0

    def _roll(self, now: float) -> None:
        """Close the bins that end before ``now``: busy links integrated up to each bin's end."""
        res = self.resolution_s
        if math.isinf(res):
            return
        while now > (self._bin + 1) * res:
            edge = (self._bin + 1) * res
            if self._busy:
                _integrate_to(self._seg_load, self._seg_over, self._since, self._gbit, self._over, edge)
                self._flush()
                self._bin += 1
            else:  # nothing busy: no bin in between gets a row
                self._flush()
                self._bin = max(self._bin + 1, self._bin_of(now))

    def record(self, now, load, overload, changed=None):
        load, overload = np.asarray(load, dtype=np.float64), np.asarray(overload, dtype=np.float64)
        if self._gbit is None:
            n = len(load)
            self._gbit, self._over, self._seg_load, self._seg_over, self._since = (np.zeros(n) for _ in range(5))
            self._bin = self._bin_of(now)
            self.first_s = now
            changed = None
        self._roll(now)
        args = (now, load, overload, self._seg_load, self._seg_over, self._since, self._gbit, self._over)
        # a list (with repeats) longer than a tenth of the links: one pass instead, which costs less (the same
        # sums: a link splits its integration only where its values changed)
        every = changed is None or len(changed) >= len(load) // 10
        self._busy += _change_all(*args) if every else _change_links(changed, *args)
        self.last_s = now

    def close(self, now):
        if self._gbit is None:
            return
        self._roll(now)
        if self._busy:
            _integrate_to(self._seg_load, self._seg_over, self._since, self._gbit, self._over, now)
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
