"""How far one full-trace result moves when the input moves by almost nothing: writes
benchmarks/results/sensitivity.json.

Why: a scheduler comparison on one trace and one cluster is a single run of a chaotic system. A completion
that moves by a millisecond can change which job a preemptive scheduler starts next, and that decision
moves thousands of others. So a difference between two runs is a result only if it exceeds what such
nudges produce on their own. This benchmark measures that noise floor. It runs full Philly (Tiresias +
consolidated on the 512-GPU 4:1 leaf-spine, as ``bench_network_speed.py``) once per capacity scale: every
link's capacity times 1 + k x step, for k = -nudges .. nudges (default 1 + k x 5e-5, k = -4 .. 4: at most
0.02%, far below anything a testbed could measure). It reports avg JCT, p99 JCT and makespan per run,
and per network model their spread, (max - min) / median (it grows with the number of runs), and their
coefficient of variation (standard deviation / mean, which does not). Runs are deterministic: the same
scale gives the same numbers.

Usage: python benchmarks/bench_sensitivity.py [--jobs N] [--networks fair,tcp] [--step 5e-5] [--nudges 4]
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from bench_core import PHILLY_TOPOLOGY, philly_run  # noqa: E402

from netlab.sim.metrics import write_json  # noqa: E402
from netlab.traces import load_trace  # noqa: E402

METRICS = ("avg_jct_s", "p99_jct_s", "makespan_s")


def spread(values: list[float]) -> float:
    """(max - min) / median: how far apart the runs landed, relative to a typical one."""
    return (max(values) - min(values)) / statistics.median(values)


def cv(values: list[float]) -> float:
    """Standard deviation (n - 1) over mean: a run's typical distance from the others, relative."""
    return statistics.stdev(values) / statistics.mean(values)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--trace-dir", default=None)
    ap.add_argument("--jobs", type=int, default=None, help="first N jobs (default: the full trace)")
    ap.add_argument("--networks", default="fair,tcp")
    ap.add_argument("--step", type=float, default=5e-5, help="relative capacity change per step")
    ap.add_argument("--nudges", type=int, default=4, help="steps each way")
    ap.add_argument("--out", default=str(Path(__file__).parent / "results" / "sensitivity.json"))
    args = ap.parse_args(argv)
    trace = load_trace("philly", trace_dir=args.trace_dir, seed=0)
    scales = [1.0 + k * args.step for k in range(-args.nudges, args.nudges + 1)]
    runs, summary = {}, {}
    for net in args.networks.split(","):
        runs[net] = []
        for scale in scales:
            r = philly_run(trace, args.jobs, network=net, capacity_scale=scale)
            runs[net].append(dict(capacity_scale=scale, **{m: r[m] for m in (*METRICS, "preemptions", "wall_s")}))
            print(f"{net} x{scale:.4f}: avg JCT {r['avg_jct_s']:.0f} s, p99 {r['p99_jct_s']:.0f} s, "
                  f"makespan {r['makespan_s']:.0f} s", flush=True)
        summary[net] = {m: dict(spread=spread([r[m] for r in runs[net]]), cv=cv([r[m] for r in runs[net]]))
                        for m in METRICS}
        print(f"{net}: " + ", ".join(f"{m} spread {v['spread']:.1%} cv {v['cv']:.1%}" for m, v in summary[net].items()),
              flush=True)
    machine = dict(python=platform.python_version(), cpus=os.cpu_count())
    out = dict(machine=machine, topology=PHILLY_TOPOLOGY, policy="tiresias", placement="consolidated",
               jobs=args.jobs or len(trace), capacity_scales=scales, runs=runs, spread=summary)
    print("wrote", write_json(args.out, out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
