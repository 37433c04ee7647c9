"""Build a sweep's report folder: the answer, the verdicts, the tables, the figures, the page.

:func:`render_report` reads a stored sweep (or a :class:`~netlab.sweep.SweepResult`) and
writes a folder, ``<sweep>/report/`` by default, replaced whole (:mod:`.folder`):
``report.html`` (the one-sentence answer, the verdict table, the figures embedded),
``comparison.csv`` (every policy against the baseline, :mod:`netlab.compare`),
``summary.csv`` (mean and sd over seeds), ``cells.csv`` (one row per cell), one PNG
per figure and ``report.json`` (the answer, the baseline, the policies).
"""

from __future__ import annotations

import io
import json
from datetime import datetime, timezone
from pathlib import Path

import matplotlib.pyplot as plt
import pandas as pd

from .. import __version__, compare
from ..errors import UnknownNameError, short
from .figures import figures
from .folder import MARKER, replace_folder
from .page import render_page
from ..units import NOISE_S, denoise
from .tables import TIME_COLUMNS, comparison_table, readable_table, with_policy_labels
from .verdicts import headline, metric_table, verdict_table

#: the report folder inside a sweep store when no ``out`` is given
FOLDER = "report"



def policies(summary: pd.DataFrame) -> list[str]:
    """The policy labels of a sweep as every table and ``--baseline`` say them (:func:`netlab.compare.arm_name`)."""
    if summary is None or summary.empty or "label" not in summary:
        return []
    return sorted({compare.arm_name(x) for x in summary.label})


def pick_baseline(summary: pd.DataFrame, baseline: str | None = None) -> str | None:
    """The label to compare against, as :func:`netlab.compare.arm_name` says it: ``baseline`` if given (any spelling
    of a policy of this sweep: ``dally+default`` is ``dally``), else :data:`netlab.compare.DEFAULT_BASELINE` when the
    sweep has it, else None (no comparison). A baseline the sweep does not have raises
    :class:`~netlab.errors.UnknownNameError` (a ValueError) naming its policies."""
    labels = policies(summary)
    if baseline is not None:
        name = compare.arm_name(baseline)
        if name not in labels:
            raise UnknownNameError(f"baseline {short(baseline)} is not a policy of this sweep; its policies: "
                                   f"{', '.join(labels) or 'none'}")
        return name
    return compare.DEFAULT_BASELINE if compare.DEFAULT_BASELINE in labels else None


def comparison(summary: pd.DataFrame, baseline: str | None = None) -> pd.DataFrame:
    """:func:`netlab.compare.compare_policies` against :func:`pick_baseline`, labels as everywhere (empty without a
    baseline or without two policies to pair)."""
    summary = with_policy_labels(summary)
    if not summary.empty:  # noise (a wait of 2.6e-14 s) is 0, not a -100% change against an exact 0
        summary = summary.assign(**{c: denoise(summary[c], NOISE_S) for c in TIME_COLUMNS if c in summary})
    base = pick_baseline(summary, baseline) if not summary.empty else None
    if base is None or summary.label.nunique() < 2:
        return pd.DataFrame()
    try:
        return compare.compare_policies(summary, base)
    except ValueError:  # only bound networks (ideal), or nothing paired with the baseline
        return pd.DataFrame()


def no_comparison_reason(summary: pd.DataFrame, baseline: str | None) -> str:
    """Why a report has no verdicts, with what to do about it."""
    labels = policies(summary)
    if summary is None or summary.empty:
        return "no cell of the sweep finished."
    if len(labels) < 2:
        return f"the sweep has one policy ({', '.join(labels)})."
    if baseline is None:
        return (f"the sweep has no {compare.DEFAULT_BASELINE} cells; name a baseline with --baseline, one of: "
                f"{', '.join(labels)}.")
    return f"nothing pairs with {baseline} by seed outside the ideal network."


def summary_note(table: pd.DataFrame) -> str:
    return ("Every cell is a mean over seeds ± one sd. Times in one unit (in each header); total wait counts waiting "
            "before the first start and after every preemption; overload integrates the demand above capacity over "
            "links and time (the ECN-mark proxy); JCT / ideal is the average JCT over the same policy's on the "
            "non-blocking network." if not table.empty else "")


def _png(fig) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, dpi=100, bbox_inches="tight", format="png")
    plt.close(fig)
    return buf.getvalue()


def render_report(source, out=None, baseline: str | None = None) -> Path:
    """Write the report folder of a sweep (directory or result) and return its ``report.html``. ``out``: the folder
    (default ``<sweep>/report``; it must be new, empty or an earlier report, and is replaced whole); ``baseline``:
    the policy to compare against (default: tiresias+consolidated when present). A bad baseline raises ValueError
    before anything is written."""
    from ..sweep import load_sweep

    res = load_sweep(source) if isinstance(source, (str, Path)) else source
    if out is None and res.path is None:
        raise ValueError("the sweep ran in memory (no store): give the report folder, out=...")
    out = Path(out) if out is not None else Path(res.path) / FOLDER
    base = pick_baseline(res.summary, baseline) if not res.summary.empty else None
    table = comparison_table(res.summary) if not res.summary.empty else pd.DataFrame()
    cmp = comparison(res.summary, base)
    answer = headline(cmp)
    text, words = verdict_table(cmp)

    def build(folder: Path) -> None:
        cmp.to_csv(folder / "comparison.csv", index=False)
        table.to_csv(folder / "summary.csv", index=False)
        with_policy_labels(res.summary).to_csv(folder / "cells.csv", index=False)
        pngs = {}
        if not res.summary.empty:
            for name, (caption, fig) in figures(res, cmp, base).items():
                pngs[name] = (caption, _png(fig))
                (folder / f"{name}.png").write_bytes(pngs[name][1])
        page = render_page(res, answer=answer, no_comparison=no_comparison_reason(res.summary, base), baseline=base,
                           verdict_text=text, verdict_words=words,
                           summary=readable_table(table) if not table.empty else pd.DataFrame(),
                           summary_note=summary_note(table), pngs=pngs, metrics=metric_table(cmp))
        (folder / "report.html").write_text(page, encoding="utf-8")
        meta = dict(answer=answer, baseline=base, policies=policies(res.summary), sweep=str(res.path or ""),
                    figures=list(pngs), netlab_version=__version__,
                    written_at=datetime.now(timezone.utc).isoformat(timespec="seconds"))
        (folder / MARKER).write_text(json.dumps(meta, indent=2) + "\n", encoding="utf-8")  # last: marks it complete

    return replace_folder(out, build) / "report.html"


def print_verdicts(cmp: pd.DataFrame, header: str = "") -> list[str]:
    """The answer, then the verdict table (each cell with its verdict), on stdout; returns
    :func:`netlab.compare.verdicts`' lines (every metric, in ``comparison.csv`` and the report)."""
    lines = compare.verdicts(cmp)
    if not lines:
        return lines
    print(header or f"\n{headline(cmp)}")
    text, words = verdict_table(cmp)
    cells = text.copy()
    for c in text.columns:
        cells[c] = [f"{t}: {w}" if t else "" for t, w in zip(text[c], words[c])]
    print(f"\naverage JCT against {compare.arm_name(cmp.baseline.iloc[0])}: change of the mean [95% bootstrap "
          "interval], seeds in which it was lower, verdict (paired by seed)")
    with pd.option_context("display.width", 250, "display.max_columns", 40, "display.max_colwidth", 200):
        print(cells.rename_axis("policy").reset_index().to_string(index=False))
    return lines
