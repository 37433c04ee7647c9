"""Summary metrics per policy: bars from 0 for amounts (times, bytes), points with their spread for ratios and
small differences, boxes for per-job waiting; mean over seeds, error bars one sd unless said otherwise.
"""

from __future__ import annotations

import warnings

import pandas as pd
import seaborn as sns

from ..units import NOISE_S, denoise, time_unit
from .style import (SETTING_NAMES, axis_label, legend_outside, named, policy_colours, policy_order, _as_settings, _ax,
                    _slanted)


def _grouped_bars(data: pd.DataFrame, y: str, by: str | None, ax, palette, errorbar):
    """Bars of ``y`` per policy (coloured), grouped by ``by`` along x (or one group per policy)."""
    order = policy_order(data.label)
    if by:
        sns.barplot(data=data, x=by, y=y, hue="label", hue_order=order, palette=palette, ax=ax, errorbar=errorbar,
                    err_kws={"linewidth": 1.0}, capsize=0.1, saturation=1)
        ax.set_xlabel(SETTING_NAMES.get(by, by))
        legend_outside(ax, title="policy")
    else:
        sns.barplot(data=data, x="label", y=y, hue="label", order=order, hue_order=order, palette=palette, ax=ax,
                    errorbar=errorbar, legend=False, err_kws={"linewidth": 1.0}, capsize=0.1, saturation=1)
        ax.set_xlabel("")
        _slanted(ax)
    return ax

def metric_bars(data: pd.DataFrame, y: str, by: str | None = None, ax=None, errorbar="sd", ylabel: str | None = None,
                unit: tuple[str, float] | None = None, palette=None):
    """A summary metric (avg/p99 JCT, makespan) per policy, mean over seeds with the sd over seeds as error bars;
    times in one unit chosen by magnitude (or ``unit``); ``by`` (e.g. ``oversub``) groups the bars."""
    ax = _ax(ax)
    d = _as_settings(named(data).dropna(subset=[y]), by)
    if y.endswith("_s"):
        name, div = unit or time_unit(d[y])
        d = d.assign(**{y: denoise(d[y], NOISE_S) / div})
    else:
        name = None
    _grouped_bars(d, y, by, ax, palette or policy_colours(d.label), errorbar)
    ax.set_ylabel(ylabel or axis_label(y, name))
    ax.set_ylim(bottom=0)
    return ax

def jct_bars(data: pd.DataFrame, y: str = "avg_jct_s", by: str | None = None, ax=None, errorbar=("ci", 95),
             palette=None):
    """Mean of a summary metric per policy, error bars over seeds (95% CI by default)."""
    return metric_bars(data, y=y, by=by, ax=ax, errorbar=errorbar, palette=palette)

def queue_delay(data: pd.DataFrame, by: str | None = None, ax=None, y: str = "queue_s", palette=None):
    """Per-job waiting per policy (boxes without fliers, white dot: mean) on a symmetric log axis in hours (linear
    below 0.01 h, which is said on the axis). ``y``: ``queue_s`` (first start - submit) or ``wait_s`` (all time
    not running: before the first start and after every preemption)."""
    ax = _ax(ax)
    d = _as_settings(named(data).dropna(subset=[y]), by)
    d = d.assign(queue_h=denoise(d[y], NOISE_S) / 3600)
    order = policy_order(d.label)
    palette = palette or policy_colours(d.label)
    with warnings.catch_warnings():  # seaborn 0.13 passes matplotlib's deprecated vert=; not ours to fix
        warnings.simplefilter("ignore", DeprecationWarning)
        kw = dict(showfliers=False, showmeans=True, palette=palette, hue="label", hue_order=order, saturation=1,
                  meanprops=dict(marker="o", markerfacecolor="white", markeredgecolor="black", markersize=4))
        if by:
            sns.boxplot(data=d, x=by, y="queue_h", ax=ax, **kw)
        else:
            sns.boxplot(data=d, x="label", y="queue_h", order=order, ax=ax, legend=False, **kw)
    ax.set_yscale("symlog", linthresh=0.01)
    ax.set_ylim(bottom=0)
    ax.yaxis.set_major_formatter(lambda v, _: f"{v:g}")
    ax.set_xlabel(SETTING_NAMES.get(by, by) if by else "")
    ax.set_ylabel(axis_label(y, "h; log scale above 0.01 h"))
    if by:
        legend_outside(ax, title="policy")
    else:
        _slanted(ax)
    return ax

def policy_points(data: pd.DataFrame, y: str, by: str | None = None, ax=None, palette=None, errorbar="sd",
                  ylabel: str | None = None, reference: float | None = None):
    """A point per policy (its colour) and ``by`` group: the mean of ``y`` over seeds (or runs) with its spread
    (``errorbar``: one sd by default). The axis spans the values, not from 0, so a difference of a few percent
    shows; ``reference`` draws a dashed line (e.g. 1 for a ratio)."""
    ax = _ax(ax)
    d = _as_settings(named(data).dropna(subset=[y]), by)
    order = policy_order(d.label)
    palette = palette or policy_colours(d.label)
    sns.pointplot(data=d, x=by or "label", y=y, hue="label", hue_order=order, order=None if by else order,
                  palette=palette, errorbar=errorbar, dodge=0.6 if by else False, linestyle="none", markersize=5,
                  err_kws={"linewidth": 1.2}, capsize=0.05, ax=ax, legend=bool(by))
    if reference is not None:
        ax.axhline(reference, color="black", lw=0.8, ls="--")
        lo, hi = ax.get_ylim()
        pad = 0.01 * abs(reference) or 0.01
        ax.set_ylim(min(lo, reference - pad), max(hi, reference + pad))
    ax.set_ylabel(ylabel or axis_label(y))
    if by:
        ax.set_xlabel(SETTING_NAMES.get(by, by))
        legend_outside(ax, title="policy")
    else:
        ax.set_xlabel("")
        _slanted(ax)
    return ax

def ideal_ratio(data: pd.DataFrame, by: str | None = None, y: str = "jct_vs_ideal", ax=None, palette=None):
    """Average JCT over the same configuration's on the ideal network (1 = the physical limit): a point per policy
    (mean over seeds, bar: one sd), grouped by ``by``."""
    d = data.dropna(subset=[y]) if y in data else data.iloc[:0]
    from ..network import ideal_networks
    d = d[~d.network.isin(ideal_networks())] if "network" in d else d
    if d.empty:
        ax = _ax(ax)
        ax.text(0.5, 0.5, "no ideal-network runs to compare with", ha="center", va="center", transform=ax.transAxes)
        return ax
    return policy_points(d, y, by=by, ax=ax, palette=palette, reference=1.0,
                         ylabel="avg JCT / ideal-network avg JCT\n(1 = no network cost)")

def tier_load(data: pd.DataFrame, hue: str = "label", ax=None, palette=None):
    """Bytes that crossed each tier (TB), per ``hue`` (policies in their colours)."""
    ax = _ax(ax)
    d = named(data).assign(tbytes=data.load_gbps * 1e9 / 8 * (data.t_end_s - data.t_start_s) / 1e12)
    g = d.groupby([hue, "tier"], as_index=False).tbytes.sum()
    if palette is None and hue == "label":
        palette = policy_colours(g.label)
    sns.barplot(data=g, x="tier", y="tbytes", hue=hue, hue_order=policy_order(g[hue]) if hue == "label" else None,
                palette=palette, ax=ax, saturation=1)
    ax.set_xlabel("link tier")
    ax.set_ylabel("data crossed (TB)")
    legend_outside(ax, title="policy" if hue == "label" else None)
    return ax
