"""CASSINI's aligned baseline: the host's own placement with every job's iterations in step.

Why: without CASSINI a job's iterations start when the job starts, so
relative phases are effectively random (the simulator's default phase, the
"random-phase" baseline). The paper's motivating case is the opposite, jobs
communicating at the same time; this baseline makes it explicit by giving
every job phase 0 (its iterations start at whole multiples of its period),
so jobs with equal periods are aligned. Both baselines bound how much a
time shift can buy. On the ``tcp`` model aligned jobs do not stay aligned:
its leader advantage pushes them into turns after some iterations, as the
testbed showed.
"""

from __future__ import annotations

import numpy as np

from ...sched import Placement
from ..base import PLACEMENT, PlacementPolicy


@PLACEMENT.register("aligned")
class Aligned(PlacementPolicy):
    """The ``host`` placement (consolidated by default) with phase 0 for every job: all in step."""

    name = "aligned"

    def __init__(self, host="consolidated"):
        self._host = PLACEMENT.create(host) if isinstance(host, str) else host
        self.host = host if isinstance(host, str) else getattr(host, "name", type(host).__name__)

    def reset(self, rng: np.random.Generator) -> None:
        self.rng = rng
        self._host.reset(np.random.default_rng(int(rng.integers(2**63))))

    def place(self, job, view):
        p = self._host.place(job, view)
        return None if p is None else Placement(p.hosts, p.gpus, 0.0)
