"""First fit: hosts in index order, taking free GPUs until the job is placed."""

import numpy as np

from ...sched import Placement
from ..base import PLACEMENT, PlacementPolicy
from .consolidated import take


@PLACEMENT.register("first-fit")
class FirstFit(PlacementPolicy):
    """Lowest-numbered hosts with free GPUs first."""

    name = "first-fit"

    def place(self, job, view):
        free = view.free_gpus
        if free.sum() < job.gpus:
            return None
        hosts = np.flatnonzero(free > 0)
        return Placement.from_counts(take(free, hosts, job.gpus))
