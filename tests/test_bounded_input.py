"""Memory bounded by the input's size where input arrives (issue 30 item 4): YAML, grids, traces.

A hostile input of a few hundred bytes must be refused in about the memory and
time of any other refused input: each case runs in a child process whose peak
RSS (``wait4``) is compared with the same command refusing a small, plainly
wrong input, so the comparison does not depend on what netlab imports.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from netlab.cli import app
from netlab.errors import InputError
from netlab.sweep import GridError, expand, read_grid, run_sweep

TOPO = "leafspine,racks=2,hosts_per_rack=2,gpus_per_host=8,host_gbps=100,spines=2"
runner = CliRunner()


def run_measured(argv: list[str], timeout_s: float = 120.0, **kw) -> tuple[int, str, float, float]:
    """(exit status, stderr, peak RSS in MB, seconds) of a child process; killed after ``timeout_s``."""
    t0 = time.monotonic()
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, **kw)
    err_chunks = []
    import threading

    reader = threading.Thread(target=lambda: err_chunks.append(proc.stderr.read()), daemon=True)
    reader.start()
    while True:
        pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
        if pid:
            break
        if time.monotonic() - t0 > timeout_s:
            proc.kill()
            pid, status, usage = os.wait4(proc.pid, 0)
            break
        time.sleep(0.02)
    proc.returncode = os.waitstatus_to_exitcode(status)
    reader.join(timeout=10)
    return proc.returncode, "".join(err_chunks), usage.ru_maxrss / 1024, time.monotonic() - t0


def alias_bomb(levels: int, key: str = "policy") -> str:
    """A grid whose ``key`` axis is 10**levels leaves through nested aliases, in a few hundred bytes."""
    lines = ['a0: &a0 ["x","x","x","x","x","x","x","x","x","x"]']
    lines += [f"a{i}: &a{i} [" + ",".join([f"*a{i - 1}"] * 10) + "]" for i in range(1, levels + 1)]
    return ("name: bomb\ntrace: philly-sample\nlinks:\n  seed: 0\n" + "\n".join("  " + x for x in lines)
            + f"\ngrid:\n  {key}: *a{levels}\n")


SWEEP = "import sys; from netlab.sweep import run_sweep; run_sweep(sys.argv[1], out=sys.argv[2], progress=False)"


def _sweep_refusal(tmp_path, name: str, text: str) -> tuple[int, str, float, float]:
    path = tmp_path / name
    path.write_text(text)
    return run_measured([sys.executable, "-c", SWEEP, str(path), str(tmp_path / f"out-{name}")])


# ---------------------------------------------------------------------------------------------------- YAML

def test_a_grid_alias_bomb_is_refused_at_once_in_bounded_memory(tmp_path):
    text = alias_bomb(8)  # 10**8 leaves in about 500 bytes (the 9 levels took 35 s and 3.3 GB)
    base_rc, base_err, base_mb, _ = _sweep_refusal(tmp_path, "plain.yaml", "name: x\ngrid:\n  polcy: [fifo]\n")
    assert base_rc == 1 and "GridError" in base_err, base_err
    rc, err, mb, seconds = _sweep_refusal(tmp_path, "bomb.yaml", text)
    assert rc == 1 and "GridError" in err and "bomb.yaml" in err and "aliases expand it to" in err, err[-2000:]
    assert mb <= base_mb + 20 + 2 * len(text) / 2**20, f"peak RSS {mb:.0f} MB, a plain refusal {base_mb:.0f} MB"
    assert seconds < 60


def test_aliases_within_bounds_still_load(tmp_path):
    doc = read_grid("base: &b [fifo, sjf]\nname: ok\ngrid:\n  policy: *b\n")
    assert doc["grid"]["policy"] == ["fifo", "sjf"]


def test_a_recursive_alias_is_refused_naming_the_line():
    with pytest.raises(GridError, match="line 2: an alias refers to a node that contains it"):
        read_grid("name: x\nloop: &a [1, *a]\n")


@pytest.mark.parametrize("kind", ["grid", "topology", "inventory", "links"])
def test_duplicate_keys_are_refused_naming_both_lines(tmp_path, kind):
    from netlab.integrations.slurm_topology import read_links
    from netlab.testbed.inventory import load_inventory
    from netlab.topology import load_topology

    texts = {
        "grid": ("name: dup\ntrace: philly-sample\ngrid:\n  policy: [fifo]\n  seed: [0]\n  policy: [sjf]\n",
                 read_grid, 6, 4),
        "topology": ("builder: leafspine\nparams:\n  racks: 2\n  hosts_per_rack: 2\n  racks: 4\n",
                     load_topology, 5, 3),
        "inventory": ("all:\n  hosts:\n    h1: {ansible_host: 10.0.0.1}\n  hosts: {}\n", load_inventory, 4, 2),
        "links": ("host_gbps: 100\noversub: 2\nhost_gbps: 25\n", read_links, 3, 1),
    }
    text, load, line, first = texts[kind]
    path = tmp_path / f"{kind}.yaml"
    path.write_text(text)
    with pytest.raises(Exception) as info:
        load(path)
    msg = str(info.value)
    assert str(path) in msg and f"line {line}" in msg and f"first at line {first}" in msg and "duplicate key" in msg
    assert isinstance(info.value, (InputError, RuntimeError))


def test_a_topology_alias_bomb_is_refused(tmp_path):
    from netlab.topology import TopologyError, load_topology

    lines = ['a0: &a0 [{name: h, gpus: 1}, {name: h, gpus: 1}, {name: h, gpus: 1}]']
    lines += [f"a{i}: &a{i} [" + ",".join([f"*a{i - 1}"] * 10) + "]" for i in range(1, 7)]
    path = tmp_path / "topo.yaml"
    path.write_text("\n".join(lines) + "\nhosts: *a6\nlinks: []\n")
    t0 = time.monotonic()
    with pytest.raises(TopologyError, match="aliases expand it to"):
        load_topology(path)
    assert time.monotonic() - t0 < 10


# ---------------------------------------------------------------------------------------------- the grid cap

def test_a_grid_over_the_cell_cap_is_refused_naming_the_count_and_how_to_raise_it(tmp_path, monkeypatch):
    # 10 axes of 5 values: 9.8 million cells in a few hundred bytes; refused before one cell is made
    doc = dict(name="huge", trace="philly-sample",
               grid=dict(seed=list(range(5)), base_seed=list(range(5)), checkpoint_s=[1, 2, 3, 4, 5],
                         restore_s=[1, 2, 3, 4, 5], oversub=[1, 2, 3, 4, 5], max_jobs=[1, 2, 3, 4, 5],
                         background=[0, 0.1, 0.2, 0.3, 0.4], policy=["fifo", "sjf", "tiresias", "fjf", "themis"],
                         network=["fair", "ideal", "tcp", "phase", "fair"], backfill=[True, False, None, True, False]))
    path = tmp_path / "huge.yaml"
    path.write_text(json.dumps(doc))
    t0 = time.monotonic()
    with pytest.raises(GridError) as info:
        run_sweep(path, out=tmp_path / "out", progress=False)
    msg = str(info.value)
    assert "9,765,625 cells" in msg and "NETLAB_MAX_CELLS" in msg and "max_cells" in msg and str(path) in msg, msg
    assert time.monotonic() - t0 < 5 and not (tmp_path / "out").exists()
    small = dict(name="s", trace="philly-sample", max_jobs=5, topology=TOPO, grid=dict(policy=["fifo", "sjf"]))
    monkeypatch.setenv("NETLAB_MAX_CELLS", "1")
    with pytest.raises(GridError, match="2 cells, over the limit of 1"):
        expand(small)
    assert len(expand(small, max_cells=2)) == 2  # raised for one call
    monkeypatch.setenv("NETLAB_MAX_CELLS", "2")
    assert len(expand(small)) == 2  # raised for the process


def test_the_cell_count_is_printed_before_a_sweep_starts(tmp_path):
    doc = dict(name="s", trace="philly-sample", max_jobs=5, topology=TOPO, grid=dict(policy=["fifo", "sjf"]))
    path = tmp_path / "grid.yaml"
    path.write_text(json.dumps(doc))
    res = runner.invoke(app, ["sweep", str(path), "--out", str(tmp_path / "out")])
    assert res.exit_code == 0, res.output
    first = next(line for line in res.output.splitlines() if line.strip())
    assert first.startswith("sweep: 2 cells") and "2 to run" in first, res.output
