"""Moved to :mod:`netlab.sched.state` (below both the policies and the simulator).

Kept importable because ``benchmarks/bench_cassini.py`` and
``benchmarks/bench_core.py`` import it from here; new code imports
:mod:`netlab.sched`.
"""

from ..sched.state import ClusterView, JobState

__all__ = ["ClusterView", "JobState"]
