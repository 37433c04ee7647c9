"""Where a ``tcp`` job's iterations start: the phase state kept across re-solves.

Every running job keeps an *anchor*, the time one of its iterations started,
and its period (in its :class:`~netlab.network.slots.Rows` row: ``anchor_s``,
``period_s``, and ``anchor_phase``, the phase a policy had set when it was
anchored). At each re-solve its position inside its iteration is taken from
there (:func:`position`), the component is simulated forward, and the anchor
moves to the last simulated iteration start (:func:`window_periods`) or, for
the mean field, the job keeps its position under its new period
(:func:`keep_position`). A new phase set by a policy re-anchors the job.
"""

from __future__ import annotations

import numpy as np

from ...jit import njit  # numba is imported at the first kernel call
from ..jit import JIT
from ..slots import Rows
from .fluid import COMM, PRE, WAIT


@njit(**JIT)
def keep_position(now_s, row, period, phase, t: Rows):
    """Record a new period for ``row``. The job keeps its position: it is re-anchored at the same fraction of
    its iteration under the new period; a new job, or one a policy moved, starts its iterations at
    ``phase x period``."""
    old_anchor, old_period = t.anchor_s[row], t.period_s[row]
    if np.isnan(old_anchor) or t.anchor_phase[row] != phase:
        t.anchor_s[row] = phase * period
    else:
        frac = ((now_s - old_anchor) % old_period) / old_period if old_period > 0 else 0.0
        t.anchor_s[row] = now_s - frac * period
    t.period_s[row], t.anchor_phase[row] = period, phase


@njit(**JIT)
def keep_positions(now_s, rows, period, phase, t: Rows):
    """:func:`keep_position` for each of ``rows`` (``period`` and ``phase`` per row) in one compiled call: a
    phase core found in its cache re-anchors all its jobs at once, not one Python-to-numba call per job."""
    for a in range(rows.shape[0]):
        keep_position(now_s, rows[a], period[a], phase[a], t)


@njit(**JIT)
def position(now_s, anchor_s, period_s, pre_s, net_s):
    """(stage, rem, until, it_start) of a job whose iterations start at ``anchor + k period``, at ``now``.

    Inside the iteration: ``pre`` seconds of work, then the all-reduce taking ``net`` seconds at the last
    solved rate (its Gbit left is proportional to the time left), then waiting to the period's end.
    Times are relative to ``now`` (the simulation starts at 0).
    """
    if not period_s > 0:
        return PRE, pre_s, 0.0, 0.0
    e = (now_s - anchor_s) % period_s
    if e < pre_s:
        return PRE, pre_s - e, 0.0, -e
    if e < pre_s + net_s:
        return COMM, 1.0 - (e - pre_s) / net_s, 0.0, -e  # rem as a fraction of the job's Gbit (scaled by caller)
    return WAIT, 0.0, period_s - e, -e


@njit(**JIT)
def window_periods(starts, n_starts, warmup, now_s=0.0):
    """(period, anchor) per job from one simulation's iteration starts, over one common time window.

    The window opens once every job is past its ``warmup`` starts and closes at the last recorded start
    of the job that finished last, so that it spans whole periods of the slowest job: a fast job's mean
    period then counts every contended episode the slow one causes, not a share that depends on where its
    own count of iterations happened to stop. The anchor is each job's last start (relative to ``now_s``).
    (Compiled: the phase cores call it from their compiled simulation, :mod:`~.core_fluid`.)
    """
    k = n_starts.shape[0]
    kept = np.minimum(n_starts, starts.shape[1])
    w = np.minimum(warmup, n_starts - 3)
    t0, t1 = -np.inf, -np.inf
    for i in range(k):
        t0 = max(t0, starts[i, w[i]])
        t1 = max(t1, starts[i, kept[i] - 1])
    period, anchor = np.empty(k), np.empty(k)
    for i in range(k):
        first, last, count = 0.0, 0.0, 0
        for x in range(kept[i]):
            v = starts[i, x]
            if v >= t0 - 1e-12 and v <= t1 + 1e-12:
                if count == 0:
                    first = v
                last = v
                count += 1
        if count < 2:  # too few starts in the common window: its own warm-up to its last start
            first, last, count = starts[i, w[i]], starts[i, kept[i] - 1], kept[i] - w[i]
        period[i] = (last - first) / (count - 1)
        anchor[i] = now_s + starts[i, kept[i] - 1]
    return period, anchor
