"""Sweep benchmarks (not timed tests): writes benchmarks/results/sweep.json.

1. Speed-up: a 200-cell sweep of small simulations (1,000 synthetic jobs each:
   5 ordering policies x 2 placements x 2 oversubscriptions x 10 seeds) into a
   results store, serially and on a local Dask cluster (2 workers, one thread
   each). Target: Dask 1.8x faster or more on 2 cores. The cluster's start-up
   is reported apart (a cluster is started once and reused across sweeps).
   ``capacity_*`` measures how many cores the run really had (the machine
   may be shared): no speed-up can beat ``effective_cores``.
2. Overhead per cell (store + scheduling), two ways: (a) the same 200-cell
   sweeps, wall time minus simulation time; (b) 200 near-empty cells (one job
   each) on Dask, where everything but ~ms of simulation is overhead.
   Target: 50 ms or less.
3. Resume: the sweep runs as ``netlab sweep`` in a subprocess, is SIGKILLed
   once half the cells are in the store (polled), then resumed on Dask.
   Target: the restart runs only the unfinished cells; every cell present once.

Usage: python benchmarks/bench_sweep.py [--quick]
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import platform
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

from netlab.sim.metrics import write_json
from netlab.sweep import expand, run_sweep

TOPOLOGY = "leafspine,racks=4,hosts_per_rack=4,gpus_per_host=8,host_gbps=100,spines=2"


def grid(seeds: int, jobs: int = 1000) -> dict:
    return dict(name="bench", trace=f"synthetic,jobs={jobs},load=0.9,cluster_gpus=128", topology=TOPOLOGY,
                grid=dict(policy=["fifo", "sjf", "srtf", "tiresias", "themis"],
                          placement=["consolidated", "k8s-netoverhead"], oversub=[2, 4], seed=list(range(seeds))))


def timed_sweep(doc, out, **kw) -> tuple[float, object]:
    t0 = time.perf_counter()
    res = run_sweep(doc, out=out, progress=False, **kw)
    return time.perf_counter() - t0, res


def speedup(doc, tmp: Path, workers: int) -> dict:
    from distributed import Client, LocalCluster

    serial_s, serial = timed_sweep(doc, tmp / "serial", backend="serial")
    t0 = time.perf_counter()
    with LocalCluster(n_workers=workers, threads_per_worker=1, processes=True, dashboard_address=None,
                      host="127.0.0.1") as cluster, Client(cluster) as client:
        client.run(importlib.import_module, "netlab.sweep.cell")  # workers are up with netlab imported
        startup_s = time.perf_counter() - t0
        dask_s, dask = timed_sweep(doc, tmp / "dask", client=client)
        near_empty = dict(doc, trace="synthetic,jobs=1,load=0.9,cluster_gpus=128", name="near-empty")
        empty_s, empty = timed_sweep(near_empty, tmp / "empty", client=client)
    cols = [c for c in serial.summary.columns if c not in ("wall_s", "cell_s", "worker")]
    same = serial.summary[cols].equals(dask.summary[cols]) and serial.jobs.equals(dask.jobs)
    n = len(serial.summary)
    return dict(
        cells=n, workers=workers, serial_s=serial_s, dask_s=dask_s, dask_startup_s=startup_s,
        speedup=serial_s / dask_s, speedup_with_startup=serial_s / (dask_s + startup_s),
        sim_s_per_cell=float(serial.summary.cell_s.mean()), same_results=bool(same),
        overhead_ms_per_cell=dict(
            serial=1000 * (serial_s - serial.summary.cell_s.sum()) / n,
            dask_worker_time=1000 * (dask_s * workers - dask.summary.cell_s.sum()) / n,
            dask_near_empty_cells=1000 * (empty_s - empty.summary.cell_s.sum() / workers) / len(empty.summary),
            near_empty_wall_s=empty_s),
    )


KILL = "import sys; from netlab.cli import app; sys.argv = ['netlab', *sys.argv[1:]]; app()"


def resume(doc, tmp: Path, workers: int) -> dict:
    from distributed import Client, LocalCluster

    path, out = tmp / "grid.yaml", tmp / "resume"
    path.write_text(yaml.safe_dump(doc))
    total = len(expand(doc))
    proc = subprocess.Popen([sys.executable, "-c", KILL, "sweep", str(path), "--out", str(out), "--backend",
                             "serial", "--quiet"], stdout=subprocess.DEVNULL)
    cells = out / "cells"
    while len(list(cells.glob("*.summary.json"))) < total // 2:
        if proc.poll() is not None:
            raise RuntimeError("the sweep ended before it was killed")
        time.sleep(0.01)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    done_before = len(list(cells.glob("*.summary.json")))
    leftovers = len(list(cells.glob(".*.tmp"))) + len(set(p.name.split(".")[0] for p in cells.glob("*.parquet"))
                                                        - set(p.name.split(".")[0] for p in cells.glob("*.summary.json")))
    with LocalCluster(n_workers=workers, threads_per_worker=1, processes=True, dashboard_address=None,
                      host="127.0.0.1") as cluster, Client(cluster) as client:
        restart_s, res = timed_sweep(doc, out, client=client)
    run = res.manifest["runs"][-1]
    return dict(cells=total, done_before_kill=done_before, partial_files_after_kill=leftovers,
                rerun_ran=run["ran"], rerun_skipped=run["skipped"], restart_s=restart_s,
                only_unfinished_redone=bool(run["ran"] == total - done_before),
                every_cell_once=bool(len(res.summary) == total and res.summary.cell_id.is_unique
                                     and not res.jobs.duplicated(["cell_id", "job_id"]).any()),
                stray_temp_files=len(list(cells.glob(".*.tmp"))))


def _spin(n: int = 5_000_000) -> float:
    t0 = time.perf_counter()
    x = 0
    for i in range(n):
        x += i
    return time.perf_counter() - t0


def parallel_capacity(workers: int) -> dict:
    """How many cores this process really gets now: the same pure-Python loop alone and ``workers`` at once.

    The machine may be shared; a speed-up can never beat this number.
    """
    from concurrent.futures import ProcessPoolExecutor

    with ProcessPoolExecutor(workers) as pool:
        list(pool.map(_spin, [1000] * workers))  # workers started
        alone = pool.submit(_spin).result()
        t0 = time.perf_counter()
        list(pool.map(_spin, [5_000_000] * workers))
        together = time.perf_counter() - t0
    return dict(loop_alone_s=alone, loops_at_once_s=together, effective_cores=workers * alone / together,
                loadavg_1min=os.getloadavg()[0])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="20 cells instead of 200")
    ap.add_argument("--workers", type=int, default=2)
    args = ap.parse_args()
    doc = grid(seeds=1 if args.quick else 10)
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        out = dict(machine=dict(python=platform.python_version(), platform=platform.platform(),
                                cpus=os.cpu_count()),
                   grid=doc, capacity_before=parallel_capacity(args.workers),
                   speedup=speedup(doc, tmp, args.workers), resume=resume(doc, tmp, args.workers),
                   capacity_after=parallel_capacity(args.workers))
    cores = min(args.workers, out["capacity_before"]["effective_cores"], out["capacity_after"]["effective_cores"])
    out["speedup"]["parallel_efficiency"] = out["speedup"]["speedup"] / cores  # against the cores really had
    out["targets"] = dict(speedup_ge_1_8=bool(out["speedup"]["speedup"] >= 1.8),
                          overhead_le_50ms=bool(max(v for k, v in out["speedup"]["overhead_ms_per_cell"].items()
                                               if k != "near_empty_wall_s") <= 50),
                          restart_redoes_only_unfinished=bool(out["resume"]["only_unfinished_redone"]))
    path = Path(__file__).parent / "results" / ("sweep-quick.json" if args.quick else "sweep.json")
    write_json(path, out)
    print(json.dumps({k: out[k] for k in ("capacity_before", "speedup", "resume", "capacity_after", "targets")},
                     indent=2))
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
