"""The zoo's overlap and gradient precision: where they come from, that they are checked, and that every network
model and the simulator apply the overlap the same way (the iteration-time rule)."""

import importlib.util
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from netlab.network import NETWORKS
from netlab.sim import simulate
from netlab.topology import load_topology
from netlab.traces.files import TraceNotFound, find_trace_dir
from netlab.workload.job import Job
from netlab.workload.overlap import COMM_GRID_S, exposed_s, fit_placement, model_overlap, profile_fits
from netlab.workload.zoo import DTYPE_BYTES, MB, ModelZoo

ZOO = ModelZoo.default()
FITTED = {"resnet50": 0.77, "resnet18": 0.34, "bert-base": 0.59, "yolov3": 0.21, "deepspeech2": 0.60, "ncf": 0.0}


def test_the_fit_recovers_a_known_overlap_and_communication():
    compute = np.array([0.1, 0.2, 0.4, 0.8])
    comm = float(COMM_GRID_S[np.argmin(abs(COMM_GRID_S - 0.3))])  # a grid point near 0.3 s
    step = compute + exposed_s(compute, comm, 0.6)  # 0.1 s and 0.2 s of compute hide 60% of themselves...
    fit = fit_placement(compute, step)
    assert fit.overlap == pytest.approx(0.6) and fit.comm_s == pytest.approx(comm) and fit.rms_s < 1e-9
    # hand check of the rule at compute 0.1 s: 0.3 - 0.6 x 0.1 = 0.24 s exposed
    assert exposed_s(0.1, 0.3, 0.6) == pytest.approx(0.24)


def test_one_batch_size_cannot_tell_overlap_from_communication():
    with pytest.raises(ValueError, match="two or more batch sizes"):
        fit_placement([0.5, 0.5], [0.7, 0.7])


def test_the_median_over_placements_is_the_models_overlap():
    fits = pd.DataFrame(dict(overlap=[0.2, 0.8, 0.5]))
    assert model_overlap(fits) == 0.5


def test_every_row_names_its_overlap_source_and_its_gradient_precision():
    for name in ZOO:
        m = ZOO[name]
        assert 0.0 <= m.overlap <= 1.0 and m.overlap_source, name
        assert m.grad_dtype in DTYPE_BYTES, name
        if FITTED.get(name, 0.0) == 0.0:
            assert m.overlap == 0.0 and (m.overlap_source.startswith("no published figure") or name == "ncf"), name
    assert {n: ZOO[n].overlap for n in FITTED} == FITTED


def test_gradient_bytes_follow_the_parameters_and_their_precision():
    for name in ZOO:
        m = ZOO[name]
        assert m.grad_bytes == pytest.approx(m.params_m * MB * DTYPE_BYTES[m.grad_dtype], rel=0.03), name
    llms = [n for n in ZOO if ZOO[n].llm is not None]
    assert llms and all(ZOO[n].grad_dtype == "bf16" and ZOO[n].half_precision for n in llms)
    assert not ZOO["resnet50"].half_precision


@pytest.mark.parametrize("column, value, message", [
    ("overlap", 1.5, "overlap must be a number in \\[0, 1\\]"), ("overlap", "lots", "overlap must be a number"),
    ("grad_dtype", "fp8", "grad_dtype must be one of"),
])
def test_a_bad_row_is_refused_with_its_model_and_column(column, value, message):
    row = dict(model="mine", params_m=1, grad_mb=4, compute_s=0.1, grad_source="", time_source="", **{column: value})
    with pytest.raises(ValueError, match=f"zoo model 'mine': {message}"):
        ModelZoo.from_rows([row])


def test_an_llm_rows_element_size_must_agree_with_its_gradient_precision():
    frame = ZOO.frame()
    rows = [dict(r) for r in frame.to_dict("records") if r["model"] == "llama3-8b"]
    shape = ZOO["llama3-8b"].llm
    rows[0].update(layers=shape.layers, hidden=shape.hidden, seq_len=shape.seq_len, micro_batch=shape.micro_batch,
                   micro_batches=shape.micro_batches, tp=shape.tp, pp=shape.pp, bytes_per_elem=2, grad_dtype="fp32")
    with pytest.raises(ValueError, match="bytes_per_elem 2 disagrees with grad_dtype 'fp32'"):
        ModelZoo.from_rows(rows)


@pytest.mark.parametrize("network", sorted(NETWORKS.names()))
def test_every_network_model_and_the_simulator_apply_the_overlap_alike(network):
    # resnet50 over two 100 Gbit/s hosts, one GPU each: a ring of 2 sends its 102 MB gradient once per iteration,
    # 0.816 Gbit in 8.16 ms; 0.77 of min(0.78, 0.00816) is hidden: 0.78 + 0.00816 x 0.23 = 0.7818768 s
    topo = load_topology("leafspine,racks=1,hosts_per_rack=2,gpus_per_host=1")
    res = simulate(topo, [Job(0, 0.0, 2, "resnet50", 1000.0)], "fifo", "consolidated", network=network).jobs
    assert res.end_s.iloc[0] == pytest.approx(1000 * 0.7818768, rel=1e-9)
    assert res.comm_fraction.iloc[0] == pytest.approx(0.00816 / 0.7818768, rel=1e-9)  # all of it, overlapped or not


def _pollux():
    try:
        return find_trace_dir() / "pollux" / "throughput-profiles"
    except TraceNotFound:
        return None


@pytest.mark.skipif(_pollux() is None or not (_pollux() or Path()).is_dir(), reason="the shared Pollux profiles are "
                    "not here (set NETLAB_TRACE_DIR)")
@pytest.mark.parametrize("profile, model", [("imagenet", "resnet50"), ("bert", "bert-base")])
def test_the_zoo_figures_are_what_the_benchmark_derives(profile, model):
    spec = importlib.util.spec_from_file_location(
        "bench_overlap", Path(__file__).parent.parent / "benchmarks" / "bench_overlap.py")
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    assert bench.POLLUX_MODELS[profile] == model
    row = bench.derive(pd.read_csv(_pollux() / profile / "placements.csv"))
    assert row["overlap"] == ZOO[model].overlap
    # the held-out placements' step times are better explained with the overlap than without
    assert row["heldout_step_ape_pct"]["median"] < row["heldout_step_ape_pct_overlap0"]["median"]
    assert len(profile_fits(pd.read_csv(_pollux() / profile / "placements.csv"))) == row["placements"]
