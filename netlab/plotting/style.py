"""One look for every figure: a colour per policy, one name per policy, axis labels with units, legends
outside the data, round time ticks on log axes.
"""

from __future__ import annotations

import matplotlib.pyplot as plt
import pandas as pd
import seaborn as sns
from matplotlib.ticker import FixedLocator, NullLocator



#: what a summary or per-job column measures, as an axis says it (the unit is added where it is drawn)
AXIS_LABELS = {"avg_jct_s": "average JCT", "p50_jct_s": "median JCT", "p99_jct_s": "p99 JCT",
               "makespan_s": "makespan", "avg_wait_s": "average total wait per job",
               "avg_start_delay_s": "average first-start delay", "jct_s": "job completion time",
               "wait_s": "total wait per job", "queue_s": "first-start delay per job",
               "jct_vs_ideal": "average JCT / ideal-network average JCT", "gpu_util": "GPU utilisation",
               "avg_slowdown": "average slowdown"}

#: log-scale time ticks a reader knows (seconds -> label)
TIME_TICKS = {1: "1 s", 10: "10 s", 60: "1 min", 600: "10 min", 3600: "1 h", 36000: "10 h", 360000: "100 h",
              3600000: "1000 h"}

#: policies' fixed colours (dark enough for text, distinct for colour-blind readers: after Okabe-Ito and seaborn's
#: colour-blind palette): the demo's policies and the classic ones; the usual baseline in dark grey
KNOWN_POLICIES = {"tiresias+consolidated": "#4d4d4d", "dally": "#d55e00", "tiresias+cassini": "#029e73",
                  "tiresias+topo-bestfit": "#0173b2", "fifo+consolidated": "#cc78bc", "fjf+consolidated": "#ca9161",
                  "themis+consolidated": "#de8f05", "themis+cassini": "#56b4e9", "sjf+consolidated": "#8c6d1f",
                  "srtf+consolidated": "#7b3294"}

#: colours for other policies, in sorted order of their labels
SPARE_COLOURS = ("#e41a1c", "#17becf", "#bcbd22", "#393b79", "#e7298a", "#66a61e", "#8c564b", "#fb9a99",
                 "#beaed4", "#9ecae1", "#fdbf6f")  # none close to a known policy's colour

#: names a figure gives its setting columns
SETTING_NAMES = {"oversub": "oversubscription", "network": "network", "trace": "trace", "label": "policy"}

def policy_colours(labels) -> dict:
    """One colour per policy, the same in every figure: the policies of :data:`KNOWN_POLICIES` keep theirs;
    others take :data:`SPARE_COLOURS` in sorted order. Labels are read as :func:`netlab.compare.arm_name` says them
    (``dally+default`` is ``dally``)."""
    from ..compare import arm_name

    out, k = {}, 0
    for label in sorted({str(x) for x in labels}, key=lambda x: (arm_name(x) not in KNOWN_POLICIES, arm_name(x))):
        name = arm_name(label)
        if name in KNOWN_POLICIES:
            out[label] = KNOWN_POLICIES[name]
        else:
            out[label] = SPARE_COLOURS[k % len(SPARE_COLOURS)]
            k += 1
    return out

def named(data: pd.DataFrame) -> pd.DataFrame:
    """``data`` with its ``label`` column as :func:`netlab.compare.arm_name` says it (one name per policy)."""
    from ..compare import arm_name

    if "label" not in data or data.empty:
        return data
    return data.assign(label=data.label.map(arm_name))

def policy_order(labels, baseline: str | None = None) -> list:
    """Policies in drawing order: the baseline first, then sorted."""
    labels = list(dict.fromkeys(str(x) for x in labels))
    rest = sorted(x for x in labels if x != baseline)
    return ([baseline] if baseline in labels else []) + rest

def axis_label(column: str, unit: str | None = None) -> str:
    """``avg_jct_s`` -> ``average JCT (h)``: the column's meaning and the unit it is drawn in."""
    name = AXIS_LABELS.get(column, column)
    return f"{name} ({unit})" if unit else name

def legend_outside(ax, title: str | None = None) -> None:
    """Move the axes' legend to the right of the data (never over the curves or bars)."""
    if ax.get_legend() is None:
        return
    sns.move_legend(ax, "upper left", bbox_to_anchor=(1.01, 1.0), frameon=False, fontsize=8,
                    title=title if title is not None else ax.get_legend().get_title().get_text(), title_fontsize=8)

def _ax(ax):
    return ax if ax is not None else plt.subplots(figsize=(6, 4))[1]

def _slanted(ax) -> None:
    ax.tick_params(axis="x", rotation=30)
    for label in ax.get_xticklabels():
        label.set_horizontalalignment("right")

#: with too many decades for the axis, only these (then only the second set) are ticked
_ROUND_TIMES = ({1, 60, 3600, 36000, 360000, 3600000}, {60, 3600, 360000})

def _time_ticks(ax, lo: float, hi: float, axis: str = "x", most: int = 5) -> None:
    """Round time ticks (1 min, 1 h, 10 h...) on a log time axis in seconds, at most ``most`` of them."""
    ticks = [t for t in TIME_TICKS if lo / 3 <= t <= hi * 3]
    for keep in _ROUND_TIMES:
        if len(ticks) > most:
            ticks = [t for t in ticks if t in keep]
    if len(ticks) < 2:
        return
    target = ax.xaxis if axis == "x" else ax.yaxis
    target.set_major_locator(FixedLocator(ticks))
    target.set_major_formatter(lambda v, _: TIME_TICKS.get(int(round(v)), ""))
    target.set_minor_locator(NullLocator())

def _as_settings(data: pd.DataFrame, by: str | None) -> pd.DataFrame:
    """The ``by`` column as ordered text (``2:1`` before ``8:1``) for a categorical axis."""
    if by != "oversub" or by not in data or isinstance(data[by].dtype, pd.CategoricalDtype):
        return data
    levels = sorted(data[by].dropna().unique())
    names = {o: f"{o:g}:1" for o in levels}
    return data.assign(oversub=pd.Categorical(data[by].map(names), [names[o] for o in levels], ordered=True))

def _setting(by, value) -> str:
    if by == "oversub" and not isinstance(value, str):
        return f"{value:g}:1"
    return str(value)
