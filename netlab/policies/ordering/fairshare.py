"""Fair share: the tenant that has used the least GPU time goes first (Slurm's fair-share factor)."""

from __future__ import annotations

from collections import defaultdict

from ..base import ORDERING, OrderingPolicy


@ORDERING.register("fair-share")
class FairShare(OrderingPolicy):
    """GPU fair share between tenants: jobs of the tenant with the least GPU time used go first.

    Why: the plain fair-share baseline of shared clusters (Slurm's
    multifactor fair-share, YARN's fair scheduler): no tenant should get more
    than its share while others wait. It is the reference a finish-time
    fairness policy (``themis``) improves on.

    Rule: tenants (``Job.tenant``: user, group or virtual cluster; every job
    without one is the tenant "") have equal shares. A tenant's usage is the
    GPU-seconds its jobs have held, recomputed every ``calc_period_s`` (like
    Slurm's ``PriorityCalcPeriod``, default 5 minutes), without decay.
    key = (usage of the job's tenant at the last recalculation, submit_s,
    job_id); at every recalculation the scheduler re-keys every job
    (``round_s``). Backfill; no preemption (a running job keeps its GPUs).
    """

    name = "fair-share"

    def __init__(self, calc_period_s: float = 300.0):
        if not calc_period_s > 0:
            raise ValueError(f"calc_period_s must be > 0, got {calc_period_s}")
        self.calc_period_s = float(calc_period_s)
        self.round_s = self.calc_period_s
        self._usage_at = -1.0
        self._usage: dict[str, float] = {}

    def reset(self, rng) -> None:
        super().reset(rng)
        self._active: dict[int, object] = {}  # jobs keyed so far that had not finished at the last recalculation
        self._done_usage: dict[str, float] = defaultdict(float)  # GPU-seconds of the finished ones, per tenant
        self._usage_at = -1.0
        self._usage = {}

    def usage(self, now: float) -> dict[str, float]:
        """GPU-seconds held per tenant, as of the last recalculation at or before ``now``."""
        period = now // self.calc_period_s
        if period != self._usage_at:
            usage = defaultdict(float, self._done_usage)
            for job_id, js in list(self._active.items()):
                used = js.attained_at(now)
                usage[js.job.tenant] += used
                if js.status == "done":  # it holds nothing more: fold it in, stop visiting it
                    self._done_usage[js.job.tenant] += used
                    del self._active[job_id]
            self._usage, self._usage_at = dict(usage), period
        return self._usage

    def key(self, job, now):
        self._active[job.job_id] = job
        return (self.usage(now).get(job.job.tenant, 0.0), job.submit_s, job.job_id)
