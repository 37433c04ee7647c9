"""Per-link state shared by the simulator's fabric and the network model it drives.

The fabric counts the running jobs on each link and records the loads in the
run's history; the model writes the loads. Policies hold the load array of
the view they were given while the run goes on, so it is copied on write:
:meth:`LinkState.lend_load` hands the current array out, and the next
:meth:`LinkState.write` replaces it by a copy before anything changes, unless
the borrower has let it go by then (no reference left but this object's: a
scheduling pass's view usually dies before the re-solve that follows the
pass, and on a 131,072-GPU fabric each copy is ~400,000 links).

Which links a write changes: a writer may name them (:meth:`LinkState.write`'s
``changed``, :meth:`LinkState.mark`), and a reader that keeps per-link state
(the aggregated history) then updates those links only
(:meth:`LinkState.take_changed`); a writer that names none may have changed
any link. On a 131,072-GPU fabric a change reaches a few hundred links of
~400,000.
"""

from __future__ import annotations

import sys

from typing import NamedTuple

import numpy as np


class LinkArrays(NamedTuple):
    """The per-link arrays compiled kernels read and write (one entry per directed link)."""

    capacity_gbps: np.ndarray
    jobs: np.ndarray  # running network jobs on the link (int64)
    load_gbps: np.ndarray  # time-averaged load
    overload_gbps: np.ndarray  # time-averaged demand above capacity (the ECN proxy)
    queue_frac: np.ndarray  # share of time the queue is above the ECN threshold (models that model one)


class LinkState:
    """Per directed link: capacity, running jobs on it, and what the history records (see the module doc)."""

    __slots__ = ("capacity_gbps", "jobs", "load_gbps", "overload_gbps", "queue_frac", "version", "_lent", "_track",
                 "_changed", "_any")

    def __init__(self, capacity_gbps: np.ndarray, track_changes: bool = False):
        """``track_changes``: keep the links each write changes for :meth:`take_changed` (a reader asks)."""
        n = len(capacity_gbps)
        self.capacity_gbps = np.ascontiguousarray(capacity_gbps, dtype=np.float64)
        self.jobs = np.zeros(n, dtype=np.int64)
        self.load_gbps = np.zeros(n)
        self.overload_gbps = np.zeros(n)
        self.queue_frac = np.zeros(n)
        self.version = 0  # counts writes: the fabric records the loads after a change
        self._lent = False
        self._track = track_changes
        self._changed: list[np.ndarray] = []  # link ids written since take_changed (with repeats)
        self._any = False  # a write that named no links: any may have changed

    def lend_load(self) -> np.ndarray:
        """The load array for a reader that keeps it (a policy's view): it will not change."""
        self._lent = True
        return self.load_gbps

    def write(self, changed: np.ndarray | None = None) -> None:
        """Call before writing the loads: a lent load array is replaced by a copy first. ``changed``: the ids of
        the links the write changes (load, overload or queue; the writer may name more with :meth:`mark`);
        None: any link."""
        if self._lent:
            if self._load_refs() > _OWN_REFS:  # still held by a borrower: it must not change
                self.load_gbps = self.load_gbps.copy()
            self._lent = False
        self.version += 1
        if self._track:
            if changed is None:
                self._any = True
            elif not self._any:
                self._changed.append(changed)

    def mark(self, changed: np.ndarray) -> None:
        """A write (after :meth:`write`) also changed these links."""
        if self._track and not self._any:
            self._changed.append(changed)

    def take_changed(self) -> np.ndarray | None:
        """The ids of the links changed since the last call (repeats possible; None: any link may have), and
        start counting again. Tracked only if the state was made with ``track_changes``: otherwise None."""
        if not self._track or self._any:
            self._any, self._changed = False, []
            return None
        changed = np.concatenate(self._changed) if self._changed else np.zeros(0, dtype=np.int64)
        self._changed = []
        return changed

    def _load_refs(self) -> int:
        return sys.getrefcount(self.load_gbps)

    def arrays(self) -> LinkArrays:
        """The arrays for a compiled kernel; call :meth:`write` first if it writes the loads."""
        return LinkArrays(self.capacity_gbps, self.jobs, self.load_gbps, self.overload_gbps, self.queue_frac)


#: what :meth:`LinkState._load_refs` reports while only the LinkState holds its load array, measured on this
#: interpreter rather than assumed (getrefcount's own argument counts on 3.11 but may be borrowed on later
#: versions): a borrower's reference is anything above it
_OWN_REFS = LinkState(np.zeros(1))._load_refs()
