"""Every OSError the command line meets is one ``error:`` line naming the path (issue 30 item 5).

A full disk (a real small tmpfs when root, else the error injected where the
store writes), a folder it may not write, a symlink loop: exit status 2, one
line, no traceback, no temporary file left, the store's lock released. And
``--out`` inside the installed package is refused before anything runs.
"""

from __future__ import annotations

import errno
import json
import os
import subprocess
from pathlib import Path

import pytest
from typer.testing import CliRunner

import netlab
from netlab.cli import app

TOPO = "leafspine,racks=2,hosts_per_rack=2,gpus_per_host=8,host_gbps=100,spines=2"
runner = CliRunner()


def _grid(tmp_path) -> Path:
    path = tmp_path / "grid.yaml"
    path.write_text(json.dumps(dict(name="g", trace="philly-sample", max_jobs=20, topology=TOPO,
                                    grid=dict(policy=["fifo", "sjf"], seed=[0]))))
    return path


def _one_error_line(res, *needles):
    out = res.output.strip()
    assert res.exit_code == 2, res.output
    assert out.startswith("error: ") and "Traceback" not in out and len(out.splitlines()) == 1, res.output
    for needle in needles:
        assert needle in out, (needle, out)


def _no_temporary_files(folder: Path):
    assert not [p for p in folder.rglob("*") if p.name.endswith(".tmp")]


@pytest.mark.parametrize("code, words", [(errno.ENOSPC, "no space left"), (errno.EACCES, "permission denied"),
                                         (errno.EDQUOT, "quota")])
def test_a_write_error_in_a_sweep_is_one_line_naming_the_file(tmp_path, monkeypatch, code, words):
    real = Path.write_bytes
    calls = []

    def failing(self, data):  # the second cell file fails as a full disk would: no file name in the error
        calls.append(self)
        if len(calls) == 2:
            raise OSError(code, os.strerror(code))
        return real(self, data)

    monkeypatch.setattr(Path, "write_bytes", failing)
    out = tmp_path / "store"
    res = runner.invoke(app, ["sweep", str(_grid(tmp_path)), "--out", str(out), "--quiet"])
    target = calls[1].name.split(".", 2)[1]  # .<cell>.jobs.parquet.<random>.tmp -> the cell id
    _one_error_line(res, str(out / "cells"), target, words)
    _no_temporary_files(out)
    assert not (out / ".lock.holder").exists()  # released: a re-run resumes
    monkeypatch.setattr(Path, "write_bytes", real)
    res = runner.invoke(app, ["sweep", str(_grid(tmp_path)), "--out", str(out), "--quiet"])
    assert res.exit_code == 0, res.output


def test_a_symlink_loop_as_out_is_one_line(tmp_path):
    loop = tmp_path / "loop"
    loop.symlink_to(loop)
    res = runner.invoke(app, ["sweep", str(_grid(tmp_path)), "--out", str(loop), "--quiet"])
    _one_error_line(res, str(loop))
    res = runner.invoke(app, ["simulate", "--quiet", "--max-jobs", "5", "--out", str(loop / "sub")])
    _one_error_line(res, str(loop))


@pytest.fixture
def small_disk(tmp_path):
    """A 16 KiB tmpfs (root only; four pages: a sweep's first files fit, its cells do not), unmounted afterwards."""
    if os.geteuid() != 0:
        pytest.skip("a real full disk needs root (mount -t tmpfs); the injected errors above run anyway")
    where = tmp_path / "disk"
    where.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=16k", "tmpfs", str(where)], capture_output=True,
                          text=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.strip()}")
    try:
        yield where
    finally:
        subprocess.run(["umount", str(where)], check=True)


def test_a_full_disk_is_one_line_for_sweep_and_simulate(tmp_path, small_disk):
    out = small_disk / "store"
    res = runner.invoke(app, ["sweep", str(_grid(tmp_path)), "--out", str(out), "--quiet"])
    _one_error_line(res, str(out), "no space left")
    _no_temporary_files(out)
    res = runner.invoke(app, ["simulate", "--quiet", "--max-jobs", "200", "--out", str(small_disk / "sim")])
    _one_error_line(res, str(small_disk / "sim"), "no space left")
    _no_temporary_files(small_disk)


def test_out_inside_the_installed_package_is_refused(tmp_path):
    inside = Path(netlab.__file__).resolve().parent / "results-here"
    for argv in (["simulate", "--quiet", "--max-jobs", "5", "--out", str(inside)],
                 ["sweep", str(_grid(tmp_path)), "--out", str(inside), "--quiet"],
                 ["demo", "--out", str(inside / "demo")]):
        res = runner.invoke(app, argv)
        _one_error_line(res, str(inside), "inside the installed netlab package")
        assert not inside.exists()
