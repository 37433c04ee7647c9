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
from netlab.sweep import GridError, expand, read_grid

TOPO = "leafspine,racks=2,hosts_per_rack=2,gpus_per_host=8,host_gbps=100,spines=2"
runner = CliRunner()


#: runs a ``python -c CODE ...`` or ``python -m MODULE ...`` command line and, at exit, writes the peak RSS of
#: its own process image (VmHWM, kB) to the file named first. wait4's ru_maxrss cannot be used: Linux carries
#: the parent's high-water mark across fork and exec, so every child of a large test process would report it.
PEAK_WRAPPER = """
import atexit, runpy, sys
report, mode, target, *rest = sys.argv[1:]
def _peak():
    with open('/proc/self/status') as fh:
        kb = next(line.split()[1] for line in fh if line.startswith('VmHWM:'))
    with open(report, 'w') as fh:
        fh.write(kb)
atexit.register(_peak)
if mode == '-c':
    sys.argv = ['-c', *rest]
    exec(compile(target, '<string>', 'exec'), {'__name__': '__main__'})
else:
    sys.argv = [target, *rest]
    runpy.run_module(target, run_name='__main__', alter_sys=True)
"""


def _vm_hwm_kb(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/status") as fh:
            return next((int(line.split()[1]) for line in fh if line.startswith("VmHWM:")), 0)
    except OSError:  # it has just ended
        return 0


def run_measured(argv: list[str], timeout_s: float = 120.0, **kw) -> tuple[int, str, float, float]:
    """(exit status, stderr, peak RSS in MB, seconds) of ``python -c ...`` or ``python -m ...``; killed after
    ``timeout_s``. The peak is the child's own (:data:`PEAK_WRAPPER`), polled meanwhile in case it is killed."""
    import tempfile
    import threading

    assert argv[0] == sys.executable and argv[1] in ("-c", "-m"), argv
    fd, report = tempfile.mkstemp(prefix="netlab-peak-")
    os.close(fd)
    t0, peak_kb = time.monotonic(), 0
    try:
        proc = subprocess.Popen([sys.executable, "-c", PEAK_WRAPPER, report, *argv[1:]], stdout=subprocess.DEVNULL,
                                stderr=subprocess.PIPE, text=True, **kw)
        err_chunks = []
        reader = threading.Thread(target=lambda: err_chunks.append(proc.stderr.read()), daemon=True)
        reader.start()
        while proc.poll() is None:
            peak_kb = max(peak_kb, _vm_hwm_kb(proc.pid))
            if time.monotonic() - t0 > timeout_s:
                proc.kill()
                proc.wait()
                break
            time.sleep(0.02)
        reader.join(timeout=10)
        with open(report) as fh:
            text = fh.read().strip()
        peak_kb = max(peak_kb, int(text) if text else 0)
    finally:
        os.unlink(report)
    return proc.returncode, "".join(err_chunks), peak_kb / 1024, time.monotonic() - t0


def alias_bomb(levels: int, key: str = "policy") -> str:
    """A grid whose ``key`` axis is 10**levels leaves through nested aliases, in a few hundred bytes."""
    lines = ['a0: &a0 ["x","x","x","x","x","x","x","x","x","x"]']
    lines += [f"a{i}: &a{i} [" + ",".join([f"*a{i - 1}"] * 10) + "]" for i in range(1, levels + 1)]
    return ("name: bomb\ntrace: philly-sample\nlinks:\n  seed: 0\n" + "\n".join("  " + x for x in lines)
            + f"\ngrid:\n  {key}: *a{levels}\n")


SWEEP = "import sys; from netlab.sweep import run_sweep; run_sweep(sys.argv[1], out=sys.argv[2], progress=False)"


def _sweep_refusal(tmp_path, name: str, text: str, timeout_s: float = 120.0) -> tuple[int, str, float, float]:
    path = tmp_path / name
    path.write_text(text)
    return run_measured([sys.executable, "-c", SWEEP, str(path), str(tmp_path / f"out-{name}")], timeout_s=timeout_s)


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
    # in a child process, killed after 60 s: without a cap, expanding the grid grows memory with no end
    rc, msg, _, _ = _sweep_refusal(tmp_path, "huge.yaml", json.dumps(doc), timeout_s=60)
    path = tmp_path / "huge.yaml"
    assert rc == 1 and "GridError" in msg, msg[-2000:]
    assert "9,765,625 cells" in msg and "NETLAB_MAX_CELLS" in msg and "max_cells" in msg and str(path) in msg, msg
    assert not (tmp_path / "out-huge.yaml").exists()
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


# ------------------------------------------------------------------------------------------------- traces

PHILLY_HEADER = "timestamp,duration,num_gpus,cluster\n"
LOAD = "import sys; from netlab.traces import load_trace; load_trace(sys.argv[1])"


def _garbage_philly(path: Path, size_bytes: int) -> None:
    row = "2017-10-03 1x:00:00,abc,-1,vc{}\n"
    with open(path, "w") as fh:
        fh.write(PHILLY_HEADER)
        i = 0
        while fh.tell() < size_bytes:
            fh.write(row.format(i))
            i += 1


def test_a_trace_of_bad_rows_is_refused_at_its_first_rows_in_bounded_memory(tmp_path):
    big = tmp_path / "philly_bad.csv"
    _garbage_philly(big, 16 * 2**20)  # the 16 MB of bad rows took 2.4 GB
    small = tmp_path / "philly_small.csv"
    small.write_text(PHILLY_HEADER + "2017-10-03 1x:00:00,abc,-1,vc1\n")
    base_rc, base_err, base_mb, _ = run_measured([sys.executable, "-c", LOAD, str(small)])
    assert base_rc == 1 and "TraceError" in base_err, base_err
    rc, err, mb, seconds = run_measured([sys.executable, "-c", LOAD, str(big)])
    assert rc == 1 and "TraceError" in err, err[-2000:]
    size_mb = big.stat().st_size / 2**20
    assert mb <= base_mb + 2 * size_mb, f"peak RSS {mb:.0f} MB; a one-row refusal {base_mb:.0f} MB; file {size_mb:.0f} MB"
    message = err.strip().splitlines()[-1]
    assert f"{big}, line 2, field 'timestamp'" in message and "where reading stopped" in message, message
    assert len(message) < 3000  # the first rows described, the rest counted


def _built_rows_kept_when_the_last_row_is_bad(tmp_path, monkeypatch, validate_first_bytes: int) -> int:
    """Chunks of 2 rows, good rows then one bad row: how many earlier chunks' built frames were still alive
    when the bad chunk was built."""
    import gc
    import weakref

    import pandas as pd

    from netlab.traces import TraceError, reader

    monkeypatch.setattr(reader, "CHUNK_ROWS", 2)
    monkeypatch.setattr(reader, "VALIDATE_FIRST_BYTES", validate_first_bytes)
    path = tmp_path / "late.csv"
    path.write_text("a\n" + "".join(f"{i}\n" for i in range(8)) + "x\n")
    built, alive_at_bad = [], []

    def build(t):
        values = t.number("a")
        if values.isna().any():
            gc.collect()
            alive_at_bad.append(sum(ref() is not None for ref in built))
        out = pd.DataFrame({"a": values, "line": t.frame["line"]})
        built.append(weakref.ref(out))
        return out

    with pytest.raises(TraceError, match="line 10, field 'a': not a number"):
        reader.Table(path, required=("a",)).load(build)
    return alive_at_bad[0]


def test_a_large_trace_refused_for_its_last_row_keeps_no_converted_row(tmp_path, monkeypatch):
    # one pass keeps the four good chunks' rows until the bad one is found; validating first keeps none
    assert _built_rows_kept_when_the_last_row_is_bad(tmp_path, monkeypatch, validate_first_bytes=2**30) == 4
    assert _built_rows_kept_when_the_last_row_is_bad(tmp_path, monkeypatch, validate_first_bytes=0) == 0


def test_a_large_good_trace_loads_the_same_when_checked_first(tmp_path, monkeypatch):
    from netlab.traces import load_trace, reader

    monkeypatch.setattr(reader, "CHUNK_ROWS", 3)
    path = tmp_path / "philly_good.csv"
    path.write_text(PHILLY_HEADER + "".join(f"2017-10-0{1 + i % 9} 10:{i:02d}:00,{100 + i},{1 << (i % 4)},vc{i % 3}\n"
                                            for i in range(20)))
    monkeypatch.setattr(reader, "VALIDATE_FIRST_BYTES", 2**30)
    once = load_trace(path)
    monkeypatch.setattr(reader, "VALIDATE_FIRST_BYTES", 0)
    checked_first = load_trace(path)
    assert len(once) == 20
    pd_testing = pytest.importorskip("pandas.testing")
    pd_testing.assert_frame_equal(once, checked_first)


def test_skip_bad_describes_the_first_bad_rows_and_counts_the_rest(tmp_path):
    from netlab.traces import load_trace
    from netlab.traces.reader import MAX_REPORTED

    good = [f"2017-10-01 00:0{i}:00,300.0,1,vc1" for i in range(3)]
    bad = [f"2017-10-01 00:00:00,abc{i},1,vc1" for i in range(50)]
    path = tmp_path / "philly_mixed.csv"
    path.write_text(PHILLY_HEADER + "\n".join(good[:1] + bad + good[1:]) + "\n")
    with pytest.warns(UserWarning, match="skipped 50 bad row"):
        df = load_trace(path, skip_bad=True)
    assert len(df) == 3 and df["line"].tolist() == [2, 53, 54]
    assert [s["line"] for s in df.attrs["skipped"]] == list(range(3, 3 + MAX_REPORTED))
    assert all(s["field"] == "duration" for s in df.attrs["skipped"])


def test_a_long_bad_value_is_quoted_by_a_bounded_prefix(tmp_path):
    from netlab.traces import TraceError, load_trace

    path = tmp_path / "philly_long.csv"
    path.write_text(PHILLY_HEADER + "2017-10-01 00:00:00," + "9" * 100_000 + "x,1,vc1\n")
    with pytest.raises(TraceError) as info:
        load_trace(path)
    assert len(str(info.value)) < 1000 and "line 2, field 'duration'" in str(info.value)


@pytest.mark.parametrize("kind", ["fifo", "device"])
def test_a_fifo_or_a_device_as_a_trace_is_refused_without_blocking(tmp_path, kind):
    if kind == "fifo":
        path = tmp_path / "philly.csv"
        os.mkfifo(path)
    else:  # a trace path (by its name) that is a device: it never ends
        path = tmp_path / "philly.csv"
        path.symlink_to("/dev/zero")
    rc, err, _, seconds = run_measured([sys.executable, "-c", LOAD, str(path)], timeout_s=60)
    assert rc == 1 and "TraceError" in err and str(path) in err, err[-2000:]
    assert ("FIFO" if kind == "fifo" else "character device") in err
    out = tmp_path / "out"
    res = runner.invoke(app, ["simulate", "--quiet", "--trace", str(path), "--out", str(out)])
    assert res.exit_code == 2 and res.output.startswith("error: ") and str(path) in res.output, res.output
    assert not out.exists()


def test_duplicate_job_ids_are_refused_with_their_lines(tmp_path):
    from netlab.traces import TraceError, load_trace

    path = tmp_path / "cluster07.csv"
    path.write_text("job_id,submission_time,duration,num_gpu\nA,0,100,1\nB,5,100,1\nA,9,100,2\nA,12,100,1\n")
    with pytest.raises(TraceError) as info:
        load_trace(path)
    msg = str(info.value)
    assert str(path) in msg and "lines 2, 4, 5" in msg and "'A'" in msg and "unique" in msg, msg
