"""The unified circle: one time grid shared by CASSINI's scorer and the ``phase`` network model.

Why one function: CASSINI scores a placement by laying jobs' on/off
communication on a circle and rotating them; the ``phase`` network model
then computes the jobs' speeds on a circle too. When the two used different
grids (the scorer 72 steps of the longest period and at most 4 periods, the
model 64 steps of the shortest and up to 4096 bins), a pair the scorer
found perfectly interleaved (score 1.0) collided on the model's longer
window: such pairs ran 6.8% slower at every shift. Both now call
:func:`unified_circle` with the same defaults, so a score of 1 means no
overlap on the model's own circle.

Rule:

* the grid step is ``max(period) / bins`` (``bins`` = 72: 5 degrees of the
  longest iteration, CASSINI's resolution);
* every period is quantised to a whole number of steps, at least 1
  (``counts``);
* the circle is the least common multiple of the counts, so periods T and
  2T meet on a circle of 2T; it is capped at ``max_periods`` longest
  periods (default 4, CASSINI's cap on the LCM): beyond the cap the circle
  is exactly that window and shorter jobs simply repeat on it (their last
  repetition cut), which stands in for the drifting overlap of
  incommensurate periods. ``exact`` says whether the LCM fitted.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

BINS = 72
MAX_PERIODS = 4


@dataclass(frozen=True)
class Circle:
    """The unified circle of a set of periods: grid step, each period in steps, total bins."""

    step_s: float
    counts: np.ndarray
    bins: int
    exact: bool  # False when the LCM hit the cap and the circle is a window of max_periods periods


def circle_bins(counts, cap: int, start: int = 1) -> tuple[int, bool]:
    """LCM of ``counts`` (and ``start``), or (cap, False) once it exceeds ``cap``."""
    total = start
    for c in sorted(set(int(c) for c in counts)):
        total = math.lcm(total, c)
        if total > cap:
            return cap, False
    return total, True


def unified_circle(periods_s, bins: int = BINS, max_periods: int = MAX_PERIODS) -> Circle:
    """The circle of ``periods_s`` (seconds): see the module doc."""
    periods = np.asarray(periods_s, dtype=float)
    step = float(periods.max()) / bins
    counts = np.maximum(1, np.rint(periods / step)).astype(np.int64)
    total, exact = circle_bins(counts, max_periods * bins)
    return Circle(step, counts, total, exact)
