"""The report page: ``templates/report.html.j2`` rendered with jinja2 (every value escaped).

The figures are embedded as base64 PNGs, so the page can be mailed or archived
alone; it references no external resource.
"""

from __future__ import annotations

import base64
from pathlib import Path

import jinja2
import pandas as pd
import yaml

from .verdicts import COLOURS

TEMPLATES = Path(__file__).resolve().parent / "templates"
#: summary columns that hold names (left-aligned)
TEXT_COLUMNS = ("policy", "trace", "topology", "network", "oversub", "jobs kept", "seeds", "setting",
                "verdict (avg JCT)")


def _environment() -> jinja2.Environment:
    return jinja2.Environment(loader=jinja2.FileSystemLoader(str(TEMPLATES)), autoescape=True,
                              undefined=jinja2.StrictUndefined, trim_blocks=False, lstrip_blocks=False)


def sweep_meta(res) -> list[tuple[str, str]]:
    """The sweep's provenance as (key, value) rows."""
    m = res.manifest or {}
    runs = m.get("runs", [])
    return [(k, "" if v is None else str(v)) for k, v in (
        ("sweep", m.get("name")), ("cells", f"{len(res.summary)} done, {len(res.errors)} failed"),
        ("started", m.get("started_at")), ("ended", m.get("ended_at")),
        ("backend", ", ".join(sorted({r["backend"] for r in runs}))), ("netlab", m.get("netlab_version")),
        ("git commit", m.get("git_commit")), ("python", (m.get("packages") or {}).get("python")))]


def render_page(res, *, answer: str, no_comparison: str, baseline: str | None, verdict_text: pd.DataFrame,
                verdict_words: pd.DataFrame, summary: pd.DataFrame, summary_note: str, pngs: dict,
                metrics: pd.DataFrame) -> str:
    """The HTML page. ``pngs``: figure name -> (caption, PNG bytes), in reading order."""
    m = res.manifest or {}
    errors = [] if res.errors.empty else list(res.errors.itertuples())
    figures = [dict(name=name, caption=caption, data=base64.b64encode(png).decode())
               for name, (caption, png) in pngs.items()]
    return _environment().get_template("report.html.j2").render(
        name=m.get("name") or "", answer=answer, no_comparison=no_comparison, baseline=baseline,
        verdict_table=None if verdict_text.empty else verdict_text, verdict_words=verdict_words, colours=COLOURS,
        summary=summary, text_columns=TEXT_COLUMNS, summary_note=summary_note, figures=figures,
        metrics=None if metrics.empty else metrics, meta=sweep_meta(res), errors=errors,
        grid=yaml.safe_dump(m.get("config", {}), sort_keys=False))
