"""Per-link state shared by the simulator's fabric and the network model it drives.

The fabric counts the running jobs on each link and records the loads in the
run's history; the model writes the loads. Policies read the loads as they
were when their view was made, while the run goes on:

* :meth:`LinkState.snapshot` is what a view holds: the loads of that moment,
  read through the live array and a log of the entries written since. A write
  that names its links first (:meth:`LinkState.write`'s ``changed``) saves the
  old values of those entries into each live snapshot; a snapshot nobody reads
  costs only that. On a 131,072-GPU fabric (~400,000 links) a multi-host job
  joining inside a scheduling pass writes a few hundred links, where a copy of
  the whole array per join cost more than the join.
* :meth:`LinkState.lend_load` hands the current array itself out (a reader
  that keeps it), and the next write replaces it by a copy before anything
  changes, unless the borrower has let it go by then (no reference left but
  this object's).

Which links a write changes: a writer may name them (:meth:`LinkState.write`'s
``changed``, :meth:`LinkState.mark`), and a reader that keeps per-link state
(the aggregated history) then updates those links only
(:meth:`LinkState.take_changed`); a writer that names none may have changed
any link. On a 131,072-GPU fabric a change reaches a few hundred links of
~400,000.
"""

from __future__ import annotations

import sys
import weakref

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
                 "_changed", "_any", "_snapshots", "_logged")

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
        self._snapshots: list[weakref.ref] = []  # snapshots that read through the live array and their logs
        self._logged = False  # the last write saved its links into live snapshots (mark may not add links)

    def lend_load(self) -> np.ndarray:
        """The load array for a reader that keeps it: it will not change."""
        self._lent = True
        return self.load_gbps

    def snapshot(self) -> "LoadSnapshot":
        """The loads as they are now, for a reader that may read them later (a policy's view): see the module doc."""
        snap = LoadSnapshot(self)
        self._snapshots.append(weakref.ref(snap))
        return snap

    def write(self, changed: np.ndarray | None = None) -> None:
        """Call before writing the loads: a lent load array is replaced by a copy first, and live snapshots save
        the entries about to change. ``changed``: the ids of the links the write changes (load, overload or
        queue); None: any link. A writer that names more links afterwards (:meth:`mark`) passes an empty array
        here: live snapshots then keep a copy of the whole array, since the entries are not known in advance."""
        if self._lent:
            if self._load_refs() > _OWN_REFS:  # still held by a borrower: it must not change
                self.load_gbps = self.load_gbps.copy()
            self._lent = False
        self._logged = False
        if self._snapshots:
            self._keep_snapshots(changed)
        self.version += 1
        if self._track:
            if changed is None:
                self._any = True
            elif not self._any:
                self._changed.append(changed)

    def _keep_snapshots(self, changed: np.ndarray | None) -> None:
        """Live snapshots save what the coming write changes (the listed entries, or the whole array)."""
        live = []
        for ref in self._snapshots:
            snap = ref()
            if snap is None or snap._state is None:
                continue
            if changed is None or len(changed) == 0:
                snap._freeze(self.load_gbps.copy())
                continue
            if snap._save(changed, self.load_gbps[changed]):
                live.append(ref)
                self._logged = True
        self._snapshots = live

    def mark(self, changed: np.ndarray) -> None:
        """A write (after :meth:`write`) also changed these links."""
        if self._logged and len(changed):  # live snapshots saved the entries named at write(), not these
            raise RuntimeError("LinkState.mark after a write that named its links while a snapshot was live: "
                               "name every link at write(), or pass an empty array there")
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


class LoadSnapshot:
    """The load per directed link as it was when :meth:`LinkState.snapshot` was called (see the module doc).

    Until the first write after it, it reads the live array; then it keeps the old values of the entries each
    write changes (the first saved value of an entry is its value at the snapshot) and builds its array from the
    live one and those when first read. A log grown past a quarter of the links is folded into a copy.
    """

    __slots__ = ("_state", "_ids", "_values", "_saved", "_array", "__weakref__")

    def __init__(self, state: LinkState):
        self._state: LinkState | None = state  # None once it holds its own array
        self._ids: list[np.ndarray] = []
        self._values: list[np.ndarray] = []
        self._saved = 0
        self._array: np.ndarray | None = None

    def array(self) -> np.ndarray:
        """The loads of the snapshot's moment (Gbit/s per directed link); the array never changes afterwards."""
        if self._array is None:
            state = self._state
            if not self._ids:  # nothing written since: the live array, lent (copied before the next write)
                self._array, self._state = state.lend_load(), None
            else:
                self._freeze(state.load_gbps.copy())
        return self._array

    def _save(self, ids: np.ndarray, values: np.ndarray) -> bool:
        """Keep the old ``values`` of entries ``ids`` (before a write); False if it now holds its own array."""
        self._ids.append(ids)
        self._values.append(values)
        self._saved += len(ids)
        if 4 * self._saved > len(self._state.load_gbps):  # a copy is now the cheaper record
            self._freeze(self._state.load_gbps.copy())
            return False
        return True

    def _freeze(self, live_copy: np.ndarray) -> None:
        """Become an array: ``live_copy`` (the live loads before the coming write) with the saved entries put
        back, latest saved first, so each entry ends at its first saved value."""
        for ids, values in zip(reversed(self._ids), reversed(self._values)):
            live_copy[ids] = values
        self._array, self._state, self._ids, self._values = live_copy, None, [], []


#: what :meth:`LinkState._load_refs` reports while only the LinkState holds its load array, measured on this
#: interpreter rather than assumed (getrefcount's own argument counts on 3.11 but may be borrowed on later
#: versions): a borrower's reference is anything above it
_OWN_REFS = LinkState(np.zeros(1))._load_refs()
