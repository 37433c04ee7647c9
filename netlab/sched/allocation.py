"""The fourth decision: how much of the network a running job gets.

Placement says where a job runs; a :class:`NetAllocation` says how its flows are treated on the links they
cross. It is what a network policy returns for each running job, what every contended network model honours
(or refuses, naming what it cannot do), and what the testbed turns into per-job HTB classes and routes:

* ``priority``: the job's class, 0 (served first) to 7, as HTB's ``prio`` and Crux's eight levels. A class is
  served strictly before the classes below it; jobs of one class share what is left.
* ``weight``: the job's share inside its class, relative to the others there (HTB's ``quantum``): 2:1 weights
  give 2/3 and 1/3 of a link both saturate.
* ``rate_cap_gbps``: a ceiling on each of the job's flows (HTB's ``ceil``); None: no cap.
* ``paths``: which equal-cost path each of the job's flows takes, as an index into that flow's paths in the
  order the topology lists them (``Topology.paths``), one entry per flow in the demand's flow order, or a
  single entry for every flow; None: the fabric's own ECMP rule (hash or split).
* ``own_queue``: the job is served from a queue of its own (the testbed's per-job HTB class, a per-job queue in
  a switch) instead of its class's queue, which it shares with the other jobs of its class (a switch has eight,
  as Crux assumes). A weight other than 1 implies it: a per-job share needs a per-job queue to be enforced.
  Jobs in one shared queue meet the FIFO effects between flows (``tcp``'s leader advantage); a job in its own
  queue does not.

The default allocation (class 0, weight 1, no cap, ECMP) is what every job had before network policies
existed, so a run without a network policy is unchanged.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ..errors import InputError

#: priority classes, 0 (highest) .. PRIORITY_CLASSES - 1, as HTB's prio and Crux's levels
PRIORITY_CLASSES = 8


@dataclass(frozen=True)
class NetAllocation:
    """One running job's share of the network (see the module doc)."""

    priority: int = 0
    weight: float = 1.0
    rate_cap_gbps: float | None = None
    paths: tuple[int, ...] | None = None
    own_queue: bool = False

    def __post_init__(self):
        if not isinstance(self.own_queue, bool):
            raise InputError(f"NetAllocation: field 'own_queue' must be True or False, got {self.own_queue!r}")
        if isinstance(self.priority, bool) or not isinstance(self.priority, int) \
                or not 0 <= self.priority < PRIORITY_CLASSES:
            raise InputError(f"NetAllocation: field 'priority' must be an integer 0..{PRIORITY_CLASSES - 1} "
                             f"(0 is served first), got {self.priority!r}")
        if not (isinstance(self.weight, (int, float)) and math.isfinite(self.weight) and self.weight > 0):
            raise InputError(f"NetAllocation: field 'weight' must be a finite number > 0, got {self.weight!r}")
        cap = self.rate_cap_gbps
        if cap is not None and not (isinstance(cap, (int, float)) and not math.isnan(cap) and cap > 0):
            raise InputError(f"NetAllocation: field 'rate_cap_gbps' must be None (no cap) or a number of Gbit/s "
                             f"> 0, got {cap!r}")
        if self.paths is not None:
            if not isinstance(self.paths, tuple) or not self.paths or not all(
                    isinstance(p, int) and not isinstance(p, bool) and p >= 0 for p in self.paths):
                raise InputError(f"NetAllocation: field 'paths' must be None (the fabric's ECMP) or a non-empty "
                                 f"tuple of path indices >= 0, got {self.paths!r}")

    @property
    def queue_of_its_own(self) -> bool:
        """True if the job is served from a queue of its own: asked for, or implied by a weight other than 1."""
        return self.own_queue or self.weight != 1.0

    @property
    def is_default(self) -> bool:
        """True if this allocation changes nothing (class 0, weight 1, no cap, ECMP)."""
        return self == DEFAULT_ALLOCATION

    def kinds(self) -> frozenset[str]:
        """The allocation kinds (``netlab.network.model.ALLOCATION_KINDS``) this allocation asks a model for."""
        asked = set()
        if self.priority != DEFAULT_ALLOCATION.priority:
            asked.add("priority")
        if self.weight != DEFAULT_ALLOCATION.weight:
            asked.add("weight")
        if self.rate_cap_gbps is not None:
            asked.add("rate_cap")
        if self.paths is not None:
            asked.add("path")
        return frozenset(asked)


DEFAULT_ALLOCATION = NetAllocation()
