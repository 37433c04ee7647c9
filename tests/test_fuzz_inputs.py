"""Property-based fuzzing of the input parsers (issue 14): any input either loads or raises the project's own
error type (netlab.errors.InputError), never another exception.

Parsers: spec strings (Spec.parse), topology spec strings, topology YAML files, trace CSV files (every known
header, mutated with injected faults: garbage cells, NaN/inf, wrong field counts, non-UTF-8 bytes, NUL,
truncation, huge fields, ...) and trace spec strings. The same strategies drive
``benchmarks/bench_robustness.py`` with many more examples; here ``max_examples`` stays small so each test
takes seconds, and ``deadline=None`` so a loaded machine does not fail them.
"""

from __future__ import annotations

import math
import tempfile
from pathlib import Path

import pandas as pd
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from netlab.errors import InputError
from netlab.spec import Spec
from netlab.topology import Topology, load_topology
from netlab.traces import load_trace

FAST = settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck), database=None)

# -- values: plausible ones and the garbage a user or an attacker writes --------------------------------------------

WEIRD_TEXT = ["nan", "NaN", "inf", "-inf", "1e400", "-0", "0x10", "1_000", " 2 ", "", "yes", "null", "..", "../x",
              "a\nb", "é", "\x00", "2.5", "-1", "0", "1e30", "9" * 30, "1,2", '"', "'", "=", "+", "+1", "1+2"]
SMALL_INT = st.integers(-3, 12)
NUMBER_TEXT = st.one_of(SMALL_INT.map(str), st.floats(allow_nan=True, allow_infinity=True).map(repr),
                        st.sampled_from(WEIRD_TEXT), st.text(max_size=6))
SCALAR = st.one_of(SMALL_INT, st.integers(), st.floats(allow_nan=True, allow_infinity=True), st.booleans(),
                   st.none(), st.text(max_size=8), st.sampled_from(WEIRD_TEXT))

# -- spec strings ---------------------------------------------------------------------------------------------------

TOPOLOGY_KEYS = ["racks", "hosts_per_rack", "gpus_per_host", "host_gbps", "oversub", "spines", "intra_gbps", "nics",
                 "ecmp", "name", "k", "hosts_per_edge", "hosts_per_side", "bottleneck_gbps", "path", "max_hosts",
                 "rack", "bogus", ""]
TOPOLOGY_KINDS = ["leafspine", "fattree", "dumbbell", "crux", "torus", "", "leafspine=1"]


@st.composite
def spec_text(draw, kinds, keys, values=NUMBER_TEXT):
    parts = [draw(st.sampled_from(kinds) | st.text(max_size=5))]
    for _ in range(draw(st.integers(0, 4))):
        form = draw(st.integers(0, 9))
        if form == 0:
            parts.append("")  # an empty part
        elif form == 1:
            parts.append(draw(st.sampled_from(keys)))  # no '='
        else:
            parts.append(f"{draw(st.sampled_from(keys) | st.text(max_size=4))}={draw(values)}")
    return ",".join(parts)


# Values that stay small when valid, so a valid topology is built in milliseconds.
TOPO_VALUE = st.one_of(st.integers(-2, 6).map(str), st.sampled_from(["2.5", "nan", "inf", "1e9", "100000000", "abc",
                                                                     "yes", "split", "hash", "", "0.5", "-0"]))


def check_spec(text: str) -> str:
    try:
        Spec.parse(text)
        return "loaded"
    except InputError:
        return "refused"


def check_topology_spec(text: str) -> str:
    try:
        assert isinstance(load_topology(text), Topology)
        return "loaded"
    except InputError:
        return "refused"


# -- topology YAML --------------------------------------------------------------------------------------------------

HOST = st.fixed_dictionaries({"name": st.sampled_from(["h1", "h2", "h 1", "../h", 7, None]),
                              "gpus": SCALAR, "rack": st.sampled_from(["r0", "r1", 3, None, ["x"]])},
                             optional={"pod": SCALAR, "intra_gbps": SCALAR, "bogus": SCALAR})
SWITCH = st.fixed_dictionaries({"name": st.sampled_from(["s", "s1", "s;1", 5])}, optional={"tier": SCALAR})
LINK = st.fixed_dictionaries({"a": st.sampled_from(["h1", "h2", "s", "zz"]), "b": st.sampled_from(["s", "s1", "h1"]),
                              "gbps": SCALAR}, optional={"tier": SCALAR, "gpbs": SCALAR})
EXPLICIT = st.fixed_dictionaries({"hosts": st.lists(HOST, max_size=3) | SCALAR,
                                  "links": st.lists(LINK, max_size=3) | SCALAR},
                                 optional={"switches": st.lists(SWITCH, max_size=3) | SCALAR, "name": SCALAR,
                                           "ecmp": st.sampled_from(["split", "hash", "rr", 1])})
BUILDER = st.fixed_dictionaries({"builder": st.sampled_from(["leafspine", "fattree", "dumbbell", "torus", 1])},
                                optional={"params": st.dictionaries(st.sampled_from(TOPOLOGY_KEYS[:14]),
                                                                    st.integers(-2, 5) | SCALAR, max_size=4) | SCALAR,
                                          "name": SCALAR})
NESTED = st.recursive(SCALAR, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner,
                                                                                          max_size=3), max_leaves=10)


@st.composite
def yaml_bytes(draw):
    form = draw(st.integers(0, 5))
    if form <= 1:
        doc = draw(EXPLICIT)
    elif form == 2:
        doc = draw(BUILDER)
    elif form == 3:
        doc = draw(NESTED)
    else:
        return draw(st.binary(max_size=200)) if form == 4 else draw(st.text(max_size=200)).encode()
    try:
        text = yaml.safe_dump(doc, sort_keys=False, allow_unicode=True)
    except Exception:  # noqa: BLE001 - a structure yaml cannot dump: use its repr
        text = repr(doc)
    data = text.encode()
    if draw(st.booleans()) and data:  # inject a fault: cut, or overwrite one byte
        i = draw(st.integers(0, len(data) - 1))
        data = data[:i] if draw(st.booleans()) else data[:i] + bytes([draw(st.integers(0, 255))]) + data[i + 1:]
    return data


def check_topology_file(data: bytes, suffix: str = ".yaml") -> str:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / f"topo{suffix}"
        path.write_bytes(data)
        try:
            assert isinstance(load_topology(path), Topology)
            return "loaded"
        except InputError:
            return "refused"


# -- trace CSV files ------------------------------------------------------------------------------------------------

#: one valid row per known format (header, rows); mutations inject faults into them
TRACE_FORMATS = {
    "itp": ("job_id,submission_time,duration,num_gpu", ["j1,0,100,1", "j2,5,200,2", "j3,9,50,4"]),
    "elasticflow": ("job_id,submission_time,duration,num_gpu,model_name,num_iteration,batch_size,deadline",
                    ["j1,0,100,1,resnet50,1000,32,500", "j2,3,100,2,bert,500,16,900"]),
    "philly": ("timestamp,duration,num_gpus,cluster", ["2017-10-03 10:00:00,100,1,vc1", "2017-10-03 10:05:00,60,8,vc2"]),
    "alibaba": ("name,num_gpu,gpu_milli,creation_time,scheduled_time,deletion_time",
                ["p1,1,1000,0,5,100", "p2,0,0,1,2,3", "p3,2,1000,4,,9"]),
    "pollux": ("name,time,application,num_replicas,batch_size", ["a,0,cifar10,1,128", "b,10,imagenet,4,400"]),
}
FAULTS = ["garbage cell", "NaN/inf cell", "huge number", "empty cell", "extra field", "missing field", "blank lines",
          "header only", "duplicate column", "latin-1 byte", "binary bytes", "NUL byte", "truncated", "quote",
          "long field", "none"]


@st.composite
def trace_csv(draw, record=None):
    fmt = draw(st.sampled_from(sorted(TRACE_FORMATS)))
    header, rows = TRACE_FORMATS[fmt]
    rows = [r.split(",") for r in rows]
    faults = draw(st.lists(st.sampled_from(FAULTS), min_size=1, max_size=3))
    cols = header.split(",")
    for fault in faults:
        r = draw(st.integers(0, len(rows) - 1)) if rows else 0
        c = draw(st.integers(0, len(cols) - 1))
        if not rows:
            break
        if fault == "garbage cell":
            rows[r][c % len(rows[r])] = draw(st.text(max_size=6).filter(lambda s: "," not in s and "\n" not in s
                                                                        and "\r" not in s and '"' not in s))
        elif fault == "NaN/inf cell":
            rows[r][c % len(rows[r])] = draw(st.sampled_from(["nan", "inf", "-inf", "1e400", "NaN"]))
        elif fault == "huge number":
            rows[r][c % len(rows[r])] = draw(st.sampled_from(["1e30", "9" * 25, "-1e300", "2147483648", "1e18"]))
        elif fault == "empty cell":
            rows[r][c % len(rows[r])] = ""
        elif fault == "extra field":
            rows[r].append("x")
        elif fault == "missing field" and rows[r]:
            rows[r].pop()
        elif fault == "header only":
            rows = []
        elif fault == "duplicate column":
            cols = cols + [cols[c]]
    text = ",".join(cols) + "\n" + "".join(",".join(r) + "\n" for r in rows)
    if "blank lines" in faults:
        text = text.replace("\n", "\n\n", 2)
    if "quote" in faults:
        text = text.replace(",", ',"', 1)
    data = text.encode()
    for fault in faults:
        i = draw(st.integers(0, max(len(data) - 1, 0)))
        if fault == "latin-1 byte":
            data = data[:i] + b"\xe9" + data[i:]
        elif fault == "binary bytes":
            data = data[:i] + draw(st.binary(min_size=1, max_size=20)) + data[i:]
        elif fault == "NUL byte":
            data = data[:i] + b"\x00" + data[i:]
        elif fault == "truncated":
            data = data[:i]
        elif fault == "long field":
            data = data[:i] + b"x" * 140_000 + data[i:]
    if record is not None:
        record.extend(faults)
    suffix = draw(st.sampled_from([".csv"] * 5 + [".trace"]))
    if suffix == ".trace":
        data = data.replace(b",", b"\t")
    return data, suffix


def check_trace_file(data: bytes, suffix: str = ".csv") -> str:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / f"t{suffix}"
        path.write_bytes(data)
        try:
            df = load_trace(path)
        except InputError:
            return "refused"
        assert isinstance(df, pd.DataFrame) and len(df) > 0
        assert all(math.isfinite(x) for x in df["submit_s"]) and (df["gpus"] > 0).all()
        return "loaded"


TRACE_KEYS = ["jobs", "load", "rate_per_h", "duration_median_s", "duration_sigma", "models", "cluster_gpus", "gpus",
              "vc", "use", "cluster", "set", "n", "seed", "bogus"]
TRACE_VALUE = st.one_of(st.integers(-2, 30).map(str), st.sampled_from(
    ["nan", "inf", "0.5", "2.5", "abc", "1e9", "1e-300", "vgg16+bert-base", "vgg16+nosuch", "1+2", "0+0", "1+abc",
     "-1+1", "", "../x", "yes", "20", "0.3+0.7"]))


def check_trace_spec(text: str) -> str:
    try:
        df = load_trace(text)
    except InputError:
        return "refused"
    assert isinstance(df, pd.DataFrame) and len(df) > 0
    return "loaded"


TRACE_KINDS = ["synthetic", "philly-sample", "nosuch", ""]

# -- the tests ------------------------------------------------------------------------------------------------------


@FAST
@given(st.text(max_size=40) | spec_text(TOPOLOGY_KINDS, TOPOLOGY_KEYS))
def test_fuzz_spec_parser(text):
    check_spec(text)


@FAST
@given(spec_text(TOPOLOGY_KINDS[:3] * 3 + TOPOLOGY_KINDS[3:], TOPOLOGY_KEYS, TOPO_VALUE))
def test_fuzz_topology_spec(text):
    check_topology_spec(text)


@FAST
@given(yaml_bytes())
def test_fuzz_topology_yaml(data):
    check_topology_file(data)


@FAST
@given(trace_csv())
def test_fuzz_trace_files(case):
    check_trace_file(*case)


@settings(FAST, max_examples=40)
@given(spec_text(TRACE_KINDS, TRACE_KEYS, TRACE_VALUE))
def test_fuzz_trace_spec(text):
    check_trace_spec(text)
