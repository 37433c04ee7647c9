"""Job completion time distributions: the CDF, and each policy's tail beside the baseline's (small multiples,
so no policy's curve hides under another's).
"""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import seaborn as sns
from matplotlib.ticker import FixedLocator, NullLocator

from .style import (SETTING_NAMES, axis_label, legend_outside, named, policy_colours, policy_order, _ax, _setting,
                    _time_ticks)


def jct_cdf(data: pd.DataFrame, hue: str = "label", ax=None, log: bool = True, palette=None):
    """Empirical CDF of job completion time, one line per ``hue`` (policies in their colours)."""
    ax = _ax(ax)
    d = named(data).dropna(subset=["jct_s"])
    if palette is None and hue == "label":
        palette = policy_colours(d.label)
    sns.ecdfplot(data=d, x="jct_s", hue=hue, ax=ax, log_scale=log, palette=palette)
    if log and len(d):
        _time_ticks(ax, d.jct_s[d.jct_s > 0].min(), d.jct_s.max())
    ax.set_xlabel(axis_label("jct_s", "log scale" if log else "s"))
    ax.set_ylabel("fraction of jobs")
    legend_outside(ax, title="policy" if hue == "label" else None)
    return ax

def jct_tail(data: pd.DataFrame, policy: str, baseline: str | None = None, ax=None, palette=None):
    """The tail of one policy's JCT distribution beside the baseline's: the share of jobs that took longer than
    x, on log-log axes (the long jobs, where schedulers differ, get as much room as the short ones)."""
    ax = _ax(ax)
    palette = palette or policy_colours(data.label)
    curves = [(baseline, True)] if baseline is not None and baseline != policy else []
    curves.append((policy, False))
    for label, behind in curves:
        v = data.loc[data.label == label, "jct_s"].to_numpy(dtype=float)
        v = np.sort(v[np.isfinite(v) & (v > 0)])
        if not len(v):
            continue
        share = 1.0 - np.arange(len(v)) / len(v)  # share of jobs taking at least v[i]
        if behind:  # the baseline: a wide pale band under the policy, visible where the two coincide
            ax.step(v, share, where="post", lw=4.5, alpha=0.35, color=palette.get(label), label=label,
                    solid_capstyle="butt")
        else:
            ax.step(v, share, where="post", lw=1.5, color=palette.get(label), label=label)
    ax.set_xscale("log")
    ax.set_yscale("log")
    v = data.jct_s[np.isfinite(data.jct_s) & (data.jct_s > 0)]
    if len(v):
        _time_ticks(ax, v.min(), v.max(), most=4)
        n = data.groupby("label").jct_s.count().max()
        ax.set_ylim(0.5 / max(n, 1), 1.3)
    ax.yaxis.set_major_locator(FixedLocator([1, 0.1, 0.01, 0.001, 1e-4]))
    ax.yaxis.set_major_formatter(lambda v, _: f"{v:.0%}" if v >= 0.01 else f"{100 * v:g}%")
    ax.yaxis.set_minor_locator(NullLocator())
    ax.grid(alpha=0.3, which="major")
    return ax

def jct_tails(data: pd.DataFrame, baseline: str | None = None, by: str | None = None, palette=None,
              panel_in: tuple = (2.4, 2.1)):
    """Small multiples of :func:`jct_tail`: one panel per policy (columns) and ``by`` value (rows, e.g. the
    oversubscription), each policy beside the baseline, so no policy's curve hides under another's. Returns the
    Figure."""
    from ..compare import arm_name

    d = named(data).dropna(subset=["jct_s"])
    baseline = arm_name(baseline) if baseline is not None else None
    palette = palette or policy_colours(d.label)
    policies = [p for p in policy_order(d.label, baseline) if p != baseline] or [baseline]
    rows = sorted(d[by].dropna().unique()) if by else [None]
    if by and isinstance(d[by].dtype, pd.CategoricalDtype):
        rows = [r for r in d[by].cat.categories if r in set(d[by])]
    ncols = len(policies)
    fig, axes = plt.subplots(len(rows), ncols, figsize=(panel_in[0] * ncols + 0.8, panel_in[1] * len(rows) + 0.9),
                             squeeze=False, sharex=True, sharey=True)
    for i, row in enumerate(rows):
        part = d if row is None else d[d[by] == row]
        for j, policy in enumerate(policies):
            ax = axes[i][j]
            jct_tail(part, policy, baseline, ax=ax, palette=palette)
            if i == 0:
                ax.set_title(policy, fontsize=9, color=palette.get(policy))
            if j == 0:
                ax.set_ylabel(f"{SETTING_NAMES.get(by, by)} {_setting(by, row)}" if row is not None else "",
                              fontsize=8)
            ax.tick_params(labelsize=7)
            for t in ax.get_xticklabels():
                t.set_rotation(30)
                t.set_horizontalalignment("right")
    fig.supxlabel("job completion time (log scale)", fontsize=9)
    fig.supylabel("share of jobs that took longer (log scale)", fontsize=9)
    if baseline is not None:
        from matplotlib.lines import Line2D

        fig.legend([Line2D([], [], color=palette.get(baseline), lw=4.5, alpha=0.35)], [f"{baseline} (baseline)"],
                   loc="upper right", bbox_to_anchor=(1.0, 1.0), frameon=False, fontsize=8)
    fig.tight_layout(rect=(0.01, 0, 1, 0.94 if baseline is not None else 1))
    return fig
