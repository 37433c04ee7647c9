"""What the policies and the mechanisms that carry their decisions out share.

A policy reads the cluster state (:class:`JobState`, :class:`ClusterView`)
and returns a decision (:class:`Placement`); the simulator or the live
testbed carries it out, raising :class:`PolicyError` if it cannot. These
types live here, below both, so that neither side imports the other for
them: ``netlab.policies`` never imports ``netlab.sim``, and ``netlab.sim``
reaches the policies only through their registries (``tests/test_layers.py``).
"""

from .allocation import DEFAULT_ALLOCATION, NetAllocation
from .decision import Placement, PolicyError
from .state import ClusterView, JobState

__all__ = ["Placement", "PolicyError", "ClusterView", "JobState", "NetAllocation", "DEFAULT_ALLOCATION"]
