"""Changes against a baseline: forest plots on a log-ratio axis labelled in percent, and a gain against
oversubscription beside the room the network leaves.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
from matplotlib.ticker import FixedLocator, NullLocator

from .style import SPARE_COLOURS, policy_colours, _ax


#: ratios (policy / baseline) a change axis may tick at
_RATIO_TICKS = (0.01, 0.02, 0.05, 0.1, 0.2, 0.3, 0.5, 0.7, 0.8, 0.9, 1.0, 1.1, 1.25, 1.5, 2.0, 3.0, 5.0, 10.0, 20.0,
                50.0, 100.0, 1000.0)

#: a change below -99% (a policy that never waits where the baseline does) is drawn at -99%
_FLOOR = 0.01

def pct_label(ratio: float) -> str:
    """A ratio to the baseline as the change it is: 0.8 -> ``-20%``, 2 -> ``+100%``, 1 -> ``0``."""
    change = 100 * (ratio - 1)
    if abs(change) < 1e-9:
        return "0"
    return f"{change:+,.0f}%" if abs(change) >= 1 else f"{change:+.1f}%"

def _ratio_axis(ax, ratios: np.ndarray, max_ticks: int = 6) -> None:
    """A change axis drawn as policy / baseline on a log scale (halving and doubling equally far from 0), labelled
    in percent, with round ticks spaced so their labels never touch."""
    finite = ratios[np.isfinite(ratios)]
    lo = min(float(finite.min()) if finite.size else 1.0, 0.95)
    hi = max(float(finite.max()) if finite.size else 1.0, 1.05)
    ax.set_xscale("log")
    pad = (math.log10(hi) - math.log10(lo)) * 0.08
    ax.set_xlim(10 ** (math.log10(lo) - pad), 10 ** (math.log10(hi) + pad))
    span = math.log10(hi) - math.log10(lo)
    inside = [t for t in _RATIO_TICKS if lo <= t <= hi]
    # neighbouring ticks at least half of each label apart plus a margin (8 pt labels: about 0.07 in a character)
    ax.tick_params(axis="x", labelsize=8)
    per_in = span / max(ax.get_position().width * ax.figure.get_figwidth(), 0.5)  # log10 units per inch
    need = lambda a, b: ((len(pct_label(a)) + len(pct_label(b))) / 2 * 0.07 + 0.12) * per_in  # noqa: E731
    ticks = [1.0]
    for side in (sorted((t for t in inside if t < 1), reverse=True), sorted(t for t in inside if t > 1)):
        last = 1.0
        for t in side:
            if abs(math.log10(t) - math.log10(last)) >= max(need(t, last), span / max_ticks):
                ticks.append(t)
                last = t
    if len(ticks) < 3:  # a narrow range: round percentages inside it
        step = _nice_step(100 * (hi - lo) / 4)
        ticks = sorted({1.0 + k * step / 100 for k in range(-40, 41) if lo <= 1.0 + k * step / 100 <= hi} | {1.0})
    ax.xaxis.set_major_locator(FixedLocator(sorted(ticks)))
    ax.xaxis.set_minor_locator(NullLocator())
    ax.xaxis.set_major_formatter(lambda v, _: pct_label(v))

def _nice_step(raw: float) -> float:
    raw = max(raw, 1e-3)
    mag = 10 ** math.floor(math.log10(raw))
    for m in (1, 2, 2.5, 5, 10):
        if m * mag >= raw:
            return m * mag
    return 10 * mag  # pragma: no cover

def comparison_forest(data: pd.DataFrame, metric: str = "avg_jct_s", hue: str | None = None, ax=None,
                      order: list | None = None):
    """Forest plot of one metric's change against the baseline: a point and its confidence interval per policy
    (rows, ``order`` or best first), ``hue`` (e.g. ``oversub``) side by side; 0 = the baseline. The axis is the
    ratio policy / baseline on a log scale, labelled as the change in percent (said on the axis).
    Reads :func:`netlab.compare.compare_policies` rows (``change``, ``ci_low``, ``ci_high`` as fractions)."""
    from ..compare import METRICS, arm_name

    ax = _ax(ax)
    d = data[data.metric == metric]
    if d.empty:
        ax.text(0.5, 0.5, "no comparison", ha="center", va="center", transform=ax.transAxes)
        return ax
    arms = list(order) if order is not None else list(d.groupby("label").change.mean().sort_values().index)
    d = d[d.label.isin(arms)]
    levels = list(dict.fromkeys(d[hue])) if hue else [None]
    colours = policy_colours(d.label)
    markers = dict(zip(levels, "osD^v<>p*"))
    step = 0.7 / max(len(levels), 1)
    ratio = lambda v: np.maximum(1.0 + np.asarray(v, dtype=float), _FLOOR)  # noqa: E731
    for k, level in enumerate(levels):
        part = d if level is None else d[d[hue] == level]
        y = np.array([arms.index(a) for a in part.label]) + (k - (len(levels) - 1) / 2) * step
        x, lo, hi = ratio(part.change), ratio(part.ci_low), ratio(part.ci_high)
        err = np.nan_to_num(np.vstack([x - lo, hi - x]))
        for xi, yi, e0, e1, label in zip(x, y, err[0], err[1], part.label):
            ax.errorbar([xi], [yi], xerr=[[e0], [e1]], fmt=markers[level], ms=4.5, capsize=2, color=colours[label])
        if level is not None:  # the legend says which marker is which setting, in black
            numeric = not isinstance(level, str) and not pd.isna(level)
            name = f"{level:g}:1" if hue == "oversub" and numeric else str(level)
            ax.plot([], [], markers[level], color="black", ms=4.5, label=name)
    ax.axvline(1.0, color="black", lw=0.8)
    ax.set_yticks(range(len(arms)), [arm_name(a) for a in arms])
    ax.set_ylim(len(arms) - 0.5, -0.5)
    _ratio_axis(ax, ratio(d[["change", "ci_low", "ci_high"]].to_numpy(dtype=float).ravel()))
    ax.set_xlabel(f"{METRICS.get(metric, metric)}: change vs baseline (log scale)")
    ax.grid(axis="x", alpha=0.3)
    return ax

def oversub_axis(ax, levels, axis: str = "x") -> None:
    """A log axis of oversubscription ticked at ``levels`` only, labelled ``4:1`` (no minor tick labels over them)."""
    target = ax.xaxis if axis == "x" else ax.yaxis
    (ax.set_xscale if axis == "x" else ax.set_yscale)("log")
    target.set_major_locator(FixedLocator([float(v) for v in levels]))
    target.set_major_formatter(lambda v, _: f"{v:g}:1")
    target.set_minor_locator(NullLocator())
    (ax.set_xlabel if axis == "x" else ax.set_ylabel)("oversubscription (log scale)")

def gain_vs_oversub(rows: pd.DataFrame, ax=None, gain: str = "avg_jct_gain", room: str = "baseline_ideal_ratio",
                    claim: float | None = None):
    """A policy's gain over the baseline per oversubscription (points: mean over seeds; bars: the smallest and
    largest seed, ``<gain>_seed_min``/``_max``), one colour per trace and transport regime (per network for rows
    without a ``regime``), beside the room the network leaves (dashed: ``1 - 1/ratio``, the most any placement can
    gain) and the paper's ``claim`` (dotted)."""
    ax = _ax(ax)
    groups = rows.groupby(["trace", "regime" if "regime" in rows else "network"], sort=True)
    colours = dict(zip(groups.groups, SPARE_COLOURS))
    for (trace, network), g in groups:
        g = g.sort_values("oversub")
        lo = g.get(f"{gain}_seed_min", g[gain])
        hi = g.get(f"{gain}_seed_max", g[gain])
        c = colours[(trace, network)]
        ax.errorbar(g.oversub, g[gain], yerr=np.vstack([g[gain] - lo, hi - g[gain]]), fmt="o-", ms=4, capsize=2,
                    color=c, label=f"gain, {trace}, {network}")
        ax.plot(g.oversub, 1 - 1 / g[room], "--", color=c, alpha=0.6, label=f"room (1 - 1/ratio), {trace}, {network}")
    if claim is not None:
        ax.axhline(claim, color="black", lw=0.8, ls=":", label=f"paper: {claim:.0%}")
    oversub_axis(ax, sorted(rows.oversub.unique()))
    ax.yaxis.set_major_formatter(lambda v, _: f"{v:.0%}")
    ax.set_ylabel("average JCT gain vs the baseline")
    ax.grid(alpha=0.3)
    return ax
