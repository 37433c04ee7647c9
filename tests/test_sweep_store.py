"""The sweep store under misuse (issue 14): two runs on one store, fsync, corrupt cells, bad grids.

Every test here failed on the code before the fix (see the commit messages).
"""

import json
import os
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest
import yaml
from typer.testing import CliRunner

from netlab.cli import app
from netlab.errors import InputError, UnknownNameError
from netlab.fileio import atomic_write
from netlab.sweep import GridError, StoreError, expand, load_sweep, run_sweep

TOPO = "leafspine,racks=2,hosts_per_rack=2,gpus_per_host=8,host_gbps=100,spines=2"
runner = CliRunner()


def small_grid(**over):
    doc = dict(name="small", trace="philly-sample", max_jobs=30, topology=TOPO, links={"seed": 0},
               grid=dict(policy=["fifo", "tiresias"], oversub=[2, 4], seed=[0]))
    doc.update(over)
    return doc


def model_columns(df):
    return df[[c for c in df.columns if c not in ("wall_s", "cell_s", "worker")]]


def _wait_for(predicate, proc, what, timeout=900):
    """Poll (no fixed sleep hides a race): until ``predicate()``, failing if ``proc`` ends first. The timeout
    only bounds a hang: a first cell can take minutes on a loaded machine when numba compiles on first use."""
    deadline = time.monotonic() + timeout
    while not predicate():
        assert proc.poll() is None, f"the other process ended before {what}: {proc.communicate()}"
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.005)


# ---------------------------------------------------------------------------------------------- 1. the lock

SWEEP_SCRIPT = """
import json, sys
from netlab.sweep import run_sweep
run_sweep(json.loads(sys.argv[1]), out=sys.argv[2], backend="serial", progress=False)
"""

HOLD_SCRIPT = """
import sys
from netlab.sweep import Store
with Store(sys.argv[1]).lock():
    print("held", flush=True)
    sys.stdin.read()  # until the test closes our stdin
"""


def test_second_run_on_a_busy_store_fails_at_once_and_the_first_finishes(tmp_path):
    grid = small_grid(max_jobs=100, grid=dict(policy=["fifo", "sjf", "tiresias"], oversub=[2, 4], seed=[0, 1]))
    total = len(expand(grid))
    out = tmp_path / "store"
    first = subprocess.Popen([sys.executable, "-c", SWEEP_SCRIPT, json.dumps(grid), str(out)],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        _wait_for(lambda: len(list((out / "cells").glob("*.summary.json"))) >= 1, first, "its first cell")
        # stopped mid-sweep (holding the store, however fast or slow this machine is) while two others try it
        os.kill(first.pid, signal.SIGSTOP)
        try:
            assert len(list((out / "cells").glob("*.summary.json"))) < total
            # the same grid and another grid: both refused while the first runs, naming the store and its pid
            for other in (grid, small_grid()):
                with pytest.raises(StoreError, match=f"{out}.*in use by pid {first.pid}"):
                    run_sweep(other, out=out, progress=False)
            res = runner.invoke(app, ["sweep", str(_grid_file(tmp_path, small_grid())), "--out", str(out),
                                      "--quiet"])
            assert res.exit_code == 2 and f"pid {first.pid}" in res.output and str(out) in res.output, res.output
        finally:
            os.kill(first.pid, signal.SIGCONT)
        stdout, stderr = first.communicate(timeout=600)
    finally:
        if first.poll() is None:
            first.kill()
            first.wait()
    assert first.returncode == 0, stderr  # the second runs never cleaned away its in-flight files
    loaded = load_sweep(out)
    assert len(loaded.summary) == total and loaded.summary.cell_id.is_unique and loaded.errors.empty
    assert len(loaded.manifest["runs"]) == 1 and loaded.manifest["runs"][0]["ran"] == total
    assert yaml.safe_load((out / "grid.yaml").read_text()) == grid
    assert len(list((out / "cells").glob("*.summary.json"))) == total
    assert not (out / ".lock.holder").exists()  # released
    assert run_sweep(grid, out=out, progress=False).manifest["runs"][-1]["ran"] == 0  # and free again


def test_a_held_store_is_left_untouched(tmp_path):
    out = tmp_path / "store"
    (out / "cells").mkdir(parents=True)
    inflight = out / "cells" / ".0123456789ab.jobs.parquet.k3x9q1.tmp"  # the holder's file being written
    inflight.write_bytes(b"half")
    holder = subprocess.Popen([sys.executable, "-c", HOLD_SCRIPT, str(out)], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        before = sorted(p.name for p in out.rglob("*"))
        res = runner.invoke(app, ["sweep", str(_grid_file(tmp_path, small_grid())), "--out", str(out), "--quiet"])
        assert res.exit_code == 2, res.output
        assert f"{out}: the sweep store is in use by pid {holder.pid}" in " ".join(res.output.split())
        assert sorted(p.name for p in out.rglob("*")) == before and inflight.read_bytes() == b"half"
        assert not (out / "manifest.json").exists()
    finally:
        holder.stdin.close()
        holder.wait(timeout=60)
    assert holder.returncode == 0


# ------------------------------------------------------------------------------------------------ 2. fsync

def test_atomic_write_fsyncs_the_file_and_its_directory(tmp_path, monkeypatch):
    synced = []
    real = os.fsync

    def spy(fd):
        st = os.fstat(fd)
        synced.append(("dir" if stat.S_ISDIR(st.st_mode) else "file", st.st_ino))
        return real(fd)

    monkeypatch.setattr(os, "fsync", spy)
    target = tmp_path / "x.json"
    atomic_write(target, lambda p: Path(p).write_text("{}"))
    assert target.read_text() == "{}"
    assert ("file", target.stat().st_ino) in synced  # the data, before the rename
    assert ("dir", tmp_path.stat().st_ino) in synced  # and the rename
    assert [kind for kind, _ in synced] == ["file", "dir"]
    assert not list(tmp_path.glob(".*.tmp"))


# ---------------------------------------------------------------------------------------- 3. corrupt cells

def _corrupt_two(out: Path) -> list[str]:
    cells = sorted(p.name.split(".")[0] for p in (out / "cells").glob("*.summary.json"))
    (out / "cells" / f"{cells[0]}.jobs.parquet").write_bytes(b"not a parquet file at all")
    summary = out / "cells" / f"{cells[1]}.summary.json"
    summary.write_text(summary.read_text()[:20])  # cut short
    return cells[:2]


def test_corrupt_cell_is_named_by_report_and_set_aside_and_recomputed_on_resume(tmp_path):
    out = tmp_path / "s"
    fresh = run_sweep(small_grid(), out=out, progress=False)
    bad = _corrupt_two(out)
    either = "|".join(bad)  # which of the two is read first follows the grid's order, not the ids
    with pytest.raises(StoreError, match=f"cell ({either}) is corrupt: ({either})\\.(jobs\\.parquet|summary\\.json)"):
        load_sweep(out)
    res = runner.invoke(app, ["report", str(out)])
    assert res.exit_code == 2 and "is corrupt" in res.output and "--repair" in res.output, res.output
    assert "Traceback" not in res.output
    with pytest.warns(UserWarning, match="corrupt"):
        again = run_sweep(small_grid(), out=out, progress=False)
    run = again.manifest["runs"][-1]
    assert run["ran"] == 2 and run["skipped"] == 2 and set(run["set_aside"]["cells"]) == set(bad)
    pd.testing.assert_frame_equal(model_columns(again.summary), model_columns(fresh.summary))
    pd.testing.assert_frame_equal(again.jobs, fresh.jobs)
    moved = Path(run["set_aside"]["moved_to"])
    assert moved.parent == out / "corrupt"  # renamed, not deleted: the bad bytes are still there
    assert (moved / f"{bad[0]}.jobs.parquet").read_bytes() == b"not a parquet file at all"
    assert (moved / f"{bad[1]}.summary.json").exists()
    assert runner.invoke(app, ["report", str(out)]).exit_code == 0


def test_cells_computed_by_other_code_are_set_aside_and_recomputed_on_resume(tmp_path, monkeypatch):
    # A store resumed after netlab's code changed (a model fix between two runs) must not keep the old
    # cells' numbers beside new ones: they are set aside (renamed, not deleted) and computed again.
    from netlab.sweep import store as store_module

    out = tmp_path / "s"
    fresh = run_sweep(small_grid(), out=out, progress=False)
    assert fresh.manifest["code_hash"] == store_module.code_hash()
    same = run_sweep(small_grid(), out=out, progress=False)  # same code: nothing recomputed, nothing moved
    assert same.manifest["runs"][-1]["ran"] == 0 and not (out / "stale").exists()
    store_module.code_hash.cache_clear()
    monkeypatch.setattr(store_module, "code_hash", lambda: "0123456789abcdef")
    with pytest.warns(UserWarning, match="4 finished cell.*other netlab code"):
        again = run_sweep(small_grid(), out=out, progress=False)
    run = again.manifest["runs"][-1]
    assert run["ran"] == 4 and run["set_aside_stale"]["cells"] == 4
    assert run["previous_code_hash"] == fresh.manifest["code_hash"]
    assert again.manifest["code_hash"] == "0123456789abcdef"
    moved = Path(run["set_aside_stale"]["moved_to"])
    assert moved.parent == out / "stale" and len(list(moved.glob("*.summary.json"))) == 4
    pd.testing.assert_frame_equal(model_columns(again.summary), model_columns(fresh.summary))


def test_repair_names_cells_computed_by_other_code(tmp_path, monkeypatch):
    from netlab.sweep import store as store_module

    out = tmp_path / "s"
    run_sweep(small_grid(), out=out, progress=False)
    bad = _corrupt_two(out)
    store_module.code_hash.cache_clear()
    monkeypatch.setattr(store_module, "code_hash", lambda: "fedcba9876543210")
    res = runner.invoke(app, ["results", str(out), "--repair"])
    assert res.exit_code == 0, res.output
    # every finished cell, the two corrupt ones among them, was computed by other code: all four set aside as
    # stale (none left to call corrupt) and recomputed
    assert "set aside 4 cell(s) computed by other netlab code" in res.output, res.output
    assert "corrupt cell(s)" not in res.output and "recomputed 4 cell(s); 0 failed" in res.output, res.output
    stale = next((out / "stale").iterdir())
    assert (stale / f"{bad[0]}.jobs.parquet").read_bytes() == b"not a parquet file at all"  # kept, not deleted


def test_results_check_and_repair(tmp_path):
    out = tmp_path / "s"
    fresh = run_sweep(small_grid(), out=out, progress=False)
    res = runner.invoke(app, ["results", str(out), "--check"])
    assert res.exit_code == 0 and "4 stored cells read back, 0 corrupt" in res.output, res.output
    bad = _corrupt_two(out)
    res = runner.invoke(app, ["results", str(out), "--check"])
    assert res.exit_code == 1, res.output
    assert all(f"corrupt cell {cid}" in res.output for cid in bad) and "2 corrupt" in res.output
    assert len(list((out / "cells").glob("*.summary.json"))) == 4 and not (out / "corrupt").exists()  # unchanged
    res = runner.invoke(app, ["results", str(out), "--repair"])
    assert res.exit_code == 0 and "set aside 2 corrupt cell(s)" in res.output and "recomputed 2" in res.output, \
        res.output
    assert runner.invoke(app, ["results", str(out), "--check"]).exit_code == 0
    pd.testing.assert_frame_equal(model_columns(load_sweep(out).summary), model_columns(fresh.summary))
    assert len(list((out / "corrupt").rglob("*"))) >= 3  # one folder, the two cells' files


# ------------------------------------------------------------------------------------------ 4. bad grids

def _grid_file(folder: Path, doc: dict) -> Path:
    path = folder / "grid.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


BAD_GRIDS = {
    "policy-number": (dict(grid=dict(policy=[5])), "'policy'", "fifo, fjf, priority, sjf"),
    "policy-misspelt": (dict(grid=dict(policy=["fifo", "tiresas"])), "'policy'", "tiresias"),
    "placement": (dict(grid=dict(placement=["consolidatd"])), "'placement'", "consolidated"),
    "preemption": (dict(grid=dict(preemption=["nope"])), "'preemption'", "or null"),
    "network": (dict(grid=dict(network=["fiar"])), "'network'", "fair"),
    "max_jobs-text": (dict(max_jobs="ten"), "'max_jobs'", "an integer >= 1"),
    "max_jobs-zero": (dict(max_jobs=0), "'max_jobs'", "an integer >= 1"),
    "null-axis": (dict(grid=dict(policy=None)), "'policy'", "give a value"),
    "seed-text": (dict(grid=dict(seed=["abc"])), "'seed'", "an integer >= 0"),
    "seed-fraction": (dict(grid=dict(seed=1.5)), "'seed'", "an integer >= 0"),
    "seed-negative": (dict(grid=dict(seed=[0, -1])), "'seed'", "an integer >= 0"),
    "oversub": (dict(grid=dict(oversub=["x"])), "'oversub'", "a finite number > 0"),
    "checkpoint": (dict(checkpoint_s=float("nan")), "'checkpoint_s'", "finite"),
    "background": (dict(grid=dict(background=[1.5])), "'background'", "< 1"),
    "topology-key": (dict(topology="leafspine,rack=2"), "'topology'", "racks"),
    "topology-kind": (dict(topology="leafspin,racks=2"), "'topology'", "leafspine"),
    "trace-kind": (dict(trace="phily-sample"), "'trace'", "philly-sample"),
    "trace-file": (dict(trace="no/such/file.csv"), "'trace'", "not found"),
    "links": (dict(links="yes"), "'links'", "true, false or a mapping"),
    "unknown-key": (dict(grid=dict(polcy=["fifo"])), "unknown grid parameter", "policy"),
}
#: bad grids whose problem is a name that is not registered
UNKNOWN_NAMES = ("policy-number", "policy-misspelt", "placement", "preemption", "network")


@pytest.mark.parametrize("name", sorted(BAD_GRIDS))
def test_bad_grid_is_refused_before_anything_is_written(tmp_path, name):
    over, key, allowed = BAD_GRIDS[name]
    doc = small_grid(**{k: v for k, v in over.items() if k != "grid"})
    if "grid" in over:
        doc["grid"] = dict(doc["grid"], **over["grid"])
    path = _grid_file(tmp_path, doc)
    out = tmp_path / "out"
    with pytest.raises(InputError) as info:  # a GridError, or an UnknownNameError for an unknown name
        run_sweep(path, out=out, progress=False)
    assert isinstance(info.value, UnknownNameError if name in UNKNOWN_NAMES else GridError), type(info.value)
    message = str(info.value)
    assert str(path) in message and key in message and allowed in message, message
    res = runner.invoke(app, ["sweep", str(path), "--out", str(out), "--quiet"])
    assert res.exit_code == 2 and res.output.startswith("error: ") and "Traceback" not in res.output, res.output
    assert not out.exists()  # nothing written: the corrected grid is not "a different sweep"
    fixed = _grid_file(tmp_path, small_grid(grid=dict(policy=["fifo"], seed=[0])))
    assert run_sweep(fixed, out=out, progress=False).errors.empty


# ---------------------------------------------------------------------------------- the grid parser, fuzzed

hypothesis = pytest.importorskip("hypothesis")
st = hypothesis.strategies

_KEYS = ["trace", "max_jobs", "topology", "oversub", "policy", "placement", "preemption", "network", "seed",
         "base_seed", "checkpoint_s", "restore_s", "backfill", "background", "batch", "name", "links", "pairs"]
_SCALARS = st.one_of(st.none(), st.booleans(), st.integers(-3, 10), st.floats(allow_nan=True),
                     st.sampled_from(["fifo", "tiresias", "fair", "ideal", "consolidated", "philly-sample", TOPO,
                                      "leafspine,racks=1", "synthetic,jobs=5", "x.csv", "a.yaml", "", "abc"]),
                     st.text(max_size=12))
_VALUES = st.recursive(_SCALARS, lambda inner: st.one_of(st.lists(inner, max_size=3),
                                                         st.dictionaries(st.sampled_from(_KEYS), inner,
                                                                         max_size=3)), max_leaves=6)


@hypothesis.settings(max_examples=150, deadline=None, suppress_health_check=list(hypothesis.HealthCheck))
@hypothesis.given(top=st.dictionaries(st.one_of(st.sampled_from(_KEYS), st.integers(0, 3)), _VALUES, max_size=4),
                  axes=st.one_of(st.none(), _VALUES,
                                 st.dictionaries(st.one_of(st.sampled_from(_KEYS), st.integers(0, 3)), _VALUES,
                                                 max_size=3)))
def test_any_grid_expands_or_raises_a_grid_error(top, axes):
    doc = dict(top, grid=axes)
    try:
        cells = expand(doc, "grid file 'fuzz.yaml'")
    except InputError as exc:  # a GridError, or an UnknownNameError
        assert "fuzz.yaml" in str(exc)
        return
    assert cells and all(isinstance(c.params["policy"], str) for c in cells)
