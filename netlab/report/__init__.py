"""The sweep report: the answer in one sentence, the verdicts, then the tables and the figures that show why.

One idea per module: :mod:`.verdicts` (the sentence and the policy x setting verdict
table), :mod:`.tables` (mean and spread over seeds, for reading), :mod:`.figures`,
:mod:`.page` (the jinja2 template), :mod:`.folder` (a report folder is replaced
whole) and :mod:`.build` (:func:`render_report`, which ties them together). The
main job that runs the demo sweep and reports it is :func:`netlab.demo.demo_report`.
"""

from .build import comparison, pick_baseline, policies, print_verdicts, render_report
from .figures import baseline_beside_winner, headline_figure
from .tables import (comparison_table, print_table, readable, readable_display, readable_jobs, readable_table,
                     spread_table, wrapped)
from .verdicts import headline, styled_verdicts, verdict_table

__all__ = ["baseline_beside_winner", "comparison", "comparison_table", "headline", "headline_figure", "pick_baseline",
           "policies", "print_table", "print_verdicts", "readable", "readable_display", "readable_jobs",
           "readable_table", "render_report", "spread_table", "styled_verdicts", "verdict_table", "wrapped"]
