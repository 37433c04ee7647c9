"""Full Philly under the ``tcp`` network model next to ``fair``, in the same process: writes
benchmarks/results/network_speed.json.

Tiresias + consolidated placement on the 512-GPU 4:1 leaf-spine, one core,
as in ``bench_core.py``. Runs alternate (fair, tcp, fair, tcp, ...) so that
load from elsewhere on the machine hits both alike; medians are reported, with
the machine's load average before and after (other work on this 2-core machine
moves both times, and their ratio, by tens of percent), and each repeat's own ratio:
even on an otherwise idle machine they spread (1.38-1.50 in one run of seven, 1.19-1.69 in
another; ``pair_ratios``). ``wall_s`` is the simulation
(the simulator's own clock, as ``bench_core.py``; the target is on it); ``run_wall_s``
is the whole run with its result tables, what a user waits for.

Target (issue "Faithful simulator"): tcp at most 30 s and at most 1.5x the
fair time of the same run.

Usage: python benchmarks/bench_network_speed.py [--repeats 2] [--jobs N] [--networks fair tcp]
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from bench_core import PHILLY_TOPOLOGY, philly_run  # noqa: E402

from netlab.sim.metrics import write_json  # noqa: E402
from netlab.traces import load_trace  # noqa: E402


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--trace-dir", default=None)
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--jobs", type=int, default=None, help="first N jobs (default: the full trace)")
    ap.add_argument("--out", default=str(Path(__file__).parent / "results" / "network_speed.json"))
    ap.add_argument("--networks", nargs="+", default=["fair", "tcp"], choices=["fair", "tcp"],
                    help="run only these (one alone: no ratio; the file is not written)")
    args = ap.parse_args(argv)
    trace = load_trace("philly", trace_dir=args.trace_dir, seed=0)
    nets = tuple(n for n in ("fair", "tcp") if n in args.networks)
    for net in nets:  # warm-up: numba compiles or loads its cache. 3,000 jobs reach components
        philly_run(trace, 3000, network=net)  # large enough for the mean field (500 did not: it compiled while timed)
    load_before = os.getloadavg()
    runs = {net: [] for net in nets}
    for _ in range(args.repeats):
        for net in nets:
            r = philly_run(trace, args.jobs, network=net)
            runs[net].append(r)
            print(f"{net}: {r['jobs']} jobs {r['wall_s']:.2f} s, avg JCT {r['avg_jct_s']:.0f} s", flush=True)
    if len(nets) < 2:  # one network: its times only (the file holds the pair)
        print(f"median {nets[0]} {statistics.median(r['wall_s'] for r in runs[nets[0]]):.2f} s")
        return 0
    med = {net: statistics.median(r["wall_s"] for r in rs) for net, rs in runs.items()}
    ratio = med["tcp"] / med["fair"]
    # each repeat's own ratio (tcp over the fair run just before it): their spread shows how far the machine moves it
    pairs = [t["wall_s"] / f["wall_s"] for f, t in zip(runs["fair"], runs["tcp"])]
    med_run = {net: statistics.median(r["run_wall_s"] for r in rs) for net, rs in runs.items()}
    head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                          cwd=Path(__file__).parent)  # the code measured
    machine = dict(python=platform.python_version(), cpus=os.cpu_count(), loadavg_before=load_before,
                   loadavg_after=os.getloadavg(), commit=head.stdout.strip())
    out = dict(machine=machine, topology=PHILLY_TOPOLOGY,
               policy="tiresias", placement="consolidated", runs=runs, median_wall_s=med, tcp_over_fair=ratio,
               pair_ratios=pairs, pair_ratio_median=statistics.median(pairs),
               median_run_wall_s=med_run, tcp_over_fair_run=med_run["tcp"] / med_run["fair"],
               target_wall_s=30.0, target_ratio=1.5, meets_target=bool(med["tcp"] <= 30.0 and ratio <= 1.5))
    print(f"median fair {med['fair']:.2f} s, tcp {med['tcp']:.2f} s, ratio {ratio:.2f} (per repeat "
          f"{min(pairs):.2f}-{max(pairs):.2f}, median {statistics.median(pairs):.2f}); with the result tables "
          f"{med_run['fair']:.2f} / {med_run['tcp']:.2f} s")
    print("wrote", write_json(args.out, out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
