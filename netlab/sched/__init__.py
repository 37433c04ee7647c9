"""What the policies and the mechanisms that carry their decisions out share, and the scheduling pass itself.

A policy reads the cluster state (:class:`JobState`, :class:`ClusterView`)
and returns a decision (:class:`Placement`); the :class:`Scheduler` runs the
one scheduling pass (order, place, preempt, check) against a
:class:`Mechanism` (the simulator, the live testbed, the Slurm advisor),
which carries the decisions out, raising :class:`PolicyError` if it cannot.
These live here, below both sides, so that neither imports the other:
``netlab.policies`` never imports ``netlab.sim``, ``netlab.sched`` imports
neither the policies nor any mechanism, and the mechanisms reach the policies
only through their registries (``tests/test_layers.py``).
"""

from .allocation import DEFAULT_ALLOCATION, NetAllocation
from .decision import Placement, PolicyError
from .mechanism import Mechanism, check_placement
from .scheduler import Scheduler
from .state import ClusterView, JobState, RunningChanges, RunningJobs

__all__ = ["Placement", "PolicyError", "ClusterView", "JobState", "NetAllocation", "DEFAULT_ALLOCATION", "Mechanism",
           "Scheduler", "check_placement", "RunningChanges", "RunningJobs"]
