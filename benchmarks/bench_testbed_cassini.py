"""CASSINI vs its host scheduler on the emulated testbed, and the simulator on the same trace (issue 13, part 4).

Brings up :data:`netlab.repro.testbed.TOPOLOGY` on the namespace testbed (root, sshd, torch), replays
:func:`netlab.repro.testbed.trace` (5 BERT-base 3-GPU jobs, 150-250 iterations) through ``TestbedCluster``
under Themis + consolidated ("host") and Themis + CASSINI over consolidated ("cassini"), once per seed,
alternating the two so machine load falls on both alike, and replays the same trace in the simulator with the
``tcp`` network. Writes ``benchmarks/results/testbed_cassini.json``: per (where, seed) avg/p99 JCT and
makespan of both and the ratio CASSINI / host; per job its JCT, placement, phase, the start error of its
first iteration and the measured median/p99 iteration time; the 1-minute load average around every run.

Usage: python benchmarks/bench_testbed_cassini.py [--seeds 0 1] [--jobs 5]
"""

from __future__ import annotations

import argparse
import os
import platform
import signal
import sys
import time
from pathlib import Path

import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_fidelity import _records, boost_priority  # noqa: E402

from netlab.repro import testbed as rt  # noqa: E402
from netlab.sim.metrics import write_json  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "benchmarks" / "results" / "testbed_cassini.json"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seeds", type=int, nargs="+", default=[0])
    ap.add_argument("--jobs", type=int, default=5)
    ap.add_argument("--nice", type=int, default=-10)
    ap.add_argument("--out", default=str(OUT))
    args = ap.parse_args(argv)
    if os.geteuid() != 0:
        print("bench_testbed_cassini needs root (network namespaces)", file=sys.stderr)
        return 2
    from netlab.testbed import NetnsTestbed
    from netlab.testbed.controller import Controller
    from netlab.topology import load_topology

    signal.signal(signal.SIGINT, signal.default_int_handler)  # SIGINT unwinds: the testbed is torn down
    t0 = time.time()
    results, loads, walls, info = {}, [], {}, {}
    with NetnsTestbed(load_topology(rt.TOPOLOGY), rate_scale=rt.RATE_SCALE) as tb:
        niceness = boost_priority(tb, args.nice) if args.nice else 0
        info = dict(links=tb.link_rates()[["src", "dst", "rate_mbit"]].to_dict("records"), leaf_queue=tb.leaf_queue)
        with Controller(tb, progress=False) as ctl:
            for seed in args.seeds:
                jobs = rt.trace(args.jobs, seed=seed)
                order = rt.POLICIES if seed % 2 == 0 else rt.POLICIES[::-1]
                for policy in order:
                    before = os.getloadavg()[0]
                    w0 = time.time()
                    results[("testbed", policy, seed)] = rt.run_testbed(ctl, jobs, policy, seed=seed)
                    walls[f"testbed {policy} seed {seed}"] = time.time() - w0
                    loads.append(dict(policy=policy, seed=seed, load_1m_before=before,
                                      load_1m_after=os.getloadavg()[0]))
                    s = results[("testbed", policy, seed)].summary
                    print(f"testbed seed {seed} {policy}: avg JCT {s['avg_jct_s']:.1f} s, p99 {s['p99_jct_s']:.1f} s "
                          f"({walls[f'testbed {policy} seed {seed}']:.0f} s wall, load {before:.1f} -> "
                          f"{loads[-1]['load_1m_after']:.1f})", flush=True)
    for seed in args.seeds:
        jobs = rt.trace(args.jobs, seed=seed)
        for policy in rt.POLICIES:
            results[("sim", policy, seed)] = rt.run_simulator(jobs, policy, seed=seed)
    cmp = rt.compare(results)
    per_job = pd.concat([rt.job_rows(r, w, p, s) for (w, p, s), r in results.items()], ignore_index=True)
    tb_ratio = cmp[cmp["where"] == "testbed"].cassini_over_host_avg_jct_s
    sim_ratio = cmp[cmp["where"] == "sim"].cassini_over_host_avg_jct_s
    meas = per_job[per_job["where"] == "testbed"].groupby(["policy", "seed"]).measured_iter_s.mean().unstack(0)
    meas99 = per_job[per_job["where"] == "testbed"].groupby(["policy", "seed"]).measured_iter_p99_s.mean().unstack(0)
    report = dict(
        machine=dict(python=platform.python_version(), cpus=os.cpu_count(), rank_nice=niceness),
        setup=dict(topology=rt.TOPOLOGY, model=rt.MODEL, gpus_per_job=rt.GPUS, ordering=rt.ORDERING, host=rt.HOST,
                   cassini="cassini over consolidated, max_rephase=0", preemption="none (both)",
                   rate_scale=rt.RATE_SCALE, time_scale=rt.TIME_SCALE, start_delay_s=rt.START_DELAY_S,
                   jobs=args.jobs, seeds=args.seeds, simulator_network="tcp", testbed=info,
                   note="testbed JCTs include START_DELAY_S / TIME_SCALE trace seconds per job (rank start-up "
                        "and phase alignment); the simulator's do not"),
        summary=_records(cmp),
        headline=dict(
            cassini_over_host_avg_jct_testbed=float(tb_ratio.mean()) if len(tb_ratio) else None,
            cassini_over_host_avg_jct_sim=float(sim_ratio.mean()) if len(sim_ratio) else None,
            cassini_over_host_mean_iter_testbed=(float((meas["cassini"] / meas["host"]).mean())
                                                 if {"cassini", "host"} <= set(meas.columns) else None),
            cassini_over_host_p99_iter_testbed=(float((meas99["cassini"] / meas99["host"]).mean())
                                                if {"cassini", "host"} <= set(meas99.columns) else None)),
        per_job=_records(per_job),
        load=_records(pd.DataFrame(loads), 2),
        wall_s=dict(walls, total=time.time() - t0),
    )
    write_json(args.out, report)
    with pd.option_context("display.width", 250, "display.max_columns", 30):
        print(cmp.round(3).T.to_string())
        print(per_job.round(3).to_string(index=False))
    print(report["headline"])
    print("wrote", args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
