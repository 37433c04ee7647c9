"""Scheduling policies: ordering, placement, preemption, network allocation and migration, each in its own module and
registry.

This package is the policies' front: importing it registers every policy, and
the simulator and the testbed reach policies only through the registries and
interfaces it exports. The decision and state types policies exchange with
them are in :mod:`netlab.sched`.
"""

from . import migration, network, ordering, placement, preemption  # noqa: F401  (registers every policy)
from . import dally  # noqa: F401  (Dally: ordering, placement and preemption)
from . import joint  # noqa: F401  (joint GPU + bandwidth allocation: a placement and a network policy)
from .base import (MIGRATION, NETWORK_POLICIES, ORDERING, PLACEMENT, PREEMPTION, MigrationPolicy, NetworkPolicy,
                   OrderingPolicy, PlacementPolicy, PreemptionPolicy)

__all__ = ["ORDERING", "PLACEMENT", "PREEMPTION", "NETWORK_POLICIES", "MIGRATION", "OrderingPolicy", "PlacementPolicy",
           "PreemptionPolicy", "NetworkPolicy", "MigrationPolicy"]
