"""FIFO: first submitted, first served (non-preemptive)."""

from ..base import ORDERING, OrderingPolicy


@ORDERING.register("fifo")
class FIFO(OrderingPolicy):
    """First come, first served; no preemption."""

    name = "fifo"

    def key(self, job, now):
        return (job.submit_s, job.job_id)
