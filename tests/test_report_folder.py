"""A report folder is replaced whole: killed at any moment, `netlab report` leaves the old report or the new one,
never a mix; what a killed build leaves behind is removed by the next one."""

import base64
import json
import os
import re
import signal
import subprocess
import sys
import time

import pandas as pd
import pytest

from netlab.report.folder import MARKER, ReportFolderError, check_destination, replace_folder, stale_staging
from netlab.sweep import run_sweep

GRID = dict(name="folder-test", trace="philly-sample", max_jobs=30,
            topology="leafspine,racks=2,hosts_per_rack=2,gpus_per_host=8,host_gbps=100,spines=2",
            grid=dict(policy=["fifo", "sjf"], seed=[0, 1]))
BASELINES = ("fifo+consolidated", "sjf+consolidated")


def _write(folder, tag):
    (folder / "a.txt").write_text(tag)
    (folder / "b.txt").write_text(tag)
    (folder / MARKER).write_text(json.dumps({"tag": tag}))


def test_a_folder_is_replaced_whole_and_nothing_is_left_beside_it(tmp_path):
    dest = tmp_path / "report"
    replace_folder(dest, lambda f: _write(f, "one"))
    assert (dest / "a.txt").read_text() == "one"
    replace_folder(dest, lambda f: _write(f, "two"))
    assert {p.name: p.read_text() for p in dest.iterdir()} == {"a.txt": "two", "b.txt": "two",
                                                               MARKER: json.dumps({"tag": "two"})}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["report"]  # no staging or old folder left


def test_a_failing_build_leaves_the_old_folder_and_no_staging(tmp_path):
    dest = tmp_path / "report"
    replace_folder(dest, lambda f: _write(f, "old"))

    def fail(folder):
        (folder / "a.txt").write_text("half")
        raise RuntimeError("disk full")

    with pytest.raises(RuntimeError, match="disk full"):
        replace_folder(dest, fail)
    assert (dest / "a.txt").read_text() == "old" and (dest / "b.txt").read_text() == "old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["report"]


def test_only_an_empty_folder_or_a_report_is_replaced(tmp_path):
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "thesis.tex").write_text("years of work")
    with pytest.raises(ReportFolderError, match="is not a netlab report"):
        replace_folder(mine, lambda f: _write(f, "x"))
    assert (mine / "thesis.tex").read_text() == "years of work"
    (tmp_path / "file").write_text("x")
    with pytest.raises(ReportFolderError, match="is not a folder"):
        check_destination(tmp_path / "file")
    (tmp_path / "link").symlink_to(mine)
    with pytest.raises(ReportFolderError, match="is not a folder"):
        check_destination(tmp_path / "link")
    empty = tmp_path / "empty"
    empty.mkdir()
    replace_folder(empty, lambda f: _write(f, "x"))
    assert (empty / "a.txt").read_text() == "x"


def test_staging_of_a_killed_build_is_removed_next_time_a_live_one_is_kept(tmp_path):
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    gone = tmp_path / f".report.abc123.{int(dead.stdout)}.tmp"
    live = tmp_path / f".report.def456.{os.getpid()}.tmp"
    other = tmp_path / f".notes.abc123.{int(dead.stdout)}.tmp"  # another folder's: not ours to remove
    for p in (gone, live, other):
        p.mkdir()
    assert stale_staging(tmp_path, "report") == [gone]
    replace_folder(tmp_path / "report", lambda f: _write(f, "x"))
    assert not gone.exists() and live.exists() and other.exists()


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    out = tmp_path_factory.mktemp("store")
    run_sweep(GRID, out=out, progress=False)
    return out


def _report(store, baseline):
    return [sys.executable, "-m", "netlab.cli", "report", str(store), "--baseline", baseline]


def _check_whole(folder) -> str:
    """The folder is one report: its files, its page and its CSV all say the same baseline; returns it."""
    meta = json.loads((folder / MARKER).read_text())
    names = {p.name for p in folder.iterdir()}
    assert names == {"report.html", MARKER, "comparison.csv", "summary.csv", "cells.csv",
                     *(f"{f}.png" for f in meta["figures"])}, names
    page = (folder / "report.html").read_text()
    assert meta["answer"] in page and f"against {meta['baseline']}" in page
    assert set(pd.read_csv(folder / "comparison.csv").baseline) == {meta["baseline"]}
    for name in meta["figures"]:  # the page embeds exactly the PNGs beside it
        m = re.search(rf'<figure id="{name}"><img alt="[^"]*" src="data:image/png;base64,([A-Za-z0-9+/=]+)"', page)
        assert base64.b64decode(m.group(1)) == (folder / f"{name}.png").read_bytes()
    return meta["baseline"]


@pytest.mark.slow
def test_killed_at_any_moment_the_report_is_the_old_one_or_the_new_one(store):
    folder = store / "report"
    env = dict(os.environ, MPLBACKEND="Agg")
    t0 = time.perf_counter()
    subprocess.run(_report(store, BASELINES[0]), env=env, check=True, capture_output=True)
    full_s = time.perf_counter() - t0
    assert _check_whole(folder) == BASELINES[0]
    for k, fraction in enumerate((0.3, 0.55, 0.7, 0.8, 0.88, 0.94, 0.98, 1.02)):
        before = _check_whole(folder)
        new = BASELINES[(BASELINES.index(before) + 1) % 2]
        proc = subprocess.Popen(_report(store, new), env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(full_s * fraction)
        proc.send_signal(signal.SIGKILL if k % 2 == 0 else signal.SIGTERM)
        proc.wait()
        after = _check_whole(folder)
        assert after in (before, new)
        if k % 2 == 1:  # SIGTERM: the build removed its own staging folder (a SIGTERM that comes before the
            # build starts stops the process before it cleans up a SIGKILLed build's leftovers: the next build does)
            assert not list(store.glob(f".report.*.{proc.pid}.tmp"))
    subprocess.run(_report(store, BASELINES[0]), env=env, check=True, capture_output=True)
    assert _check_whole(folder) == BASELINES[0]
    assert not list(store.glob(".report.*.tmp"))  # a killed build's leftovers removed by the next build


TERM_AT = """
import os, shutil, signal, sys, tempfile
from pathlib import Path
from netlab.report import folder

where, dest = sys.argv[1], Path(sys.argv[2])

def term_after(fn):
    def wrapped(*a, **kw):
        out = fn(*a, **kw)
        os.kill(os.getpid(), signal.SIGTERM)  # the signal arrives right after this step
        return out
    return wrapped

def build(staging):
    for i in range(20):
        (staging / f"f{i}.txt").write_text("x" * 1000)
    (staging / folder.MARKER).write_text("{}")

if where == "mkdtemp":  # the staging folder exists, the build has not started
    folder.tempfile.mkdtemp = term_after(tempfile.mkdtemp)
else:  # the new report is in; the old one, now under the staging name, is being removed
    real = shutil.rmtree
    def first_file_then_term(path, *a, **kw):
        files = sorted(Path(path).rglob("*.txt"))
        if files:
            files[0].unlink()
            os.kill(os.getpid(), signal.SIGTERM)
        return real(path, *a, **kw)
    folder.shutil.rmtree = first_file_then_term
folder.replace_folder(dest, build)
"""


@pytest.mark.parametrize("where", ["mkdtemp", "rmtree"])
def test_a_sigterm_at_either_end_of_a_build_leaves_no_staging_folder(tmp_path, where):
    dest = tmp_path / "report"
    dest.mkdir()
    (dest / MARKER).write_text("{}")
    (dest / "old.txt").write_text("old")
    done = subprocess.run([sys.executable, "-c", TERM_AT, where, str(dest)], capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 128 + signal.SIGTERM, (done.returncode, done.stderr[-2000:])  # stopped by the build
    assert not list(tmp_path.glob(".report.*.tmp")), list(tmp_path.iterdir())
    assert (dest / MARKER).is_file()  # the old report or the new one, whole
    assert (dest / "old.txt").exists() != (where == "rmtree")
