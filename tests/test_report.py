"""The HTML report and its figures; the sweep/results/report commands end to end."""

import base64
import re

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402
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
FIGURES = ("comparison", "jct_cdf", "avg_jct", "p99_jct", "makespan", "queue_delay", "link_utilisation",
           "placement_timeline", "ideal_ratio")
PNG = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module")
def sweep_dir(tmp_path_factory):
    out = tmp_path_factory.mktemp("sweep")
    run_sweep(GRID, out=out, progress=False)
    return out


def test_report_has_table_and_every_figure_embedded(sweep_dir):
    page = render_report(sweep_dir).read_text()
    assert "avg JCT (h)" in page and "JCT / ideal" in page and "tiresias+random" in page
    for name in FIGURES:
        png = (sweep_dir / f"{name}.png").read_bytes()
        assert png.startswith(PNG) and len(png) > 5000, name
        m = re.search(rf"<figure id='{name}'><img alt='[^']*' src='data:image/png;base64,([A-Za-z0-9+/=]+)'", page)
        assert m, f"{name} not embedded"
        assert base64.b64decode(m.group(1)) == png
    # failed cells are listed with their tracebacks; no external resource is referenced
    assert "Failed cells (16)" in page and "the topology has 1" in page and "Traceback" in page
    assert "src='http" not in page and "href=" not in page


def test_report_opens_with_the_verdicts_and_the_headline_comparison(sweep_dir):
    page = render_report(sweep_dir).read_text()
    verdicts = re.findall(r"<li class='verdict'>([^<]*)</li>", page)
    # fifo+consolidated, fifo+random, tiresias+random against tiresias+consolidated, at 2:1 and 4:1 (fair)
    assert len(verdicts) == 6
    assert all(re.fullmatch(r"\S+ vs tiresias\+consolidated at [24]:1 \(2 seeds\): avg JCT [-+]?\d.*"
                            r"-&gt; (better|worse|no clear difference) \(avg JCT lower in [012]/2 seeds\)", v)
               for v in verdicts), verdicts
    # the headline figure comes first: before the sweep's table and every other figure
    first = page.index("<figure")
    assert page.index("<figure id='comparison'>") == first < page.index("<h2>Summary")
    assert page.index("<h2>Verdicts</h2>") < first
    cmp = pd.read_csv(sweep_dir / "comparison.csv")
    assert set(cmp.metric) == {"avg_jct_s", "p99_jct_s", "makespan_s", "avg_wait_s"}
    assert set(cmp.network) == {"fair"} and (cmp.ci_low <= cmp.change).all() and (cmp.change <= cmp.ci_high).all()


def test_a_sweep_without_the_default_baseline_has_no_verdicts_unless_one_is_named(tmp_path):
    res = run_sweep(dict(GRID, max_jobs=30, grid=dict(policy=["fifo", "sjf"], seed=[0, 1])), out=tmp_path,
                    progress=False)
    page = render_report(res).read_text()
    assert "<h2>Verdicts</h2>" not in page and "id='comparison'" not in page
    page = render_report(res, baseline="fifo+default").read_text()
    assert page.count("<li class='verdict'>sjf vs fifo ") == 1
    with pytest.raises(ValueError, match="baseline 'nope' is not a policy of this sweep; its policies: fifo"):
        render_report(res, baseline="nope")


def test_figures_say_what_they_measure_in_units_with_round_ticks(sweep_dir):
    from netlab.sweep import load_sweep

    res = load_sweep(sweep_dir)
    fig, ax = plt.subplots()
    plotting.metric_bars(res.summary, y="avg_jct_s", hue="oversub", ax=ax)
    assert ax.get_ylabel() == "average JCT (h)"
    fig.canvas.draw()
    legend = ax.get_legend().get_window_extent()
    assert legend.x0 >= ax.get_window_extent().x1  # outside the data, right of the axes
    plt.close(fig)
    fig, ax = plt.subplots()
    plotting.link_utilisation(res.links[res.links.cell_id == res.links.cell_id.iloc[0]], ax=ax)
    ticks = [t for t in ax.get_xticks() if ax.get_xlim()[0] <= t <= ax.get_xlim()[1]]
    assert len(ticks) >= 2 and all(float(t).is_integer() for t in ticks)  # round hours
    assert ax.get_xlabel() == "time (h)"
    plt.close(fig)
    fig, ax = plt.subplots()
    plotting.jct_cdf(res.jobs, hue="label", ax=ax)
    assert "1 h" in [t.get_text() for t in ax.get_xticklabels()]
    fig.canvas.draw()
    assert ax.get_legend().get_window_extent().x0 >= ax.get_window_extent().x1
    plt.close(fig)


def test_placement_timeline_draws_only_jobs_whose_run_intervals_are_known():
    jobs = pd.DataFrame(dict(job_id=[0, 1, 2], gpus=[8, 16, 4], start_s=[0.0, 0.0, 3600.0],
                             end_s=[7200.0, 3600.0, 10800.0], hosts=[1, 2, 1], racks=[1, 2, 1],
                             allocation=["r0h0:8", "r0h1:8,r1h0:8", "r0h0:4"], preemptions=[0, 0, 3]))
    fig, ax = plt.subplots()
    plotting.placement_timeline(jobs, ax=ax)
    (patches,) = ax.collections
    assert len(patches.get_paths()) == 8 + 16  # one rectangle per GPU slot; job 2 (preempted) not drawn
    colours = {tuple(c) for c in patches.get_facecolors()}
    assert len(colours) == 2  # one host; several racks
    assert "(1 preempted job\nnot drawn)" in ax.get_legend().get_title().get_text()
    plt.close(fig)


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
