"""What communication added after the solve costs a job's iteration: only the part its overlapped compute cannot hide.

Why: the lossy transports' terms (the timeout tail, :mod:`~.rto`; the DCTCP
rate cut, :mod:`~.ratecut`; ``stretch``) are seconds of *communication*: a
ring step waiting 200 ms for a retransmission, a window cut below its share.
A job that overlaps its all-reduce with its backward pass (``overlap`` > 0)
iterates in

    iter = compute + comm - overlap x min(compute, comm)

(:func:`netlab.network.model.iteration_time`), so lengthening ``comm`` by
``extra`` lengthens the iteration by

    extra - overlap x min(extra, max(compute - comm, 0))

the extra less what still fits under the overlapped compute: the fluid and
the mean field treat their own communication time this way (the bandwidth
share), and the terms added after them are treated alike. A job without
overlap (or whose communication already outlasts its compute) pays the extra
in full; a job whose communication is half hidden (overlap 0.5) and has room
left under its compute pays half. The batch solve, the incremental
``resolve`` and :func:`~.scenarios.stretch_starts` all read this function.
"""

from __future__ import annotations


def exposed_s(compute_s: float, comm_s: float, overlap: float, extra_s: float) -> float:
    """The iteration seconds ``extra_s`` more communication costs a job computing ``compute_s`` and communicating
    ``comm_s`` (as solved, intra-host phase included) with ``overlap`` of the shorter hidden (module doc)."""
    if extra_s <= 0.0 or overlap <= 0.0:
        return extra_s
    return extra_s - overlap * min(extra_s, max(compute_s - comm_s, 0.0))


def comm_of_period(compute_s: float, overlap: float, period_s: float, at_least_s: float = 0.0) -> float:
    """The communication seconds (intra-host phase included) a job of ``compute_s`` and ``overlap`` spends per
    iteration of ``period_s``: :func:`netlab.network.model.iteration_time` solved for its ``comm``, at least
    ``at_least_s`` (its communication alone). A scenario run records iteration starts only, and its period less the
    exposed compute also counts the wait for the overlapped compute, which is not communication. A fully
    overlapped job whose period is its compute hides any communication up to it: ``at_least_s`` then (capped at
    the compute)."""
    x = period_s - compute_s
    if overlap <= 0.0:
        return max(x, at_least_s)
    if x > (1.0 - overlap) * compute_s:  # communication outlasts the compute
        return max(x + overlap * compute_s, at_least_s)
    if overlap < 1.0:
        return max(x / (1.0 - overlap), at_least_s)
    return min(at_least_s, compute_s)
