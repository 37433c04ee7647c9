"""CASSINI (NSDI 2024): interleave jobs' communication phases on shared links.

* :mod:`.score`: per-link compatibility on a unified circle (:mod:`netlab.network.circle`), shift optimisation;
* :mod:`.affinity`: the job/link affinity graph and its breadth-first phase assignment;
* :mod:`.candidates`: the host scheduler's short list of acceptable placements;
* :mod:`.ranker`: the ``cassini`` placement policy (candidates, ranking, phases and shifts);
* :mod:`.baseline`: the ``aligned`` placement (the host's pick, every job in step), a baseline.

Importing this package registers the ``cassini`` and ``aligned`` placement policies.
"""

from . import baseline, ranker  # noqa: F401  (registers "aligned", "cassini")
from .candidates import shortlist
from .affinity import Assignment, affinity_graph, assign_phases, contended
from .ranker import Cassini, Scored
from .score import LinkResult, Wave, evaluate, optimise, scan

__all__ = ["Assignment", "Cassini", "LinkResult", "Scored", "Wave", "affinity_graph", "assign_phases", "shortlist",
           "contended", "evaluate", "optimise", "scan"]
