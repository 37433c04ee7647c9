"""One schema per boundary: the command line, a sweep grid and Python check a field by the same rule and fail
with the same error class and message (an unknown name: UnknownNameError, an InputError and a KeyError)."""

from __future__ import annotations

import json
import time

import pandas as pd
import pytest
from typer.testing import CliRunner

from netlab.cli import app
from netlab.errors import InputError, UnknownNameError, short
from netlab.policies import ORDERING
from netlab.run import RunParams, run_one
from netlab.sim import SimConfig, Simulator
from netlab.sweep import GridError, expand, run_sweep
from netlab.topology import load_topology
from netlab.traces import load_trace
from netlab.workload.job import jobs_from_frame

runner = CliRunner()
TOPO = "leafspine,racks=2,hosts_per_rack=2,gpus_per_host=8,host_gbps=100,spines=2"
#: how every boundary words an unknown ordering policy
UNKNOWN_POLICY = "field 'policy': unknown ordering policy 'nope'; allowed: " + ", ".join(ORDERING.names())


def _err(res) -> str:
    return getattr(res, "stderr", "") or res.output


def test_an_unknown_policy_is_one_error_class_and_message_from_the_cli_a_grid_and_python(tmp_path):
    res = runner.invoke(app, ["simulate", "--policy", "nope", "--quiet", "--out", str(tmp_path / "o")])
    assert res.exit_code == 2 and _err(res).startswith("error: ") and UNKNOWN_POLICY in _err(res), _err(res)
    assert len(_err(res).strip().splitlines()) == 1

    grid = tmp_path / "grid.yaml"
    grid.write_text("trace: philly-sample\nmax_jobs: 5\ngrid:\n  policy: [fifo, nope]\n")
    res = runner.invoke(app, ["sweep", str(grid), "--out", str(tmp_path / "s"), "--quiet"])
    assert res.exit_code == 2 and UNKNOWN_POLICY in _err(res) and str(grid) in _err(res), _err(res)
    assert not (tmp_path / "s").exists()

    raised = []
    for attempt in (lambda: expand(dict(grid=dict(policy=["fifo", "nope"])), "grid file 'g.yaml'"),
                    lambda: run_sweep(dict(grid=dict(policy="nope")), progress=False),
                    lambda: RunParams(policy="nope"),
                    lambda: RunParams.parse({"policy": "nope"}, where="notebook")):
        with pytest.raises(UnknownNameError) as info:
            attempt()
        raised.append(info.value)
    for exc in raised:
        assert type(exc) is UnknownNameError and isinstance(exc, InputError) and isinstance(exc, KeyError)
        assert UNKNOWN_POLICY in str(exc), str(exc)
    assert isinstance(RunParams(), SimConfig)  # a run's parameters are a SimConfig with the run's names


def test_an_unknown_network_or_history_in_simconfig_names_the_field_and_the_registered_names():
    from netlab.network import NETWORKS

    allowed = ", ".join(sorted(NETWORKS.names()))  # every registered model (the transport regimes' among them)
    assert {"fair", "ideal", "phase", "tcp"} <= set(NETWORKS.names())
    with pytest.raises(UnknownNameError, match=rf"SimConfig: field 'network': unknown network model 'fiar'; "
                                               rf"allowed: {allowed}, or null for the default$"):
        SimConfig(network="fiar")
    config = SimConfig()
    with pytest.raises(UnknownNameError, match="field 'link_history': unknown link history 'x'"):
        config.link_history = "x"  # assignments are checked too
    assert config.link_history is None
    with pytest.raises(InputError, match="field 'checkpoint_s' must be >= 0, got -1"):
        SimConfig(checkpoint_s=-1)
    with pytest.raises(InputError, match="field 'bogus' is not a known field"):
        SimConfig(bogus=1)


def test_registry_lookups_raise_the_same_class_naming_the_field():
    with pytest.raises(KeyError) as info:  # callers that catch KeyError still do
        ORDERING.get("nope", "policy")
    assert type(info.value) is UnknownNameError and str(info.value) == UNKNOWN_POLICY
    topo = load_topology(TOPO)
    jobs = jobs_from_frame(load_trace("philly-sample", max_jobs=3), topo)
    with pytest.raises(UnknownNameError, match="field 'ordering': unknown ordering policy 'nope'"):
        Simulator(topo, jobs, "nope")


def test_a_trace_row_with_an_unknown_model_is_an_unknown_name_naming_the_row():
    frame = load_trace("philly-sample", max_jobs=3).assign(model=["resnet50", "no-such-model", "resnet50"])
    with pytest.raises(UnknownNameError, match=r"trace row 1 \(job .*\): unknown model 'no-such-model'; allowed: "):
        jobs_from_frame(frame, load_topology(TOPO))


def _aliased(levels: int):
    """What YAML aliases build: each level is a list holding the level below twice (2**levels leaves)."""
    value = ["x" * 10_000]
    for _ in range(levels):
        value = [value, value]
    return value


@pytest.mark.parametrize("attempt", [
    lambda v: expand(dict(grid=dict(policy=[v])), "grid file 'g.yaml'"),
    lambda v: expand(dict(grid=dict(max_jobs=[v])), "grid file 'g.yaml'"),
    lambda v: SimConfig(network=v),
    lambda v: ORDERING.get(v),
], ids=["grid-name", "grid-number", "simconfig", "registry"])
def test_a_deeply_aliased_bad_value_is_quoted_by_a_bounded_prefix(attempt):
    value = _aliased(60)  # its whole repr would be 2**60 x 10 kB
    t0 = time.process_time()
    with pytest.raises(InputError) as info:
        attempt(value)
    assert time.process_time() - t0 < 5.0
    assert len(str(info.value)) < 1_000 and short(value) in str(info.value), str(info.value)[:300]


def test_grid_values_are_strict_and_other_bad_fields_are_grid_errors():
    with pytest.raises(GridError, match="field 'seed' is not an integer, got '1'"):
        expand(dict(grid=dict(seed=["1"])))  # a quoted number in YAML is text
    with pytest.raises(GridError, match="field 'backfill' is not true or false, got 1"):
        expand(dict(backfill=1))
    assert expand(dict(oversub=2))[0].params["oversub"] == 2  # an integer for a number; ids keep what was written


def test_one_simulation_is_one_function_with_one_placement_column(tmp_path):
    grid = dict(trace="philly-sample", max_jobs=12, topology=TOPO, grid=dict(policy="tiresias", placement="random",
                                                                               network="fair"))
    (cell,) = expand(grid)
    swept = run_sweep(grid, progress=False)
    alone = run_one(dict(trace="philly-sample", max_jobs=12, topology=TOPO, policy="tiresias", placement="random",
                         network="fair", seed=cell.sim_seed, workload_seed=cell.workload_seed))
    assert "allocation" not in swept.jobs
    assert set(swept.jobs.placement_policy) == {"random"}
    pd.testing.assert_frame_equal(swept.jobs[alone.jobs.columns], alone.jobs, check_dtype=False)
    assert alone.jobs.placement.str.contains(":").all()  # the job's hosts, host:gpus,...


def test_max_jobs_is_cut_once_by_whoever_reads_the_trace():
    frame = load_trace("philly-sample", max_jobs=10)
    calls = []

    def load(trace, seed, max_jobs, trace_dir, cluster_gpus):  # (wrongly) ignores max_jobs: nobody cuts again
        calls.append(max_jobs)
        return frame

    result = run_one(dict(trace="philly-sample", max_jobs=4, topology=TOPO, network="ideal"), load=load)
    assert calls == [4] and len(result.jobs) == 10
    result = run_one(RunParams(trace=frame, max_jobs=4, topology=TOPO, network="ideal"))  # a DataFrame: cut here
    assert len(result.jobs) == 4 and result.config["trace"] == "<DataFrame>" and result.config["max_jobs"] == 4


def test_export_and_import_errors_are_caught_once_by_the_root_command(tmp_path):
    res = runner.invoke(app, ["export", "slurm", "leafspine,racks=0", "--out", str(tmp_path / "t.conf")])
    assert res.exit_code == 2 and _err(res).startswith("error: ") and "field 'racks' must be >= 1" in _err(res)
    assert "Traceback" not in _err(res) and not (tmp_path / "t.conf").exists()
    conf = tmp_path / "topology.conf"
    conf.write_text("SwitchName=s0 Switches=s0\n")
    res = runner.invoke(app, ["import", "slurm", str(conf)])
    assert res.exit_code == 2 and _err(res).startswith("error: ") and "Traceback" not in _err(res), _err(res)


def test_the_cli_writes_what_the_schema_accepts(tmp_path):
    res = runner.invoke(app, ["simulate", "--max-jobs", "3", "--network", "ideal", "--seed", "2", "--quiet",
                              "--out", str(tmp_path)])
    assert res.exit_code == 0, res.output
    config = json.loads((tmp_path / "config.json").read_text())
    assert (config["network"], config["seed"], config["max_jobs"], config["checkpoint_s"]) == ("ideal", 2, 3, None)
    assert (config["storage_gbps"], config["launch_s"]) == (20.0, 30.0)  # each job's restart from its model's size
