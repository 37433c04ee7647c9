"""SJF: shortest job first, by the oracle isolated duration (non-preemptive)."""

from ..base import ORDERING, OrderingPolicy


@ORDERING.register("sjf")
class SJF(OrderingPolicy):
    """Shortest job first by oracle isolated duration; no preemption.

    Why: the classic lower bound on average JCT for a non-preemptive queue when
    durations are known, used as an (unrealistically well-informed) baseline.

    Rule: key = (job.isolated_s, submit_s, job_id): the job with the smallest
    duration at isolated speed (all its iterations, consolidated, alone on a
    non-blocking network) goes first; ties in submit order. The duration is
    the oracle value, not a prediction. Running jobs are never displaced.
    """

    name = "sjf"

    def key(self, job, now):
        return (job.isolated_s, job.submit_s, job.job_id)
