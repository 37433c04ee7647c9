"""The report as a reader sees it: rendered by headless Chromium (Debian's ``chromium``), on a tiny demo.

Skips with the reason when chromium is not installed (``.ci/run`` installs it).
"""

import re
import shutil
import subprocess

import matplotlib

matplotlib.use("Agg")

import numpy as np  # noqa: E402
import pytest  # noqa: E402
from matplotlib.image import imread  # noqa: E402

from netlab.report import demo_report  # noqa: E402

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (apt-get install chromium)")


def chromium(tmp_path, *args) -> subprocess.CompletedProcess:
    """Headless Chromium with no network, no first-run or background work, a throwaway profile."""
    argv = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
            "--disable-background-networking", "--disable-component-update", "--disable-sync",
            f"--user-data-dir={tmp_path / 'profile'}", *args]
    return subprocess.run(argv, capture_output=True, text=True, timeout=180, check=True)


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    out = tmp_path_factory.mktemp("demo")
    return demo_report(out, max_jobs=40, seeds=2, backend="serial", progress=False)


def test_the_rendered_report_shows_the_verdicts_and_the_headline_figure(report, tmp_path):
    dom = chromium(tmp_path, "--dump-dom", report.resolve().as_uri()).stdout
    verdicts = re.findall(r'<li class="verdict">([^<]*)</li>', dom)
    # 6 policies against tiresias+consolidated at 2:1 and at 8:1
    assert len(verdicts) == 12, dom[:2000]
    assert any(v.startswith("dally vs tiresias+consolidated at 8:1 (2 seeds): avg JCT ") for v in verdicts)
    assert all(re.search(r"-&gt; (better|worse|no clear difference) \(avg JCT lower in [012]/2 seeds\)$", v)
               for v in verdicts), verdicts
    head = re.search(r'<figure id="comparison"><img alt="Change against tiresias\+consolidated[^"]*" '
                     r'src="data:image/png;base64,([^"]{1000,})"', dom)
    assert head, "the headline figure is not in the rendered DOM"
    assert dom.index('id="comparison"') < dom.index("<h2>Summary")  # first, before the table


def test_the_screenshot_is_a_page_not_a_blank(report, tmp_path):
    shot = tmp_path / "shot.png"
    chromium(tmp_path, f"--screenshot={shot}", "--window-size=1280,2000", report.resolve().as_uri())
    img = imread(shot)
    assert img.shape[:2] == (2000, 1280)
    rgb = img[..., :3].reshape(-1, 3)
    colours = np.unique((rgb * 255).astype(np.uint8), axis=0)
    assert len(colours) > 50  # text, table rules and figure colours, not one flat colour
    ink = (rgb.mean(axis=1) < 0.5).mean()
    assert 0.005 < ink < 0.5  # dark text and marks on a light page
    # the top of the page (heading and verdicts) carries ink too: the page renders from its start
    top = img[:400, :, :3].mean(axis=2)
    assert (top < 0.5).mean() > 0.005
