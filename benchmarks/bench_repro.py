"""Full-size reproduction runs for issue 3; writes benchmarks/results/repro.json.

* Dally-like: Philly and ITP cluster03 (first ``--max-jobs`` jobs; most of its jobs are multi-GPU) on a 256-GPU leaf-spine
  at 4:1 and 8:1, consolidation-based Tiresias vs Dally (full and parts),
  topology-aware best fit, FIFO, random; fair and ideal networks; 3 seeds.
* CASSINI-like: 24 one-GPU servers, the 13 CASSINI models, Poisson arrivals;
  Themis/Tiresias with and without CASSINI on the phase network, 4:1, and a
  sweep over oversubscription (1, 2, 4, 8) and load (0.6, 0.9).

The notebooks 02 and 03 read the file: the acceptance ratios (Tiresias +
consolidated over the best network-aware policy) and each paper claim next to
what netlab measured.

Usage: python benchmarks/bench_repro.py [--max-jobs 2000] [--seeds 3] [--backend processes]
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import pandas as pd

from netlab import repro


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--max-jobs", type=int, default=2000)
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--cassini-jobs", type=int, default=120)
    ap.add_argument("--backend", default="processes")
    ap.add_argument("--store", default="results/bench-repro", help="Sweep stores (resumable).")
    ap.add_argument("--out", default=str(Path(__file__).parent / "results" / "repro.json"))
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    dally = repro.run(repro.dally_grid(traces=("philly", "itp,cluster=03"), oversub=(4, 8), seeds=args.seeds,
                                       max_jobs=args.max_jobs), out=f"{args.store}/dally", backend=args.backend)
    dally_t = repro.dally_table(dally)
    t1 = time.perf_counter()
    cas = repro.run(repro.cassini_grid(oversub=(1, 2, 4, 8), loads=(0.6, 0.9), jobs=args.cassini_jobs,
                                       seeds=args.seeds), out=f"{args.store}/cassini", backend=args.backend)
    cas_t = repro.cassini_table(cas)
    t2 = time.perf_counter()
    congested = dally_t[dally_t.oversub == 4]
    acceptance = repro.acceptance(congested, cas_t[cas_t.oversub == 4])
    claims = repro.claims_vs_measured(dally=dally_t, cassini=cas_t)
    errors = pd.concat([dally.errors, cas.errors], ignore_index=True)
    path = repro.write_results(args.out, dally=dally_t, cassini=cas_t, acceptance=acceptance, claims=claims,
                               setup=dict(max_jobs=args.max_jobs, seeds=args.seeds, cassini_jobs=args.cassini_jobs,
                                          dally_topology=repro.DALLY_TOPOLOGY,
                                          cassini_topology=repro.CASSINI_TOPOLOGY,
                                          dally_wall_s=t1 - t0, cassini_wall_s=t2 - t1, failed_cells=len(errors)))
    with pd.option_context("display.width", 220, "display.max_columns", 30):
        print(dally_t.to_string(index=False))
        print(cas_t.to_string(index=False))
        print(pd.DataFrame(acceptance).T)
        print(claims.to_string(index=False))
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
