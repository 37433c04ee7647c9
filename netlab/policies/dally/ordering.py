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

With ``preempt`` the ordering also states the starvation bound in its keys:
a running job already preempted ``max_preemptions`` times is *pinned*: its
key is ``(-1, submit_s, job_id)``, above every waiting job, so it is never a
preemption candidate and runs to completion (``next_key_change`` is None for
it). The preemption policy checks the same bound (default 8 in both; if the
two differ the smaller wins). Stating it in the keys also keeps a scheduling
pass cheap: pinned jobs no longer look like the worst-ranked running jobs,
so waiting jobs stop asking for victims that can never be given.
"""

from __future__ import annotations

from functools import partial

from ..base import ORDERING
from ..ordering.tiresias import Tiresias
from .preemption import DEFAULT_MAX_PREEMPTIONS


class DallyOrdering(Tiresias):
    """Tiresias 2D-LAS keys with Dally's delay-scheduling placement and network-sensitive preemption."""

    name = "dally"

    def __init__(self, delay: bool = True, preempt: bool = True, autotune: bool = True, name: str | None = None,
                 max_preemptions: int = DEFAULT_MAX_PREEMPTIONS, **tiresias):
        if autotune and not delay:
            raise ValueError("autotune tunes the delay timers: it needs delay=True")
        super().__init__(**tiresias)
        self.delay, self.preempt, self.autotune = bool(delay), bool(preempt), bool(autotune)
        self.name = name or self.name
        self.default_placement = ("dally" if autotune else "dally-delay") if delay else "topo-bestfit"
        self.default_preemption = "dally" if preempt else "priority"
        self.max_preemptions = int(max_preemptions) if preempt else None

    def pinned(self, job) -> bool:
        """A running job at the preemption bound: never displaced again."""
        return (self.max_preemptions is not None and job.status == "running"
                and job.preemptions >= self.max_preemptions)

    def key(self, job, now):
        if self.pinned(job):
            return (-1, job.submit_s, job.job_id)
        return super().key(job, now)

    def next_key_change(self, job, now):
        return None if self.pinned(job) else super().next_key_change(job, now)


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
