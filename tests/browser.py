"""A page as a reader sees it, in headless Chromium (Debian's ``chromium``): a screenshot, what the browser laid out.

Used by ``test_report_render.py`` (the report) and ``test_notebooks.py`` (each executed notebook exported to
HTML). Tests skip with the reason when chromium is not installed (``.ci/run`` installs it).
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import numpy as np

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
MISSING = "chromium is not installed (apt-get install chromium)"

#: run in the page after load: every table cell whose content does not fit its box (clipped, or spilling into
#: the next cell) or that pandas cut ("..."), and the images
_CHECK = """<script>
window.addEventListener("load", () => {
  const cut = [];
  for (const el of document.querySelectorAll("td, th")) {
    const text = el.textContent.trim();
    const clips = el.scrollWidth > el.clientWidth + 1;  // content wider than its cell: clipped or spilling over
    if (clips || text === "..." || text === "\\u2026" || /\\.\\.\\.$/.test(text)) cut.push(text.slice(0, 80));
  }
  document.body.setAttribute("data-check", JSON.stringify({
    cells: document.querySelectorAll("td, th").length, cut: cut, images: document.images.length,
    broken_images: [...document.images].filter(i => !i.complete || i.naturalWidth === 0).length}));
});
</script>"""


def run(tmp_path: Path, *args) -> subprocess.CompletedProcess:
    """Headless Chromium with no network, no first-run or background work, a throwaway profile."""
    argv = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
            "--disable-background-networking", "--disable-component-update", "--disable-sync", "--hide-scrollbars",
            f"--user-data-dir={tmp_path / 'chromium-profile'}", *args]
    return subprocess.run(argv, capture_output=True, text=True, timeout=300, check=True)


def layout(page: Path, tmp_path: Path) -> dict:
    """What the browser laid out: table cells, cells cut off, images (and broken ones)."""
    checked = tmp_path / f"{page.stem}.checked.html"
    html = page.read_text(encoding="utf-8")
    checked.write_text(html.replace("</body>", _CHECK + "</body>") if "</body>" in html else html + _CHECK,
                       encoding="utf-8")
    dom = run(tmp_path, "--virtual-time-budget=10000", "--dump-dom", checked.resolve().as_uri()).stdout
    m = re.search(r'<body[^>]*data-check="([^"]*)"', dom)
    assert m, "the check script did not run"
    return json.loads(m.group(1).replace("&quot;", '"').replace("&amp;", "&").replace("&lt;", "<").replace("&gt;", ">"))


def screenshot(page: Path, tmp_path: Path, width: int = 1280, height: int = 2000) -> np.ndarray:
    """The page's first ``height`` pixels as an RGB array in [0, 1]."""
    from matplotlib.image import imread

    shot = tmp_path / f"{page.stem}.png"
    run(tmp_path, f"--screenshot={shot}", f"--window-size={width},{height}", page.resolve().as_uri())
    return imread(shot)[..., :3]


def not_blank(img: np.ndarray) -> tuple[int, float]:
    """(distinct colours, share of dark pixels): a page with text and figures has many colours and some ink."""
    rgb = img.reshape(-1, 3)
    colours = len(np.unique((rgb * 255).astype(np.uint8), axis=0))
    ink = float((rgb.mean(axis=1) < 0.5).mean())
    return colours, ink
