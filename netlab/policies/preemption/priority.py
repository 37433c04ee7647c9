"""Preemption by priority: displace the worst-ranked running jobs first."""

from ..base import PREEMPTION, PreemptionPolicy


@PREEMPTION.register("priority")
class ByPriority(PreemptionPolicy):
    """Take victims from the lowest priority up until enough GPUs are free; spare those not needed.

    Rule: walk the running jobs ranked below the waiting job, worst first,
    until the free GPUs plus theirs cover it (none if they never do). Then
    spare, best-ranked first, every chosen job the surplus can still hold: a
    small worst-ranked job taken before a larger one that alone frees enough
    keeps running (displacing it would only restart it, paying checkpoint and
    restore). This is exactly the set Tiresias' scheduler displaces when it
    gives GPUs to jobs in priority order and keeps every lower-ranked job
    that still fits.
    """

    name = "priority"

    def victims(self, job, candidates, view):
        need = job.gpus - view.total_free
        chosen = []
        for c in candidates:
            if need <= 0:
                break
            chosen.append(c)
            need -= c.gpus
        if need > 0:
            return []
        surplus = -need
        if surplus:
            spared = set()
            for c in reversed(chosen[:-1]):  # the last one is needed: without it they were not enough
                if c.gpus <= surplus:
                    surplus -= c.gpus
                    spared.add(c.job_id)
            if spared:
                chosen = [c for c in chosen if c.job_id not in spared]
        return chosen


@PREEMPTION.register("none")
class NoPreemption(PreemptionPolicy):
    """Never preempt."""

    name = "none"
