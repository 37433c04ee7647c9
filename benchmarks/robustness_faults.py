"""Fault injections for ``bench_robustness.py`` (issue 30): what is tried, and whether netlab held.

Each row tries one kind of fault a number of times and counts how often netlab
held (the property the issue states for it); ``refused_inputs`` measures the
peak RSS of every kind of refused input in a fresh process (its own VmHWM, see
``tests/test_bounded_input.run_measured``: wait4 would report this process's) against
the target of 200 MB plus twice the input's size, beside the same command
refusing a trivial input (what importing netlab costs). The checks reuse the
tests' helpers (``tests/test_*.py``), loaded by path, so a row and its test
cannot drift apart. Rows that need root (a tmpfs, a network namespace for the
agent) say ``skipped`` with the reason elsewhere.
"""

from __future__ import annotations

import errno
import importlib.util
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import traceback
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
NETLAB = [sys.executable, "-m", "netlab.cli"]
TOPO = "leafspine,racks=2,hosts_per_rack=2,gpus_per_host=8,host_gbps=100,spines=2"


def _tests(name: str):
    path = ROOT / "tests" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(f"robustness_{path.stem}", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _row(name: str, tries, held_if, note: str = "") -> dict:
    """Run ``held_if(i)`` for each try (True: held); an exception is a fault (recorded, not raised)."""
    t0, held, failures = time.perf_counter(), 0, []
    tries = list(tries)
    for i in tries:
        try:
            ok = held_if(i)
        except Exception as exc:  # noqa: BLE001 - a fault to record
            ok = False
            failures.append(f"{i}: {type(exc).__name__}: {str(exc)[:300]}")
        else:
            if not ok:
                failures.append(f"{i}: did not hold")
        held += bool(ok)
    row = dict(fault=name, tried=len(tries), held=held, note=note, failures=failures[:5],
               wall_s=round(time.perf_counter() - t0, 1))
    print(f"  {name[:100]:100s} {held:4d}/{len(tries):<4d} held  ({row['wall_s']} s)", flush=True)
    return row


def _skipped(name: str, why: str) -> dict:
    print(f"  {name[:100]:100s} skipped: {why}", flush=True)
    return dict(fault=name, tried=0, held=0, note=f"skipped: {why}", failures=[], wall_s=0.0)


def _grid(folder: Path, **over) -> Path:
    doc = dict(name="g", trace="philly-sample", max_jobs=20, topology=TOPO,
               grid=dict(policy=["fifo", "sjf"], seed=[0]))
    doc.update(over)
    path = folder / f"grid-{len(list(folder.glob('grid-*')))}.yaml"
    path.write_text(json.dumps(doc))
    return path


def _cli(argv: list[str], timeout_s: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run(NETLAB + argv, capture_output=True, text=True, timeout=timeout_s)


def _one_error_line(done: subprocess.CompletedProcess, *needles: str) -> bool:
    err = done.stderr.strip()
    return (done.returncode == 2 and err.startswith("error: ") and len(err.splitlines()) == 1
            and "Traceback" not in err and all(n in err for n in needles))


# ------------------------------------------------------------------------------------------------ rows

def pool_rows(tmp: Path, n: int) -> list[dict]:
    pools = _tests("test_pool_cleanup")
    rows = []
    for sig in (signal.SIGKILL, signal.SIGTERM):
        def held(i, sig=sig):
            where = tmp / f"pool-{sig}-{i}"
            where.mkdir()
            pools._kill_and_check([sys.executable, "-c", pools.SWEEP, json.dumps(pools.GRID), str(where / "s")],
                                  sig, 2, where)
            return True
        rows.append(_row(f"processes sweep killed with {signal.Signals(sig).name}: no child alive after 5 s",
                         range(n), held, "workers, forkserver and resource tracker, recorded by pid before the kill"))
    return rows


def store_rows(tmp: Path, flips: int) -> list[dict]:
    from netlab.sweep import StoreError, run_sweep
    from netlab.sweep.runner import check_store, repair_store

    safety = _tests("test_store_safety")
    base = tmp / "stored"
    run_sweep(safety.small_grid(), out=base, progress=False)

    def copy(name: str) -> Path:
        out = tmp / name
        shutil.copytree(base, out, symlinks=True)
        return out

    def foreign(i):
        folder = tmp / f"foreign-{i}"
        folder.mkdir()
        (folder / "notes.txt").write_text("mine")
        (folder / ".draft.tmp").write_text("an editor's")
        before = safety._tree(folder)
        try:
            run_sweep(safety.small_grid(), out=folder, progress=False)
        except StoreError:
            return safety._tree(folder) == before
        return False

    links = ["cells", ".lock", "corrupt", "manifest.json"]

    def symlinked(i):
        out, name = copy(f"link-{i}"), links[i]
        outside = tmp / f"outside-{i}"
        outside.mkdir()
        (outside / ".x.tmp").write_text("not the store's")
        target = outside / "t"
        if name == "cells":
            (out / "cells").rename(target)
        elif name == "manifest.json":
            (out / name).rename(target)
        elif name == "corrupt":
            target.mkdir()
            next((out / "cells").glob("*.jobs.parquet")).write_bytes(b"garbage")
        else:
            target.write_text("someone else's")
            (out / name).unlink(missing_ok=True)
        (out / name).symlink_to(target)
        before = safety._tree(outside)
        refused = 0
        for attempt in (lambda: run_sweep(safety.small_grid(), out=out, progress=False), lambda: repair_store(out)):
            try:
                attempt()
            except StoreError:
                refused += 1
        return refused == 2 and safety._tree(outside) == before

    rng = random.Random(30)
    readable = []  # flips that leave a file that still parses: before the hashes, --check missed these

    def flipped(i):
        import io

        import pandas as pd

        out = copy(f"flip-{i}")
        files = sorted(p for p in (out / "cells").iterdir() if p.suffix in (".parquet", ".json"))
        path = rng.choice(files)
        data = bytearray(path.read_bytes())
        pos = rng.randrange(len(data))
        data[pos] ^= 1 << rng.randrange(8)
        path.write_bytes(bytes(data))
        try:
            pd.read_parquet(io.BytesIO(bytes(data))) if path.suffix == ".parquet" else json.loads(bytes(data))
            readable.append(i)
        except Exception:  # noqa: BLE001 - the file no longer parses: any check finds it
            pass
        return bool(check_store(out).corrupt)

    def stray(i):
        out = copy(f"stray-{i}")
        (out / "cells" / "deadbeef0000.summary.json").write_text("{not json")
        first = not check_store(out).ok
        repair_store(out)
        return first and check_store(out).ok and list((out / "stray").rglob("deadbeef0000.summary.json"))

    flips_row = _row("one random bit flipped in a stored cell file: --check reports it", range(flips), flipped,
                     "any byte of any parquet or summary file; the cell's SHA-256 catches flips that still parse")
    flips_row["still_parsed"] = len(readable)
    return [
        _row("sweep --out on a folder that is not a store: refused, untouched", range(1), foreign),
        _row("a store name symlinked outside (cells, .lock, corrupt, manifest): refused, outside untouched",
             range(len(links)), symlinked),
        flips_row,
        _row("a stray file in cells/: --check reports it, --repair sets it aside, --check agrees", range(1), stray),
    ]


def input_rows(tmp: Path) -> list[dict]:
    from netlab.errors import InputError
    from netlab.sweep import GridError, read_grid, run_sweep
    from netlab.topology import load_topology

    bounded = _tests("test_bounded_input")

    def grid_bomb(levels):
        t0 = time.perf_counter()
        try:
            read_grid(bounded.alias_bomb(levels))
        except GridError as exc:
            return "aliases expand it to" in str(exc) and time.perf_counter() - t0 < 5
        return False

    def topo_bomb(levels):
        lines = ['a0: &a0 [{name: h, gpus: 1}, {name: h, gpus: 1}]']
        lines += [f"a{i}: &a{i} [" + ",".join([f"*a{i - 1}"] * 10) + "]" for i in range(1, levels + 1)]
        path = tmp / f"topo-bomb-{levels}.yaml"
        path.write_text("\n".join(lines) + f"\nhosts: *a{levels}\nlinks: []\n")
        try:
            load_topology(path)
        except InputError as exc:
            return "aliases expand it to" in str(exc)
        return False

    dups = {"grid": "name: d\ngrid:\n  policy: [fifo]\n  policy: [sjf]\n",
            "topology": "builder: leafspine\nparams:\n  racks: 2\n  racks: 4\n",
            "links": "host_gbps: 100\nhost_gbps: 25\n"}

    def duplicate(kind):
        from netlab.integrations.slurm_topology import read_links

        path = tmp / f"dup-{kind}.yaml"
        path.write_text(dups[kind])
        try:
            {"grid": read_grid, "topology": load_topology, "links": read_links}[kind](path)
        except InputError as exc:
            return "duplicate key" in str(exc) and "first at line" in str(exc)
        return False

    def huge_grid(i):
        doc = dict(name="huge", grid={k: list(range(1, 11)) for k in ("seed", "base_seed", "max_jobs", "checkpoint_s",
                                                                        "restore_s", "oversub", "background")})
        doc["grid"]["background"] = [x / 20 for x in range(10)]
        t0 = time.perf_counter()
        try:
            run_sweep(doc, out=tmp / f"huge-{i}", progress=False)
        except GridError as exc:
            return "10,000,000 cells" in str(exc) and time.perf_counter() - t0 < 5 and not (tmp / f"huge-{i}").exists()
        return False

    def trace_kind(kind):
        path = tmp / f"trace-{kind}.csv"
        if kind == "fifo":
            os.mkfifo(path)
        elif kind == "device":
            path.symlink_to("/dev/zero")
        elif kind == "duplicate ids":
            path = tmp / "cluster09.csv"
            path.write_text("job_id,submission_time,duration,num_gpu\nA,0,100,1\nA,9,100,2\n")
        else:
            bounded._garbage_philly(path, 2**20)
        done = subprocess.run([sys.executable, "-c", bounded.LOAD, str(path)], capture_output=True, text=True,
                              timeout=60)
        return done.returncode == 1 and "TraceError" in done.stderr and str(path) in done.stderr

    return [
        _row("grid YAML alias bomb (10^6..10^10 leaves): refused in < 5 s", range(6, 11), grid_bomb),
        _row("topology YAML alias bomb (2x10^4..2x10^7 hosts): refused", range(4, 8), topo_bomb),
        _row("duplicate YAML keys (grid, topology, Slurm links): refused naming both lines", sorted(dups), duplicate),
        _row("a 10-million-cell grid: refused naming the count, nothing written", range(1), huge_grid),
        _row("trace: garbage rows, FIFO, device, duplicate job ids: one TraceError naming the file",
             ["garbage", "fifo", "device", "duplicate ids"], trace_kind),
    ]


def oserror_rows(tmp: Path) -> list[dict]:
    inject = ("import errno, os, sys, pathlib\n"
              "real = pathlib.Path.write_bytes\n"
              "calls = []\n"
              "def failing(self, data):\n"
              "    calls.append(self)\n"
              "    if len(calls) == 2:\n"
              "        raise OSError(int(sys.argv[1]), os.strerror(int(sys.argv[1])))\n"
              "    return real(self, data)\n"
              "pathlib.Path.write_bytes = failing\n"
              "from netlab.cli import app\n"
              "app(sys.argv[2:])\n")
    codes = [errno.ENOSPC, errno.EACCES, errno.EDQUOT, errno.EROFS]

    def injected(code):
        out = tmp / f"os-{code}"
        done = subprocess.run([sys.executable, "-c", inject, str(code), "sweep", str(_grid(tmp)), "--out", str(out),
                               "--quiet"], capture_output=True, text=True, timeout=300)
        left = [p for p in out.rglob("*") if p.name.endswith(".tmp")]
        return _one_error_line(done, str(out / "cells")) and not left and not (out / ".lock.holder").exists()

    def loop(i):
        link = tmp / f"loop-{i}"
        link.symlink_to(link)
        return (_one_error_line(_cli(["sweep", str(_grid(tmp)), "--out", str(link), "--quiet"]), str(link))
                and _one_error_line(_cli(["simulate", "--quiet", "--max-jobs", "5", "--out", str(link / "s")]),
                                    str(link)))

    rows = [_row("ENOSPC, EACCES, EDQUOT, EROFS injected where a sweep writes: one error line, no .tmp, lock released",
                 codes, injected),
            _row("a symlink loop as --out (sweep, simulate): one error line", range(1), loop)]
    if os.geteuid() != 0:
        rows.append(_skipped("a real full disk (16 KiB tmpfs): one error line", "needs root (mount)"))
        return rows
    disk = tmp / "disk"
    disk.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=16k", "tmpfs", str(disk)]).returncode != 0:
        rows.append(_skipped("a real full disk (16 KiB tmpfs): one error line", "mount failed"))
        return rows
    try:
        def full(i):
            a = _cli(["sweep", str(_grid(tmp)), "--out", str(disk / f"s{i}"), "--quiet"])
            b = _cli(["simulate", "--quiet", "--max-jobs", "200", "--out", str(disk / f"sim{i}")])
            return (_one_error_line(a, "no space left") and _one_error_line(b, "no space left")
                    and not [p for p in disk.rglob("*") if p.name.endswith(".tmp")])
        rows.append(_row("a real full disk (16 KiB tmpfs) for sweep and simulate: one error line, no .tmp", range(1),
                         full))
    finally:
        subprocess.run(["umount", str(disk)], check=True)
    return rows


def agent_rows(tmp: Path, n: int) -> list[dict]:
    from netlab.testbed.agent_client import AgentClient, AgentError

    live = _tests("test_agent_client")

    times = []

    def stopped(i):
        proc = subprocess.Popen([sys.executable, "-c", live.STAND_IN], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE)
        try:
            client = AgentClient("h", live.ProcessChannel(proc), heartbeat_s=0.2, dead_after_s=2.0)
            client.wait_hello(30)
            fut = client.submit("never")
            os.kill(proc.pid, signal.SIGSTOP)
            t0 = time.monotonic()
            try:
                fut.result(timeout=30)
            except AgentError as exc:
                times.append(time.monotonic() - t0)
                return exc.type == "AgentDead" and times[-1] < 3.5
            return False
        finally:
            os.kill(proc.pid, signal.SIGCONT)
            proc.kill()
            proc.wait()

    rows = [_row("controller client: a SIGSTOPped agent declared dead (bound 2 s), its pending call fails",
                 range(n), stopped)]
    rows[-1]["detection_s"] = [round(t, 2) for t in times]
    if os.geteuid() != 0 or shutil.which("unshare") is None:
        rows.append(_skipped("agent: request lines of 4 and 64 MB refused, a prefix quoted",
                             "needs root (a network namespace of its own)"))
        return rows
    rss = []

    def long_line(mb):
        state = tmp / f"agent-{mb}"
        env = dict(os.environ, PYTHONPATH=str(ROOT / "agent"), PYTHONUNBUFFERED="1")
        proc = subprocess.Popen(["unshare", "--net", sys.executable, "-m", "netlab_agent", "--state-dir", str(state),
                                 "--heartbeat-s", "0"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                stderr=subprocess.DEVNULL, env=env)
        try:
            assert json.loads(proc.stdout.readline())["event"] == "hello"
            chunk = b"x" * 2**20
            proc.stdin.write(b'{"id": 1, "cmd": "shape", "args": {"ifname": "')
            for _ in range(mb):
                proc.stdin.write(chunk)
            proc.stdin.write(b'"}}\n{"id": 2, "cmd": "status"}\n')
            proc.stdin.flush()
            refused, answer = json.loads(proc.stdout.readline()), json.loads(proc.stdout.readline())
            peak = _vm_hwm_mb(proc.pid)
            rss.append(dict(input_mb=mb, peak_rss_mb=peak, target_mb=200 + 2 * mb))
            proc.stdin.close()
            proc.wait(timeout=30)
            return (refused["id"] is None and not refused["ok"] and len(json.dumps(refused)) < 1000
                    and answer["id"] == 2 and answer["ok"] and peak <= 200 + 2 * mb)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()

    rows.append(_row("agent: request lines of 4 and 64 MB refused (a prefix quoted), the next request answered",
                     [4, 64], long_line))
    rows[-1]["agent_peak_rss"] = rss
    return rows


def _vm_hwm_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return round(int(line.split()[1]) / 1024, 1)
    return float("nan")


# ------------------------------------------------------------------------------------- peak RSS of refusals

def refused_inputs(tmp: Path) -> list[dict]:
    """Peak RSS of the command refusing each hostile input, beside the same command on a trivial refusal."""
    bounded = _tests("test_bounded_input")
    run = bounded.run_measured
    cases = []
    bomb = tmp / "bomb.yaml"
    bomb.write_text(bounded.alias_bomb(9))
    dup = tmp / "dup.yaml"
    dup.write_text("name: d\ngrid:\n  policy: [fifo]\n  policy: [sjf]\n")
    huge = tmp / "huge.yaml"
    huge.write_text(json.dumps(dict(name="h", grid={k: list(range(1, 11)) for k in
                                                    ("seed", "base_seed", "max_jobs", "checkpoint_s", "restore_s",
                                                     "oversub", "max_jobs")})))
    plain = tmp / "plain.yaml"
    plain.write_text("name: p\ngrid:\n  polcy: [fifo]\n")
    sweep = lambda path: NETLAB + ["sweep", str(path), "--out", str(tmp / "never"), "--quiet"]  # noqa: E731
    cases += [("grid: alias bomb (10^9 leaves)", bomb, sweep(bomb), sweep(plain)),
              ("grid: duplicate keys", dup, sweep(dup), sweep(plain)),
              ("grid: 10^6 cells", huge, sweep(huge), sweep(plain))]
    tbomb = tmp / "topo-bomb.yaml"
    lines = ['a0: &a0 [{name: h, gpus: 1}, {name: h, gpus: 1}]']
    lines += [f"a{i}: &a{i} [" + ",".join([f"*a{i - 1}"] * 10) + "]" for i in range(1, 8)]
    tbomb.write_text("\n".join(lines) + "\nhosts: *a7\nlinks: []\n")
    simulate = lambda *a: NETLAB + ["simulate", "--quiet", "--max-jobs", "5", "--out", str(tmp / "never"), *a]  # noqa
    tplain = tmp / "topo-plain.yaml"
    tplain.write_text("hosts: 3\n")
    cases.append(("topology: alias bomb (2x10^7 hosts)", tbomb, simulate("--topology", str(tbomb)),
                  simulate("--topology", str(tplain))))
    small = tmp / "philly_small.csv"
    small.write_text(bounded.PHILLY_HEADER + "2017-10-03 1x:00:00,abc,-1,vc1\n")
    for mb in (16, 200):
        path = tmp / f"philly_garbage_{mb}.csv"
        bounded._garbage_philly(path, mb * 2**20)
        cases.append((f"trace: {mb} MB of bad rows", path, simulate("--trace", str(path)),
                      simulate("--trace", str(small))))
    last = tmp / "philly_bad_last.csv"  # the worst case: every row read before the bad ones come
    with open(last, "w") as fh:
        fh.write(bounded.PHILLY_HEADER)
        i = 0
        while fh.tell() < 48 * 2**20:  # under MAX_ROWS: refused for its last row
            fh.write(f"2017-10-0{1 + i % 9} 10:{i % 60:02d}:00,{100 + i % 997},{1 << (i % 4)},vc{i % 7}\n")
            i += 1
        fh.write("2017-10-03 1x:00:00,abc,-1,vc1\n")
    cases.append(("trace: 48 MB of good rows, then a bad one", last, simulate("--trace", str(last)),
                  simulate("--trace", str(small))))
    rows, baselines = [], {}
    for name, path, argv, base_argv in cases:
        key = tuple(base_argv)
        if key not in baselines:
            baselines[key] = run(base_argv)[2]
        rc, err, mb, seconds = run(argv, timeout_s=600)
        size_mb = path.stat().st_size / 2**20
        target = 200 + 2 * size_mb
        rows.append(dict(input=name, bytes=path.stat().st_size, refused=rc == 2 and err.strip().startswith("error:"),
                         peak_rss_mb=round(mb, 1), trivial_refusal_rss_mb=round(baselines[key], 1),
                         target_mb=round(target, 1), within_target=mb <= target, seconds=round(seconds, 1),
                         # the temporary folder's name is this machine's: the message names the file inside it
                         error=(err.strip().splitlines()[-1].replace(str(tmp), "<tmp>")[:200]
                                if err.strip() else "")))
        print(f"  {name:45s} {size_mb:8.1f} MB in  peak {mb:6.0f} MB (trivial refusal {baselines[key]:.0f} MB, "
              f"target {target:.0f} MB) {'ok' if mb <= target else 'OVER'}  {seconds:.1f} s", flush=True)
    return rows


def run_all(scale: float = 1.0) -> dict:
    """Every fault row and the refused inputs' peak RSS (``scale`` multiplies the repeated tries)."""
    n = lambda k: max(1, int(round(k * scale)))  # noqa: E731
    with tempfile.TemporaryDirectory(prefix="netlab-faults-") as tmp:
        tmp = Path(tmp)
        rows = []
        print("fault injections:", flush=True)
        for part, make in (("pools", lambda d: pool_rows(d, n(3))), ("store", lambda d: store_rows(d, n(60))),
                           ("inputs", input_rows), ("oserrors", oserror_rows),
                           ("agent", lambda d: agent_rows(d, n(3)))):
            where = tmp / part
            where.mkdir()
            try:
                rows += make(where)
            except Exception:  # noqa: BLE001 - one broken part must not hide the others
                rows.append(dict(fault=f"{part}: the harness failed", tried=1, held=0, note="",
                                 failures=[traceback.format_exc(limit=-3)[-600:]], wall_s=0.0))
        print("peak RSS of refused inputs (target: 200 MB + 2x the input):", flush=True)
        where = tmp / "rss"
        where.mkdir()
        refused = refused_inputs(where)
    return dict(rows=rows, tried=sum(r["tried"] for r in rows), held=sum(r["held"] for r in rows),
                refused_inputs=refused, refused_within_target=sum(r["within_target"] for r in refused))
