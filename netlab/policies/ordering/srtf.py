"""SRTF: shortest remaining time first (oracle, preemptive)."""

from ..base import ORDERING, OrderingPolicy


@ORDERING.register("srtf")
class SRTF(OrderingPolicy):
    """Shortest remaining time first by oracle remaining isolated time; preemptive.

    Why: the preemptive counterpart of SJF, optimal for average completion
    time on a single machine; an upper reference for informed schedulers.

    Rule: key = (remaining_iso_s(), submit_s, job_id), i.e. the remaining
    iterations times the isolated iteration time (not the job's current,
    possibly network-slowed speed). Keys drift as jobs progress, so
    ``dynamic_keys`` is on: every scheduling pass recomputes them. A waiting
    job preempts running jobs whose remaining time is larger (the preemption
    policy chooses which, largest remaining first). Checkpoint/restore costs
    are charged by the simulator and not included in the key.
    """

    name = "srtf"
    preemptive = True
    dynamic_keys = True

    def key(self, job, now):
        return (job.remaining_iso_s(), job.submit_s, job.job_id)
