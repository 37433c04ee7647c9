"""The decision a placement policy returns, and the error for one that cannot be carried out."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np


class PolicyError(RuntimeError):
    """A policy returned a decision that cannot be carried out."""


@dataclass(frozen=True)
class Placement:
    """GPUs per host; the ring visits ``hosts`` in this order.

    ``phase`` (0..1, optional) sets the job's communication phase offset as a
    fraction of its iteration, for the phase-aware network model. ``shifts``
    re-sets running jobs' phases at the same moment, as ``(job_id, phase)``
    pairs (CASSINI shifts every job of an affinity component together).
    """

    hosts: tuple[int, ...]
    gpus: tuple[int, ...]
    phase: float | None = None
    shifts: tuple[tuple[int, float], ...] = ()

    @property
    def n_gpus(self) -> int:
        return sum(self.gpus)

    @classmethod
    def from_counts(cls, counts: np.ndarray, order: Sequence[int] | None = None, phase: float | None = None):
        """From a per-host GPU count array; hosts in index order unless ``order`` is given."""
        hosts = np.flatnonzero(counts) if order is None else [h for h in order if counts[h] > 0]
        return cls(tuple(int(h) for h in hosts), tuple(int(counts[h]) for h in hosts), phase)

