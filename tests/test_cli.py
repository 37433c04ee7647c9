"""The command line end to end (typer's runner, in-process)."""

import json

import pandas as pd
from typer.testing import CliRunner

from netlab.cli import app
from netlab.sim.metrics import SUMMARY_KEYS

runner = CliRunner()


def test_simulate_writes_all_outputs(tmp_path):
    out = tmp_path / "run"
    result = runner.invoke(app, ["simulate", "--trace", "philly-sample", "--max-jobs", "40", "--topology",
                                 "leafspine,racks=2,hosts_per_rack=2,gpus_per_host=8,oversub=4", "--policy",
                                 "tiresias", "--placement", "random", "--network", "fair", "--seed", "3",
                                 "--out", str(out), "--quiet"])
    assert result.exit_code == 0, result.output
    summary = json.loads((out / "summary.json").read_text())
    assert set(SUMMARY_KEYS) <= set(summary) and summary["jobs"] == 40
    config = json.loads((out / "config.json").read_text())
    assert config["ordering"]["name"] == "tiresias" and config["placement"]["name"] == "random"
    assert config["seed"] == 3
    jobs = pd.read_parquet(out / "jobs.parquet")
    assert len(jobs) == 40 and jobs.end_s.notna().all()
    assert {"link", "utilisation", "overload_gbps"} <= set(pd.read_parquet(out / "links.parquet").columns)


def test_policies_and_traces_list_what_is_registered():
    result = runner.invoke(app, ["policies"])
    assert result.exit_code == 0
    for name in ("fifo", "fjf", "sjf", "srtf", "tiresias", "themis", "consolidated", "first-fit", "random",
                 "gandiva", "k8s-netoverhead", "fair", "phase", "ideal"):
        assert name in result.output
    lines = {line.split()[0]: line for line in result.output.splitlines() if line.startswith("  ")}
    assert "head-of-line" in lines["fifo"].lower() or "strict" in lines["fifo"].lower()
    assert "backfill" in lines["fjf"].lower()
    result = runner.invoke(app, ["traces"])
    assert result.exit_code == 0
    for name in ("philly", "philly-sample", "gavel", "itp", "pollux", "sia", "alibaba", "synthetic"):
        assert name in result.output


def test_bad_topology_and_policy_fail_clearly(tmp_path):
    result = runner.invoke(app, ["simulate", "--topology", "leafspine,racks=0", "--out", str(tmp_path)])
    assert result.exit_code == 2 and "field 'racks' must be >= 1" in result.output
    result = runner.invoke(app, ["simulate", "--policy", "nope", "--max-jobs", "5", "--out", str(tmp_path)])
    assert result.exit_code == 2 and "unknown ordering policy 'nope'" in result.output


def test_demo_prints_table_and_writes_figures(tmp_path):
    result = runner.invoke(app, ["demo", "--out", str(tmp_path), "--max-jobs", "40", "--seeds", "2"])
    assert result.exit_code == 0, result.output
    assert "avg JCT (h)" in result.output and "JCT / ideal" in result.output
    answer = json.loads((tmp_path / "report" / "report.json").read_text())["answer"]
    assert "tiresias+consolidated" in answer and answer in result.output  # the answer, then the verdict table
    assert "dally" in result.output.split(answer)[1] and "lower in" in result.output.split(answer)[1]
    for name in ("comparison.png", "jct_tails.png", "link_utilisation.png", "metrics.png", "summary.csv"):
        assert (tmp_path / "report" / name).stat().st_size > 1000 or name == "summary.csv"
    table = pd.read_csv(tmp_path / "report" / "summary.csv")
    assert set(table.network) == {"tcp", "dcqcn", "ideal"}  # the default and the rate-fair regime, and the bound
    result = runner.invoke(app, ["results", str(tmp_path)])  # one sweep: its answer and verdicts again
    assert result.exit_code == 0 and answer in result.output


def test_the_cli_simulates_on_the_library_default_network(tmp_path):
    from netlab.network import DEFAULT_NETWORK, NETWORKS

    result = runner.invoke(app, ["simulate", "--max-jobs", "3", "--quiet", "--out", str(tmp_path)])
    assert result.exit_code == 0, result.output
    config = json.loads((tmp_path / "config.json").read_text())
    assert config["network"] == DEFAULT_NETWORK and DEFAULT_NETWORK in NETWORKS.names()
