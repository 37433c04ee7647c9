"""Dally's ordering: Tiresias' discretised 2D-LAS keys, bringing Dally's own placement and preemption.

Why this ordering: Dally's contribution is where jobs go and when they wait
or displace others, not who goes first. Keeping Tiresias' keys (least
attained GPU-time first, a few queues, preemptive) makes a comparison
with Tiresias + consolidated placement isolate exactly the placement,
delay and preemption parts.

Each part is switchable (constructor flags), and every combination maps to
registered placement and preemption names, so ``--policy dally`` (or an
ablation name) runs the whole scheduler:

* ``delay``: placement ``dally-delay`` (fixed timers) instead of
  ``topo-bestfit`` (same placements, never waits);
* ``autotune`` (needs ``delay``): placement ``dally`` (auto-tuned timers);
* ``preempt``: preemption ``dally`` (network-sensitive, bounded) instead of
  ``priority`` (Tiresias' plain worst-first preemption).

The ordering pins no job. It used to put a running job preempted
``max_preemptions`` times above every waiting job (never a victim again);
on Philly that froze Tiresias' demoted long jobs wherever they ran, often
scattered over hosts, and let them outrank everyone (see
:mod:`.preemption`: the bound now applies to locality preemptions only, and
Tiresias' own starvation guard to the rest).
"""

from __future__ import annotations

from functools import partial

from ..base import ORDERING
from ..ordering.tiresias import Tiresias


class DallyOrdering(Tiresias):
    """Tiresias 2D-LAS keys with Dally's delay-scheduling placement and network-sensitive preemption."""

    name = "dally"

    def __init__(self, delay: bool = True, preempt: bool = True, autotune: bool = True, name: str | None = None,
                 **tiresias):
        if autotune and not delay:
            raise ValueError("autotune tunes the delay timers: it needs delay=True")
        super().__init__(**tiresias)
        self.delay, self.preempt, self.autotune = bool(delay), bool(preempt), bool(autotune)
        self.name = name or self.name
        self.default_placement = ("dally" if autotune else "dally-delay") if delay else "topo-bestfit"
        self.default_preemption = "dally" if preempt else "priority"


# Registered variants: name -> the parts switched on. Ablation reading:
# delay = dally-delay vs dally-base; autotune = dally-autotune vs dally-delay
# (or dally vs dally-delay-preempt); preemption = dally vs dally-autotune
# (or dally-preempt vs dally-base). dally-base is Tiresias with topo-bestfit.
VARIANTS = {
    "dally": dict(delay=True, preempt=True, autotune=True),
    "dally-delay": dict(delay=True, preempt=False, autotune=False),
    "dally-autotune": dict(delay=True, preempt=False, autotune=True),
    "dally-delay-preempt": dict(delay=True, preempt=True, autotune=False),
    "dally-preempt": dict(delay=False, preempt=True, autotune=False),
    "dally-base": dict(delay=False, preempt=False, autotune=False),
}

for _name, _flags in VARIANTS.items():
    _on = [k for k, v in _flags.items() if v] or ["none"]
    ORDERING.register(_name, doc=f"Dally on Tiresias keys; parts on: {', '.join(_on)}")(
        partial(DallyOrdering, name=_name, **_flags))
