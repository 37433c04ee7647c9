"""The synthetic generator's load is the load: LLM jobs' GPU-seconds count, a trace spec run on a topology is sized
for it, a run says the utilisation it reached, and a trace sized for a far different cluster draws a warning.
Expectations are worked out by hand."""

import json

import pandas as pd
import pytest
from typer.testing import CliRunner

from netlab.cli import app
from netlab.run import RunParams, bind
from netlab.traces import load_trace, poisson_trace
from netlab.traces.synthetic import fit_warning, offered_load


def load_jobs(trace, topology):
    return bind(RunParams(trace=trace, topology=topology))

TOPOLOGY = "leafspine,racks=2,hosts_per_rack=4,gpus_per_host=8,oversub=4"  # 64 GPUs


def test_llm_jobs_count_in_the_arrival_rate():
    # every non-LLM job has 2 GPUs; half the jobs are llama3-8b (tp 1, pp 1), whose sizes that fit 4 GPUs are
    # 1, 2, 4 (drawn evenly): E[gpus] = 0.5 * 2 + 0.5 * 7/3 = 13/6. Durations are exactly 3,600 s (sigma 0), so
    # load 1 on 4 GPUs is 4 GPU-s per s = rate * 13/6 * 3600: rate = 24/13 jobs per hour.
    df = poisson_trace(jobs=10, load=1.0, cluster_gpus=4, gpus=(0, 1), duration_sigma=0.0, llm=0.5,
                       llm_models=("llama3-8b",))
    assert df.attrs["rate_per_h"] == pytest.approx(24 / 13)
    without = poisson_trace(jobs=10, load=1.0, cluster_gpus=4, gpus=(0, 1), duration_sigma=0.0)
    assert without.attrs["rate_per_h"] == pytest.approx(2.0)  # 4 GPU-s per s = rate * 2 GPUs * 3600 s


def test_offered_load_by_hand():
    df = pd.DataFrame({"submit_s": [0.0, 50.0, 100.0], "gpus": [2, 4, 8], "duration_s": [10.0, 20.0, 30.0]})
    # 2*10 + 4*20 + 8*30 = 340 GPU-s over 100 s, on 4 GPUs
    assert offered_load(df, 4) == pytest.approx(0.85)
    assert offered_load(df.iloc[:1], 4) is None  # one arrival: no window


@pytest.mark.parametrize("llm", [0.0, 0.3])
def test_the_trace_offers_the_load_asked_for(llm):
    df = poisson_trace(jobs=20_000, load=0.7, cluster_gpus=1024, duration_sigma=0.5, llm=llm, seed=5)
    assert offered_load(df, 1024) == pytest.approx(0.7, rel=0.05)


def test_a_spec_run_on_a_topology_is_sized_for_it():
    assert load_trace("synthetic,jobs=5", cluster_gpus=1024).attrs["cluster_gpus"] == 1024
    assert load_trace("synthetic,jobs=5,cluster_gpus=32", cluster_gpus=1024).attrs["cluster_gpus"] == 32
    assert load_trace("synthetic,jobs=5").attrs["cluster_gpus"] == 64  # no cluster known
    topo, jobs, df = load_jobs("synthetic,jobs=20,load=0.9", "leafspine,racks=8,hosts_per_rack=4,gpus_per_host=8")
    assert df.attrs["cluster_gpus"] == topo.total_gpus == 256


def test_a_trace_sized_for_another_cluster_draws_a_warning():
    small = load_trace("synthetic,jobs=200,load=0.8,cluster_gpus=16")
    assert fit_warning(small, 32) is None  # within 2x
    message = fit_warning(small, 1024)
    assert "16-GPU cluster" in message and "1,024 GPUs" in message and "cluster_gpus=1024" in message
    with pytest.warns(UserWarning, match="sized for a 16-GPU cluster"):
        load_jobs("synthetic,jobs=20,load=0.9,cluster_gpus=16", "leafspine,racks=8,hosts_per_rack=4,gpus_per_host=8")


def test_simulate_prints_the_utilisation_reached(tmp_path):
    out = tmp_path / "run"
    result = CliRunner().invoke(app, ["simulate", "--trace", "synthetic,jobs=30,load=0.9,duration_sigma=0",
                                      "--topology", TOPOLOGY, "--network", "ideal", "--out", str(out), "--quiet"])
    assert result.exit_code == 0, result.output
    summary = json.loads((out / "summary.json").read_text())
    line = next(line for line in result.output.splitlines() if line.startswith("GPU utilisation reached"))
    assert f"{summary['gpu_util']:.3f}" in line and "the trace offers load" in line
