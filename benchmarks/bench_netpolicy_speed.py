"""What a network policy costs on full Philly under the default network (issue 27's target: <= 1.3x).

Full Philly (the trace as ``bench_identity`` runs it: tiresias ordering, consolidated placement, the
Philly topology), the default network model, run with ``--netpolicy none`` and with each named network
policy, alternating in one process (none, crux, none, crux, ...) so load drifts hit both alike. The measure is
CPU time (``time.process_time``) per run; the ratio is the median policy run over the median ``none`` run.
Each arm first runs the trace's first ``--warmup-jobs`` jobs untimed (numba compiles what that arm uses).
Wall time and the load average are recorded beside it. Each trace length (``--jobs N`` or the full trace)
is a row of its own under ``by_jobs`` (``"20000"``, ``"all"``); a run replaces its own row and keeps the others.

Usage: python benchmarks/bench_netpolicy_speed.py [--repeats 2] [--policies crux] [--jobs N] [--trace-dir DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
TARGET = 1.3


def run_once(trace, topo_spec: str, netpolicy: str, network: str) -> dict:
    from netlab.sim import SimConfig, Simulator
    from netlab.topology import load_topology
    from netlab.workload.job import jobs_from_frame

    topo = load_topology(topo_spec)
    jobs = jobs_from_frame(trace, topo)
    c0, w0 = time.process_time(), time.perf_counter()
    res = Simulator(topo, jobs, "tiresias", "consolidated", None, SimConfig(network=network),
                    netpolicy=netpolicy).run()
    return dict(netpolicy=netpolicy, cpu_s=time.process_time() - c0, wall_s=time.perf_counter() - w0,
                avg_jct_s=float(res.summary["avg_jct_s"]), jobs=int(len(res.jobs)), load=os.getloadavg()[0])


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--policies", default="crux")
    ap.add_argument("--jobs", type=int, default=None, help="the trace's first N jobs only (default: all)")
    ap.add_argument("--warmup-jobs", type=int, default=3000, help="each arm first runs this many jobs, untimed")
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from bench_core import DEFAULT_TRACE_DIR, PHILLY_TOPOLOGY, philly_trace

    ap.add_argument("--trace-dir", default=DEFAULT_TRACE_DIR)
    ap.add_argument("--out", default=str(RESULTS / "netpolicy_speed.json"))
    args = ap.parse_args(argv)

    from netlab.network.model import DEFAULT_NETWORK
    from netlab.sim.metrics import write_json

    trace = philly_trace(args.trace_dir)
    if trace is None:
        return 0
    if args.jobs is not None:
        trace = trace.iloc[:args.jobs]
    policies = args.policies.split(",")
    for pol in ["none", *policies]:  # compiles each arm's kernels (the priority classes' too): not timed
        run_once(trace.iloc[:args.warmup_jobs], PHILLY_TOPOLOGY, pol, DEFAULT_NETWORK)
    runs, load0 = [], os.getloadavg()[0]
    for rep in range(args.repeats):
        for pol in ["none", *policies]:
            r = dict(repeat=rep, **run_once(trace, PHILLY_TOPOLOGY, pol, DEFAULT_NETWORK))
            runs.append(r)
            print(f"repeat {rep} {pol}: cpu {r['cpu_s']:.1f} s wall {r['wall_s']:.1f} s load {r['load']:.1f} "
                  f"avg JCT {r['avg_jct_s']:.0f} s", flush=True)
    base = statistics.median(r["cpu_s"] for r in runs if r["netpolicy"] == "none")
    ratios = {}
    for pol in policies:
        med = statistics.median(r["cpu_s"] for r in runs if r["netpolicy"] == pol)
        ratios[pol] = dict(cpu_ratio=med / base, within_target=med / base <= TARGET,
                           per_repeat=[a["cpu_s"] / b["cpu_s"] for a, b in
                                       zip([r for r in runs if r["netpolicy"] == pol],
                                           [r for r in runs if r["netpolicy"] == "none"])])
    out = dict(target=f"--netpolicy on full Philly under the default network <= {TARGET}x the CPU time without",
               network=DEFAULT_NETWORK, topology=PHILLY_TOPOLOGY, ordering="tiresias", placement="consolidated",
               jobs=runs[0]["jobs"], first_jobs_only=args.jobs,
               warmup_jobs=args.warmup_jobs, loadavg_start=load0, repeats=args.repeats, cpus=os.cpu_count(),
               measured=time.strftime("%Y-%m-%d %H:%M"), none_cpu_s_median=base, ratios=ratios, runs=runs)
    path = Path(args.out)
    doc = json.loads(path.read_text()) if path.exists() else {}
    rows = doc.get("by_jobs", {}) if isinstance(doc.get("by_jobs"), dict) else {}
    rows[str(args.jobs) if args.jobs is not None else "all"] = out
    write_json(args.out, dict(target=out["target"], by_jobs=dict(sorted(rows.items()))))
    print({p: round(v["cpu_ratio"], 3) for p, v in ratios.items()}, "wrote", args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
