"""Why CASSINI falls below its host where it does: writes benchmarks/results/cassini_cause.json.

For every seed of the CASSINI reproduction where CASSINI's average JCT is above its host's (the per-seed table
``cassini_seeds`` of ``repro_cassini.json``, which ``bench_repro.py --part cassini`` writes; or the cases given
with ``--case``), it runs the case again and measures (:func:`netlab.repro.cassini_cause.case_cause`): the two
runs job by job (waiting vs running, the worst jobs' share, which jobs lose, preemptions, racks, the jobs the
divergence never reached), CASSINI's decisions (alternatives taken over the host's own pick, phases set),
CASSINI on the host's own pick only (phases alone), the host against itself under capacity nudges of
1 + k x 5e-5 (its own spread) and CASSINI against its host on each nudged capacity. CASSINI is run as it is:
nothing here tunes it.

Every case's host and CASSINI average JCT are compared with the table's (``reproduced``): the runs are
deterministic, so a mismatch means the table came from another commit (re-run ``bench_repro.py --part cassini``).

Usage:
    python benchmarks/bench_cassini_cause.py                     # the cases below 1 in repro_cassini.json
    python benchmarks/bench_cassini_cause.py --case paper,2,themis,reno-shallow,10
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from pathlib import Path

import pandas as pd

from netlab.repro import regimes as reg
from netlab.repro.cassini_cause import below_one, case_cause
from netlab.sim.metrics import write_json

RESULTS = Path(__file__).parent / "results"


def cause_text(c: dict) -> str:
    """One sentence per case from its measured numbers."""
    p, dec, own, self_, n = c["per_job"], c["decisions"], c["host_pick_only"], c["host_vs_itself"], c["nudged_ratio"]
    alt, rest = c["jobs_by_decision"]["alternative"], c["jobs_by_decision"]["host_pick"]
    inside = self_["ratio_min"] <= c["ratio"] <= self_["ratio_max"]
    return (f"{c['ratio']:.3f}x: average JCT {p['avg_d_jct_s']:+.0f} s per job = {p['avg_d_wait_s']:+.0f} s waiting, "
            f"{p['avg_d_run_s']:+.0f} s running (network-added {p['avg_d_net_s']:+.0f} s); the {p['worst_n']} worst "
            f"jobs carry {p['worst_share_of_increase']:.0%} of the increase (median isolated "
            f"{p['worst_median_isolated_s']:.0f} s vs {p['rest_median_isolated_s']:.0f} s for the others); "
            f"preemptions {p['preemptions_host']} host vs {p['preemptions_cassini']} CASSINI; the "
            f"{p['untouched_jobs']} jobs the divergence never reached {p['untouched_avg_d_jct_s'] or 0:+.0f} s; "
            f"CASSINI took an alternative to the host's pick in {dec.get('took_alternative', 0)} of "
            f"{dec.get('decisions', 0)} decisions (those {alt['jobs']} jobs ran {alt['avg_d_run_s'] or 0:+.0f} s, the "
            f"others {rest['avg_d_run_s'] or 0:+.0f} s); on the host's pick only (phases alone) {own['ratio']:.3f}x; "
            f"the host "
            f"against itself under capacity nudges {self_['ratio_min']:.3f}-{self_['ratio_max']:.3f}x"
            + (" (the ratio lies inside it)" if inside else " (the ratio lies outside it)")
            + f"; CASSINI vs host on the same nudged capacities: median {n['median']:.3f}x, below 1 in {n['below_1']} "
              f"of {n['runs']}")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--table", default=str(RESULTS / "repro_cassini.json"),
                    help="the CASSINI part of the reproduction (its cassini_seeds rows)")
    ap.add_argument("--case", action="append", default=[],
                    help="setup,oversub,host,regime,seed (instead of the table's cases below 1; repeatable)")
    ap.add_argument("--nudges", type=int, default=4, help="host-against-itself runs: k = -nudges..nudges, k != 0")
    ap.add_argument("--out", default=str(RESULTS / "cassini_cause.json"))
    args = ap.parse_args(argv)
    t0, c0 = time.time(), time.process_time()
    table = pd.DataFrame(json.loads(Path(args.table).read_text())["cassini_seeds"]) if Path(args.table).exists() \
        else pd.DataFrame()
    setup = json.loads(Path(args.table).read_text())["setup"] if Path(args.table).exists() else {}
    jobs, load = int(setup.get("jobs", 120)), 0.9
    if args.case:
        cases = []
        for spec in args.case:
            s, o, h, r, seed = spec.split(",")
            cases.append(dict(setup=s, oversub=int(o), host=h, regime=r, seed=int(seed)))
    else:
        cases = below_one(table)[["setup", "oversub", "host", "regime", "seed", "avg_jct_s_random",
                                  "avg_jct_s_cassini"]].to_dict(orient="records")
    out = []
    for c in cases:
        cell = dict(c, network=reg.network_of(c["regime"])["network"], jobs=jobs, load=load)
        t = time.process_time()
        res = case_cause(cell, nudges=args.nudges)
        if "avg_jct_s_random" in c:
            res["table"] = dict(avg_jct_s_host=c["avg_jct_s_random"], avg_jct_s_cassini=c["avg_jct_s_cassini"])
            res["reproduced"] = bool(abs(res["avg_jct_s_host"] / c["avg_jct_s_random"] - 1) < 1e-9
                                     and abs(res["avg_jct_s_cassini"] / c["avg_jct_s_cassini"] - 1) < 1e-9)
        res["cause"] = cause_text(res)
        res["cpu_s"] = time.process_time() - t
        print(f"{c['setup']} {c['oversub']}:1 {c['host']} {c['regime']} seed {c['seed']}: {res['cause']}", flush=True)
        out.append(res)
    write_json(args.out, dict(
        note="per case where CASSINI's average JCT is above its host's: the two runs job by job, CASSINI's "
             "decisions, CASSINI on the host's own pick only and the host against itself "
             "(netlab/repro/cassini_cause.py); ratio = host / CASSINI average JCT (< 1: CASSINI worse)",
        table=str(Path(args.table).name) if not args.case else None, cases=out,
        machine=dict(python=platform.python_version(), cpus=os.cpu_count(), load_avg_1m=os.getloadavg()[0]),
        cpu_s=time.process_time() - c0, wall_s=time.time() - t0))
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
