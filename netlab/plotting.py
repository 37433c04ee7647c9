"""Seaborn axes-level figures. Each takes ``data=`` and ``ax=`` and returns the Axes.

Plotting stays out of the simulator; these functions only read the tidy
DataFrames that :mod:`netlab.experiments` returns.
"""

from __future__ import annotations

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


def jct_bars(data: pd.DataFrame, x: str = "label", y: str = "avg_jct_s", hue: str | None = None, ax=None):
    """Mean of a summary metric per policy, error bars over seeds (95% CI)."""
    ax = _ax(ax)
    sns.barplot(data=data, x=x, y=y, hue=hue, ax=ax, errorbar=("ci", 95))
    ax.tick_params(axis="x", rotation=30)
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
