"""Scheduling policies: ordering, placement and preemption, each in its own module and registry."""

from . import ordering, placement, preemption  # noqa: F401  (registers every policy)
from . import dally  # noqa: F401  (Dally: ordering, placement and preemption)
from .base import (ORDERING, PLACEMENT, PREEMPTION, OrderingPolicy, Placement, PlacementPolicy, PolicyError,
                   PreemptionPolicy)

__all__ = ["ORDERING", "PLACEMENT", "PREEMPTION", "OrderingPolicy", "PlacementPolicy", "PreemptionPolicy",
           "Placement", "PolicyError"]
