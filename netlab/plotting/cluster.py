"""One run inside the cluster: where jobs ran (a Gantt chart of hosts split into GPU slots, every run of a
preempted job) and how busy the links were (a heatmap over time).
"""

from __future__ import annotations

import re

import numpy as np
import pandas as pd
from matplotlib.ticker import MaxNLocator

from .style import _ax


def host_order(name: str):
    """Sort key for host names in natural order (``r2h10`` after ``r2h9``)."""
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
    hosts = list(hosts) if hosts is not None else sorted({h for _, h, _ in parts}, key=host_order)[:max_hosts]
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
