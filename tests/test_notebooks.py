"""Execute every notebook with small parameters, as papermill would, then read it as a reader would.

The cell tagged ``parameters`` keeps its defaults; a cell inserted right after
it overrides them with the small values below. No output may hold a traceback
or a warning. The executed notebook is exported to HTML (nbconvert) and opened
in headless Chromium (``browser.py``; skipped without chromium): the page is
not blank, every image loads and no table cell is cut off. Committed notebooks
must carry no outputs.
"""

import json
import re
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

import browser

NOTEBOOKS = sorted((Path(__file__).resolve().parents[1] / "notebooks").glob("*.ipynb"))

SMALL = {
    "01-quickstart.ipynb": dict(MAX_JOBS=60, SEEDS=2, POLICIES=[("fifo", "consolidated"),
                                                                ("tiresias", "consolidated"), ("dally", None),
                                                                ("tiresias", "consolidated", "crux")],
                                BACKEND="serial"),
    "02-dally.ipynb": dict(TRACES=["synthetic,jobs=50,load=0.9,cluster_gpus=256,gpus=0.2+0.3+0.3+0.2"],
                           MAX_JOBS=None, OVERSUB=[8], BACKGROUND=[], REGIMES=["reno-deep", "dcqcn"], SEEDS=[0],
                           BACKEND="serial"),
    "03-cassini.ipynb": dict(JOBS=30, SWEEP_OVERSUB=[1, 4], SWEEP_LOADS=[0.9], SEEDS=1, BACKEND="serial",
                             REGIMES=["reno-deep", "dcqcn"]),
    # Testbed runs measure in the window where every job of a scenario ran, after its warm-up iterations
    # (2 in 04's experiments, 10 in 05's fidelity scenarios); fewer iterations than that leaves under 2 steady
    # ones in the window and netlab.testbed.scenarios.summarise_logs rightly warns (RuntimeWarning) that the
    # rows are not a shared measurement: 04 with 4 iterations and 05 with 12 did. On a loaded machine a job's
    # ranks may start a second or more after the common start time, which shortens that window: 04 runs 24
    # iterations (about 3 s a job) so a late start still leaves a shared window (8 left 0.1 s at load 20).
    "04-testbed.ipynb": dict(BUSBW_RATES_MBIT=[200], BUSBW_RANKS=[2], GRAD_BYTES=2_000_000, ITERATIONS=24),
    # 05 runs the testbed parts only where the testbed can run (else it reads the recorded results).
    "05-congestion-model.ipynb": dict(SIM_TOPOLOGIES=["leafspine,racks=4,hosts_per_rack=2,gpus_per_host=8,oversub=4"],
                                      PLACEMENT_SEEDS=2,
                                      SIM_EXPERIMENTS=30, TESTBED_EXPERIMENTS=3, RUN_FIDELITY=True,
                                      FIDELITY_ITERATIONS=20, PLACEMENT_JOBS=40),
    "06-interleaving.ipynb": dict(REPEAT=1),  # reads the recorded experiment only
    "07-operators.ipynb": dict(POLICIES=[("fifo", "random"), ("fifo", "topo-bestfit")], SEEDS=2),  # the sacct sample
    "08-llm-fabrics.ipynb": dict(TRACE="synthetic,jobs=60,load=0.9,cluster_gpus=256,llm=0.4",
                                 TOPOLOGY="rail,gpus=256,hosts_per_su=8,sus_per_pod=2,spines_per_pod=2,"
                                          "cores_per_plane=1,host_gbps=100,oversub=2",
                                 PLACEMENTS=["consolidated", "k8s-netoverhead", "tp-aware"], SEEDS=2,
                                 BACKEND="serial"),
    "09-network-policies.ipynb": dict(CRUX="../benchmarks/results/crux.json"),  # reads the recorded results only
}
# Notebooks that drive the emulated testbed need root, sshd and torch; they skip with the reason elsewhere.
NEEDS_TESTBED = {"04-testbed.ipynb"}
OUT_PARAM = "OUT"  # notebooks with a results store write it under the test's tmp dir
# Warnings a notebook may still print, with the reason; anything else printed as a warning fails the test.
KNOWN_WARNINGS: dict[str, set[str]] = {}  # none: every notebook runs without printing a warning
WARNING = re.compile(r"\b(\w*Warning)\b")


def test_every_notebook_has_small_parameters():
    assert NOTEBOOKS, "no notebooks found"
    assert {nb.name for nb in NOTEBOOKS} <= set(SMALL), "add small parameters for every notebook to SMALL"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_committed_without_outputs(path):
    nb = json.loads(path.read_text())
    for cell in nb["cells"]:
        if cell["cell_type"] == "code":
            assert not cell.get("outputs") and not cell.get("execution_count"), f"{path.name} has outputs"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_runs_with_small_parameters(path, tmp_path, monkeypatch):
    if path.name in NEEDS_TESTBED:
        from netlab.testbed.probe import missing

        if missing():
            pytest.skip("; ".join(missing()))
    nb = nbformat.read(path, as_version=4)
    idx = next(i for i, c in enumerate(nb.cells) if "parameters" in c.metadata.get("tags", []))
    small = dict(SMALL[path.name])
    if OUT_PARAM in nb.cells[idx].source:
        small[OUT_PARAM] = str(tmp_path / "store")
    overrides = "\n".join(f"{k} = {v!r}" for k, v in small.items())
    nb.cells.insert(idx + 1, nbformat.v4.new_code_cell(overrides))
    # The kernel's own backend (inline), as in Jupyter: a library that picks Agg at import would hide the figures.
    monkeypatch.delenv("MPLBACKEND", raising=False)
    scratch = tmp_path / "tmp"  # the kernel's temporary folder (its own only): a notebook leaves nothing in it
    scratch.mkdir()
    client = NotebookClient(nb, timeout=600, kernel_name="python3", resources={"metadata": {"path": str(path.parent)}})
    with monkeypatch.context() as kernel_env:
        kernel_env.setenv("TMPDIR", str(scratch))
        client.execute()
    assert sorted(p.name for p in scratch.iterdir()) == [], f"{path.name} left these in its temporary folder"
    # Every code cell ran, and none raised (nbclient raises on error).
    ran = [c for c in nb.cells if c.cell_type == "code"]
    assert all(c.execution_count for c in ran)
    outputs = [o for c in ran for o in c.get("outputs", [])]
    # Figures render inline, as a reader sees them in Jupyter.
    assert any("image/png" in o.get("data", {}) for o in outputs), f"{path.name}: no figure rendered"
    lines = [line for o in outputs for line in _text(o).splitlines() if WARNING.search(line) or "Traceback" in line]
    printed = {m for line in lines for m in WARNING.findall(line)} | {"Traceback" for line in lines
                                                                     if "Traceback" in line}
    assert printed <= KNOWN_WARNINGS.get(path.name, set()), f"{path.name} printed:\n" + "\n".join(lines)
    if browser.CHROMIUM is None:
        return
    from nbconvert import HTMLExporter

    page = tmp_path / f"{path.stem}.html"
    page.write_text(HTMLExporter().from_notebook_node(nb)[0], encoding="utf-8")
    colours, ink = browser.not_blank(browser.screenshot(page, tmp_path, 1280, 2000))
    assert colours > 50 and 0.003 < ink < 0.5, (path.name, colours, ink)
    seen = browser.layout(page, tmp_path)
    assert seen["cut"] == [], f"{path.name}: table cells cut off: {seen['cut']}"
    assert seen["images"] >= 1 and seen["broken_images"] == 0, seen


def _text(output) -> str:
    """What an output shows as text: a stream, an error, or a rich output's plain text and HTML."""
    if output.get("output_type") == "stream":
        return output.get("text", "")
    if output.get("output_type") == "error":
        return "Traceback\n" + "\n".join(output.get("traceback", []))
    data = output.get("data", {})
    return "\n".join(str(data.get(k, "")) if isinstance(data.get(k, ""), str) else "".join(data.get(k, []))
                     for k in ("text/plain", "text/html"))
