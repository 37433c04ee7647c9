"""Preemption by priority: displace the worst-ranked running jobs first."""

from ..base import PREEMPTION, PreemptionPolicy


@PREEMPTION.register("priority")
class ByPriority(PreemptionPolicy):
    """Take victims from the lowest priority up until enough GPUs are free."""

    name = "priority"

    def victims(self, job, candidates, view):
        need = job.gpus - view.total_free
        chosen = []
        for c in candidates:
            if need <= 0:
                break
            chosen.append(c)
            need -= c.gpus
        return chosen if need <= 0 else []


@PREEMPTION.register("none")
class NoPreemption(PreemptionPolicy):
    """Never preempt."""

    name = "none"
