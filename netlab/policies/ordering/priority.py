"""Priority: the trace's priority or QoS class first, then submission order (non-preemptive)."""

from ..base import ORDERING, OrderingPolicy


@ORDERING.register("priority")
class Priority(OrderingPolicy):
    """Strict priority classes from the trace, first come first served inside a class; no preemption.

    Why: production clusters order by a priority or QoS class the user or the
    operator sets (Slurm's QOS and partition priority, Kubernetes'
    PriorityClass, Alibaba's LS/Guaranteed/Burstable/BE pods): the baseline a
    network-aware scheduler must beat where tenants are not equal.

    Rule: key = (-job.priority, submit_s, job_id): a larger priority goes
    first (``Job.priority``; 0 when the trace has none, which makes this
    ``fjf``); ties in submit order. Backfill: a job that does not fit is walked
    past. Running jobs are never displaced (``preemptive = False``): a
    priority-preemptive variant is ``priority`` with a preemption policy and
    ``preemptive=True`` passed to the constructor.
    """

    name = "priority"

    def __init__(self, preemptive: bool = False):
        self.preemptive = bool(preemptive)

    def key(self, job, now):
        return (-job.job.priority, job.submit_s, job.job_id)
