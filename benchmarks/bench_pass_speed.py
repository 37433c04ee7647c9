"""Is the simulator as fast with this tree's code as with an earlier commit's? Writes results/pass_speed.json.

Full Philly (82,247 jobs), Tiresias + consolidated on the 512-GPU 4:1 leaf-spine (``bench_core.py``), under
``fair`` and ``tcp``, once with the package of ``--base`` (a git ref, extracted with ``git archive``) and once
with this tree's, alternating in one session (old, new, new, old, ...) so that load from elsewhere on the
machine hits both alike. Each run is its own process (the two packages share a name); the time is the CPU
time of ``Simulator.run`` in that process (``time.process_time``: what other work on a shared machine moves
least), with its wall time beside it. Each side first runs 3,000 jobs per network untimed (numba compiles or
loads its cache). The job tables' hashes must agree between the sides: the comparison is of the same work.

Written for issue 25 (one scheduling pass): the pass moved out of the simulator into ``netlab.sched``; the
target is "no slower" (new / old CPU time <= 1 within the spread of the repeats' own ratios).

Usage: python benchmarks/bench_pass_speed.py [--base main] [--repeats 2] [--jobs N] [--trace-dir DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

WORKER = r"""
import hashlib, json, sys, time
sys.path.insert(0, sys.argv[1])
sys.path.insert(1, sys.argv[2])  # benchmarks/ (bench_core, bench_identity) of this tree
import netlab
assert netlab.__file__.startswith(sys.argv[1]), netlab.__file__
from bench_core import PHILLY_TOPOLOGY
from bench_identity import JOB_COLUMNS, table_hash
from netlab.sim import SimConfig, Simulator
from netlab.topology import load_topology
from netlab.traces import load_trace
from netlab.workload.job import jobs_from_frame
network, n_jobs, trace_dir = sys.argv[3], int(sys.argv[4]), sys.argv[5] or None
trace = load_trace("philly", trace_dir=trace_dir, seed=0)
if n_jobs:
    trace = trace.iloc[:n_jobs]
topo = load_topology(PHILLY_TOPOLOGY)
sim = Simulator(topo, jobs_from_frame(trace, topo), "tiresias", "consolidated", None,
                SimConfig(network=network, record_links=True))
cpu0, wall0 = time.process_time(), time.perf_counter()
res = sim.run()
cpu, wall = time.process_time() - cpu0, time.perf_counter() - wall0
cols = [c for c in JOB_COLUMNS if c in res.jobs.columns]
print(json.dumps(dict(cpu_s=cpu, wall_s=wall, jobs=len(res.jobs), hash=table_hash(res.jobs, cols),
                      passes=int(res.summary["events"]))))
"""


def extract(ref: str, into: Path) -> Path:
    """The ``netlab`` package of git ref ``ref``, under ``into``."""
    tar = into / "base.tar"
    with open(tar, "wb") as f:
        subprocess.run(["git", "-C", str(ROOT), "archive", ref, "netlab"], stdout=f, check=True)
    with tarfile.open(tar) as t:
        t.extractall(into / "base", filter="data")
    return into / "base"


def run(side: Path, network: str, n_jobs: int, trace_dir: str | None) -> dict:
    out = subprocess.run([sys.executable, "-c", WORKER, str(side), str(ROOT / "benchmarks"), network, str(n_jobs),
                          trace_dir or ""], capture_output=True, text=True, check=False)
    if out.returncode != 0:
        raise RuntimeError(f"worker on {side} ({network}) failed:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--base", default="main", help="the git ref to compare with (default: main)")
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--jobs", type=int, default=0, help="first N jobs (default 0: the full trace)")
    ap.add_argument("--trace-dir", default=os.environ.get("NETLAB_TRACE_DIR"))
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "pass_speed.json"))
    args = ap.parse_args(argv)
    base_commit = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", args.base], capture_output=True,
                                 text=True, check=True).stdout.strip()
    head = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                          check=True).stdout.strip()
    with tempfile.TemporaryDirectory(prefix="netlab-pass-speed-") as tmp:
        sides = {"old": extract(args.base, Path(tmp)), "new": ROOT}
        for side in sides.values():
            for net in ("fair", "tcp"):
                run(side, net, 3000, args.trace_dir)
        load_before = os.getloadavg()
        runs: dict = {net: {"old": [], "new": []} for net in ("fair", "tcp")}
        for r in range(args.repeats):
            for net in ("fair", "tcp"):
                for name in (("old", "new") if r % 2 == 0 else ("new", "old")):
                    res = run(sides[name], net, args.jobs, args.trace_dir)
                    runs[net][name].append(res)
                    print(f"{net} {name}: {res['jobs']} jobs, CPU {res['cpu_s']:.1f} s, wall {res['wall_s']:.1f} s, "
                          f"load {os.getloadavg()[0]:.1f}", flush=True)
        load_after = os.getloadavg()
    summary = {}
    for net, rs in runs.items():
        hashes = {r["hash"] for side in rs.values() for r in side}
        pairs = [n["cpu_s"] / o["cpu_s"] for o, n in zip(rs["old"], rs["new"])]
        med = {name: statistics.median(r["cpu_s"] for r in side) for name, side in rs.items()}
        summary[net] = dict(median_cpu_s=med, new_over_old=med["new"] / med["old"], pair_ratios=pairs,
                            same_results=len(hashes) == 1)
        print(f"{net}: old {med['old']:.1f} s, new {med['new']:.1f} s CPU, new/old {med['new'] / med['old']:.3f} "
              f"(repeats {', '.join(f'{p:.3f}' for p in pairs)}); same job tables: {len(hashes) == 1}")
    machine = dict(python=platform.python_version(), cpus=os.cpu_count(), loadavg_before=load_before,
                   loadavg_after=load_after)
    from netlab.sim.metrics import write_json

    out = dict(base=base_commit, head=head, jobs=args.jobs or "full", policy="tiresias", placement="consolidated",
               machine=machine, runs=runs, summary=summary)
    print("wrote", write_json(args.out, out))
    return 0 if all(s["same_results"] for s in summary.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
