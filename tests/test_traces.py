"""Trace loaders: real files load with the documented counts and schema; bad input fails clearly."""

from __future__ import annotations

import csv
import re
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from netlab.topology import load_topology
from netlab.traces import COLUMNS, TraceError, assign_models, list_traces, load_trace, poisson_trace
from netlab.workload.job import jobs_from_frame
from netlab.workload.zoo import ModelZoo

SHARED = Path(__file__).resolve().parents[1].parent / "shared" / "traces"
ZOO = set(ModelZoo.default().names())


@pytest.fixture
def shared():
    if not SHARED.is_dir():
        pytest.skip(f"shared traces not found at {SHARED} (they live beside the repository)")
    return SHARED


def check_schema(df: pd.DataFrame, source: str) -> None:
    assert list(df.columns[: len(COLUMNS)]) == list(COLUMNS)
    assert df["gpus"].dtype == np.int64
    for col in ("submit_s", "duration_s", "iterations"):
        assert df[col].dtype == np.float64
    for col in ("job_id", "model", "pattern", "source"):
        assert pd.api.types.is_string_dtype(df[col])
    assert df["submit_s"].min() == 0
    assert df["submit_s"].is_monotonic_increasing
    assert df.index.equals(pd.RangeIndex(len(df)))
    assert (df["gpus"] > 0).all()
    assert set(df["model"]) <= ZOO
    assert (df["source"] == source).all()
    assert (df["duration_s"].notna() | df["iterations"].notna()).all()
    assert set(df.attrs) >= {"source_file", "skipped", "filtered"}
    assert df.attrs["skipped"] == []


# --- real traces -------------------------------------------------------------------------------

@pytest.mark.parametrize("what, rows", [
    ("philly", 82_247),
    ("gavel", 2_000), ("gavel,vc=0e4a51", 1_181), ("gavel,vc=103959", 986), ("gavel,vc=23dbec", 9),
    ("gavel,vc=6214e9", 2_000), ("gavel,vc=e13805", 607),
    ("itp", 5_778), ("itp,cluster=01", 1_595), ("itp,cluster=10", 260),
    ("elasticflow", 5_778), ("elasticflow,cluster=03", 3_011),
    ("pollux", 160), ("pollux,set=workloads-realistic,n=8", 160),
    ("sia", 160), ("sia,set=saturn,n=10", 160),
])
def test_real_trace_counts_and_schema(shared, what, rows):
    df = load_trace(what, trace_dir=shared)
    assert len(df) == rows
    check_schema(df, what.split(",")[0])


def test_alibaba_keeps_gpu_pods_that_ran(shared):
    path = shared / "alibaba-gpu-v2023/openb_pod_list_default.csv"
    with open(path, newline="") as fh:
        pods = list(csv.DictReader(fh))
    gpu = [p for p in pods if int(p["num_gpu"]) > 0]
    ran = [p for p in gpu if p["scheduled_time"] != ""]
    df = load_trace("alibaba", trace_dir=shared)
    check_schema(df, "alibaba")
    assert len(df) == len(ran)
    assert df.attrs["filtered"]["CPU-only pods (num_gpu == 0)"] == len(pods) - len(gpu)
    assert df.attrs["filtered"]["GPU pods never scheduled (scheduled_time empty)"] == len(gpu) - len(ran)
    assert df["gpus"].max() == 8


def test_pollux_iterations_come_from_validation_curves(shared):
    df = load_trace("pollux", trace_dir=shared)
    assert df["iterations"].notna().all() and df["duration_s"].isna().all()
    row = df[df["application"] == "imagenet"].iloc[0]
    curve = pd.read_csv(shared / f"pollux/throughput-profiles/imagenet/validation-{row.batch_size}.csv")
    assert row.iterations == curve["iteration"].iloc[-1]


def test_gavel_maps_job_types_and_keeps_steps(shared):
    df = load_trace("gavel,use=iterations", trace_dir=shared)
    first = (shared / "gavel-philly-vc/seed0/b436b2.trace").read_text().splitlines()[0].split("\t")
    assert df.loc[0, "iterations"] == float(first[4]) and df.loc[0, "gpus"] == int(first[6])
    assert df.loc[0, "model"] == "transformer" and df.loc[0, "batch_size"] == 128
    by_duration = load_trace("gavel", trace_dir=shared)  # the default: Gavel's duration on the zoo model
    assert by_duration["iterations"].isna().all() and (by_duration["duration_s"] > 0).all()
    assert (by_duration["trace_iterations"] == df["iterations"]).all()


def test_file_path_detects_format(shared):
    df = load_trace(shared / "microsoft-itp-elasticflow/elasticflow/195job.csv")
    assert len(df) == 195 and df["source"].iloc[0] == "elasticflow"
    assert len(load_trace(shared / "gavel-philly-vc/seed0/23dbec.trace")) == 9


def test_max_jobs_keeps_earliest(shared):
    full = load_trace("itp", trace_dir=shared)
    df = load_trace("itp", trace_dir=shared, max_jobs=50)
    assert len(df) == 50 and (df["job_id"] == full["job_id"].head(50)).all()
    assert df.attrs["filtered"] == {"beyond max_jobs=50": len(full) - 50}


# --- bundled sample ----------------------------------------------------------------------------

def test_sample_loads_without_shared_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("NETLAB_TRACE_DIR", str(tmp_path))
    monkeypatch.chdir(tmp_path)
    df = load_trace("philly-sample")
    check_schema(df, "philly-sample")
    assert 400 <= len(df) <= 600
    assert (df["gpus"] >= 2).mean() >= 0.25 and (df["gpus"] >= 16).sum() >= 3 and df["gpus"].max() <= 64
    with pytest.raises(FileNotFoundError, match="trace"):
        load_trace("philly")


def test_sample_binds_to_a_topology():
    topo = load_topology("leafspine,racks=4,hosts_per_rack=4,gpus_per_host=8,oversub=2")
    jobs = jobs_from_frame(load_trace("philly-sample"), topo)
    assert len(jobs) == 500 and all(j.iterations > 0 for j in jobs)


def test_list_traces():
    table = list_traces()
    assert {"philly", "philly-sample", "gavel", "itp", "elasticflow", "pollux", "sia", "alibaba", "synthetic"} \
        <= set(table["name"])
    assert not table.set_index("name").loc["philly-sample", "needs_shared"]


# --- bad input ---------------------------------------------------------------------------------

PHILLY_OK = ["timestamp,duration,num_gpus,gpu_time,cluster",
             "2017-10-01 00:00:00,100.0,1,100.0,vc1",
             "2017-10-01 00:01:00,200.0,2,400.0,vc1"]


def write(tmp_path, name, lines):
    path = tmp_path / name
    path.write_text("\n".join(lines) + "\n")
    return path


def assert_error(path, line: int, field: str, **kw):
    with pytest.raises(TraceError) as info:
        load_trace(path, **kw)
    msg = str(info.value)
    assert path.name in msg and f"line {line}" in msg and field in msg, msg
    assert not re.search(rf"line {line}\d", msg)


def test_missing_column(tmp_path):
    path = write(tmp_path, "itp.csv", ["job_id,submission_time,duration", "a,0,10"])
    with pytest.raises(TraceError, match=r"itp\.csv, line 1.*unknown trace format"):
        load_trace(path)
    from netlab.traces.itp import read_itp
    with pytest.raises(TraceError, match=r"itp\.csv, line 1 \(header\): missing column\(s\) 'num_gpu'"):
        read_itp(path)


@pytest.mark.parametrize("bad_line, field", [
    ("2017-10-01 00:02:00,300.0,1,300.0", "cluster"),            # a field short
    ("2017-10-01 00:02:00,300.0,1,300.0,vc1,x", "extra field"),  # a field too many
    ("2017-10-01 00:02:00,abc,1,300.0,vc1", "duration"),         # text in a number field
    ("2017-13-01 00:02:00,300.0,1,300.0,vc1", "timestamp"),      # bad timestamp
    ("2017-10-01 00:02:00,300.0,-2,-600.0,vc1", "num_gpus"),     # negative GPUs
    ("2017-10-01 00:02:00,300.0,0,0.0,vc1", "num_gpus"),         # zero GPUs
    ("2017-10-01 00:02:00,300.0,1.5,450.0,vc1", "num_gpus"),     # fractional GPUs
])
def test_malformed_philly_row(tmp_path, bad_line, field):
    path = write(tmp_path, "philly_bad.csv", PHILLY_OK + [bad_line])
    assert_error(path, 4, field)


def test_unknown_gavel_job_type(tmp_path):
    rows = ["ResNet-50 (batch size 64)\tcmd\t-n\t1\t1000\t0.0\t1",
            "Mystery-Net (batch size 8)\tcmd\t-n\t1\t1000\t5.0\t1",
            "LM (batch size 20)\tcmd\t-n\t1\t1000\t9.0\t2"]
    assert_error(write(tmp_path, "vc.trace", rows), 2, "job_type")


def test_unknown_elasticflow_model_and_negative_gpus(tmp_path):
    header = "job_id,submission_time,num_iteration,model_name,deadline,batch_size,num_gpu,duration"
    path = write(tmp_path, "cluster99.csv", [header, "a,0,10,resnet50,100,32,1,60", "b,5,10,alexnet9,100,32,1,60"])
    assert_error(path, 3, "model_name")
    path = write(tmp_path, "cluster98.csv", [header, "a,0,10,resnet50,100,32,1,60", "", "b,5,10,bert,100,32,-4,60"])
    assert_error(path, 4, "num_gpu")  # the blank line 3 still counts


def test_skip_bad_records_and_warns(tmp_path):
    path = write(tmp_path, "philly_bad.csv", PHILLY_OK + ["2017-10-01 00:02:00,abc,1,300.0,vc1",
                                                         "2017-10-01 00:03:00,300.0,-1,-300.0,vc1"])
    with pytest.warns(UserWarning, match="skipped 2 bad row"):
        df = load_trace(path, skip_bad=True)
    assert len(df) == 2
    assert [(s["line"], s["field"]) for s in df.attrs["skipped"]] == [(4, "duration"), (5, "num_gpus")]


def test_good_file_does_not_warn(tmp_path):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        df = load_trace(write(tmp_path, "philly_ok.csv", PHILLY_OK))
    assert list(df["submit_s"]) == [0.0, 60.0] and list(df["gpus"]) == [1, 2]


# --- model assignment --------------------------------------------------------------------------

def test_assign_models_is_seeded():
    frame = poisson_trace(jobs=300, seed=1).drop(columns="model")
    a, b, c = (assign_models(frame, seed=s)["model"] for s in (7, 7, 8))
    assert (a == b).all() and not (a == c).all()
    assert set(a) <= ZOO
    small = frame["gpus"] * frame["duration_s"] < 3600
    assert set(a[small]) <= {"resnet18", "mobilenet", "shufflenet"}


def test_philly_sample_models_follow_seed():
    a, b, c = (load_trace("philly-sample", seed=s)["model"] for s in (0, 0, 1))
    assert (a == b).all() and not (a == c).all()


# --- synthetic ---------------------------------------------------------------------------------

def test_synthetic_count_schema_and_determinism():
    df = load_trace("synthetic,jobs=200,load=0.8")
    check_schema(df, "synthetic")
    assert len(df) == 200 and df["gpus"].max() <= 64
    pd.testing.assert_frame_equal(df, load_trace("synthetic,jobs=200,load=0.8"))
    assert not df["model"].equals(load_trace("synthetic,jobs=200,load=0.8", seed=1)["model"])


@pytest.mark.parametrize("load", [0.5, 1.2])
def test_synthetic_load_matches(load):
    df = poisson_trace(jobs=20_000, load=load, cluster_gpus=64, seed=3)
    offered = (df["gpus"] * df["duration_s"]).sum() / df["submit_s"].max() / 64
    assert offered == pytest.approx(load, rel=0.15)


def test_synthetic_rate():
    df = poisson_trace(jobs=5_000, rate_per_h=30, seed=2)
    assert len(df) / (df["submit_s"].max() / 3600) == pytest.approx(30, rel=0.05)
