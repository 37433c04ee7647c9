"""The event-driven simulator."""

from ..sched import ClusterView, JobState  # the state the simulator shows its policies
from .kernel import Kernel, RealtimeClock, SimClock
from .metrics import SimResult, link_summary
from .config import SimConfig
from .simulator import Simulator, simulate

__all__ = ["Kernel", "SimClock", "RealtimeClock", "SimResult", "link_summary", "SimConfig", "Simulator", "simulate",
           "ClusterView", "JobState"]
