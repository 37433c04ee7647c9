"""Sweeps: grid expansion and seeds, the resumable store, kill-and-resume, backends, failures, manifest."""

import json
import os
import signal
import subprocess
import sys
import tempfile
import time

import numpy as np
import pandas as pd
import pytest

from netlab.sweep import TIMING_COLUMNS, GridError, StoreError, expand, load_sweep, run_sweep
from netlab.sweep.grid import cell_seeds

TOPO = "leafspine,racks=2,hosts_per_rack=2,gpus_per_host=8,host_gbps=100,spines=2"


def small_grid(**over):
    doc = dict(name="small", trace="philly-sample", max_jobs=30, topology=TOPO, links={"seed": 0},
               grid=dict(policy=["fifo", "tiresias"], oversub=[2, 4], seed=[0, 1]))
    doc.update(over)
    return doc


def model_columns(df):
    return df[[c for c in df.columns if c not in TIMING_COLUMNS]]


def assert_same(a, b):
    pd.testing.assert_frame_equal(model_columns(a.summary), model_columns(b.summary), check_dtype=False)
    pd.testing.assert_frame_equal(a.jobs, b.jobs, check_dtype=False)


def test_grid_crosses_lists_keeps_fixed_values_and_zips_mappings():
    doc = dict(trace="philly-sample", grid=dict(policy=["fifo", "sjf"], network="fair", seed=[0, 1, 2],
                                                pair=[{"placement": "random", "oversub": 2},
                                                      {"placement": "consolidated", "oversub": 4}]))
    cells = expand(doc)
    assert len(cells) == 2 * 3 * 2
    assert {c.params["network"] for c in cells} == {"fair"}
    assert {(c.params["placement"], c.params["oversub"]) for c in cells} == {("random", 2), ("consolidated", 4)}
    # ids are a hash of the canonical parameters: the order of keys does not matter
    shuffled = dict(grid=dict(reversed(list(doc["grid"].items()))), trace="philly-sample")
    assert {c.id for c in expand(shuffled)} == {c.id for c in cells}
    assert len({c.id for c in cells}) == len(cells)
    with pytest.raises(GridError, match="unknown grid parameter"):
        expand(dict(grid=dict(polcy=["fifo"])))


def test_seeds_are_spawned_per_replicate_and_cell():
    cells = expand(dict(base_seed=7, grid=dict(policy=["fifo", "sjf"], seed=[0, 1])))
    by = {(c.params["policy"], c.params["seed"]): c for c in cells}
    want = int(np.random.SeedSequence(7, spawn_key=(1, 0)).generate_state(1, np.uint64)[0] >> np.uint64(1))
    assert by["fifo", 1].workload_seed == want
    # one replicate shares its workload (common random numbers); every cell has its own simulation stream
    assert by["fifo", 0].workload_seed == by["sjf", 0].workload_seed != by["fifo", 1].workload_seed
    assert len({c.sim_seed for c in cells}) == len(cells)
    assert by["fifo", 1].workload_seed != 7 + 1 and cell_seeds(by["fifo", 1].params) == (
        by["fifo", 1].workload_seed, by["fifo", 1].sim_seed)


def test_long_form_frames_same_seeds_same_results(tmp_path):
    a = run_sweep(small_grid(), progress=False)
    assert len(a.summary) == 8 and a.errors.empty
    assert len(a.jobs) == 8 * 30
    assert {"policy", "placement_policy", "oversub", "seed", "cell_id", "label", "placement"} <= set(a.jobs)
    assert not a.jobs.duplicated(["cell_id", "job_id"]).any()
    assert set(a.links.seed) == {0} and not a.links.empty
    b = run_sweep(small_grid(), out=tmp_path / "s", progress=False)
    assert_same(a, b)
    # loading a stored sweep gives the same frames as the run that wrote it
    c = load_sweep(tmp_path / "s")
    for name in ("jobs", "summary", "links"):
        pd.testing.assert_frame_equal(getattr(b, name), getattr(c, name))


def test_rerun_skips_completed_cells_and_rejects_another_grid(tmp_path):
    first = run_sweep(small_grid(), out=tmp_path, progress=False)
    again = run_sweep(small_grid(), out=tmp_path, progress=False)
    assert again.manifest["runs"][-1]["ran"] == 0
    assert again.manifest["runs"][-1]["skipped"] == 8
    assert_same(first, again)
    with pytest.raises(StoreError, match="different sweep"):
        run_sweep(small_grid(max_jobs=10), out=tmp_path, progress=False)


def test_manifest_is_complete(tmp_path):
    res = run_sweep(small_grid(), out=tmp_path, progress=False)
    m = json.loads((tmp_path / "manifest.json").read_text())
    assert m == res.manifest
    for key in ("config", "config_hash", "netlab_version", "git_commit", "packages", "base_seed", "seeding",
                "cells", "created_at", "started_at", "ended_at", "runs"):
        assert key in m, key
    assert m["config"] == small_grid()
    assert {"python", "numpy", "pandas", "pyarrow", "dask", "distributed"} <= set(m["packages"])
    assert m["packages"]["numpy"] == np.__version__
    assert len(m["cells"]) == 8 and all({"id", "params", "workload_seed", "sim_seed"} <= set(c) for c in m["cells"])
    assert m["started_at"] <= m["ended_at"]
    run = m["runs"][-1]
    assert run["backend"] == "serial" and run["ran"] == 8 and run["failed"] == 0 and run["ended_at"]
    assert (tmp_path / "grid.yaml").exists()


@pytest.mark.parametrize("backend", ["serial", "processes"])
def test_failing_cell_is_recorded_and_the_others_finish(tmp_path, backend):
    # a valid grid whose tiny topology cannot hold the trace's 8-GPU jobs: those cells fail as they run
    # (a misspelt policy is now refused with the grid, before anything runs: test_bad_grid_is_refused_...)
    tiny = "leafspine,racks=1,hosts_per_rack=1,gpus_per_host=1"
    grid = small_grid(grid=dict(topology=[TOPO, tiny], seed=[0, 1]))
    res = run_sweep(grid, out=tmp_path, backend=backend, workers=2, progress=False)
    assert len(res.summary) == 2 and set(res.summary.topology) == {TOPO}
    assert len(res.errors) == 2 and set(res.errors.topology) == {tiny}
    for err in res.errors.itertuples():
        assert "the topology has 1" in err.error
        assert "Traceback" in err.traceback and "run_cell" in err.traceback
        assert (tmp_path / "cells" / f"{err.cell_id}.error.json").exists()
    # a re-run retries only the failed cells
    again = run_sweep(grid, out=tmp_path, progress=False)
    assert again.manifest["runs"][-1]["ran"] == 2 and again.manifest["runs"][-1]["skipped"] == 2


def test_backends_give_the_same_results(tmp_path, monkeypatch):
    pytest.importorskip("distributed")
    grid = small_grid(links=False)
    serial = run_sweep(grid, backend="serial", progress=False)
    procs = run_sweep(grid, backend="processes", workers=2, progress=False)
    tmp = tmp_path / "tmp"  # the temporary folder of this process and its children, to see what the run leaves
    tmp.mkdir()
    monkeypatch.setenv("TMPDIR", str(tmp))
    monkeypatch.setattr(tempfile, "tempdir", str(tmp))
    dask = run_sweep(grid, backend="dask", workers=2, progress=False)
    assert os.listdir(tmp) == []  # its LocalCluster's scratch space went with it
    assert_same(serial, procs)
    assert_same(serial, dask)
    assert procs.summary.worker.nunique() >= 1 and (dask.summary.worker != serial.summary.worker).all()


def test_dask_backend_accepts_a_client(tmp_path):
    distributed = pytest.importorskip("distributed")
    import dask

    # in-process workers talk over inproc://: no port is opened at all (their scratch space in tmp_path)
    with dask.config.set({"temporary-directory": str(tmp_path)}), \
            distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=False,
                                     dashboard_address=None) as cluster, distributed.Client(cluster) as client:
        res = run_sweep(small_grid(grid=dict(policy=["fifo"], seed=[0, 1])), client=client, progress=False)
        assert len(res.summary) == 2 and client.status == "running"  # ours stays open


KILL_SCRIPT = """
import json, sys
from netlab.sweep import run_sweep
run_sweep(json.loads(sys.argv[1]), out=sys.argv[2], backend="serial", progress=False)
"""


def test_resume_after_sigkill_gives_every_cell_exactly_once(tmp_path):
    grid = small_grid(max_jobs=200, links={"seed": 0},
                      grid=dict(policy=["fifo", "sjf", "tiresias"], oversub=[2, 4], seed=[0, 1, 2, 3]))
    total = len(expand(grid))
    out = tmp_path / "store"
    proc = subprocess.Popen([sys.executable, "-c", KILL_SCRIPT, json.dumps(grid), str(out)])
    cells = out / "cells"
    deadline = time.monotonic() + 900  # bounds a hang only: numba may compile on first use, slow under load
    try:  # poll the store, kill as soon as a few cells are in (no sleeping to hide races)
        while len(list(cells.glob("*.summary.json"))) < 3:
            assert proc.poll() is None, "the sweep ended before it could be killed"
            assert time.monotonic() < deadline, "no cell finished in time"
            time.sleep(0.005)
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.wait()
    assert proc.returncode == -signal.SIGKILL
    done_before = len(list(cells.glob("*.summary.json")))
    assert 3 <= done_before < total
    (cells / ".0123456789ab.jobs.parquet.a1b2c3.tmp").write_bytes(b"partial")  # as a kill mid-write leaves it
    res = run_sweep(grid, out=out, progress=False)
    run = res.manifest["runs"][-1]
    assert run["ran"] == total - done_before and run["skipped"] == done_before
    assert res.manifest["runs"][0]["ended_at"] is None  # the killed run never ended
    assert len(res.summary) == total and res.summary.cell_id.is_unique and res.errors.empty
    assert sorted(res.summary.cell_id) == sorted(c.id for c in expand(grid))
    assert (res.jobs.groupby("cell_id").size() == 200).all()
    assert not list(cells.glob(".*.tmp")) and not list(out.glob(".*.tmp"))
    assert len(list(cells.glob("*.summary.json"))) == len(list(cells.glob("*.jobs.parquet"))) == total
    # and the resumed sweep equals one run in a single go
    assert_same(res, run_sweep(grid, progress=False))


def test_background_traffic_slows_cross_rack_jobs_and_keeps_old_cell_ids():
    from netlab.sweep import run_sweep
    from netlab.sweep.grid import expand

    base = dict(trace="synthetic,jobs=30,load=1.0,gpus=0+0+0+0+1,cluster_gpus=16", max_jobs=None,
                topology="leafspine,racks=2,hosts_per_rack=2,gpus_per_host=4,oversub=2,spines=1",
                grid=dict(policy="fifo", placement="first-fit", seed=0))
    plain = expand(base)
    assert "background" not in plain[0].params  # optional keys stay out of ids unless set
    with_bg = dict(base, grid=dict(base["grid"], background=[0.0, 0.5]))
    res = run_sweep(with_bg, backend="serial", progress=False)
    s = res.summary.set_index("background")
    assert s.loc[0.5, "avg_jct_s"] > s.loc[0.0, "avg_jct_s"]
