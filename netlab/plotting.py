"""Seaborn axes-level figures. Each takes ``data=`` and ``ax=`` and returns the Axes.

Plotting stays out of the simulator; these functions only read the tidy
DataFrames that :mod:`netlab.experiments` and :mod:`netlab.sweep` return
(per-job rows, one row per run or cell, per-link segments), so a notebook
and the HTML report draw the same figures.
"""

from __future__ import annotations

import re
import warnings

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import seaborn as sns
from matplotlib.ticker import MaxNLocator


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


def axis_label(column: str, unit: str | None = None) -> str:
    """``avg_jct_s`` -> ``average JCT (h)``: the column's meaning and the unit it is drawn in."""
    name = AXIS_LABELS.get(column, column)
    return f"{name} ({unit})" if unit else name


def legend_outside(ax, title: str | None = None) -> None:
    """Move the axes' legend to the right of the data (never over the curves or bars)."""
    if ax.get_legend() is None:
        return
    sns.move_legend(ax, "upper left", bbox_to_anchor=(1.01, 1.0), frameon=False, fontsize=8,
                    title=title if title is not None else ax.get_legend().get_title().get_text())


def _ax(ax):
    return ax if ax is not None else plt.subplots(figsize=(6, 4))[1]


def jct_cdf(data: pd.DataFrame, hue: str = "label", ax=None, log: bool = True):
    """Empirical CDF of job completion time, one line per ``hue``."""
    ax = _ax(ax)
    d = data.dropna(subset=["jct_s"])
    sns.ecdfplot(data=d, x="jct_s", hue=hue, ax=ax, log_scale=log)
    if log and len(d):
        lo, hi = d.jct_s[d.jct_s > 0].min(), d.jct_s.max()
        ticks = {t: name for t, name in TIME_TICKS.items() if lo / 10 <= t <= hi * 10}
        if len(ticks) >= 2:
            ax.set_xticks(list(ticks), list(ticks.values()))
            ax.minorticks_off()
    ax.set_xlabel(axis_label("jct_s", None if log else "s"))
    ax.set_ylabel("fraction of jobs")
    legend_outside(ax, title="policy" if hue == "label" else None)
    return ax


def jct_bars(data: pd.DataFrame, x: str = "label", y: str = "avg_jct_s", hue: str | None = None, ax=None,
             errorbar=("ci", 95)):
    """Mean of a summary metric per policy, error bars over seeds (95% CI by default)."""
    ax = _ax(ax)
    sns.barplot(data=data, x=x, y=y, hue=hue, ax=ax, errorbar=errorbar)
    ax.tick_params(axis="x", rotation=30)
    for label in ax.get_xticklabels():
        label.set_horizontalalignment("right")
    ax.set_ylabel(axis_label(y))
    legend_outside(ax)
    return ax


def metric_bars(data: pd.DataFrame, y: str, x: str = "label", hue: str | None = None, ax=None, errorbar="sd",
                ylabel: str | None = None, hours: bool = True):
    """A summary metric (avg/p99 JCT, makespan, queueing) per policy; error bars: spread over seeds (sd)."""
    d = data.assign(**{y: data[y] / 3600}) if hours else data
    ax = jct_bars(d, x=x, y=y, hue=hue, ax=ax, errorbar=errorbar)
    ax.set_xlabel("")
    ax.set_ylabel(ylabel or axis_label(y, "h" if hours else ("s" if y.endswith("_s") else None)))
    return ax


def queue_delay(data: pd.DataFrame, x: str = "label", hue: str | None = None, ax=None, y: str = "queue_s"):
    """Per-job waiting per policy: boxes without fliers, symlog hours. ``y``: ``queue_s`` (first start -
    submit) or ``wait_s`` (all time not running: before the first start and after every preemption)."""
    ax = _ax(ax)
    d = data.dropna(subset=[y]).assign(queue_h=lambda df: df[y] / 3600)
    with warnings.catch_warnings():  # seaborn 0.13 passes matplotlib's deprecated vert=; not ours to fix
        warnings.simplefilter("ignore", DeprecationWarning)
        sns.boxplot(data=d, x=x, y="queue_h", hue=hue, ax=ax, showfliers=False, showmeans=True,
                    meanprops=dict(marker="o", markerfacecolor="white", markeredgecolor="black", markersize=4))
    ax.set_yscale("symlog", linthresh=0.01)
    ax.set_ylim(bottom=0)
    ax.set_xlabel("")
    ax.set_ylabel(axis_label(y, "h"))
    ax.tick_params(axis="x", rotation=30)
    for label in ax.get_xticklabels():
        label.set_horizontalalignment("right")
    legend_outside(ax)
    return ax


def ideal_ratio(data: pd.DataFrame, x: str = "label", hue: str | None = None, y: str = "jct_vs_ideal", ax=None):
    """Average JCT over the same configuration's on the ideal network (1 = the physical limit)."""
    ax = _ax(ax)
    d = data.dropna(subset=[y]) if y in data else data.iloc[:0]
    from .network import ideal_networks
    d = d[~d.network.isin(ideal_networks())] if "network" in d else d
    if d.empty:
        ax.text(0.5, 0.5, "no ideal-network runs to compare with", ha="center", va="center", transform=ax.transAxes)
        return ax
    jct_bars(d, x=x, y=y, hue=hue, ax=ax, errorbar="sd")
    ax.axhline(1.0, color="black", lw=0.8, ls="--")
    ax.set_xlabel("")
    ax.set_ylabel(axis_label(y))
    return ax


def _natural(name: str):
    return [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", str(name))]


#: a job's span, the colour it is drawn in (what crosses the oversubscribed fabric stands out)
SPANS = {"one host": "#9ecae1", "one rack, several hosts": "#fd8d3c", "several racks": "#cb181d"}


def _span(hosts: int, racks: int) -> str:
    return "several racks" if racks > 1 else ("one rack, several hosts" if hosts > 1 else "one host")


def placement_timeline(data: pd.DataFrame, ax=None, gpus_per_host: int | None = None, max_hosts: int = 32):
    """Gantt chart of jobs on hosts: one row per host, split into GPU slots, coloured by the job's span
    (one host, one rack, several racks: the last two cross the network, the last the oversubscribed tier).

    Reads one run's per-job rows (``start_s``, ``end_s``, ``gpus``, ``hosts``, ``racks`` and the
    ``allocation`` or ``placement`` string ``host:gpus,...``). Only jobs that were never preempted are
    drawn: a preempted job's run intervals are not recorded (only its first start, its end and its last
    hosts), so drawing it would paint GPUs it did not hold; the legend counts them. A trace with
    thousands of preemptions thus still shows exactly where the rest ran.
    """
    from matplotlib.collections import PatchCollection
    from matplotlib.patches import Patch, Rectangle

    ax = _ax(ax)
    col = "allocation" if "allocation" in data else "placement"
    jobs = data.dropna(subset=["start_s", "end_s"])
    jobs = jobs[jobs[col].astype(str).str.len() > 0].sort_values("start_s")
    preempted = jobs[jobs.preemptions > 0] if "preemptions" in jobs else jobs.iloc[:0]
    exact = jobs.drop(preempted.index)
    parts = [(row, host, int(g)) for row in exact.itertuples(index=False)
             for host, _, g in (p.rpartition(":") for p in str(getattr(row, col)).split(","))]
    if not parts:
        what = f"all {len(preempted)} placed jobs were preempted" if len(preempted) else "no placed jobs"
        ax.text(0.5, 0.5, what, ha="center", va="center", transform=ax.transAxes)
        return ax
    hosts = sorted({h for _, h, _ in parts}, key=_natural)[:max_hosts]
    index = {h: i for i, h in enumerate(hosts)}
    cap = gpus_per_host or max(g for _, _, g in parts)
    free_at = {h: np.zeros(cap) for h in hosts}
    rects, faces = [], []
    for row, host, g in parts:
        if host not in index:
            continue
        start, end = row.start_s / 3600, row.end_s / 3600
        slots = np.argsort(free_at[host] > row.start_s, kind="stable")[:g]  # free slots first
        free_at[host][slots] = row.end_s
        colour = SPANS[_span(int(getattr(row, "hosts", 1)), int(getattr(row, "racks", 1)))]
        for slot in slots:
            rects.append(Rectangle((start, index[host] + slot / cap), max(end - start, 1e-6), 1 / cap))
            faces.append(colour)
    ax.add_collection(PatchCollection(rects, facecolors=faces, edgecolors="none"))
    racks = [re.match(r"(.*?)h\d+$", h) for h in hosts]  # leaf-spine hosts are named r<rack>h<host>
    if all(racks):
        for i in range(1, len(hosts)):
            if racks[i].group(1) != racks[i - 1].group(1):
                ax.axhline(i, color="black", lw=0.6)
    ax.set_xlim(jobs.start_s.min() / 3600, jobs.end_s.max() / 3600)
    ax.set_ylim(0, len(hosts))
    ax.set_yticks(np.arange(len(hosts)) + 0.5, hosts, fontsize=7)
    ax.invert_yaxis()
    ax.set_xlabel("time (h)")
    ax.set_ylabel("host (rows split into GPU slots)")
    handles = [Patch(color=c, label=name) for name, c in SPANS.items()]
    title = "job spans"
    if len(preempted):
        title += f"\n({len(preempted)} preempted job{'s' if len(preempted) > 1 else ''}\nnot drawn)"
    ax.legend(handles=handles, fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), title=title,
              title_fontsize=8, frameon=False)
    return ax


def link_utilisation(data: pd.DataFrame, bins: int = 60, top: int = 24, tiers=None, ax=None):
    """Heatmap of utilisation over time for the busiest links (rows) in ``bins`` time bins.

    Drawn on a real time axis (hours), so the ticks fall at round hours whatever the bins' edges.
    """
    ax = _ax(ax)
    links = data if tiers is None else data[data.tier.isin(tiers)]
    if links.empty:
        ax.text(0.5, 0.5, "no network traffic", ha="center", va="center", transform=ax.transAxes)
        return ax
    t0, t1 = links.t_start_s.min(), links.t_end_s.max()
    edges = np.linspace(t0, t1, bins + 1)
    names = links.src.astype(str) + " > " + links.dst.astype(str)
    busiest = (links.load_gbps * (links.t_end_s - links.t_start_s)).groupby(names).sum().nlargest(top).index
    grid = pd.DataFrame(0.0, index=busiest, columns=range(bins))
    width = edges[1] - edges[0]
    for name, seg in links[names.isin(busiest)].groupby(names[names.isin(busiest)]):
        for row in seg.itertuples():
            lo = np.clip(row.t_start_s, edges[:-1], edges[1:])
            hi = np.clip(row.t_end_s, edges[:-1], edges[1:])
            grid.loc[name] += (hi - lo) / width * row.utilisation
    mesh = ax.pcolormesh(edges / 3600, np.arange(len(busiest) + 1), grid.to_numpy(), vmin=0, vmax=1,
                         cmap="rocket_r")
    ax.figure.colorbar(mesh, ax=ax, label="utilisation (share of capacity)")
    ax.set_yticks(np.arange(len(busiest)) + 0.5, list(busiest), fontsize=7)
    ax.invert_yaxis()
    ax.xaxis.set_major_locator(MaxNLocator(nbins=10, integer=True))
    ax.set_xlabel("time (h)")
    ax.set_ylabel("link (busiest first)")
    return ax


#: a change axis switches to symlog beyond this many percent, so +5% and +300% both stay readable
LINEAR_PCT = 20.0
_PCT_TICKS = (-50, -20, 0, 20, 100, 1000, 10000, 100000)


def _percent_axis(ax, values_pct: np.ndarray) -> None:
    """A change axis in percent: linear while every value is within a few x :data:`LINEAR_PCT`, else
    symlog (linear inside +-LINEAR_PCT, logarithmic beyond) with ticks at round percentages."""
    finite = values_pct[np.isfinite(values_pct)]
    span = float(np.abs(finite).max()) if finite.size else 0.0
    if span > 3 * LINEAR_PCT:
        ax.set_xscale("symlog", linthresh=LINEAR_PCT, linscale=1.0)
        lo, hi = float(finite.min()), float(finite.max())
        lo, hi = min(lo, -LINEAR_PCT), max(hi, LINEAR_PCT)
        ax.set_xticks([t for t in _PCT_TICKS if lo <= t <= hi])
        tr = ax.xaxis.get_transform()
        t_lo, t_hi = tr.transform([lo, hi])
        pad = 0.06 * (t_hi - t_lo)  # a margin in drawn distance, as linear axes have
        ax.set_xlim(*tr.inverted().transform([t_lo - pad, t_hi + pad]))
        ax.tick_params(axis="x", labelsize=8)
        ax.minorticks_off()
    else:
        ax.xaxis.set_major_locator(MaxNLocator(nbins=5, steps=[1, 2, 2.5, 5, 10]))
    ax.xaxis.set_major_formatter(lambda v, _: f"{v:+,.0f}%" if v else "0")


def comparison_forest(data: pd.DataFrame, metric: str = "avg_jct_s", hue: str | None = None, ax=None,
                      order: list | None = None):
    """Forest plot of one metric's change against the baseline: a point and its confidence interval per
    policy (rows, ``order`` or best first), ``hue`` (e.g. ``oversub``) side by side; 0 = the baseline.
    Reads :func:`netlab.compare.compare_policies` rows (``change``, ``ci_low``, ``ci_high`` as fractions)."""
    from .compare import METRICS, arm_name

    ax = _ax(ax)
    d = data[data.metric == metric]
    if d.empty:
        ax.text(0.5, 0.5, "no comparison", ha="center", va="center", transform=ax.transAxes)
        return ax
    arms = list(order) if order is not None else list(d.groupby("label").change.mean().sort_values().index)
    d = d[d.label.isin(arms)]
    levels = list(dict.fromkeys(d[hue])) if hue else [None]
    colours = dict(zip(levels, sns.color_palette("colorblind", len(levels))))
    step = 0.7 / max(len(levels), 1)
    for k, level in enumerate(levels):
        part = d if level is None else d[d[hue] == level]
        y = np.array([arms.index(a) for a in part.label]) + (k - (len(levels) - 1) / 2) * step
        x = 100 * part.change.to_numpy(dtype=float)
        err = np.vstack([x - 100 * part.ci_low.to_numpy(dtype=float), 100 * part.ci_high.to_numpy(dtype=float) - x])
        name = None if level is None else (f"{level:g}:1" if hue == "oversub" and not pd.isna(level)
                                           else f"{hue}={level}")
        ax.errorbar(x, y, xerr=np.nan_to_num(err), fmt="o", ms=4, capsize=2, color=colours[level], label=name)
    ax.axvline(0, color="black", lw=0.8)
    ax.set_yticks(range(len(arms)), [arm_name(a) for a in arms])
    ax.set_ylim(len(arms) - 0.5, -0.5)
    _percent_axis(ax, 100 * d[["change", "ci_low", "ci_high"]].to_numpy(dtype=float))
    ax.set_xlabel(f"{METRICS.get(metric, metric)}: change vs baseline")
    ax.grid(axis="x", alpha=0.3)
    return ax


def tier_load(data: pd.DataFrame, hue: str = "label", ax=None):
    """Bytes that crossed each tier, per ``hue``."""
    ax = _ax(ax)
    d = data.assign(tbytes=data.load_gbps * 1e9 / 8 * (data.t_end_s - data.t_start_s) / 1e12)
    g = d.groupby([hue, "tier"], as_index=False).tbytes.sum()
    sns.barplot(data=g, x="tier", y="tbytes", hue=hue, ax=ax)
    ax.set_ylabel("TB crossed")
    return ax
