"""The sweep report: a summary table and figures, as PNG files and one self-contained HTML page.

:func:`render_report` reads a stored sweep (or a :class:`~netlab.sweep.SweepResult`)
and writes, next to it, ``summary.csv`` (mean over seeds), ``cells.csv`` (one
row per cell), one PNG per figure and ``report.html`` with the same PNGs
embedded as base64, so the page can be mailed or archived alone.
:func:`demo_report` is the main job: the default sweep, the table, the report.
"""

from __future__ import annotations

import base64
import html
import io
from pathlib import Path

import matplotlib.pyplot as plt  # no backend chosen here: notebooks import this module (inline figures)
import pandas as pd
import yaml

from . import plotting
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
        fair = res.summary[res.summary.network != "ideal"] if "network" in res.summary else res.summary
        return fair.sort_values("overload_gbit").cell_id.iloc[-1] if len(fair) else None
    kept = res.summary[res.summary.cell_id.isin(res.links.cell_id.unique())]
    return kept.sort_values("overload_gbit").cell_id.iloc[-1]


def figures(res) -> dict:
    """Figure name -> (title, matplotlib Figure). Every panel is one axes-level call of :mod:`netlab.plotting`."""
    s, jobs = res.summary, res.jobs
    congested = s[s.network != "ideal"] if "network" in s else s
    cjobs = jobs[jobs.network != "ideal"] if "network" in jobs else jobs
    hue = _facet(congested)
    out = {}
    panels = sorted(congested[hue].unique()) if hue else [None]
    fig, axes = _fig(6.0 * len(panels), 4.2, len(panels))
    for ax, value in zip(axes, panels):
        plotting.jct_cdf(cjobs if value is None else cjobs[cjobs[hue] == value], hue="label", ax=ax)
        ax.set_title(f"{hue}={value}" if hue else "")
    out["jct_cdf"] = ("JCT CDF per policy", fig)
    for name, col, title in (("avg_jct", "avg_jct_s", "Average JCT"), ("p99_jct", "p99_jct_s", "p99 JCT"),
                             ("makespan", "makespan_s", "Makespan")):
        fig, (ax,) = _fig()
        plotting.metric_bars(congested, y=col, hue=hue, ax=ax)
        out[name] = (f"{title} per policy (error bars: sd over seeds)", fig)
    fig, (ax,) = _fig()
    if "wait_s" in cjobs:  # total waiting: before the first start and after every preemption
        plotting.queue_delay(cjobs.assign(queue_s=cjobs.wait_s), hue=hue, ax=ax)
        ax.set_ylabel("total waiting per job (h)")
        what = "Total waiting per job: queued before the first start and after every preemption"
    else:  # a store written before wait_s existed
        plotting.queue_delay(cjobs, hue=hue, ax=ax)
        what = "First-start delay per job"
    out["queue_delay"] = (f"{what} (boxes; white dot: mean)", fig)
    cell = _showcase_cell(res)
    if cell is not None:
        row = s[s.cell_id == cell].iloc[0]
        what = ", ".join(f"{c}={row[c]}" for c in ["label"] + _varying(s)[1:] + ["seed"] if c in row)
        fig, (ax,) = _fig(9, 5)
        plotting.link_utilisation(res.links[res.links.cell_id == cell] if not res.links.empty else res.links, ax=ax)
        out["link_utilisation"] = (f"Per-link utilisation over time, busiest links ({what})", fig)
        fig, (ax,) = _fig(10, 5.5)
        plotting.placement_timeline(jobs[jobs.cell_id == cell], ax=ax)
        out["placement_timeline"] = (f"Placement timeline: jobs on hosts ({what})", fig)
    fig, (ax,) = _fig()
    plotting.ideal_ratio(s, hue=hue, ax=ax)
    out["ideal_ratio"] = ("Ratio to the ideal network (average JCT; 1 = non-blocking)", fig)
    return out


def _png(fig) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, dpi=100, bbox_inches="tight", format="png")
    plt.close(fig)
    return buf.getvalue()


def _fmt(value) -> str:
    return f"{value:,.3g}" if isinstance(value, float) and abs(value) < 10 else (
        f"{value:,.0f}" if isinstance(value, float) else str(value))


def _html(res, table: pd.DataFrame, pngs: dict) -> str:
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
             "text-align:right}th{background:#f3f3f3}figure{margin:1.5em 0}img{max-width:100%}"
             "pre{background:#f6f6f6;padding:8px;overflow:auto;font-size:12px}",
             "</style></head><body>", f"<h1>netlab sweep: {html.escape(str(m.get('name', '')))}</h1><table>"]
    parts += [f"<tr><th>{k}</th><td style='text-align:left'>{html.escape(str(v))}</td></tr>" for k, v in meta]
    parts += ["</table><h2>Summary (mean over seeds)</h2>",
              table.to_html(index=False, float_format=lambda v: _fmt(float(v)), na_rep="", border=0),
              "<h2>Figures</h2>"]
    for name, (title, png) in pngs.items():
        data = base64.b64encode(png).decode()
        parts.append(f"<figure id='{name}'><img alt='{html.escape(title)}' src='data:image/png;base64,{data}'>"
                     f"<figcaption>{html.escape(title)}</figcaption></figure>")
    if not res.errors.empty:
        parts.append(f"<h2>Failed cells ({len(res.errors)})</h2><p>Re-running the sweep retries them.</p>")
        for e in res.errors.itertuples():
            parts.append(f"<details><summary>{e.cell_id} {html.escape(e.label)}: {html.escape(e.error)}</summary>"
                         f"<pre>{html.escape(e.traceback)}</pre></details>")
    parts += ["<h2>Grid</h2><pre>", html.escape(yaml.safe_dump(m.get("config", {}), sort_keys=False)),
              "</pre></body></html>"]
    return "".join(parts)


def render_report(source, out=None) -> Path:
    """Write the figures, summary.csv, cells.csv and report.html for a sweep (directory or result)."""
    from .sweep import load_sweep

    res = load_sweep(source) if isinstance(source, (str, Path)) else source
    out = Path(out or res.path)
    out.mkdir(parents=True, exist_ok=True)
    table = comparison_table(res.summary) if not res.summary.empty else pd.DataFrame()
    atomic_write(out / "summary.csv", lambda p: table.to_csv(p, index=False))
    atomic_write(out / "cells.csv", lambda p: res.summary.to_csv(p, index=False))
    pngs = {}
    if not res.summary.empty:
        for name, (title, fig) in figures(res).items():
            png = _png(fig)
            pngs[name] = (title, png)
            atomic_write(out / f"{name}.png", lambda p, png=png: Path(p).write_bytes(png))
    page = _html(res, table, pngs)
    atomic_write(out / "report.html", lambda p: Path(p).write_text(page, encoding="utf-8"))
    return out / "report.html"


def print_table(table: pd.DataFrame, header: str = "") -> None:
    with pd.option_context("display.width", 200, "display.max_columns", 30, "display.max_rows", 500,
                           "display.float_format", "{:,.2f}".format):
        if header:
            print(header)
        print(table.to_string(index=False))


def demo_report(out, trace="philly-sample", topology=None, seeds: int = 3, max_jobs=None, backend="processes",
                workers=None, ideal: bool = True, progress: bool | None = True, **backend_options) -> Path:
    """The main job: the default sweep into ``out``, the summary table on stdout, ``out/report.html``."""
    from .sweep import demo_grid, run_sweep
    from .sweep.grid import DEMO_TOPOLOGY

    grid = demo_grid(trace=trace, max_jobs=max_jobs, topology=topology or DEMO_TOPOLOGY, seeds=seeds, ideal=ideal)
    res = run_sweep(grid, out=out, backend=backend, progress=progress, workers=workers, **backend_options)
    g = grid["grid"]
    print_table(comparison_table(res.summary),
                f"\ntrace={trace} topology={grid['topology']} oversub={g['oversub']} seeds={seeds} "
                f"cells={len(res.summary)} failed={len(res.errors)}")
    return render_report(res, out)
