"""Seaborn/matplotlib figures. Axes-level functions take ``data=`` and ``ax=`` and return the Axes.

Plotting stays out of the simulator; these functions only read the tidy
DataFrames that :mod:`netlab.experiments` and :mod:`netlab.sweep` return
(per-job rows, one row per run or cell, per-link segments), so a notebook
and the HTML report draw the same figures, in the same colours:
:func:`policy_colours` gives every policy one colour wherever it is drawn.
Every axis names its quantity and unit; an axis that is not linear says so in its
label; legends sit outside the data.
"""

from __future__ import annotations

import math
import re
import warnings

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import seaborn as sns
from matplotlib.ticker import FixedLocator, MaxNLocator, NullLocator

from .units import NOISE_S, denoise, time_unit

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
    from .compare import arm_name

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
    from .compare import arm_name

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
    from .compare import arm_name

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


def _setting(by, value) -> str:
    if by == "oversub" and not isinstance(value, str):
        return f"{value:g}:1"
    return str(value)


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


def _as_settings(data: pd.DataFrame, by: str | None) -> pd.DataFrame:
    """The ``by`` column as ordered text (``2:1`` before ``8:1``) for a categorical axis."""
    if by != "oversub" or by not in data or isinstance(data[by].dtype, pd.CategoricalDtype):
        return data
    levels = sorted(data[by].dropna().unique())
    names = {o: f"{o:g}:1" for o in levels}
    return data.assign(oversub=pd.Categorical(data[by].map(names), [names[o] for o in levels], ordered=True))


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
    from .network import ideal_networks
    d = d[~d.network.isin(ideal_networks())] if "network" in d else d
    if d.empty:
        ax = _ax(ax)
        ax.text(0.5, 0.5, "no ideal-network runs to compare with", ha="center", va="center", transform=ax.transAxes)
        return ax
    return policy_points(d, y, by=by, ax=ax, palette=palette, reference=1.0,
                         ylabel="avg JCT / ideal-network avg JCT\n(1 = no network cost)")


def _natural(name: str):
    return [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", str(name))]


#: a job's span, the colour it is drawn in (what crosses the oversubscribed fabric stands out)
SPANS = {"one host": "#9ecae1", "one rack, several hosts": "#fd8d3c", "several racks": "#cb181d"}


def _span(hosts: int, racks: int) -> str:
    return "several racks" if racks > 1 else ("one rack, several hosts" if hosts > 1 else "one host")


def _rack_of(host: str) -> str | None:
    m = re.match(r"(.*?)h\d+$", host)  # leaf-spine hosts are named r<rack>h<host>
    return m.group(1) if m else None


def run_intervals(data: pd.DataFrame) -> pd.DataFrame:
    """One row per run of a job (``job_id``, ``start_s``, ``end_s``, ``where`` = ``host:gpus,...``,
    ``preempted``: a preemption ended it or an earlier one): a job that ran once is one row (start to end on its
    placement); a preempted job one row per run (the ``runs`` column of the per-job table)."""
    col = "allocation" if "allocation" in data else "placement"
    jobs = data.dropna(subset=["start_s"])
    rows = []
    has_runs = "runs" in jobs
    for job in jobs.itertuples(index=False):
        runs = str(getattr(job, "runs", "") or "") if has_runs else ""
        if runs:
            for part in runs.split(";"):
                span, _, where = part.partition("@")
                a, _, b = span.partition("-")
                rows.append((job.job_id, float(a), float(b), where, True))
        elif str(getattr(job, col)):
            rows.append((job.job_id, job.start_s, job.end_s, str(getattr(job, col)), job.preemptions > 0
                         if "preemptions" in jobs else False))
    out = pd.DataFrame(rows, columns=["job_id", "start_s", "end_s", "where", "preempted"])
    return out.dropna(subset=["end_s"])


def placement_timeline(data: pd.DataFrame, ax=None, gpus_per_host: int | None = None, max_hosts: int = 32,
                       t_range: tuple | None = None, hosts: list | None = None, legend: bool = True):
    """Gantt chart of jobs on hosts: one row per host, split into GPU slots, each run of a job coloured by its
    span (one host, one rack, several racks: the last two cross the network, the last the oversubscribed tier);
    runs of preempted jobs hatched. Times in hours over the whole run (``t_range``: seconds, e.g. to align two
    panels); ``hosts``: the rows to draw (default: the hosts used, first ``max_hosts``).

    Reads one run's per-job rows: ``start_s``, ``end_s``, ``hosts``, ``racks``, the placement string
    ``host:gpus,...`` (``allocation`` or ``placement``) and ``runs`` (every run of a preempted job). Without a
    ``runs`` column (stores written before it existed) preempted jobs cannot be drawn where they were: they are
    left out and counted in the legend.
    """
    from matplotlib.collections import PatchCollection
    from matplotlib.patches import Patch, Rectangle

    ax = _ax(ax)
    runs = run_intervals(data)
    missing = 0
    if "runs" not in data and "preemptions" in data:  # old stores: only the last placement of a preempted job
        missing = int((data.preemptions > 0).sum())
        runs = runs[~runs.job_id.isin(data.job_id[data.preemptions > 0])]
    parts = [(r, host, int(g)) for r in runs.itertuples(index=False)
             for host, _, g in (p.rpartition(":") for p in r.where.split(",")) if host]
    if not parts:
        ax.text(0.5, 0.5, "no placed jobs", ha="center", va="center", transform=ax.transAxes)
        return ax
    hosts = list(hosts) if hosts is not None else sorted({h for _, h, _ in parts}, key=_natural)[:max_hosts]
    index = {h: i for i, h in enumerate(hosts)}
    cap = gpus_per_host or max(g for _, h, g in parts)
    free_at = {h: np.zeros(cap) for h in hosts}
    span_of = {}
    for r in runs.itertuples(index=False):
        where = [p.rpartition(":")[0] for p in r.where.split(",")]
        racks = {_rack_of(h) for h in where}
        span_of[(r.job_id, r.start_s)] = _span(len(where), len(racks) if None not in racks else 1)
    rects, faces, hatched = [], [], []
    for r, host, g in sorted(parts, key=lambda p: p[0].start_s):
        if host not in index:
            continue
        start, end = r.start_s / 3600, r.end_s / 3600
        slots = np.argsort(free_at[host] > r.start_s, kind="stable")[:g]  # free slots first
        free_at[host][slots] = r.end_s
        colour = SPANS[span_of[(r.job_id, r.start_s)]]
        for slot in slots:
            rect = Rectangle((start, index[host] + slot / cap), max(end - start, 1e-6), 1 / cap)
            (hatched if r.preempted else rects).append(rect)
            if not r.preempted:
                faces.append(colour)
            else:
                rect.set_facecolor(colour)
    ax.add_collection(PatchCollection(rects, facecolors=faces, edgecolors="none"))
    if hatched:
        ax.add_collection(PatchCollection(hatched, facecolors=[r.get_facecolor() for r in hatched],
                                          edgecolors="black", linewidths=0.0, hatch="////", alpha=0.9))
    racks = [_rack_of(h) for h in hosts]
    if all(racks):
        for i in range(1, len(hosts)):
            if racks[i] != racks[i - 1]:
                ax.axhline(i, color="black", lw=0.6)
    lo, hi = t_range if t_range is not None else (runs.start_s.min(), runs.end_s.max())
    ax.set_xlim(lo / 3600, hi / 3600)
    ax.set_ylim(0, len(hosts))
    ax.set_yticks(np.arange(len(hosts)) + 0.5, hosts, fontsize=7)
    ax.invert_yaxis()
    ax.set_xlabel("time (h)")
    ax.set_ylabel("host (rows split into GPU slots)")
    if legend:
        handles = [Patch(color=c, label=name) for name, c in SPANS.items()]
        handles.append(Patch(facecolor="white", edgecolor="black", hatch="////", label="a preempted job's runs"))
        title = "job spans" + (f"\n({missing} preempted jobs\nnot recorded)" if missing else "")
        ax.legend(handles=handles, fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), title=title,
                  title_fontsize=8, frameon=False)
    return ax


def busiest_links(data: pd.DataFrame, top: int = 24) -> list:
    """The ``top`` links (``src > dst``) that carried the most traffic over the run, busiest first."""
    names = data.src.astype(str) + " > " + data.dst.astype(str)
    return list((data.load_gbps * (data.t_end_s - data.t_start_s)).groupby(names).sum().nlargest(top).index)


def link_utilisation(data: pd.DataFrame, bins: int = 60, top: int = 24, tiers=None, ax=None, rows: list | None = None,
                     t_range: tuple | None = None, colorbar: bool = True):
    """Heatmap of utilisation over time (hours) for the busiest links (rows) in ``bins`` time bins; ``rows`` and
    ``t_range`` (seconds) fix the links and the time span, to set two runs side by side."""
    ax = _ax(ax)
    links = data if tiers is None else data[data.tier.isin(tiers)]
    if links.empty:
        ax.text(0.5, 0.5, "no network traffic", ha="center", va="center", transform=ax.transAxes)
        return ax
    t0, t1 = t_range if t_range is not None else (links.t_start_s.min(), links.t_end_s.max())
    edges = np.linspace(t0, t1, bins + 1)
    names = links.src.astype(str) + " > " + links.dst.astype(str)
    busiest = list(rows) if rows is not None else busiest_links(links, top)
    grid = pd.DataFrame(0.0, index=busiest, columns=range(bins))
    width = edges[1] - edges[0]
    keep = names.isin(busiest)
    for name, seg in links[keep].groupby(names[keep]):
        for row in seg.itertuples():
            lo = np.clip(row.t_start_s, edges[:-1], edges[1:])
            hi = np.clip(row.t_end_s, edges[:-1], edges[1:])
            grid.loc[name] += (hi - lo) / width * row.utilisation
    mesh = ax.pcolormesh(edges / 3600, np.arange(len(busiest) + 1), grid.to_numpy(), vmin=0, vmax=1,
                         cmap="rocket_r")
    if colorbar:
        ax.figure.colorbar(mesh, ax=ax, label="utilisation (share of capacity)")
    ax.set_yticks(np.arange(len(busiest)) + 0.5, list(busiest), fontsize=7)
    ax.invert_yaxis()
    ax.xaxis.set_major_locator(MaxNLocator(nbins=8, integer=True))
    ax.set_xlabel("time (h)")
    ax.set_ylabel("link (busiest first)")
    return ax


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
    from .compare import METRICS, arm_name

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
    largest seed, ``<gain>_seed_min``/``_max``), one colour per trace and network, beside the room the network
    leaves (dashed: ``1 - 1/ratio``, the most any placement can gain) and the paper's ``claim`` (dotted)."""
    ax = _ax(ax)
    groups = rows.groupby(["trace", "network"], sort=True)
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
