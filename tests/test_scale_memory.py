"""Bounded memory: per-link history full / aggregated / off, compact job tables, synthetic traces in chunks,
and memory per job measured with tracemalloc."""

import gc
import math
import tracemalloc

import numpy as np
import pandas as pd
import pytest

from netlab.errors import UnknownNameError
from netlab.sim.metrics import JOB_COLUMNS, link_summary
from netlab.sim.simulator import SimConfig, Simulator
from netlab.topology import load_topology
from netlab.traces import poisson_trace
from netlab.traces.synthetic import poisson_chunks
from netlab.workload.job import jobs_from_frame

TOPO = load_topology("leafspine,racks=4,hosts_per_rack=4,gpus_per_host=8,oversub=4")


def run(jobs, **config):
    return Simulator(TOPO, jobs, "tiresias", "consolidated", None, SimConfig(network="fair", **config)).run()


@pytest.fixture(scope="module")
def jobs():
    df = poisson_trace(jobs=300, load=0.9, cluster_gpus=TOPO.total_gpus, seed=4, llm=0.1)
    return jobs_from_frame(df, TOPO)


@pytest.fixture(scope="module")
def full(jobs):
    return run(jobs)


@pytest.mark.parametrize("resolution_s", [600.0, 3600.0, math.inf])
def test_aggregate_keeps_bytes_and_overload_and_bounds_rows(jobs, full, resolution_s):
    agg = run(jobs, link_history="aggregate", link_resolution_s=resolution_s)
    pd.testing.assert_frame_equal(agg.jobs, full.jobs)  # the history never changes what happens
    assert agg.summary["overload_gbit"] == pytest.approx(full.summary["overload_gbit"], rel=1e-9)
    assert agg.summary["tier_bytes"] == pytest.approx(full.summary["tier_bytes"], rel=1e-9)
    # per link, the bytes over the run are the same
    per_full = link_summary(full.links).set_index("link").bytes
    per_agg = link_summary(agg.links).set_index("link").bytes
    pd.testing.assert_series_equal(per_agg.sort_index(), per_full.sort_index(), rtol=1e-9)
    # one row per busy link per bin: never more than links x bins, and each row inside its bin
    span = full.links.t_end_s.max() - full.links.t_start_s.min()
    bins = 1 if math.isinf(resolution_s) else math.ceil(span / resolution_s) + 1
    assert len(agg.links) <= TOPO.n_links * bins
    if not math.isinf(resolution_s):
        b = np.floor(agg.links.t_start_s / resolution_s)
        assert (agg.links.t_end_s <= (b + 1) * resolution_s + 1e-6).all()
    assert agg.links.columns.tolist() == full.links.columns.tolist()


def test_no_history_keeps_no_rows_and_the_same_jobs(jobs, full):
    none = run(jobs, link_history="none")
    assert none.links.empty and none.summary["tier_bytes"] == {}
    pd.testing.assert_frame_equal(none.jobs, full.jobs)
    assert run(jobs[:50], record_links=False).links.empty  # the older switch means "none"


def test_a_bad_history_is_refused_before_the_run(jobs):
    with pytest.raises(UnknownNameError, match="link_history.*unknown link history 'sometimes'; allowed: aggregate"):
        Simulator(TOPO, jobs, "fifo", config=SimConfig(link_history="sometimes"))
    with pytest.raises(ValueError, match="link_resolution_s' must be > 0"):
        Simulator(TOPO, jobs, "fifo", config=SimConfig(link_history="aggregate", link_resolution_s=0.0))


def test_job_table_columns_are_numpy(full):
    numeric = [name for name, dtype in JOB_COLUMNS if dtype is not object]
    assert full.jobs.columns.tolist() == [name for name, _ in JOB_COLUMNS]
    for name in numeric:
        assert full.jobs[name].dtype.kind in "if", name


def test_chunked_synthetic_trace_is_the_same_trace():
    params = dict(jobs=1000, load=0.9, cluster_gpus=1024, seed=7, llm=0.2)
    whole = poisson_trace(**params)
    chunks = list(poisson_chunks(chunk_jobs=137, **params))
    assert [len(c) for c in chunks] == [137] * 7 + [41]
    pd.testing.assert_frame_equal(pd.concat(chunks, ignore_index=True), whole, check_like=False)
    ids = [j.job_id for c, start in zip(chunks, range(0, 1000, 137))
           for j in jobs_from_frame(c, load_topology("leafspine,racks=16,hosts_per_rack=8,gpus_per_host=8"),
                                    first_id=start)]
    assert ids == list(range(1000))


def _traced_bytes(n: int, history: str) -> int:
    df = poisson_trace(jobs=n, load=0.9, cluster_gpus=TOPO.total_gpus, seed=1)
    jobs = jobs_from_frame(df, TOPO)
    del df
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        res = run(jobs, link_history=history)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert len(res.jobs) == n
    return peak - before  # the most the run held at once, result included


def test_memory_per_job_without_link_history_is_under_4_kb():
    _traced_bytes(200, "none")  # compile and import whatever a first run needs
    small, large = 1000, 3000
    none = (_traced_bytes(large, "none") - _traced_bytes(small, "none")) / (large - small)
    full = (_traced_bytes(large, "full") - _traced_bytes(small, "full")) / (large - small)
    assert 0 < none < 4096
    assert full > none  # the full history is what grows


def test_cli_simulate_aggregates_link_history(tmp_path):
    from typer.testing import CliRunner

    from netlab.cli import app

    args = ["simulate", "--trace", "philly-sample", "--max-jobs", "40", "--topology",
            "leafspine,racks=2,hosts_per_rack=2,gpus_per_host=8,oversub=4", "--network", "fair", "--quiet"]
    out = tmp_path / "agg"
    result = CliRunner().invoke(app, args + ["--link-history", "aggregate", "--link-resolution-s", "600",
                                             "--out", str(out)])
    assert result.exit_code == 0, result.output
    links = pd.read_parquet(out / "links.parquet")
    assert len(links) and (links.t_end_s - links.t_start_s).max() <= 600 + 1e-6
    bad = tmp_path / "bad"
    result = CliRunner().invoke(app, args + ["--link-history", "sometimes", "--out", str(bad)])
    assert result.exit_code == 2 and "aggregate, full, none" in result.output
    assert not bad.exists()  # refused before anything was written


def test_a_finished_job_keeps_no_network_demand(jobs):
    sim = Simulator(TOPO, jobs, "tiresias", "consolidated", None, SimConfig(network="fair"))
    result = sim.run()
    assert (result.jobs.gpus > TOPO.host_gpus.max()).any()  # multi-host jobs ran, each with a demand while it ran
    assert all(js.status == "done" and js.demand is None for js in sim.states.values())
