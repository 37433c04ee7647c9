"""Worker pools die with their parent (issue 30 item 1).

A sweep on the processes backend (and ``netlab demo``, which runs one) is
killed with SIGKILL or SIGTERM while its workers compute: every process it
started (the forkserver, the resource tracker, the workers) must be gone
within 5 s, and nothing may be left in its temporary folder (multiprocessing's
``pymp-*`` folder and the forkserver's socket in it outlive a SIGKILLed parent
unless the forkserver removes them). The processes are found as the killed process's descendants
(recorded with their start times before the kill, so a reused pid is never
mistaken for one of them); nothing is ever signalled by name.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import psutil
import pytest

TOPO = "leafspine,racks=2,hosts_per_rack=2,gpus_per_host=8,host_gbps=100,spines=2"
# many cells of a few hundred jobs: the pool is still busy when the test kills its parent
GRID = dict(name="kill", trace="philly-sample", max_jobs=400, topology=TOPO,
            grid=dict(policy=["fifo", "tiresias", "sjf"], oversub=[2, 4], seed=list(range(8))))
SWEEP = """
import json, sys
from netlab.sweep import run_sweep
run_sweep(json.loads(sys.argv[1]), out=sys.argv[2], backend="processes", workers=2, progress=False)
"""


def _descendants(pid: int) -> list[psutil.Process]:
    try:
        return psutil.Process(pid).children(recursive=True)
    except psutil.NoSuchProcess:
        return []


def _wait(pred, timeout_s: float, what: str, proc=None):
    deadline = time.monotonic() + timeout_s
    while not pred():
        if proc is not None and proc.poll() is not None:
            raise AssertionError(f"the process ended before {what}: {proc.communicate()}")
        assert time.monotonic() < deadline, f"timed out after {timeout_s} s waiting for {what}"
        time.sleep(0.05)


def _alive(procs: list[psutil.Process]) -> list[psutil.Process]:
    """Those still running and the same process (psutil compares the start time), zombies excluded."""
    out = []
    for p in procs:
        try:
            if p.is_running() and p.status() != psutil.STATUS_ZOMBIE:
                out.append(p)
        except psutil.NoSuchProcess:
            pass
    return out


def _kill_and_check(argv: list[str], sig: int, workers: int, tmp_path):
    tmp = tmp_path / "tmp"  # the killed process's temporary folder: what it and its children leave there
    tmp.mkdir()
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            cwd=tmp_path, start_new_session=True, env={**os.environ, "TMPDIR": str(tmp)})
    children: list[psutil.Process] = []
    try:
        # the pool is up: at least the workers, the forkserver and the resource tracker, and a worker is busy
        def pool_running():
            children[:] = _descendants(proc.pid)
            busy = [c for c in children if _cpu_s(c) > 0.5 and "resource_tracker" not in _cmd(c)]
            return len(children) >= workers + 2 and busy

        _wait(pool_running, 240, "the worker pool to start", proc)
        os.kill(proc.pid, sig)
        proc.wait(timeout=60)
        try:
            _wait(lambda: not _alive(children), 5, "every child to exit")
        except AssertionError:
            left = [(p.pid, _cmd(p)[:120]) for p in _alive(children)]
            raise AssertionError(f"alive 5 s after {signal.Signals(sig).name} of their parent: {left}") from None
        left = sorted(str(p.relative_to(tmp)) for p in tmp.rglob("*"))
        assert not left, f"left in the temporary folder after {signal.Signals(sig).name} of their parent: {left}"
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        for p in _alive(children):  # exactly the processes recorded above, so no other test's pool is touched
            p.kill()
    return proc


def _cpu_s(p: psutil.Process) -> float:
    try:
        t = p.cpu_times()
        return t.user + t.system
    except psutil.NoSuchProcess:
        return 0.0


def _cmd(p: psutil.Process) -> str:
    try:
        return " ".join(p.cmdline())
    except psutil.NoSuchProcess:
        return ""


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM])
def test_sweep_pool_dies_with_its_parent(tmp_path, sig):
    out = tmp_path / "store"
    proc = _kill_and_check([sys.executable, "-c", SWEEP, json.dumps(GRID), str(out)], sig, 2, tmp_path)
    if sig == signal.SIGTERM:  # an orderly stop: the store is released and no traceback is printed
        assert proc.returncode != 0
        assert not (out / ".lock.holder").exists()
        assert "Traceback" not in proc.stderr.read()


def test_demo_pool_dies_with_its_parent_on_sigterm(tmp_path):
    argv = [sys.executable, "-m", "netlab.cli", "demo", "--out", str(tmp_path / "demo"), "--seeds", "2",
            "--max-jobs", "300", "--workers", "2"]
    proc = _kill_and_check(argv, signal.SIGTERM, 2, tmp_path)
    err = proc.stderr.read()
    assert proc.returncode != 0 and "Traceback" not in err, err
    assert "error:" in err and "SIGTERM" in err, err


THREAD_THEN_MAIN = """
import os, threading, psutil
from netlab.procguard import process_pool

seen = []
def in_thread():
    with process_pool(1) as pool:
        seen.append(pool.submit(os.getppid).result())

t = threading.Thread(target=in_thread)
t.start()
t.join()  # the thread that started the forkserver has ended; the process lives on
with process_pool(1) as pool:
    seen.append(pool.submit(os.getppid).result())
print(seen[0], seen[1], psutil.Process(seen[0]).is_running())
"""


def test_forkserver_outlives_the_thread_that_started_it(tmp_path):
    """The kernel signals the forkserver when the thread that started it ends; only a gone parent process stops it."""
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    out = subprocess.run([sys.executable, "-c", THREAD_THEN_MAIN], capture_output=True, text=True, timeout=120,
                         cwd=tmp_path, env={**os.environ, "TMPDIR": str(tmp)})
    assert out.returncode == 0, out.stderr
    first, second, alive = out.stdout.split()
    assert first == second and alive == "True"  # the same forkserver forked both pools' workers
    assert not list(tmp.iterdir())  # an orderly exit removes multiprocessing's folder as before
