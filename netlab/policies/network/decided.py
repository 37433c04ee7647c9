"""The jobs a path-choosing network policy has decided on, kept in flat arrays across its calls.

Why: ``crux`` decides tens of running jobs thousands of times a run, and most of them are the same jobs as in its
last call (one or two started or ended). Gathering each job's flows, last path picks, intensity and class from
Python objects at every call cost more than the decision itself. Here each decided job has a slot: its flows
(``_Flows.packed`` and ``secs``) are copied into flat pools once, when it is added, and its picks and class stay
in the table between calls, so a call hands one compiled kernel the slots in the order it wants
(``crux._decide_slots``) and the kernel reads each slot's flows where they sit in the pools (no copy per call).

Slots are reused; the pools grow at their end and, when full, are rebuilt from the live slots (the freed regions
dropped), so their size stays within a small multiple of what the running jobs need.
"""

from __future__ import annotations

import numpy as np


class DecidedTable:
    """Per slot: where its flows (``packed``, ``secs``) and path picks sit in the pools, its flows, whether every
    seconds entry of its flows is finite and above zero (``positive``: then no path of it can cost nothing, which
    lets a kernel keep its picks without pricing its paths: ``crux._pick_slots``), GPU intensity and class
    (-1: not decided yet). A new slot's picks are -1 (no path yet)."""

    def __init__(self, slots: int = 64, pool: int = 4096):
        self.packed = np.zeros(pool, dtype=np.int64)  # each slot's n_paths, hops and links (``_Flows.packed``)
        self.secs = np.zeros(pool)  # each slot's seconds per hop entry (``_Flows.secs``)
        self.picks = np.zeros(pool, dtype=np.int64)  # each slot's path pick per flow
        self.pk_off = np.zeros(slots, dtype=np.int64)
        self.sec_off = np.zeros(slots, dtype=np.int64)
        self.pick_off = np.zeros(slots, dtype=np.int64)
        self.n_flows = np.zeros(slots, dtype=np.int64)
        self.positive = np.zeros(slots, dtype=np.bool_)  # every seconds entry finite and > 0
        self.intensity = np.zeros(slots)
        self.cls = np.full(slots, -1, dtype=np.int64)
        self._flows: dict[int, object] = {}  # live slot -> its _Flows (what a rebuild copies again)
        self._free: list[int] = []
        self._slots = 0  # slots ever handed out (the live ones and the free ones)
        self._ends = [0, 0, 0]  # the used length of packed, secs, picks

    def add(self, flows, intensity: float) -> int:
        """A new slot for a job with ``flows`` (a ``_Flows``) and ``intensity``: picks -1, class -1."""
        need = (len(flows.packed), len(flows.secs), len(flows.n_paths))
        if any(e + n > len(a) for e, n, a in zip(self._ends, need, (self.packed, self.secs, self.picks))):
            self._rebuild(need)
        if self._free:
            s = self._free.pop()
        else:
            if self._slots == len(self.n_flows):
                self._grow_slots()
            s, self._slots = self._slots, self._slots + 1
        a, b, c = self._ends
        self.packed[a:a + need[0]] = flows.packed
        self.secs[b:b + need[1]] = flows.secs
        self.picks[c:c + need[2]] = -1
        self.pk_off[s], self.sec_off[s], self.pick_off[s] = a, b, c
        self.n_flows[s] = need[2]
        positive = flows.positive
        if positive is None:
            positive = bool(np.all(np.isfinite(flows.secs) & (flows.secs > 0)))
        self.positive[s] = positive
        self.intensity[s], self.cls[s] = intensity, -1
        self._ends = [a + need[0], b + need[1], c + need[2]]
        self._flows[s] = flows
        return s

    def remove(self, slot: int) -> None:
        """Free ``slot`` (its pool regions are dropped at the next rebuild)."""
        del self._flows[slot]
        self._free.append(slot)

    def arrays(self) -> tuple:
        """The pools and per-slot arrays ``crux._decide_slots`` reads, in its order (valid until the next
        :meth:`add`)."""
        return (self.packed, self.secs, self.picks, self.pk_off, self.sec_off, self.pick_off, self.n_flows,
                self.positive, self.intensity)

    def picks_of(self, slot: int) -> np.ndarray:
        """The slot's path picks (a view: valid until the next :meth:`add`)."""
        o = self.pick_off[slot]
        return self.picks[o:o + self.n_flows[slot]]

    def _grow_slots(self) -> None:
        n = 2 * len(self.n_flows)
        for name in ("pk_off", "sec_off", "pick_off", "n_flows", "positive", "intensity", "cls"):
            old = getattr(self, name)
            new = np.full(n, -1, dtype=old.dtype) if name == "cls" else np.zeros(n, dtype=old.dtype)
            new[:len(old)] = old
            setattr(self, name, new)

    def _rebuild(self, need: tuple) -> None:
        """The pools again from the live slots only, each at least twice what they and ``need`` take."""
        live = sorted(self._flows)
        sizes = [sum(len(f.packed) for f in self._flows.values()), sum(len(f.secs) for f in self._flows.values()),
                 sum(len(f.n_paths) for f in self._flows.values())]
        lens = [max(len(a), 2 * (s + n)) for a, s, n in zip((self.packed, self.secs, self.picks), sizes, need)]
        packed, secs, picks = np.zeros(lens[0], np.int64), np.zeros(lens[1]), np.zeros(lens[2], np.int64)
        a = b = c = 0
        for s in live:
            f = self._flows[s]
            na, nb, nc = len(f.packed), len(f.secs), len(f.n_paths)
            packed[a:a + na], secs[b:b + nb] = f.packed, f.secs
            picks[c:c + nc] = self.picks_of(s)
            self.pk_off[s], self.sec_off[s], self.pick_off[s] = a, b, c
            a, b, c = a + na, b + nb, c + nc
        self.packed, self.secs, self.picks = packed, secs, picks
        self._ends = [a, b, c]
