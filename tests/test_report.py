"""The report: the answer first, the verdict table, tables for reading, figures that show the effect; the
sweep/results/report commands end to end."""

import base64
import json
import re

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402
import yaml  # noqa: E402
from typer.testing import CliRunner  # noqa: E402

from netlab import plotting  # noqa: E402
from netlab.cli import app  # noqa: E402
from netlab.compare import arm_name  # noqa: E402
from netlab.report import comparison_table, headline, readable_table, render_report, verdict_table  # noqa: E402
from netlab.report.figures import showcase  # noqa: E402
from netlab.sweep import load_sweep, run_sweep  # noqa: E402

TOPO = "leafspine,racks=2,hosts_per_rack=2,gpus_per_host=8,host_gbps=100,spines=2"
TINY = "leafspine,racks=1,hosts_per_rack=1,gpus_per_host=1"  # too small for the trace's 8-GPU jobs: cells fail
GRID = dict(name="report-test", trace="philly-sample", max_jobs=80, topology=TOPO,
            links={"network": "fair", "seed": 0},
            grid=dict(case=[{"policy": "fifo"}, {"policy": "tiresias"}, {"policy": "fifo", "topology": TINY}],
                      placement=["consolidated", "random"],
                      oversub=[2, 4], network=["fair", "ideal"], seed=[0, 1]))
FIGURES = ("comparison", "jct_tails", "metrics", "queue_delay", "link_utilisation", "placement_timeline",
           "ideal_ratio")
PNG = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module")
def sweep_dir(tmp_path_factory):
    out = tmp_path_factory.mktemp("sweep")
    run_sweep(GRID, out=out, progress=False)
    return out


@pytest.fixture(scope="module")
def page(sweep_dir):
    return render_report(sweep_dir).read_text()


def test_report_folder_has_the_page_tables_and_every_figure_embedded(sweep_dir, page):
    folder = sweep_dir / "report"
    assert {p.name for p in folder.iterdir()} == {"report.html", "report.json", "comparison.csv", "summary.csv",
                                                   "cells.csv", *(f"{f}.png" for f in FIGURES)}
    for name in FIGURES:
        png = (folder / f"{name}.png").read_bytes()
        assert png.startswith(PNG) and len(png) > 5000, name
        m = re.search(rf'<figure id="{name}"><img alt="[^"]*" src="data:image/png;base64,([A-Za-z0-9+/=]+)"', page)
        assert m, f"{name} not embedded"
        assert base64.b64decode(m.group(1)) == png
    # failed cells are listed with their tracebacks; no external resource is referenced
    assert "Failed cells (16)" in page and "the topology has 1" in page and "Traceback" in page
    assert "src=\"http" not in page and "href=" not in page
    meta = json.loads((folder / "report.json").read_text())
    assert meta["baseline"] == "tiresias+consolidated" and meta["answer"] and meta["figures"] == list(FIGURES)


def test_the_page_answers_first_then_the_verdict_table_then_the_figures(sweep_dir, page):
    answer = re.search(r'<p class="answer" id="answer">([^<]+)</p>', page).group(1)
    assert answer == json.loads((sweep_dir / "report" / "report.json").read_text())["answer"]
    assert "tiresias+consolidated" in answer and answer.endswith(".")
    assert page.index('id="answer"') < page.index('id="verdicts"') < page.index('<figure id="comparison">') \
        < page.index('id="summary"') < page.index('<figure id="jct_tails">')
    # one row per policy against the baseline, one column per oversubscription, each cell coloured by its verdict
    table = page[page.index('id="verdicts"'):page.index("</table>", page.index('id="verdicts"'))]
    assert re.findall(r"<th>([^<]+)</th>", table) == ["2:1", "4:1"]
    rows = re.findall(r'<tr><th class="policy">([^<]+)</th>', table)
    assert sorted(rows) == ["fifo+consolidated", "fifo+random", "tiresias+random"]
    cells = re.findall(r'<td class="(better|worse|no-clear-difference)" title="[^"]+">([^<]+)</td>', table)
    assert len(cells) == 6
    assert all(re.fullmatch(r"[-+]?\d[\d.]*%|0%", t.split(" [")[0]) and re.search(r"lower in [012]/2$", t)
               for _, t in cells), cells
    cmp = pd.read_csv(sweep_dir / "report" / "comparison.csv")
    assert set(cmp.metric) == {"avg_jct_s", "p99_jct_s", "makespan_s", "avg_wait_s"}
    assert set(cmp.network) == {"fair"}
    finite = cmp.dropna(subset=["change"])
    assert (finite.ci_low <= finite.change).all() and (finite.change <= finite.ci_high).all()
    # every metric once more, as a table (no dense monospace lines)
    assert 'class="metrics"' in page and "<li" not in page


def test_a_sweep_without_the_default_baseline_gets_verdicts_when_one_is_named(tmp_path):
    res = run_sweep(dict(GRID, max_jobs=30, grid=dict(policy=["fifo", "sjf"], seed=[0, 1])), out=tmp_path,
                    progress=False)
    page = render_report(res).read_text()
    assert 'id="verdicts"' not in page and 'id="comparison"' not in page
    assert "No comparison: the sweep has no tiresias+consolidated cells; name a baseline with --baseline, one of: " \
           "fifo+consolidated, sjf+consolidated." in page
    for spelling in ("fifo+default", "fifo+consolidated"):  # any spelling names the one label
        page = render_report(res, baseline=spelling).read_text()
        assert re.findall(r'<tr><th class="policy">([^<]+)</th>', page) == ["sjf+consolidated"]
        assert "against fifo+consolidated" in page
    with pytest.raises(ValueError, match=r"baseline 'nope' is not a policy of this sweep; its policies: "
                                         r"fifo\+consolidated, sjf\+consolidated$"):
        render_report(res, baseline="nope")


def test_one_label_per_policy():
    assert arm_name("tiresias+default") == arm_name("tiresias+consolidated") == "tiresias+consolidated"
    assert arm_name("dally+default") == arm_name("dally+dally") == "dally"
    assert arm_name("dally-preempt+default") == "dally-preempt"  # an ablation brings its own placement too
    assert arm_name("tiresias+cassini") == "tiresias+cassini" and arm_name("made+up") == "made+up"


def _row(label, **values):
    base = dict(label=label, network="tcp", oversub=8.0, seeds=2)
    return {**base, **values}


def test_readable_table_one_time_unit_spread_noise_and_bit_units_by_hand():
    table = pd.DataFrame([
        _row("tiresias+default", avg_jct_s=9000.0, avg_jct_s_sd=360.0, p99_jct_s=72000.0, p99_jct_s_sd=0.0,
             makespan_s=792000.0, makespan_s_sd=3600.0, avg_wait_s=2.6e-14, avg_wait_s_sd=1e-15,
             overload_gbit=7_053_184_000.0, overload_gbit_sd=12_000_000.0, gpu_util=0.5612, gpu_util_sd=0.01),
        _row("dally+default", avg_jct_s=7200.0, avg_jct_s_sd=np.nan, p99_jct_s=36000.0, p99_jct_s_sd=np.nan,
             makespan_s=720000.0, makespan_s_sd=np.nan, avg_wait_s=1800.0, avg_wait_s_sd=np.nan,
             overload_gbit=512_000_000.0, overload_gbit_sd=np.nan, gpu_util=0.6, gpu_util_sd=np.nan)])
    out = readable_table(table)
    # median of the times (2 h ... 220 h): hours for every time column; the overload in Ebit; labels one way
    assert list(out.columns) == ["policy", "oversub", "network", "seeds", "avg JCT (h)", "p99 JCT (h)", "makespan (h)",
                                 "total wait (h)", "GPU util (%)", "overload (Ebit)"]
    first, second = out.iloc[0], out.iloc[1]
    assert first["policy"] == "tiresias+consolidated" and second["policy"] == "dally" and first["oversub"] == "8:1"
    assert first["avg JCT (h)"] == "2.50\u00a0±\u00a00.10"  # 9000 s = 2.5 h, sd 360 s = 0.1 h
    assert first["p99 JCT (h)"] == "20.0\u00a0±\u00a00"
    assert first["makespan (h)"] == "220\u00a0±\u00a01"  # one precision per column: 3 digits of its median
    assert first["total wait (h)"] == "0\u00a0±\u00a00"  # 2.6e-14 s is noise
    assert first["overload (Ebit)"] == "7.05\u00a0±\u00a00.01"
    assert first["GPU util (%)"] == "56.1\u00a0±\u00a01.0"
    assert second["avg JCT (h)"] == "2.00" and second["total wait (h)"] == "0.500" and second["seeds"] == "2"
    assert not any("e-" in v or "e+" in v for v in out.to_numpy().ravel())


def test_time_unit_follows_the_magnitude():
    from netlab.units import time_unit

    assert time_unit([5.0, 30.0, 90.0]) == ("s", 1.0)
    assert time_unit([600.0, 1800.0]) == ("min", 60.0)
    assert time_unit([7200.0, 36000.0, 80000.0]) == ("h", 3600.0)
    assert time_unit([400000.0, 900000.0]) == ("d", 86400.0)
    assert time_unit([2.6e-14, 0.0]) == ("s", 1.0)  # noise only: seconds


def _cmp(rows):
    from netlab.compare import COLUMNS

    base = dict(baseline="tiresias+consolidated", metric="avg_jct_s", seeds=10, baseline_mean=1.0, mean=1.0,
                diff_mean=0.0, higher_seeds=0)
    out = pd.DataFrame([{**base, **r} for r in rows])
    return out[["oversub"] + COLUMNS]


def test_the_answer_in_one_sentence_by_hand():
    cmp = _cmp([dict(oversub=2.0, label="dally+default", change=-0.01, ci_low=-0.05, ci_high=0.02, lower_seeds=6),
                dict(oversub=2.0, label="fifo+consolidated", change=0.2, ci_low=0.1, ci_high=0.3, lower_seeds=0),
                dict(oversub=8.0, label="dally+default", change=-0.162, ci_low=-0.228, ci_high=-0.109, lower_seeds=10),
                dict(oversub=8.0, label="tiresias+cassini", change=-0.05, ci_low=-0.08, ci_high=-0.01, lower_seeds=9),
                dict(oversub=8.0, label="fifo+consolidated", change=0.02, ci_low=-0.01, ci_high=0.04, lower_seeds=3)])
    assert headline(cmp) == ("At 8:1, dally cuts average JCT by 16% [11%, 23%] against tiresias+consolidated, lower "
                             "in 10 of 10 seeds (1 other policy also clearly better); at 2:1 no policy is clearly "
                             "better than tiresias+consolidated; fifo+consolidated is clearly worse.")
    text, word = verdict_table(cmp)
    assert list(text.columns) == ["2:1", "8:1"] and list(text.index) == ["dally", "tiresias+cassini",
                                                                         "fifo+consolidated"]
    assert text.loc["dally", "8:1"] == "-16% [-23%, -11%] · lower in 10/10"
    assert word.loc["dally", "8:1"] == "better" and word.loc["fifo+consolidated", "2:1"] == "worse"
    assert word.loc["dally", "2:1"] == "no clear difference" and text.loc["tiresias+cassini", "2:1"] == ""
    same = _cmp([dict(oversub=o, label="dally", change=0.0, ci_low=-0.01, ci_high=0.01, lower_seeds=5)
                 for o in (2.0, 4.0, 8.0)])
    assert headline(same) == "At 2:1, 4:1 and 8:1 no policy differs clearly from tiresias+consolidated."


def test_noise_is_no_change_in_the_comparison():
    from netlab.report import comparison

    rows = [dict(label=lab, oversub=8.0, network="tcp", seed=s, trace="t", policy=lab.split("+")[0],
                 placement=lab.split("+")[1], avg_jct_s=100.0 + s + (lab == "fifo+consolidated"),
                 avg_wait_s=(2.6e-14 if lab == "tiresias+consolidated" else 0.0))
            for lab in ("tiresias+consolidated", "fifo+consolidated") for s in range(3)]
    cmp = comparison(pd.DataFrame(rows))
    wait = cmp[cmp.metric == "avg_wait_s"].iloc[0]
    assert np.isnan(wait.change)  # both waits are 0: no -100% from 2.6e-14 s of float noise


def test_figures_say_what_they_measure_in_units_with_round_ticks(sweep_dir):
    res = load_sweep(sweep_dir)
    fair = res.summary[res.summary.network == "fair"]
    fig, ax = plt.subplots()
    plotting.metric_bars(fair, y="avg_jct_s", by="oversub", ax=ax)
    assert re.fullmatch(r"average JCT \((s|min|h)\)", ax.get_ylabel()) and ax.get_xlabel() == "oversubscription"
    fig.canvas.draw()
    legend = ax.get_legend().get_window_extent()
    assert legend.x0 >= ax.get_window_extent().x1  # outside the data, right of the axes
    colours = plotting.policy_colours(fair.label)
    bars = {tuple(np.round(p.get_facecolor()[:3], 3)) for p in ax.patches if p.get_height() > 0}
    assert bars == {tuple(np.round(matplotlib.colors.to_rgb(colours[lab]), 3)) for lab in set(fair.label)}
    plt.close(fig)
    fig, ax = plt.subplots()
    plotting.link_utilisation(res.links[res.links.cell_id == res.links.cell_id.iloc[0]], ax=ax)
    ticks = [t for t in ax.get_xticks() if ax.get_xlim()[0] <= t <= ax.get_xlim()[1]]
    assert len(ticks) >= 2 and all(float(t).is_integer() for t in ticks)  # round hours
    assert ax.get_xlabel() == "time (h)"
    plt.close(fig)
    fig = plotting.jct_tails(res.jobs[res.jobs.network == "fair"].assign(label=lambda d: d.label.map(arm_name)),
                             "tiresias+consolidated", by="oversub")
    axes = fig.axes
    assert len(axes) == 2 * 3  # oversub rows x the three policies besides the baseline
    assert all(a.get_xscale() == "log" and a.get_yscale() == "log" for a in axes)
    assert "log scale" in fig._supxlabel.get_text() and "log scale" in fig._supylabel.get_text()
    assert "1 h" in [t.get_text() for t in axes[-1].get_xticklabels()]
    plt.close(fig)


def _no_overlap(labels) -> bool:
    boxes = [t.get_window_extent() for t in labels if t.get_text()]
    return all(a.x1 <= b.x0 for a, b in zip(boxes, boxes[1:]))


@pytest.mark.parametrize("changes", [(-0.3, 0.05, 0.2), (-0.02, 0.01, 0.03), (-0.5, 3.0, 12.0), (-0.99, -0.2, 0.4)])
def test_the_change_axis_is_log_ratio_says_so_and_its_ticks_never_touch(changes):
    from netlab.compare import COLUMNS

    rows = [dict(label=f"p{k}", baseline="b", metric="avg_jct_s", seeds=5, baseline_mean=1, mean=1, diff_mean=0,
                 change=c, ci_low=c - 0.01, ci_high=c + 0.01, lower_seeds=0, higher_seeds=0)
            for k, c in enumerate(changes)]
    fig, ax = plt.subplots(figsize=(3.1, 2.5))
    plotting.comparison_forest(pd.DataFrame(rows)[COLUMNS], ax=ax)
    fig.canvas.draw()
    assert ax.get_xscale() == "log" and "log scale" in ax.get_xlabel()
    labels = [t for t in ax.get_xticklabels() if ax.get_xlim()[0] <= t.get_position()[0] <= ax.get_xlim()[1]]
    texts = [t.get_text() for t in labels]
    assert "0" in texts and len(texts) >= 3, texts
    assert _no_overlap(sorted(labels, key=lambda t: t.get_position()[0])), texts
    assert all(re.fullmatch(r"0|[-+][\d,.]+%", t) for t in texts), texts
    plt.close(fig)


def test_placement_timeline_draws_every_run_of_preempted_jobs():
    jobs = pd.DataFrame(dict(job_id=[0, 1, 2], gpus=[8, 16, 4], start_s=[0.0, 0.0, 3600.0],
                             end_s=[7200.0, 3600.0, 36000.0], hosts=[1, 2, 1], racks=[1, 2, 1],
                             placement=["r0h0:8", "r0h1:8,r1h0:8", "r1h1:4"], preemptions=[0, 0, 2],
                             runs=["", "", "3600.000-7200.000@r0h0:4;9000.000-10000.000@r0h1:2,r1h0:2;"
                                           "20000.000-36000.000@r1h1:4"]))
    fig, ax = plt.subplots()
    plotting.placement_timeline(jobs, ax=ax)
    plain, hatched = ax.collections
    assert len(plain.get_paths()) == 8 + 16  # one rectangle per GPU slot of the jobs that ran once
    assert len(hatched.get_paths()) == 4 + 2 + 2 + 4  # every run of the preempted job, where it ran
    assert ax.get_xlim() == (0.0, 10.0)  # the whole run: to the preempted job's end at 36,000 s
    hosts = [t.get_text() for t in ax.get_yticklabels()]
    assert hosts == ["r0h0", "r0h1", "r1h0", "r1h1"]
    plt.close(fig)


def test_the_simulator_records_every_run_of_a_preempted_job():
    from netlab.experiments import run

    res = run(trace="philly-sample", topology=TOPO, policy="tiresias", placement="consolidated", network="fair",
              max_jobs=120)
    pre = res.jobs[res.jobs.preemptions > 0]
    assert len(pre) > 0 and (res.jobs.runs[res.jobs.preemptions == 0] == "").all()
    for job in pre.itertuples():
        runs = [(float(a), float(b), where) for a, b, where in
                (re.fullmatch(r"([\d.]+)-([\d.]+)@(.+)", r).groups() for r in job.runs.split(";"))]
        assert len(runs) == job.preemptions + 1
        assert runs[0][0] == pytest.approx(job.start_s, abs=1e-3) and runs[-1][1] == pytest.approx(job.end_s, abs=1e-3)
        assert runs[-1][2] == job.placement
        assert sum(b - a for a, b, _ in runs) == pytest.approx(job.run_s, abs=1e-2 * len(runs))  # time holding GPUs
        assert all(a <= b <= c for (_, b, _), (c, _, _) in zip(runs, runs[1:]) for a in [runs[0][0]])


def test_the_side_by_side_cells_are_the_baseline_and_the_winner_in_one_setting(sweep_dir):
    from netlab.report import comparison

    res = load_sweep(sweep_dir)
    base_row, win_row, why = showcase(res, comparison(res.summary), "tiresias+consolidated")
    assert base_row["label"] == "tiresias+consolidated" and win_row["label"] != "tiresias+consolidated"
    assert (base_row["oversub"], base_row["seed"], base_row["network"]) == (win_row["oversub"], win_row["seed"],
                                                                             win_row["network"])
    assert win_row["label"] in why


def test_summary_table_is_mean_and_sd_over_seeds(sweep_dir, page):
    table = pd.read_csv(sweep_dir / "report" / "summary.csv")
    assert list(table.columns[:4]) == ["label", "oversub", "network", "seeds"]
    assert len(table) == 2 * 2 * 2 * 2  # policies x placements x oversub x networks (the broken one failed)
    assert {"avg_jct_s", "avg_jct_s_sd", "makespan_s_sd"} <= set(table.columns)
    cells = load_sweep(sweep_dir).summary
    one = cells[(cells.label == "fifo+random") & (cells.network == "fair") & (cells.oversub == 4)]
    row = table[(table.label == "fifo+random") & (table.network == "fair") & (table.oversub == 4)].iloc[0]
    assert row.avg_jct_s == pytest.approx(one.avg_jct_s.mean()) and row.avg_jct_s_sd == pytest.approx(
        one.avg_jct_s.std(ddof=1))
    assert "avg JCT (" in page and " ± " in page and "JCT / ideal" in page


def test_plotting_functions_take_data_and_ax_and_return_the_axes(sweep_dir):
    res = load_sweep(sweep_dir)
    one = res.summary.cell_id.iloc[0]
    calls = [
        (plotting.jct_cdf, res.jobs, {}), (plotting.jct_bars, res.summary, {}),
        (plotting.metric_bars, res.summary, {"y": "makespan_s", "by": "oversub"}),
        (plotting.queue_delay, res.jobs, {"by": "oversub"}), (plotting.ideal_ratio, res.summary, {}),
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


def test_one_colour_per_policy_whatever_else_is_drawn():
    a = plotting.policy_colours(["dally+default", "fifo+random", "tiresias+consolidated"])
    b = plotting.policy_colours(["dally", "tiresias+consolidated", "zzz+x", "fifo+random"])
    assert a["dally+default"] == b["dally"] and a["tiresias+consolidated"] == b["tiresias+consolidated"]
    assert len(set(b.values())) == len(b)
    # no two colours a figure may hold are near each other (RGB distance; 0.17 is e.g. orange beside vermillion)
    rgb = np.array([matplotlib.colors.to_rgb(c) for c in [*plotting.KNOWN_POLICIES.values(), *plotting.SPARE_COLOURS]])
    gaps = np.linalg.norm(rgb[:, None] - rgb[None], axis=2) + np.eye(len(rgb)) * 9
    assert gaps.min() > 0.17


def test_sweep_results_and_report_commands(tmp_path):
    runner = CliRunner()
    grid = tmp_path / "grid.yaml"
    grid.write_text(yaml.safe_dump(dict(GRID, max_jobs=30, grid=dict(policy=["fifo", "sjf"], seed=[0, 1]))))
    out = tmp_path / "results" / "mine"
    result = runner.invoke(app, ["sweep", str(grid), "--out", str(out), "--backend", "serial", "--quiet"])
    assert result.exit_code == 0, result.output
    assert "avg JCT (" in result.output and "4 cells done, 0 failed" in result.output
    result = runner.invoke(app, ["results", str(tmp_path / "results")])
    assert result.exit_code == 0 and "report-test" in result.output and str(out) in result.output
    assert "fifo+consolidated, sjf+consolidated" in result.output  # the labels --baseline takes
    result = runner.invoke(app, ["results", str(out)])
    assert result.exit_code == 0 and "no verdicts" in result.output
    result = runner.invoke(app, ["results", str(out), "--baseline", "fifo"])
    assert result.exit_code == 2 and "its policies: fifo+consolidated, sjf+consolidated" in result.output
    result = runner.invoke(app, ["results", str(out), "--baseline", "fifo+default"])
    assert result.exit_code == 0 and "sjf+consolidated" in result.output
    assert "against fifo+consolidated" in result.output
    result = runner.invoke(app, ["report", str(out), "--baseline", "fifo+consolidated"])
    assert result.exit_code == 0 and (out / "report" / "report.html").stat().st_size > 10000
    assert json.loads((out / "report" / "report.json").read_text())["baseline"] == "fifo+consolidated"
    result = runner.invoke(app, ["report", str(out), "--baseline", "nope"])
    assert result.exit_code == 2 and "baseline 'nope' is not a policy of this sweep" in result.output
    assert json.loads((out / "report" / "report.json").read_text())["baseline"] == "fifo+consolidated"  # kept
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump(dict(GRID, max_jobs=10, grid=dict(policy=["fifo", "nope"]))))
    result = runner.invoke(app, ["sweep", str(bad), "--out", str(tmp_path / "bad"), "--quiet"])
    assert result.exit_code == 2 and "field 'policy': unknown ordering policy 'nope'" in result.output
    assert not (tmp_path / "bad").exists()  # refused with the grid, before anything is written
    failing = tmp_path / "failing.yaml"
    failing.write_text(yaml.safe_dump(dict(GRID, max_jobs=10, grid=dict(topology=[TOPO, TINY]))))
    result = runner.invoke(app, ["sweep", str(failing), "--out", str(tmp_path / "failing"), "--quiet"])
    assert result.exit_code == 1 and "failed" in result.output and "the topology has 1" in result.output


def test_a_bad_sweep_option_writes_nothing(tmp_path):
    runner = CliRunner()
    grid = tmp_path / "grid.yaml"
    grid.write_text(yaml.safe_dump(dict(GRID, max_jobs=10, grid=dict(policy=["fifo"]))))
    result = runner.invoke(app, ["sweep", str(grid), "--out", str(tmp_path / "store"), "--backend", "process"])
    assert result.exit_code == 2 and "--backend 'process': not a sweep backend; one of dask, processes, serial" \
        in result.output
    assert not (tmp_path / "store").exists()
    with pytest.raises(KeyError, match="unknown sweep backend 'process'"):  # the library call too
        run_sweep(grid, out=tmp_path / "lib", backend="process")
    assert not (tmp_path / "lib").exists()
    result = runner.invoke(app, ["results", str(tmp_path)])
    assert "no sweeps under" in result.output


def test_report_refuses_a_folder_that_is_not_a_report(tmp_path, sweep_dir):
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("keep me")
    result = CliRunner().invoke(app, ["report", str(sweep_dir), "--out", str(mine)])
    assert result.exit_code == 2 and "is not a netlab report (no report.json)" in result.output
    assert [p.name for p in mine.iterdir()] == ["notes.txt"]


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
