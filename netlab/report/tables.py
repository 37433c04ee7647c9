"""Summary tables: the mean and spread over seeds per configuration, and the same for reading.

:func:`comparison_table` is numeric (``summary.csv``); :func:`readable_table` is
what a page or a notebook shows: one policy label (:func:`netlab.compare.arm_name`),
every mean beside its spread over seeds (``2.31 ± 0.12``, the sd), one time unit for
the whole table chosen by magnitude and named in each header, values below
numerical noise as 0, no scientific notation for ordinary magnitudes.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from .. import compare
from ..units import NOISE, NOISE_S, bit_unit, column_places, denoise, fmt, mean_sd, time_unit

TABLE_COLUMNS = ["finished", "avg_jct_s", "p99_jct_s", "makespan_s", "avg_wait_s", "avg_start_delay_s",
                 "gpu_util", "overload_gbit", "avg_slowdown", "jct_vs_ideal", "wall_s"]
#: parameter columns a table or figure splits by, when they vary (topology is implied by oversub)
GROUPS = ("label", "trace", "max_jobs", "topology", "oversub", "network")
#: simulated times (seconds) shown in the table's one time unit
TIME_COLUMNS = ("avg_jct_s", "p50_jct_s", "p99_jct_s", "makespan_s", "avg_wait_s", "avg_start_delay_s")


def varying(summary: pd.DataFrame, cols=GROUPS) -> list[str]:
    """The grouping columns a table splits by: label and network always, the others when they vary."""
    keep = [c for c in cols if c in summary and (c in ("label", "network") or summary[c].nunique(dropna=False) > 1)]
    if "oversub" in keep and "topology" in keep and summary.groupby("oversub").topology.nunique().max() == 1:
        keep.remove("topology")
    return keep


def with_policy_labels(frame: pd.DataFrame) -> pd.DataFrame:
    """``label`` (and ``baseline``) as :func:`netlab.compare.arm_name` says them, so every table, verdict, figure and
    error names a policy one way."""
    if frame is None or frame.empty:
        return frame
    out = frame
    for col in ("label", "baseline"):
        if col in out:
            out = out.assign(**{col: out[col].map(compare.arm_name)})
    return out


def comparison_table(summary: pd.DataFrame) -> pd.DataFrame:
    """Mean and sd over seeds (``<metric>`` and ``<metric>_sd``) per configuration (label, network and any other
    varying parameter), ``seeds`` counted, fastest average JCT first within a network and oversubscription."""
    summary = with_policy_labels(summary)
    by = varying(summary)
    num = [c for c in TABLE_COLUMNS if c in summary.columns]
    groups = summary.groupby(by, as_index=False, dropna=False)
    table = groups[num].mean()
    spread = groups[num].std(ddof=1)
    for c in num:
        table[f"{c}_sd"] = spread[c].to_numpy()
    if "seed" in summary:
        table.insert(len(by), "seeds", groups.seed.nunique().seed.to_numpy())
    order = [c for c in ("network", "oversub") if c in by] + (["avg_jct_s"] if "avg_jct_s" in table else [])
    return table.sort_values(order, kind="stable").reset_index(drop=True)


def oversub_name(value) -> str:
    """``8:1``; blank for none (the ideal network has no oversubscription)."""
    return "" if value is None or pd.isna(value) else f"{float(value):g}:1"


#: summary column -> (header as a reader says it, kind): kind picks the unit (time, bits, percent, ratio, text)
READABLE = {"label": ("policy", "text"), "trace": ("trace", "text"), "max_jobs": ("jobs kept", "text"),
            "topology": ("topology", "text"), "oversub": ("oversub", "oversub"), "network": ("network", "text"),
            "seeds": ("seeds", "text"), "avg_jct_s": ("avg JCT", "time"), "p99_jct_s": ("p99 JCT", "time"),
            "makespan_s": ("makespan", "time"), "avg_wait_s": ("total wait", "time"),
            "avg_start_delay_s": ("first-start delay", "time"), "gpu_util": ("GPU util (%)", "percent"),
            "overload_gbit": ("overload", "bits"), "jct_vs_ideal": ("JCT / ideal", "ratio"),
            "avg_slowdown": ("slowdown", "ratio")}


#: the summary columns a readable table shows by default (``summary.csv`` keeps every one)
SHOWN = ("label", "trace", "max_jobs", "topology", "oversub", "network", "seeds", "avg_jct_s", "p99_jct_s", "makespan_s",
         "avg_wait_s", "gpu_util", "overload_gbit", "jct_vs_ideal")


def readable_table(table: pd.DataFrame, columns=SHOWN) -> pd.DataFrame:
    """:func:`comparison_table` for reading: text cells (mean ± sd over seeds), headers with their unit, one time
    unit for every time column, the overload in the bit unit its size needs, noise as 0, ``8:1``. ``columns``:
    the summary columns to show (None: every one)."""
    table = with_policy_labels(table)
    out = pd.DataFrame(index=table.index)
    times = [c for c in TIME_COLUMNS if c in table]
    t_name, t_div = time_unit(table[times].to_numpy().ravel()) if times else ("s", 1.0)
    for col, (name, kind) in READABLE.items():
        if col not in table or (columns is not None and col not in columns):
            continue
        v = table[col]
        sd = table[f"{col}_sd"] if f"{col}_sd" in table else pd.Series(np.nan, index=table.index)
        if kind == "text":
            out[name] = v.map(lambda x: "" if pd.isna(x) else (str(int(x)) if isinstance(x, float) and x.is_integer()
                                                                 else str(x)))
            continue
        if kind == "oversub":
            out[name] = v.map(oversub_name)
            continue
        if kind == "time":
            name, div, noise = f"{name} ({t_name})", t_div, NOISE_S
        elif kind == "bits":
            unit, div = bit_unit(v)
            name, noise = f"{name} ({unit})", 1e-9
        elif kind == "percent":
            div, noise = 0.01, NOISE
        else:
            div, noise = 1.0, NOISE
        m = denoise(v, noise) / div
        s = denoise(sd, noise) / div
        places = column_places(m)
        out[name] = [mean_sd(a, b, places) for a, b in zip(m, s)]
    return out


def time_columns(frame: pd.DataFrame, columns, unit: tuple[str, float] | None = None) -> tuple[pd.DataFrame, str]:
    """``frame`` with the time columns (seconds) in one unit picked by magnitude (or ``unit``), noise as 0, the
    columns renamed ``<name without _s> (<unit>)``; returns (frame, unit name)."""
    cols = [c for c in columns if c in frame]
    name, div = unit or time_unit(frame[cols].to_numpy().ravel())
    out = frame.copy()
    for c in cols:
        out[c] = denoise(out[c], NOISE_S) / div
    out = out.rename(columns={c: f"{c.removesuffix('_s')} ({name})" for c in cols})
    return out, name


def print_table(table: pd.DataFrame, header: str = "") -> None:
    """A readable table on stdout (every column whole)."""
    with pd.option_context("display.width", 250, "display.max_columns", 40, "display.max_rows", 500,
                           "display.max_colwidth", 200):
        if header:
            print(header)
        print(table.to_string(index=False))


#: the per-job columns :func:`readable_jobs` shows, in order
JOB_COLUMNS = ("job_id", "model", "gpus", "hosts", "racks", "placement", "preemptions", "queue_s", "wait_s", "jct_s",
               "isolated_s", "comm_fraction", "slowdown")


def readable_jobs(jobs: pd.DataFrame, sort: str = "slowdown", n: int = 10) -> pd.DataFrame:
    """The ``n`` jobs with the largest ``sort`` for reading: key columns only, times in one unit (named in the
    headers), ratios to 2 decimals, the placement (hosts and GPUs) whole."""
    col = "allocation" if "allocation" in jobs else "placement"
    top = jobs.sort_values(sort, ascending=False, kind="stable").head(n)
    top = top.rename(columns={col: "placement"}) if col != "placement" else top
    keep = [c for c in JOB_COLUMNS if c in top]
    out, _ = time_columns(top[keep], [c for c in keep if c.endswith("_s")])
    for c in ("comm_fraction", "slowdown"):
        if c in out:
            out[c] = out[c].round(2)
    return out.reset_index(drop=True)


def readable_display() -> None:
    """pandas' display options for notebooks: every column and cell whole (no '...'), up to 200 rows, floats as
    :func:`netlab.units.fmt` (3 significant digits, thousands separators, never scientific notation)."""
    pd.set_option("display.max_columns", None)
    pd.set_option("display.max_colwidth", None)
    pd.set_option("display.max_rows", 200)
    pd.set_option("display.width", 250)
    pd.set_option("display.float_format", fmt)
    try:  # in a notebook: table cells never wrap a label or a "mean ± sd" over two lines
        from IPython import get_ipython
        from IPython.display import HTML, display
    except ImportError:  # pragma: no cover - IPython comes with every notebook
        return
    if get_ipython() is not None:
        display(HTML("<style>.dataframe td { white-space: nowrap; }</style>"))  # headers may wrap


def spread_table(frame: pd.DataFrame, value: str, index, columns=None) -> pd.DataFrame:
    """``value``'s mean ± sd over the rows of each ``index`` x ``columns`` group (e.g. over seeds), as text with one
    number of decimals per table."""
    keys = [index] if isinstance(index, str) else list(index)
    cols = [] if columns is None else ([columns] if isinstance(columns, str) else list(columns))
    g = frame.groupby(keys + cols)[value].agg(["mean", "std"])
    places = column_places(g["mean"])
    text = pd.Series([mean_sd(m, sd, places) for m, sd in zip(g["mean"], g["std"])], index=g.index, name=value)
    return text.unstack(cols) if cols else text.to_frame()


def per_run(jobs: pd.DataFrame, fn, keys=("label", "seed")) -> pd.DataFrame:
    """``fn(one run's per-job rows)`` for every run (``cell_id``) of a sweep's jobs, the run's ``keys`` as columns.
    The run's hosts are in ``placement`` whichever column the store kept them in (``allocation`` in a sweep)."""
    parts = []
    for _, run in jobs.groupby("cell_id", sort=False):
        rows = run.assign(placement=run["allocation"]) if "allocation" in run else run
        tags = {k: rows[k].iloc[0] for k in keys if k in rows}
        parts.append(fn(rows).assign(**tags))
    return pd.concat(parts, ignore_index=True) if parts else pd.DataFrame()


def wrapped(frame: pd.DataFrame, columns, width_em: int = 40):
    """``frame`` as a pandas Styler whose ``columns`` (long texts: a claim's reason) wrap at ``width_em`` while
    every other cell stays on one line: whole, and the table still fits the page."""
    cols = [c for c in ([columns] if isinstance(columns, str) else columns) if c in frame]
    style = frame.style.set_properties(**{"white-space": "nowrap"})
    if cols:
        style = style.set_properties(subset=cols, **{"white-space": "normal", "min-width": f"{width_em // 2}em",
                                                     "max-width": f"{width_em}em"})
    return style.format(precision=3, thousands=",", na_rep="")


def readable(frame: pd.DataFrame, columns=None) -> pd.DataFrame:
    """Any result table for reading: ``columns`` (default all) in order, policy labels one way, times (``*_s``) in
    one unit by magnitude named in their headers, gains and shares (``*_gain*``, ``*_frac*``) in percent, noise as
    0. Numbers stay numbers (sortable); :func:`readable_display` prints them without scientific notation."""
    out = with_policy_labels(frame if columns is None else frame[[c for c in columns if c in frame]])
    times = [c for c in out.columns if str(c).endswith("_s") and pd.api.types.is_numeric_dtype(out[c])]
    if times:
        out, _ = time_columns(out, times)
    for c in [c for c in out.columns if ("_gain" in str(c) or "_frac" in str(c))
              and pd.api.types.is_numeric_dtype(out[c])]:
        out[c] = (denoise(out[c], NOISE) * 100).round(1)
        out = out.rename(columns={c: f"{c} (%)"})
    return out
