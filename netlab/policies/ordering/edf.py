"""EDF: earliest deadline first (non-preemptive by default)."""

from ..base import ORDERING, OrderingPolicy


@ORDERING.register("edf")
class EDF(OrderingPolicy):
    """Earliest deadline first; jobs without a deadline after every job with one, in submit order.

    Why: the classic deadline scheduler and the baseline of deadline-aware DL
    schedulers (ElasticFlow, Chronus compare with it); the ITP trace
    ElasticFlow released carries a deadline per job (``Job.deadline_s``).
    Deadline misses are reported in every summary (``deadline_miss_share``).

    Rule: key = (deadline_s, submit_s, job_id), where a job without one has
    deadline inf; backfill. ``preemptive=True`` lets a waiting job with an
    earlier deadline displace running ones with later deadlines (through the
    run's preemption policy), as preemptive EDF does; the default does not,
    since every preemption costs a checkpoint and restore.
    """

    name = "edf"

    def __init__(self, preemptive: bool = False):
        self.preemptive = bool(preemptive)

    def key(self, job, now):
        return (job.job.deadline_s, job.submit_s, job.job_id)
