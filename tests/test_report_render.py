"""The report as a reader sees it: rendered by headless Chromium (Debian's ``chromium``), on a tiny demo.

Skips with the reason when chromium is not installed (``.ci/run`` installs it).
"""

import re

import matplotlib

matplotlib.use("Agg")

import pytest  # noqa: E402

import browser  # noqa: E402
from netlab.demo import demo_report  # noqa: E402
from netlab.sweep.grid import DEMO_REGIMES, DEMO_SCHEDULERS  # noqa: E402

pytestmark = pytest.mark.skipif(browser.CHROMIUM is None, reason=browser.MISSING)


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    out = tmp_path_factory.mktemp("demo")
    return demo_report(out, max_jobs=40, seeds=2, backend="serial", progress=False)


def test_the_rendered_report_answers_first_then_the_verdict_table_then_the_headline_figure(report, tmp_path):
    dom = browser.run(tmp_path, "--dump-dom", report.resolve().as_uri()).stdout
    answer = re.search(r'<p class="answer" id="answer">([^<]+)</p>', dom).group(1)
    assert "tiresias+consolidated" in answer and answer.endswith(".")
    table = dom[dom.index('id="verdicts"'):dom.index("</table>", dom.index('id="verdicts"'))]
    # every other scheduler (crux's network policy too) against tiresias+consolidated, one column each for 2:1 and
    # 8:1 in each of the demo's regimes
    others = len(DEMO_SCHEDULERS) - 1
    assert re.findall(r"<th>([^<]+)</th>", table) == [f"{o}, {r}" for o in ("2:1", "8:1") for r in sorted(DEMO_REGIMES)]
    assert len(re.findall(r'<tr><th class="policy">', table)) == others
    cells = re.findall(r'<td class="(better|worse|no-clear-difference)" title="[^"]+">([^<]+)</td>', table)
    assert len(cells) == others * 2 * len(DEMO_REGIMES), cells
    assert all(re.search(r"· lower in [012]/2$", t) for _, t in cells), cells
    head = re.search(r'<figure id="comparison"><img alt="Change against tiresias\+consolidated[^"]*" '
                     r'src="data:image/png;base64,([^"]{1000,})"', dom)
    assert head, "the headline figure is not in the rendered DOM"
    assert dom.index('id="answer"') < dom.index('id="verdicts"') < dom.index('id="comparison"') \
        < dom.index('id="summary"')


def test_the_page_is_a_page_not_a_blank_and_nothing_is_cut(report, tmp_path):
    img = browser.screenshot(report, tmp_path, 1280, 2000)
    assert img.shape[:2] == (2000, 1280)
    colours, ink = browser.not_blank(img)
    assert colours > 50  # text, table rules, verdict colours and figure colours, not one flat colour
    assert 0.005 < ink < 0.5  # dark text and marks on a light page
    top = img[:400].mean(axis=2)  # the answer and the verdict table: the page renders from its start
    assert (top < 0.5).mean() > 0.005
    seen = browser.layout(report, tmp_path)
    assert seen["cells"] > 100 and seen["cut"] == [], seen["cut"]
    assert seen["images"] >= 6 and seen["broken_images"] == 0
