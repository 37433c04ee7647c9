"""Seaborn/matplotlib figures. Axes-level functions take ``data=`` and ``ax=`` and return the Axes.

Plotting stays out of the simulator; these functions only read the tidy
DataFrames that :mod:`netlab.experiments` and :mod:`netlab.sweep` return
(per-job rows, one row per run or cell, per-link segments), so a notebook
and the HTML report draw the same figures, in the same colours:
:func:`policy_colours` gives every policy one colour wherever it is drawn.
Every axis names its quantity and unit; an axis that is not linear says so in its
label; legends sit outside the data.

One idea per module: :mod:`.style` (colours, names, labels, ticks),
:mod:`.distributions` (JCT CDF and tails), :mod:`.summaries` (per-policy bars,
points and boxes), :mod:`.cluster` (placement timeline, link heatmap),
:mod:`.changes` (changes against a baseline).
"""

from .changes import comparison_forest, gain_vs_oversub, oversub_axis, pct_label
from .cluster import SPANS, busiest_links, host_order, link_utilisation, placement_timeline, run_intervals
from .distributions import jct_cdf, jct_tail, jct_tails
from .style import (AXIS_LABELS, KNOWN_POLICIES, SETTING_NAMES, SPARE_COLOURS, TIME_TICKS, axis_label, legend_outside,
                    named, policy_colours, policy_order)
from .summaries import ideal_ratio, jct_bars, metric_bars, policy_points, queue_delay, tier_load

__all__ = ["AXIS_LABELS", "KNOWN_POLICIES", "SETTING_NAMES", "SPANS", "SPARE_COLOURS", "TIME_TICKS", "axis_label",
           "busiest_links", "comparison_forest", "gain_vs_oversub", "host_order", "ideal_ratio", "jct_bars", "jct_cdf",
           "jct_tail", "jct_tails", "legend_outside", "link_utilisation", "metric_bars", "named", "oversub_axis",
           "pct_label", "placement_timeline", "policy_colours", "policy_order", "policy_points", "queue_delay",
           "run_intervals", "tier_load"]
