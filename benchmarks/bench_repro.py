"""Full-size reproduction runs; writes benchmarks/results/repro.json.

Two parts, each run and stored on its own so one can be redone without the
other (``--part dally`` / ``--part cassini`` write ``repro_dally.json`` /
``repro_cassini.json``); every run then merges the two parts it finds into
``repro.json`` with the acceptance check and each paper claim beside what
netlab measured (``--part merge`` only merges).

* Dally-like: Philly and ITP cluster03 (first ``--max-jobs`` jobs) on a 256-GPU
  leaf-spine, consolidation-based Tiresias vs Dally (full and parts),
  topology-aware best fit, FIFO, random (:func:`netlab.repro.dally_grid`).
* CASSINI-like: 24 one-GPU servers, the CASSINI models, Poisson arrivals;
  host schedulers with and without CASSINI (:func:`netlab.repro.cassini_grid`).

The notebooks 02 and 03 read repro.json.

Usage: python benchmarks/bench_repro.py [--part dally|cassini|merge|all] [--max-jobs 2000] [--seeds 3]
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import pandas as pd

from netlab import repro

RESULTS = Path(__file__).parent / "results"


def run_dally(args) -> dict:
    t0 = time.perf_counter()
    result = repro.run(repro.dally_grid(traces=("philly", "itp,cluster=03"), oversub=(4, 8), seeds=args.seeds,
                                        max_jobs=args.max_jobs), out=f"{args.store}/dally", backend=args.backend)
    table = repro.dally_table(result)
    with pd.option_context("display.width", 220, "display.max_columns", 30):
        print(table.to_string(index=False))
    return dict(dally=table, setup=dict(max_jobs=args.max_jobs, seeds=args.seeds, topology=repro.DALLY_TOPOLOGY,
                                        wall_s=time.perf_counter() - t0, failed_cells=len(result.errors)))


def run_cassini(args) -> dict:
    t0 = time.perf_counter()
    result = repro.run(repro.cassini_grid(oversub=(1, 2, 4, 8), loads=(0.6, 0.9), jobs=args.cassini_jobs,
                                          seeds=args.seeds), out=f"{args.store}/cassini", backend=args.backend)
    table = repro.cassini_table(result)
    with pd.option_context("display.width", 220, "display.max_columns", 30):
        print(table.to_string(index=False))
    return dict(cassini=table, setup=dict(jobs=args.cassini_jobs, seeds=args.seeds, topology=repro.CASSINI_TOPOLOGY,
                                          wall_s=time.perf_counter() - t0, failed_cells=len(result.errors)))


def merge(out: Path) -> Path | None:
    """repro.json from the stored parts: both tables, the acceptance check at 4:1 and the claims."""
    parts = {p: json.loads((RESULTS / f"repro_{p}.json").read_text())
             for p in ("dally", "cassini") if (RESULTS / f"repro_{p}.json").exists()}
    if not parts:
        print("no parts stored yet")
        return None
    dally = pd.DataFrame(parts["dally"]["dally"]) if "dally" in parts else None
    cassini = pd.DataFrame(parts["cassini"]["cassini"]) if "cassini" in parts else None
    doc = dict(setup={p: d["setup"] for p, d in parts.items()},
               claims=repro.claims_vs_measured(dally=dally, cassini=cassini))
    if dally is not None:
        doc["dally"] = dally
    if cassini is not None:
        doc["cassini"] = cassini
    if dally is not None and cassini is not None:
        doc["acceptance"] = repro.acceptance(dally[dally.oversub == 4], cassini[cassini.oversub == 4])
    print(doc["claims"].to_string(index=False))
    return repro.write_results(out, **doc)


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--part", choices=("dally", "cassini", "merge", "all"), default="all")
    ap.add_argument("--max-jobs", type=int, default=2000)
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--cassini-jobs", type=int, default=120)
    ap.add_argument("--backend", default="processes")
    ap.add_argument("--store", default="results/bench-repro", help="Sweep stores (resumable).")
    ap.add_argument("--out", default=str(RESULTS / "repro.json"))
    args = ap.parse_args(argv)
    runners = dict(dally=run_dally, cassini=run_cassini)
    for part in (("dally", "cassini") if args.part == "all" else (args.part,) if args.part in runners else ()):
        path = repro.write_results(RESULTS / f"repro_{part}.json", **runners[part](args))
        print(f"wrote {path}")
    path = merge(Path(args.out))
    if path:
        print(f"wrote {path}")


if __name__ == "__main__":
    main()
