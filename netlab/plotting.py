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


def _ax(ax):
    return ax if ax is not None else plt.subplots(figsize=(6, 4))[1]


def jct_cdf(data: pd.DataFrame, hue: str = "label", ax=None, log: bool = True):
    """Empirical CDF of job completion time, one line per ``hue``."""
    ax = _ax(ax)
    sns.ecdfplot(data=data.dropna(subset=["jct_s"]), x="jct_s", hue=hue, ax=ax, log_scale=log)
    ax.set_xlabel("job completion time (s)")
    ax.set_ylabel("fraction of jobs")
    return ax


def jct_bars(data: pd.DataFrame, x: str = "label", y: str = "avg_jct_s", hue: str | None = None, ax=None,
             errorbar=("ci", 95)):
    """Mean of a summary metric per policy, error bars over seeds (95% CI by default)."""
    ax = _ax(ax)
    sns.barplot(data=data, x=x, y=y, hue=hue, ax=ax, errorbar=errorbar)
    ax.tick_params(axis="x", rotation=30)
    for label in ax.get_xticklabels():
        label.set_horizontalalignment("right")
    return ax


def metric_bars(data: pd.DataFrame, y: str, x: str = "label", hue: str | None = None, ax=None, errorbar="sd",
                ylabel: str | None = None, hours: bool = True):
    """A summary metric (avg/p99 JCT, makespan, queueing) per policy; error bars: spread over seeds (sd)."""
    d = data.assign(**{y: data[y] / 3600}) if hours else data
    ax = jct_bars(d, x=x, y=y, hue=hue, ax=ax, errorbar=errorbar)
    ax.set_xlabel("")
    ax.set_ylabel(ylabel or (f"{y} (h)" if hours else y))
    return ax


def queue_delay(data: pd.DataFrame, x: str = "label", hue: str | None = None, ax=None):
    """Per-job queueing delay (first start - submit) per policy: boxes without fliers, symlog hours."""
    ax = _ax(ax)
    d = data.dropna(subset=["queue_s"]).assign(queue_h=lambda df: df.queue_s / 3600)
    with warnings.catch_warnings():  # seaborn 0.13 passes matplotlib's deprecated vert=; not ours to fix
        warnings.simplefilter("ignore", DeprecationWarning)
        sns.boxplot(data=d, x=x, y="queue_h", hue=hue, ax=ax, showfliers=False, showmeans=True,
                    meanprops=dict(marker="o", markerfacecolor="white", markeredgecolor="black", markersize=4))
    ax.set_yscale("symlog", linthresh=0.01)
    ax.set_ylim(bottom=0)
    ax.set_xlabel("")
    ax.set_ylabel("queueing delay (h)")
    ax.tick_params(axis="x", rotation=30)
    for label in ax.get_xticklabels():
        label.set_horizontalalignment("right")
    return ax


def ideal_ratio(data: pd.DataFrame, x: str = "label", hue: str | None = None, y: str = "jct_vs_ideal", ax=None):
    """Average JCT over the same configuration's on the ideal network (1 = the physical limit)."""
    ax = _ax(ax)
    d = data.dropna(subset=[y]) if y in data else data.iloc[:0]
    d = d[d.network != "ideal"] if "network" in d else d
    if d.empty:
        ax.text(0.5, 0.5, "no ideal-network runs to compare with", ha="center", va="center", transform=ax.transAxes)
        return ax
    jct_bars(d, x=x, y=y, hue=hue, ax=ax, errorbar="sd")
    ax.axhline(1.0, color="black", lw=0.8, ls="--")
    ax.set_xlabel("")
    ax.set_ylabel("avg JCT / ideal-network avg JCT")
    return ax


def _natural(name: str):
    return [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", str(name))]


def placement_timeline(data: pd.DataFrame, ax=None, gpus_per_host: int | None = None, max_hosts: int = 32):
    """Gantt chart of jobs on hosts: one row per host, split into GPU slots, coloured by job size.

    Reads one run's per-job rows (``start_s``, ``end_s``, ``gpus`` and the
    ``allocation`` or ``placement`` string ``host:gpus,...``). A job is drawn
    from its first start to its end on its last allocation, so a preempted
    job (hatched) looks as if it held those GPUs throughout.
    """
    from matplotlib.collections import PatchCollection
    from matplotlib.patches import Patch, Rectangle

    ax = _ax(ax)
    col = "allocation" if "allocation" in data else "placement"
    jobs = data.dropna(subset=["start_s", "end_s"])
    jobs = jobs[jobs[col].astype(str).str.len() > 0].sort_values("start_s")
    parts = [(row, host, int(g)) for row in jobs.itertuples(index=False)
             for host, _, g in (p.rpartition(":") for p in str(getattr(row, col)).split(","))]
    if not parts:
        ax.text(0.5, 0.5, "no placed jobs", ha="center", va="center", transform=ax.transAxes)
        return ax
    hosts = sorted({h for _, h, _ in parts}, key=_natural)[:max_hosts]
    index = {h: i for i, h in enumerate(hosts)}
    cap = gpus_per_host or max(g for _, _, g in parts)
    free_at = {h: np.zeros(cap) for h in hosts}
    sizes = sorted(jobs.gpus.unique())
    colours = dict(zip(sizes, sns.color_palette("viridis", len(sizes))))
    rects, faces, hatched = [], [], []
    for row, host, g in parts:
        if host not in index:
            continue
        start, end = row.start_s / 3600, row.end_s / 3600
        slots = np.argsort(free_at[host] > row.start_s, kind="stable")[:g]  # free slots first
        free_at[host][slots] = row.end_s
        for s in slots:
            rect = Rectangle((start, index[host] + s / cap), max(end - start, 1e-6), 1 / cap)
            (hatched if row.preemptions else rects).append(rect)
            if not row.preemptions:
                faces.append(colours[row.gpus])
    if hatched:  # underneath: their spans are the least exact
        ax.add_collection(PatchCollection(hatched, facecolors="none", edgecolors="silver", hatch="///", lw=0.2))
    ax.add_collection(PatchCollection(rects, facecolors=faces, edgecolors="none"))
    ax.set_xlim(jobs.start_s.min() / 3600, jobs.end_s.max() / 3600)
    ax.set_ylim(0, len(hosts))
    ax.set_yticks(np.arange(len(hosts)) + 0.5, hosts, fontsize=7)
    ax.invert_yaxis()
    ax.set_xlabel("time (h)")
    ax.set_ylabel("host (rows split into GPU slots)")
    handles = [Patch(color=colours[s], label=f"{s} GPU{'s' if s > 1 else ''}") for s in sizes]
    if hatched:
        handles.append(Patch(facecolor="none", edgecolor="grey", hatch="///", label="preempted"))
    ax.legend(handles=handles, fontsize=7, loc="upper left", bbox_to_anchor=(1.0, 1.0), title="job size")
    return ax


def link_utilisation(data: pd.DataFrame, bins: int = 60, top: int = 24, tiers=None, ax=None):
    """Heatmap of utilisation over time for the busiest links (rows) in ``bins`` time bins."""
    ax = _ax(ax)
    links = data if tiers is None else data[data.tier.isin(tiers)]
    if links.empty:
        ax.text(0.5, 0.5, "no network traffic", ha="center", va="center", transform=ax.transAxes)
        return ax
    t0, t1 = links.t_start_s.min(), links.t_end_s.max()
    edges = np.linspace(t0, t1, bins + 1)
    names = links.src.astype(str) + ">" + links.dst.astype(str)
    busiest = (links.load_gbps * (links.t_end_s - links.t_start_s)).groupby(names).sum().nlargest(top).index
    grid = pd.DataFrame(0.0, index=busiest, columns=np.round(edges[:-1] / 3600, 2))
    width = edges[1] - edges[0]
    for name, seg in links[names.isin(busiest)].groupby(names[names.isin(busiest)]):
        for row in seg.itertuples():
            lo = np.clip(row.t_start_s, edges[:-1], edges[1:])
            hi = np.clip(row.t_end_s, edges[:-1], edges[1:])
            grid.loc[name] += (hi - lo) / width * row.utilisation
    sns.heatmap(grid, ax=ax, vmin=0, vmax=1, cmap="rocket_r", cbar_kws={"label": "utilisation"},
                xticklabels=max(1, bins // 8))
    ax.set_xlabel("time (h)")
    ax.set_ylabel("link")
    return ax


def tier_load(data: pd.DataFrame, hue: str = "label", ax=None):
    """Bytes that crossed each tier, per ``hue``."""
    ax = _ax(ax)
    d = data.assign(tbytes=data.load_gbps * 1e9 / 8 * (data.t_end_s - data.t_start_s) / 1e12)
    g = d.groupby([hue, "tier"], as_index=False).tbytes.sum()
    sns.barplot(data=g, x="tier", y="tbytes", hue=hue, ax=ax)
    ax.set_ylabel("TB crossed")
    return ax
