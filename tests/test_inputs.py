"""Issue 14, parser and CLI side: every bad input is one project error (InputError) naming the file, line or
field and the allowed values, raised before anything is written; no silent garbage, no tracebacks."""

from __future__ import annotations

import os
import time

import pytest
from typer.testing import CliRunner

from netlab.cli import app
from netlab.errors import InputError
from netlab.spec import Spec, SpecError
from netlab.topology import TopologyError, load_topology
from netlab.traces import TraceError, load_trace

HEADER = "job_id,submission_time,duration,num_gpu\n"


# -- topology spec strings -----------------------------------------------------------------------------------------

@pytest.mark.parametrize("spec,needles", [
    ("leafspine,oversub=nan", ["field 'oversub'", "not finite", "allowed: a finite number > 0"]),
    ("leafspine,host_gbps=inf", ["field 'host_gbps'", "not finite"]),
    ("leafspine,racks=abc", ["field 'racks'", "not an integer", "got 'abc'", "allowed: an integer >= 1"]),
    ("leafspine,racks=2.5", ["field 'racks'", "not a whole number", "got 2.5"]),
    ("leafspine,racks=yes", ["field 'racks'", "yes/no"]),
    ("leafspine,rack=2", ["unknown parameter(s) 'rack'", "known: ecmp, gpus_per_host, host_gbps, hosts_per_rack"]),
    ("leafspine,ecmp=rr", ["field 'ecmp'", "one of 'split', 'hash'"]),
    ("leafspine,,racks=2", ["part 2 is empty"]),
    ("leafspine,racks=2,", ["part 3 is empty"]),
    ("fattree,k=4.5", ["field 'k'", "not a whole number"]),
    ("dumbbell,bottleneck_gbps=nan", ["field 'bottleneck_gbps'", "not finite"]),
])
def test_bad_topology_spec_is_one_topology_error_naming_field_and_allowed_values(spec, needles):
    with pytest.raises(TopologyError) as err:
        load_topology(spec)
    msg = str(err.value)
    assert spec in msg and all(n in msg for n in needles), msg


def test_topology_size_is_bounded_before_building():
    t0 = time.perf_counter()
    with pytest.raises(TopologyError, match="hosts_per_rack' must be <= 100000"):
        load_topology("leafspine,racks=1,hosts_per_rack=10000000")
    with pytest.raises(TopologyError, match=r"over the limit of 100,000"):
        load_topology("leafspine,racks=1000,hosts_per_rack=1000")
    assert time.perf_counter() - t0 < 5


def test_spec_strings_refuse_empty_parts_and_huge_text():
    assert Spec.parse("leafspine,racks=2").params == {"racks": 2}
    for bad in ("leafspine,,racks=2", "leafspine,racks=2,", ",leafspine", " , "):
        with pytest.raises(SpecError):
            Spec.parse(bad)
    with pytest.raises(SpecError, match="over the limit"):
        Spec.parse("leafspine," + "a=1," * 5000)


# -- topology YAML -------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("text,needles", [
    ("hosts:\n  - {name: h1, gpus: 1.7, rack: r}\nswitches: [{name: s}]\nlinks:\n  - {a: h1, b: s, gbps: 10}\n",
     ["hosts[0]: field 'gpus' is not a whole number, got 1.7 at line 2", "allowed: an integer >= 0"]),
    ("hosts:\n  - {name: h1, gpus: 1, rack: r}\nswitches: [{name: s}]\nlinks:\n  - {a: h1, b: s, gbps: .nan}\n",
     ["links[0]: field 'gbps' is not finite", "line 5"]),
    ("hosts:\n  - {name: h1, gpus: 1, rack: r}\nswitches: [{name: s}]\nlinks:\n  - {a: h1, b: s, gbps: .inf}\n",
     ["links[0]: field 'gbps' is not finite"]),
    ("hosts:\n  - {name: h1, gpus: 1, rack: r, intra_gbps: .nan}\nswitches: [{name: s}]\nlinks:\n"
     "  - {a: h1, b: s, gbps: 1}\n", ["hosts[0]: field 'intra_gbps' is not finite"]),
    ("hosts:\n  - {name: h1, gpus: 1, rack: r}\nswitches: [{name: s}]\nlinks:\n  - {a: h1, b: s, gpbs: 10}\n",
     ["links[0]: missing field 'gbps'", "links[0]: field 'gpbs' is not a known field", "known fields: a, b, gbps"]),
    ("builder: leafspine\nparams: {racks: 2.5}\n", ["field 'params'", "field 'racks' is not a whole number"]),
    ("builder: leafspine\nparams: {oversub: .nan}\n", ["field 'oversub' is not finite"]),
    ("builder: leafspine\nparams: {rack: 2}\n", ["unknown parameter(s) 'rack'", "known: ecmp"]),
    ("hosts: 5\nlinks: []\n", ["field 'hosts' is not a list"]),
    ("[" * 5000 + "\n", ["invalid YAML"]),
])
def test_bad_topology_yaml_is_one_error_naming_file_line_field(tmp_path, text, needles):
    path = tmp_path / "topo.yaml"
    path.write_text(text)
    with pytest.raises(TopologyError) as err:
        load_topology(path)
    msg = str(err.value)
    assert str(path) in msg and all(n in msg for n in needles), msg


def test_topology_yaml_that_is_not_text_or_too_big(tmp_path):
    path = tmp_path / "topo.yaml"
    path.write_bytes(b"name: caf\xe9\n")
    with pytest.raises(TopologyError, match=r"topo.yaml, line 1: not UTF-8"):
        load_topology(path)
    with open(path, "wb") as fh:  # sparse: no real disk used
        fh.truncate(2**31)
    with pytest.raises(TopologyError, match="over the limit"):
        load_topology(path)
    (tmp_path / "dir.yaml").mkdir()
    with pytest.raises(TopologyError, match="is a directory"):
        load_topology(tmp_path / "dir.yaml")


def test_crux_csv_that_is_binary_is_a_topology_error(tmp_path):
    path = tmp_path / "topo.csv"
    path.write_bytes(b"ip,DSW,PSW,ASW\n\x89PNG\xff,a,b,c\n")
    with pytest.raises(TopologyError, match=r"topo.csv, line 2: not UTF-8"):
        load_topology(path)
    path.write_text("ip,DSW,PSW,ASW\n" + "x" * 140_000 + ",a,b,c\n")
    with pytest.raises(TopologyError, match=r"line 2: not valid CSV: field larger than field limit"):
        load_topology(path)


# -- trace files ---------------------------------------------------------------------------------------------------

def test_binary_and_latin1_traces_name_file_and_line(tmp_path):
    path = tmp_path / "t.csv"
    path.write_bytes(HEADER.encode() + "caf\u00e9,0,10,1\n".encode("latin-1"))
    with pytest.raises(TraceError, match=r"t.csv, line 2: not UTF-8 text \(byte 0xe9\)"):
        load_trace(path)
    path.write_bytes(bytes(range(256)) * 20)
    with pytest.raises(TraceError, match=r"t.csv, line 1: (not UTF-8|NUL byte)"):
        load_trace(path)


def test_header_only_trace_is_a_trace_error(tmp_path):
    path = tmp_path / "t.csv"
    path.write_text(HEADER)
    with pytest.raises(TraceError, match="a header but no job rows"):
        load_trace(path)
    gavel = tmp_path / "t.trace"
    gavel.write_text("\n\n")
    with pytest.raises(TraceError, match="no job rows"):
        load_trace(gavel)


def test_field_over_the_csv_limit_is_a_trace_error(tmp_path):
    path = tmp_path / "t.csv"
    path.write_text(HEADER + "x" * 200_000 + ",0,10,1\n")
    with pytest.raises(TraceError, match=r"t.csv, line 2: not valid CSV: a field is longer than 131,072"):
        load_trace(path)


def test_huge_trace_is_refused_before_it_is_read(tmp_path):
    path = tmp_path / "t.csv"
    with open(path, "wb") as fh:  # a valid header, then 2 GB (sparse: no real disk used)
        fh.write(HEADER.encode())
        fh.truncate(2**31)
    t0 = time.perf_counter()
    with pytest.raises(TraceError, match=r"t.csv: trace file is 2,147,483,648 bytes, over the limit"):
        load_trace(path)
    assert time.perf_counter() - t0 < 5


def test_row_limit_stops_reading(tmp_path, monkeypatch):
    from netlab.traces import reader

    monkeypatch.setattr(reader, "MAX_ROWS", 50)
    path = tmp_path / "t.csv"
    path.write_text(HEADER + "".join(f"j{i},{i},10,1\n" for i in range(60)))
    with pytest.raises(TraceError, match=r"t.csv, line 52: more than 50 rows"):
        load_trace(path)


def test_garbage_values_in_rows_are_trace_errors(tmp_path):
    path = tmp_path / "t.csv"
    path.write_text(HEADER + "a,0,10,1e30\n")
    with pytest.raises(TraceError, match=r"line 2, field 'num_gpu': must be <= 2,147,483,647"):
        load_trace(path)
    philly = tmp_path / "p.csv"
    philly.write_text("timestamp,duration,num_gpus,cluster\n1700-01-01 00:00:00,10,1,a\n2250-01-01 00:00:00,10,1,a\n")
    with pytest.raises(TraceError, match=r"line 2, field 'timestamp': outside the years"):
        load_trace(philly)
    for bad in (tmp_path / "dir.csv",):
        bad.mkdir()
        with pytest.raises(TraceError, match="is a directory"):
            load_trace(bad)


@pytest.mark.parametrize("kwargs,needle", [
    (dict(max_jobs=-5), "max_jobs -5: must be an integer >= 1"),
    (dict(max_jobs=0), "max_jobs 0: must be an integer >= 1"),
    (dict(max_jobs=2.5), "max_jobs 2.5"),
    (dict(seed=1.5), "seed 1.5: must be an integer >= 0"),
    (dict(seed=-1), "seed -1"),
])
def test_load_trace_options_are_checked(kwargs, needle):
    with pytest.raises(TraceError, match=needle):
        load_trace("philly-sample", **kwargs)


@pytest.mark.parametrize("spec,needle", [
    ("synthetic,jobs=abc", "field 'jobs' is not an integer"),
    ("synthetic,jobs=2.5", "field 'jobs' is not a whole number"),
    ("synthetic,jobs=100000000000", "field 'jobs' must be <= 2000000"),
    ("synthetic,load=nan", "field 'load' is not finite"),
    ("synthetic,gpus=1+abc", "field 'gpus[1]' is not a number"),
    ("synthetic,gpus=-1+1", "field 'gpus[0]' must be >= 0"),
    ("synthetic,models=vgg16+nosuch", "unknown model(s) ['nosuch']"),
    ("synthetic,load=1,rate_per_h=2", "give load or rate_per_h, not both"),
    ("gavel,vc=../../etc/x", "field 'vc' does not match the allowed pattern"),
    ("itp,cluster=abc", "field 'cluster' does not match"),
    ("philly-sample,seed=3", "'seed' is not a spec parameter"),
])
def test_bad_trace_spec_is_one_input_error(spec, needle):
    with pytest.raises(InputError) as err:
        load_trace(spec)
    assert needle in str(err.value) and spec in str(err.value), str(err.value)


def test_missing_trace_file_is_both_trace_error_and_file_not_found(tmp_path):
    with pytest.raises(TraceError) as err:
        load_trace(tmp_path / "none.csv")
    assert isinstance(err.value, FileNotFoundError)


# -- the command line ----------------------------------------------------------------------------------------------

def _simulate(tmp_path, *args):
    out = tmp_path / "out"
    res = CliRunner().invoke(app, ["simulate", "--quiet", "--out", str(out), *args])
    return res, out


def _err(res) -> str:
    return getattr(res, "stderr", "") or res.output


@pytest.mark.parametrize("args, needle", [
    (["--max-jobs", "-5"], "field 'max_jobs' must be >= 1, got -5 (allowed: an integer >= 1"),
    (["--max-jobs", "0"], "field 'max_jobs' must be >= 1, got 0"),
    (["--seed", "-1"], "field 'seed' must be >= 0, got -1"),
    (["--checkpoint-s", "nan"], "field 'checkpoint_s' is not finite"),
    (["--restore-s", "inf"], "field 'restore_s' is not finite"),
    (["--restore-s", "-1"], "field 'restore_s' must be >= 0"),
    (["--link-resolution-s", "0"], "field 'link_resolution_s' must be > 0"),
])
def test_cli_options_out_of_range_are_one_error_line_from_the_schema(tmp_path, args, needle):
    res, out = _simulate(tmp_path, *args)
    err = _err(res)
    assert res.exit_code == 2 and err.startswith("error: netlab simulate: ") and needle in err, err
    assert "Traceback" not in err and not out.exists()


@pytest.mark.parametrize("content,needle", [
    (HEADER.encode() + "caf\u00e9,0,10,1\n".encode("latin-1"), "t.csv, line 2: not UTF-8 text"),
    (HEADER.encode(), "a header but no job rows"),
    (HEADER.encode() + b"x" * 200_000 + b",0,10,1\n", "line 2: not valid CSV"),
])
def test_cli_bad_trace_is_one_error_line_and_nothing_written(tmp_path, content, needle):
    trace = tmp_path / "t.csv"
    trace.write_bytes(content)
    res, out = _simulate(tmp_path, "--trace", str(trace))
    assert res.exit_code == 2, res.output
    err = _err(res)
    assert err.startswith("error: ") and needle in err and "Traceback" not in err, err
    assert not out.exists()


@pytest.mark.parametrize("topo,needle", [
    ("leafspine,racks=abc", "field 'racks' is not an integer"),
    ("leafspine,racks=2.5", "field 'racks' is not a whole number"),
    ("leafspine,rack=2", "known: ecmp, gpus_per_host"),
    ("leafspine,oversub=nan", "field 'oversub' is not finite"),
])
def test_cli_bad_topology_is_one_error_line(tmp_path, topo, needle):
    res, out = _simulate(tmp_path, "--topology", topo)
    assert res.exit_code == 2 and needle in _err(res), _err(res)
    assert not out.exists()


def test_cli_out_that_is_a_file_fails_before_simulating(tmp_path, monkeypatch):
    import netlab.run

    def boom(*a, **k):
        raise AssertionError("simulated although --out is a file")

    monkeypatch.setattr(netlab.run, "run_one", boom)
    target = tmp_path / "out"
    target.write_text("keep me")
    res = CliRunner().invoke(app, ["simulate", "--quiet", "--out", str(target)])
    assert res.exit_code == 2 and "exists and is not a directory" in _err(res), _err(res)
    assert target.read_text() == "keep me"
    assert sorted(os.listdir(tmp_path)) == ["out"]


def test_builder_yaml_with_a_name_in_params_loads(tmp_path):
    # Found by benchmarks/bench_robustness.py: 'name' in params was a TypeError (multiple values for 'name').
    path = tmp_path / "b.yaml"
    path.write_text("builder: fattree\nparams: {k: 4, name: pods}\n")
    assert load_topology(path).name == "pods"
    path.write_text("builder: fattree\nparams: {k: 4, name: [1]}\n")
    with pytest.raises(TopologyError, match="field 'name' is not text"):
        load_topology(path)
