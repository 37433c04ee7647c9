"""The HTML report and its figures; the sweep/results/report commands end to end."""

import base64
import re

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402
import yaml  # noqa: E402
from typer.testing import CliRunner  # noqa: E402

from netlab import plotting  # noqa: E402
from netlab.cli import app  # noqa: E402
from netlab.report import comparison_table, render_report  # noqa: E402
from netlab.sweep import run_sweep  # noqa: E402

TOPO = "leafspine,racks=2,hosts_per_rack=2,gpus_per_host=8,host_gbps=100,spines=2"
TINY = "leafspine,racks=1,hosts_per_rack=1,gpus_per_host=1"  # too small for the trace's 8-GPU jobs: cells fail
GRID = dict(name="report-test", trace="philly-sample", max_jobs=80, topology=TOPO,
            links={"network": "fair", "seed": 0},
            grid=dict(case=[{"policy": "fifo"}, {"policy": "tiresias"}, {"policy": "fifo", "topology": TINY}],
                      placement=["consolidated", "random"],
                      oversub=[2, 4], network=["fair", "ideal"], seed=[0, 1]))
FIGURES = ("jct_cdf", "avg_jct", "p99_jct", "makespan", "queue_delay", "link_utilisation", "placement_timeline",
           "ideal_ratio")
PNG = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module")
def sweep_dir(tmp_path_factory):
    out = tmp_path_factory.mktemp("sweep")
    run_sweep(GRID, out=out, progress=False)
    return out


def test_report_has_table_and_every_figure_embedded(sweep_dir):
    page = render_report(sweep_dir).read_text()
    assert "avg_jct_s" in page and "jct_vs_ideal" in page and "tiresias+random" in page
    for name in FIGURES:
        png = (sweep_dir / f"{name}.png").read_bytes()
        assert png.startswith(PNG) and len(png) > 5000, name
        m = re.search(rf"<figure id='{name}'><img alt='[^']*' src='data:image/png;base64,([A-Za-z0-9+/=]+)'", page)
        assert m, f"{name} not embedded"
        assert base64.b64decode(m.group(1)) == png
    # failed cells are listed with their tracebacks; no external resource is referenced
    assert "Failed cells (16)" in page and "the topology has 1" in page and "Traceback" in page
    assert "src='http" not in page and "href=" not in page


def test_summary_table_is_mean_over_seeds(sweep_dir):
    table = (sweep_dir / "summary.csv").read_text().splitlines()
    assert table[0].startswith("label,oversub,network,seeds")
    assert len(table) - 1 == 2 * 2 * 2 * 2  # policies x placements x oversub x networks (the broken one failed)


def test_plotting_functions_take_data_and_ax_and_return_the_axes(sweep_dir):
    from netlab.sweep import load_sweep

    res = load_sweep(sweep_dir)
    one = res.summary.cell_id.iloc[0]
    calls = [
        (plotting.jct_cdf, res.jobs, {}), (plotting.jct_bars, res.summary, {}),
        (plotting.metric_bars, res.summary, {"y": "makespan_s", "hue": "oversub"}),
        (plotting.queue_delay, res.jobs, {"hue": "oversub"}), (plotting.ideal_ratio, res.summary, {}),
        (plotting.link_utilisation, res.links[res.links.cell_id == res.links.cell_id.iloc[0]], {}),
        (plotting.placement_timeline, res.jobs[res.jobs.cell_id == one], {}),
        (plotting.tier_load, res.links, {}),
    ]
    for fn, data, kw in calls:
        fig, ax = plt.subplots()
        assert fn(data=data, ax=ax, **kw) is ax, fn.__name__
        assert ax.has_data() or ax.collections or ax.texts, fn.__name__
        plt.close(fig)
    assert list(comparison_table(res.summary).label.unique())


def test_sweep_results_and_report_commands(tmp_path):
    runner = CliRunner()
    grid = tmp_path / "grid.yaml"
    grid.write_text(yaml.safe_dump(dict(GRID, max_jobs=30, grid=dict(policy=["fifo", "sjf"], seed=[0, 1]))))
    out = tmp_path / "results" / "mine"
    result = runner.invoke(app, ["sweep", str(grid), "--out", str(out), "--backend", "serial", "--quiet"])
    assert result.exit_code == 0, result.output
    assert "avg_jct_s" in result.output and "4 cells done, 0 failed" in result.output
    result = runner.invoke(app, ["results", str(tmp_path / "results")])
    assert result.exit_code == 0 and "report-test" in result.output and str(out) in result.output
    result = runner.invoke(app, ["report", str(out)])
    assert result.exit_code == 0 and (out / "report.html").stat().st_size > 10000
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump(dict(GRID, max_jobs=10, grid=dict(policy=["fifo", "nope"]))))
    result = runner.invoke(app, ["sweep", str(bad), "--out", str(tmp_path / "bad"), "--quiet"])
    assert result.exit_code == 2 and "'nope' is not a registered ordering policy" in result.output
    assert not (tmp_path / "bad").exists()  # refused with the grid, before anything is written
    failing = tmp_path / "failing.yaml"
    failing.write_text(yaml.safe_dump(dict(GRID, max_jobs=10, grid=dict(topology=[TOPO, TINY]))))
    result = runner.invoke(app, ["sweep", str(failing), "--out", str(tmp_path / "failing"), "--quiet"])
    assert result.exit_code == 1 and "failed" in result.output and "the topology has 1" in result.output


def test_importing_the_report_keeps_the_notebook_backend():
    """Notebook 01 imports netlab.report: choosing Agg at import would hide every figure in Jupyter."""
    import os
    import subprocess
    import sys

    pytest.importorskip("matplotlib_inline")
    backend = "module://matplotlib_inline.backend_inline"
    code = ("import matplotlib; before = matplotlib.get_backend(); import netlab.report, netlab.plotting; "
            "import matplotlib.pyplot; print(before); print(matplotlib.get_backend())")
    env = dict(os.environ, MPLBACKEND=backend)
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    before, after = out.stdout.split()
    assert before == after == backend
