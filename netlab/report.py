"""The sweep report: which policy wins, by how much, how sure; then the table and the figures.

:func:`render_report` reads a stored sweep (or a :class:`~netlab.sweep.SweepResult`)
and writes, next to it, ``comparison.csv`` (every policy against the baseline,
:mod:`netlab.compare`), ``summary.csv`` (mean over seeds), ``cells.csv`` (one
row per cell), one PNG per figure and ``report.html`` with the same PNGs
embedded as base64, so the page can be mailed or archived alone. The page
opens with the verdicts and the headline figure (each policy's change
against the baseline, with its confidence interval).
:func:`demo_report` is the main job: the demo sweep, the table, the verdicts, the report.
"""

from __future__ import annotations

import base64
import html
import io
from pathlib import Path

import matplotlib.pyplot as plt  # no backend chosen here: notebooks import this module (inline figures)
import pandas as pd
import yaml

from . import compare, plotting
from .sim.metrics import atomic_write

TABLE_COLUMNS = ["finished", "avg_jct_s", "p99_jct_s", "makespan_s", "avg_wait_s", "avg_start_delay_s",
                 "gpu_util", "overload_gbit",
                 "avg_slowdown", "jct_vs_ideal", "wall_s"]
#: parameter columns a table or figure splits by, when they vary (topology is implied by oversub)
GROUPS = ("label", "trace", "max_jobs", "topology", "oversub", "network")


def _varying(summary: pd.DataFrame, cols=GROUPS) -> list[str]:
    keep = [c for c in cols if c in summary and (c in ("label", "network") or summary[c].nunique(dropna=False) > 1)]
    if "oversub" in keep and "topology" in keep and summary.groupby("oversub").topology.nunique().max() == 1:
        keep.remove("topology")
    return keep


def comparison_table(summary: pd.DataFrame) -> pd.DataFrame:
    """Mean over seeds per configuration (label, network and any other varying parameter), best first."""
    by = _varying(summary)
    num = [c for c in TABLE_COLUMNS if c in summary.columns]
    table = summary.groupby(by, as_index=False, dropna=False)[num].mean()
    if "seed" in summary:
        table.insert(len(by), "seeds", summary.groupby(by, dropna=False).seed.nunique().to_numpy())
    order = [c for c in ("network", "oversub") if c in by] + ["avg_jct_s"]
    return table.sort_values(order, kind="stable").reset_index(drop=True)


#: summary column -> (header as a reader says it, divisor to its unit); columns not listed are left out
READABLE = {"label": ("policy", None), "trace": ("trace", None), "max_jobs": ("jobs kept", None),
            "topology": ("topology", None), "oversub": ("oversub", None), "network": ("network", None),
            "seeds": ("seeds", None), "avg_jct_s": ("avg JCT (h)", 3600), "p99_jct_s": ("p99 JCT (h)", 3600),
            "makespan_s": ("makespan (h)", 3600), "avg_wait_s": ("total wait (h)", 3600),
            "avg_start_delay_s": ("first-start delay (h)", 3600), "gpu_util": ("GPU util", None),
            "overload_gbit": ("overload (Tbit)", 1000), "jct_vs_ideal": ("JCT / ideal", None)}


def readable_table(table: pd.DataFrame) -> pd.DataFrame:
    """:func:`comparison_table` for reading: times in hours, headers with units, ``dally`` for
    ``dally+default``, the oversubscription as ``8:1`` (blank on the ideal network, which has none)."""
    out = pd.DataFrame(index=table.index)
    for col, (name, div) in READABLE.items():
        if col not in table:
            continue
        v = table[col]
        if col == "label":
            v = v.map(compare.arm_name)
        elif col == "oversub":
            v = v.map(lambda o: "" if pd.isna(o) else f"{o:g}:1")
        elif div:
            v = v / div
        out[name] = v
    return out


def _facet(summary: pd.DataFrame) -> str | None:
    """The parameter besides the policy that varies (hue of the bar charts), if any."""
    rest = [c for c in _varying(summary) if c not in ("label", "network")]
    return rest[0] if rest else None


def _fig(width=8.0, height=4.5, ncols=1):
    fig, axes = plt.subplots(1, ncols, figsize=(width, height), squeeze=False)
    return fig, list(axes[0])


def _showcase_cell(res) -> str | None:
    """The most congested cell that kept its per-link rows (for the heatmap and the Gantt chart)."""
    if res.links.empty:
        from .network import ideal_networks
        fair = res.summary[~res.summary.network.isin(ideal_networks())] if "network" in res.summary else res.summary
        return fair.sort_values("overload_gbit").cell_id.iloc[-1] if len(fair) else None
    kept = res.summary[res.summary.cell_id.isin(res.links.cell_id.unique())]
    return kept.sort_values("overload_gbit").cell_id.iloc[-1]


def pick_baseline(summary: pd.DataFrame, baseline: str | None = None) -> str | None:
    """The label to compare against: ``baseline`` if given (it must be in the sweep; ``dally`` names
    ``dally+default``), else
    :data:`netlab.compare.DEFAULT_BASELINE` when the sweep has it, else None (no comparison)."""
    labels = set(summary.label) if "label" in summary else set()
    if baseline is not None:
        if baseline not in labels and f"{baseline}+default" in labels:  # "dally": its own placement
            baseline = f"{baseline}+default"
        if baseline not in labels:
            raise ValueError(f"baseline {baseline!r} is not a policy of this sweep; its policies: "
                             f"{', '.join(sorted(labels)) or 'none'}")
        return baseline
    return compare.DEFAULT_BASELINE if compare.DEFAULT_BASELINE in labels else None


def comparison(summary: pd.DataFrame, baseline: str | None = None) -> pd.DataFrame:
    """:func:`netlab.compare.compare_policies` against :func:`pick_baseline` (empty without a baseline or
    without two policies to pair)."""
    base = pick_baseline(summary, baseline) if not summary.empty else None
    if base is None or summary.label.nunique() < 2:
        return pd.DataFrame()
    try:
        return compare.compare_policies(summary, base)
    except ValueError:  # only bound networks (ideal), or nothing paired with the baseline
        return pd.DataFrame()


def headline_figure(cmp: pd.DataFrame):
    """One row of forest plots (one per metric): each policy's change against the baseline, with its
    interval, side by side per oversubscription (or whatever else the setting varies)."""
    setting = [c for c in cmp.columns if c not in compare.COLUMNS and cmp[c].nunique(dropna=False) > 1]
    hue = setting[0] if setting else None
    metrics = list(cmp.metric.cat.categories) if hasattr(cmp.metric, "cat") else list(dict.fromkeys(cmp.metric))
    arms = cmp.label.nunique()
    fig, axes = plt.subplots(1, len(metrics), figsize=(3.0 * len(metrics) + 1.8, 0.45 * arms * max(
        1, (cmp[hue].nunique() if hue else 1) * 0.6) + 1.6), sharey=True, squeeze=False)
    axes = list(axes[0])
    order = list(cmp[cmp.metric == metrics[0]].groupby("label").change.mean().sort_values().index)
    for ax, m in zip(axes, metrics):
        plotting.comparison_forest(cmp, metric=m, hue=hue, ax=ax, order=order)
        ax.set_title(compare.METRICS.get(m, m), fontsize=10)
        ax.set_xlabel("change vs baseline")
    for ax in axes[1:]:
        ax.tick_params(axis="y", left=False)
    if hue:
        axes[-1].legend(loc="upper left", bbox_to_anchor=(1.02, 1.0), frameon=False, fontsize=8,
                        title="oversubscription" if hue == "oversub" else hue, title_fontsize=8)
    fig.tight_layout()
    return fig


def _as_read(frame: pd.DataFrame) -> pd.DataFrame:
    """Labels and settings as figures show them: ``dally`` for ``dally+default``, oversub ``8:1`` (ordered)."""
    if frame.empty:
        return frame
    out = frame.assign(label=frame.label.map(compare.arm_name)) if "label" in frame else frame
    if "oversub" in out and out.oversub.notna().any():
        levels = sorted(out.oversub.dropna().unique())
        names = {o: f"{o:g}:1" for o in levels}
        out = out.assign(oversub=pd.Categorical(out.oversub.map(names), [names[o] for o in levels], ordered=True))
    return out


def figures(res, cmp: pd.DataFrame | None = None) -> dict:
    """Figure name -> (title, matplotlib Figure); the headline comparison first when there is one."""
    s, jobs = _as_read(res.summary), _as_read(res.jobs)
    from .network import ideal_networks
    congested = s[~s.network.isin(ideal_networks())] if "network" in s else s
    cjobs = jobs[~jobs.network.isin(ideal_networks())] if "network" in jobs else jobs
    hue = _facet(congested)
    out = {}
    if cmp is not None and not cmp.empty:
        base = compare.arm_name(cmp.baseline.iloc[0])
        seeds = sorted({int(n) for n in cmp.seeds})
        out["comparison"] = (f"Change against {base}, paired by seed: change of the mean and its 95% bootstrap "
                             f"interval ({'-'.join(map(str, seeds[::max(len(seeds) - 1, 1)]))} seeds; left of 0 "
                             "is better)", headline_figure(cmp))
    panels = [v for v in congested[hue].cat.categories if v in set(congested[hue])] if hue == "oversub" else (
        sorted(congested[hue].unique()) if hue else [None])
    fig, axes = _fig(5.5 * len(panels) + 2, 4.2, len(panels))
    for k, (ax, value) in enumerate(zip(axes, panels)):
        plotting.jct_cdf(cjobs if value is None else cjobs[cjobs[hue] == value], hue="label", ax=ax)
        ax.set_title(_facet_title(hue, value))
        if k < len(panels) - 1 and ax.get_legend():
            ax.get_legend().remove()
    out["jct_cdf"] = ("Job completion time CDF per policy (all seeds)", fig)
    for name, col, title in (("avg_jct", "avg_jct_s", "Average JCT"), ("p99_jct", "p99_jct_s", "p99 JCT"),
                             ("makespan", "makespan_s", "Makespan")):
        fig, (ax,) = _fig()
        plotting.metric_bars(congested, y=col, hue=hue, ax=ax)
        _hue_title(ax, hue)
        out[name] = (f"{title} per policy (mean over seeds; error bars: sd over seeds)", fig)
    fig, (ax,) = _fig()
    if "wait_s" in cjobs:  # total waiting: before the first start and after every preemption
        plotting.queue_delay(cjobs, hue=hue, ax=ax, y="wait_s")
        what = "Total waiting per job: queued before the first start and after every preemption"
    else:  # a store written before wait_s existed
        plotting.queue_delay(cjobs, hue=hue, ax=ax)
        what = "First-start delay per job"
    _hue_title(ax, hue)
    out["queue_delay"] = (f"{what} (boxes; white dot: mean)", fig)
    cell = _showcase_cell(res)
    if cell is not None:
        row = s[s.cell_id == cell].iloc[0]
        what = ", ".join(f"{c}={row[c]}" for c in ["label"] + _varying(res.summary)[1:] + ["seed"] if c in row)
        fig, (ax,) = _fig(10, 5)
        plotting.link_utilisation(res.links[res.links.cell_id == cell] if not res.links.empty else res.links, ax=ax)
        out["link_utilisation"] = (f"Per-link utilisation over time, busiest links ({what})", fig)
        fig, (ax,) = _fig(10, 5.5)
        plotting.placement_timeline(jobs[jobs.cell_id == cell], ax=ax)
        out["placement_timeline"] = (f"Placement timeline: jobs on hosts, coloured by how far they spread ({what})",
                                     fig)
    fig, (ax,) = _fig()
    plotting.ideal_ratio(s, hue=hue, ax=ax)
    _hue_title(ax, hue)
    out["ideal_ratio"] = ("Ratio to the ideal network (average JCT; 1 = non-blocking)", fig)
    return out


def _facet_title(hue, value) -> str:
    if hue is None:
        return ""
    return f"oversubscription {value}" if hue == "oversub" else f"{hue}={value}"


def _hue_title(ax, hue) -> None:
    if hue == "oversub" and ax.get_legend() is not None:
        plotting.legend_outside(ax, title="oversubscription")


def _png(fig) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, dpi=100, bbox_inches="tight", format="png")
    plt.close(fig)
    return buf.getvalue()


def _fmt(value) -> str:
    if not isinstance(value, float):
        return str(value)
    if value == 0 or abs(value) >= 100:
        return f"{value:,.0f}"
    return f"{value:.3g}" if abs(value) >= 0.001 else f"{'<' if value > 0 else '>-'}0.001"


def _html(res, table: pd.DataFrame, pngs: dict, lines: list[str], cmp: pd.DataFrame) -> str:
    m = res.manifest or {}
    runs = m.get("runs", [])
    meta = [("sweep", m.get("name")), ("cells", f"{len(res.summary)} done, {len(res.errors)} failed"),
            ("started", m.get("started_at")), ("ended", m.get("ended_at")),
            ("backend", ", ".join(sorted({r["backend"] for r in runs}))),
            ("netlab", m.get("netlab_version")), ("git commit", m.get("git_commit")),
            ("python", (m.get("packages") or {}).get("python"))]
    parts = ["<!doctype html><html><head><meta charset='utf-8'><title>netlab sweep report</title><style>",
             "body{font-family:system-ui,sans-serif;margin:2em;max-width:1200px}"
             "table{border-collapse:collapse;font-size:13px}td,th{border:1px solid #ccc;padding:2px 6px;"
             "text-align:right}td:first-child{text-align:left}th{background:#f3f3f3}"
             "figure{margin:1.5em 0}img{max-width:100%}"
             "pre{background:#f6f6f6;padding:8px;overflow:auto;font-size:12px}"
             "ul.verdicts{font-family:ui-monospace,monospace;font-size:13px;line-height:1.5}",
             "</style></head><body>", f"<h1>netlab sweep: {html.escape(str(m.get('name', '')))}</h1>"]
    if lines:
        base = compare.arm_name(cmp.baseline.iloc[0])
        parts += ["<h2>Verdicts</h2>",
                  f"<p>Each policy against <b>{html.escape(base)}</b>, seed by seed (every policy of a seed "
                  "replays the same jobs): the change of the mean and its 95% bootstrap interval (BCa, paired "
                  "seed resamples). <i>better</i>/<i>worse</i>: the average-JCT interval excludes 0. Lower is "
                  "better for every metric; <i>total wait</i> counts waiting before the first start and after "
                  "every preemption.</p><ul class='verdicts'>"]
        parts += [f"<li class='verdict'>{html.escape(line)}</li>" for line in lines]
        parts.append("</ul>")
    figs = list(pngs.items())
    if figs and figs[0][0] == "comparison":
        parts.append(_figure_html(*figs[0]))
        figs = figs[1:]
    parts.append("<h2>Sweep</h2><table>")
    parts += [f"<tr><th>{k}</th><td style='text-align:left'>{html.escape(str(v))}</td></tr>" for k, v in meta]
    parts += ["</table><h2>Summary (mean over seeds)</h2>",
              readable_table(table).to_html(index=False, float_format=lambda v: _fmt(float(v)), na_rep="",
                                            border=0),
              "<h2>Figures</h2>"]
    parts += [_figure_html(name, item) for name, item in figs]
    if not res.errors.empty:
        parts.append(f"<h2>Failed cells ({len(res.errors)})</h2><p>Re-running the sweep retries them.</p>")
        for e in res.errors.itertuples():
            parts.append(f"<details><summary>{e.cell_id} {html.escape(e.label)}: {html.escape(e.error)}</summary>"
                         f"<pre>{html.escape(e.traceback)}</pre></details>")
    parts += ["<h2>Grid</h2><pre>", html.escape(yaml.safe_dump(m.get("config", {}), sort_keys=False)),
              "</pre></body></html>"]
    return "".join(parts)


def _figure_html(name: str, item) -> str:
    title, png = item
    data = base64.b64encode(png).decode()
    return (f"<figure id='{name}'><img alt='{html.escape(title)}' src='data:image/png;base64,{data}'>"
            f"<figcaption>{html.escape(title)}</figcaption></figure>")


def render_report(source, out=None, baseline: str | None = None) -> Path:
    """Write comparison.csv, summary.csv, cells.csv, the figures and report.html for a sweep (directory or
    result). ``baseline``: the label to compare against (default: tiresias+consolidated when present)."""
    from .sweep import load_sweep

    res = load_sweep(source) if isinstance(source, (str, Path)) else source
    out = Path(out or res.path)
    out.mkdir(parents=True, exist_ok=True)
    table = comparison_table(res.summary) if not res.summary.empty else pd.DataFrame()
    cmp = comparison(res.summary, baseline)
    lines = compare.verdicts(cmp)
    atomic_write(out / "comparison.csv", lambda p: cmp.to_csv(p, index=False))
    atomic_write(out / "summary.csv", lambda p: table.to_csv(p, index=False))
    atomic_write(out / "cells.csv", lambda p: res.summary.to_csv(p, index=False))
    pngs = {}
    if not res.summary.empty:
        for name, (title, fig) in figures(res, cmp).items():
            png = _png(fig)
            pngs[name] = (title, png)
            atomic_write(out / f"{name}.png", lambda p, png=png: Path(p).write_bytes(png))
    page = _html(res, table, pngs, lines, cmp)
    atomic_write(out / "report.html", lambda p: Path(p).write_text(page, encoding="utf-8"))
    return out / "report.html"


def print_table(table: pd.DataFrame, header: str = "") -> None:
    with pd.option_context("display.width", 200, "display.max_columns", 30, "display.max_rows", 500,
                           "display.float_format", "{:,.2f}".format):
        if header:
            print(header)
        print(table.to_string(index=False))


def print_verdicts(cmp: pd.DataFrame, header: str = "") -> list[str]:
    """The verdict lines on stdout (and returned)."""
    lines = compare.verdicts(cmp)
    if lines:
        print(header or f"\nverdicts against {compare.arm_name(cmp.baseline.iloc[0])} "
                        "(change of the mean, 95% bootstrap interval, paired by seed):")
        for line in lines:
            print("  " + line)
    return lines


def demo_report(out, trace="philly-sample", topology=None, seeds: int | None = None, max_jobs=None, backend="processes",
                workers=None, ideal: bool = True, progress: bool | None = True, oversub=None,
                baseline: str | None = None, **backend_options) -> Path:
    """The main job: the demo sweep (:func:`netlab.sweep.demo_grid`: classic and network-aware schedulers,
    congested leaf-spine, ideal network once per scheduler and seed) into ``out``; the summary table and
    the verdicts against ``baseline`` (default :data:`netlab.sweep.grid.DEMO_BASELINE`) on stdout;
    ``out/report.html``. The process backend runs the first cell in this process first (numba compiles
    once, the workers load its cache)."""
    from .sweep import demo_grid, expand, run_sweep
    from .sweep.grid import DEMO_BASELINE, DEMO_OVERSUB, DEMO_SEEDS, DEMO_TOPOLOGY

    seeds = seeds or DEMO_SEEDS
    grid = demo_grid(trace=trace, max_jobs=max_jobs, topology=topology or DEMO_TOPOLOGY, seeds=seeds, ideal=ideal,
                     oversub=tuple(oversub or DEMO_OVERSUB))
    labels = pd.DataFrame({"label": sorted({c.label for c in expand(grid)})})
    base = pick_baseline(labels, baseline or DEMO_BASELINE)  # a bad --baseline fails here, before anything runs
    if backend == "processes":
        backend_options.setdefault("warm_up", True)
    res = run_sweep(grid, out=out, backend=backend, progress=progress, workers=workers, **backend_options)
    oversubs = ", ".join(f"{o:g}:1" for o in (oversub or DEMO_OVERSUB))
    print_table(readable_table(comparison_table(res.summary)),
                f"\ntrace={trace} topology={grid['topology']} oversub={oversubs} (+ ideal network) seeds={seeds} "
                f"cells={len(res.summary)} failed={len(res.errors)}")
    cmp = comparison(res.summary, base)
    print_verdicts(cmp)
    return render_report(res, out, base)
