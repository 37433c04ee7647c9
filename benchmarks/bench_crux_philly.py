"""Is ``crux``'s average JCT on Philly different from no network policy? Writes benchmarks/results/crux_philly.json.

The setup of ``bench_netpolicy_speed.py`` (tiresias ordering, consolidated placement, the Philly leaf-spine, the
default network), run with ``--netpolicy none`` and ``--netpolicy crux`` on independent slices of the trace
(jobs ``[lo, hi)`` in submission order, each slice a run of its own on an empty cluster) and, with ``--full``, on
the whole trace. Per slice: each arm's average JCT, the ratio crux / none, and the per-job paired difference
(crux minus none, the same job) with a 95% t-interval. Over slices: the mean ratio with a 95% t-interval (the
slices are the independent samples). Where crux loses or wins is broken down by the jobs it can touch (multi-host
jobs, those crux put in a class other than 0, those it re-routed) against the one-host jobs it cannot, and by the
jobs whose preemption count differs between the arms (the network speeds change what tiresias preempts).

Usage: python benchmarks/bench_crux_philly.py [--slices 0:20000,20000:40000,...] [--full] [--trace-dir DIR]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import numpy as np
from bench_crux import interval  # mean and a 95% t-interval, as crux.json reports them

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
SLICES = "0:20000,20000:40000,40000:60000,60000:82247"


def run_arm(trace, netpolicy: str) -> tuple:
    """(job table, per job: the highest class crux gave it and whether it was given paths more than once)."""
    from bench_core import PHILLY_TOPOLOGY

    from netlab.network.model import DEFAULT_NETWORK
    from netlab.policies import NETWORK_POLICIES
    from netlab.sim import SimConfig, Simulator
    from netlab.topology import load_topology
    from netlab.workload.job import jobs_from_frame

    topo = load_topology(PHILLY_TOPOLOGY)
    policy = NETWORK_POLICIES.create(netpolicy)
    top_class, paths_seen = {}, {}
    inner = policy.allocate

    def recorded(view):
        out = inner(view)
        for jid, a in out.items():
            top_class[jid] = max(top_class.get(jid, 0), a.priority)
            paths_seen.setdefault(jid, set()).add((view.running[jid].placement.hosts, a.paths))
        return out

    policy.allocate = recorded
    c0 = time.process_time()
    res = Simulator(topo, jobs_from_frame(trace, topo), "tiresias", "consolidated", None,
                    SimConfig(network=DEFAULT_NETWORK), netpolicy=policy).run()
    rerouted = {jid for jid, s in paths_seen.items() if len(s) > 1}
    return res.jobs, top_class, rerouted, time.process_time() - c0


def compare(none, crux, top_class: dict, rerouted: set) -> dict:
    """Paired per-job JCT differences, overall and by group."""
    a = none.set_index("job_id").jct_s
    b = crux.set_index("job_id").jct_s.reindex(a.index)
    diff = (b - a).to_numpy()
    decided = np.array([j in top_class for j in a.index])  # crux decided on it (it ran with traffic there)
    multi = (none.set_index("job_id").hosts.reindex(a.index) > 1).to_numpy() | decided
    cls = np.array([top_class.get(j, 0) for j in a.index])
    rr = np.array([j in rerouted for j in a.index])
    pre_a = none.set_index("job_id").preemptions.reindex(a.index).to_numpy()
    pre_b = crux.set_index("job_id").preemptions.reindex(a.index).to_numpy()
    groups = dict(all=np.ones(len(a), bool), one_host=~multi, multi_host=multi, class_0_multi_host=multi & (cls == 0),
                  class_1_plus=cls >= 1, rerouted=rr, preempted_more_under_crux=pre_b > pre_a,
                  preempted_less_under_crux=pre_b < pre_a, same_preemptions=pre_b == pre_a)
    out = {}
    for name, m in groups.items():
        d = diff[m]
        out[name] = dict(jobs=int(m.sum()), share_of_total_diff=float(d.sum() / diff.sum()) if diff.sum() else None,
                         none_avg_jct_s=float(a.to_numpy()[m].mean()) if m.any() else None,
                         crux_avg_jct_s=float(b.to_numpy()[m].mean()) if m.any() else None,
                         paired_diff_s=interval(d))
    out["preemptions"] = dict(none=int(pre_a.sum()), crux=int(pre_b.sum()))
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--slices", default=SLICES)
    ap.add_argument("--full", action="store_true", help="also the whole trace")
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from bench_core import DEFAULT_TRACE_DIR, philly_trace

    ap.add_argument("--trace-dir", default=DEFAULT_TRACE_DIR)
    ap.add_argument("--out", default=str(RESULTS / "crux_philly.json"))
    args = ap.parse_args(argv)
    from netlab.sim.metrics import write_json

    trace = philly_trace(args.trace_dir)
    if trace is None:
        return 0
    spans = [tuple(int(x) for x in s.split(":")) for s in args.slices.split(",") if s]
    if args.full:
        spans.append((0, len(trace)))
    rows = []
    for lo, hi in spans:
        part = trace.iloc[lo:hi]
        none, _, _, cpu_none = run_arm(part, "none")
        crux, top, rr, cpu_crux = run_arm(part, "crux")
        row = dict(jobs=f"{lo}:{hi}", n=int(len(part)), none_avg_jct_s=float(none.jct_s.mean()),
                   crux_avg_jct_s=float(crux.jct_s.mean()), ratio=float(crux.jct_s.mean() / none.jct_s.mean()),
                   cpu_s=dict(none=cpu_none, crux=cpu_crux), groups=compare(none, crux, top, rr))
        rows.append(row)
        print(f"{lo}:{hi} none {row['none_avg_jct_s']:.0f} crux {row['crux_avg_jct_s']:.0f} ratio {row['ratio']:.4f} "
              f"paired diff {row['groups']['all']['paired_diff_s']}", flush=True)
    slices = [r for r in rows if r["n"] < len(trace)]
    out = dict(setup="tiresias, consolidated, Philly leaf-spine (bench_core.PHILLY_TOPOLOGY), the default network; "
                     "each slice of the trace a run of its own on an empty cluster",
               measured=time.strftime("%Y-%m-%d %H:%M"), loadavg_start=os.getloadavg()[0],
               ratio_over_slices=interval([r["ratio"] for r in slices]), rows=rows)
    write_json(args.out, out)
    print("ratio over slices", out["ratio_over_slices"], "wrote", args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
