"""Dally (Sharma et al., arXiv 2401.16492): network-sensitive scheduling of distributed training.

Three switchable parts on top of Tiresias' 2D-LAS ordering:

* :mod:`.placement`: delay scheduling over locality levels (host, rack, any)
  with timers scaled by each job's network sensitivity
  (:mod:`netlab.sensitivity`);
* :mod:`.preemption`: sensitive jobs displace less-sensitive, lower-ranked
  ones to get one host or rack (at most ``max_preemptions`` such displacements
  per victim), and choose consolidating victims when GPUs are short;
* :mod:`.tuner`: timers shortened or lengthened online from observed
  queueing against slowdown costs.

:mod:`.ordering` registers ``dally`` (all on) and the ablations
``dally-delay``, ``dally-autotune``, ``dally-delay-preempt``,
``dally-preempt`` and ``dally-base`` (all off).
"""

from . import ordering, placement, preemption  # noqa: F401
from .ordering import VARIANTS, DallyOrdering
from .placement import DallyPlacement
from .preemption import NetworkPreemption
from .tuner import AutoTuner

__all__ = ["VARIANTS", "DallyOrdering", "DallyPlacement", "NetworkPreemption", "AutoTuner"]
