"""The event-driven simulator."""

from .kernel import Kernel, RealtimeClock, SimClock
from .metrics import SimResult, link_summary
from .simulator import SimConfig, Simulator, simulate
from .state import ClusterView, JobState

__all__ = ["Kernel", "SimClock", "RealtimeClock", "SimResult", "link_summary", "SimConfig", "Simulator", "simulate",
           "ClusterView", "JobState"]
