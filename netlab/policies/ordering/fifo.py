"""FIFO (strict, head-of-line blocking) and FJF (first job that fits: FIFO with backfill); non-preemptive."""

from ..base import ORDERING, OrderingPolicy


@ORDERING.register("fifo")
class FIFO(OrderingPolicy):
    """Strict first come, first served: the head job waits until it fits (head-of-line blocking); no backfill.

    Why: FIFO as researchers, Gavel and Tiresias mean it, the baseline every
    scheduler is compared with. Its head-of-line blocking is part of the
    policy: a large job at the head keeps GPUs idle until enough are free.

    Rule: key = (submit_s, job_id); ``backfill = False``: a scheduling pass
    starts jobs in submit order and stops at the first one that cannot start
    (too few free GPUs, or the placement declined). Running jobs are never
    displaced. ``SimConfig(backfill=True)`` overrides this (that is ``fjf``).
    """

    name = "fifo"
    backfill = False

    def key(self, job, now):
        return (job.submit_s, job.job_id)


@ORDERING.register("fjf")
class FJF(FIFO):
    """First job that fits: FIFO order, but a job that fits starts even while an earlier one waits (backfill).

    Why: Tiresias' ``fjf`` schedule (and what netlab's ``fifo`` did before
    it became strict): less idle time than strict FIFO, at the risk of
    starving large jobs, since nothing reserves GPUs for them.

    Rule: key = (submit_s, job_id) as ``fifo``; ``backfill = True``: every
    scheduling pass walks the whole queue in submit order and starts each
    job that fits. No reservations, no preemption.
    """

    name = "fjf"
    backfill = True
