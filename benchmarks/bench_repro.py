"""Full-size reproduction runs; writes benchmarks/results/repro.json.

Two parts, each run and stored on its own so one can be redone without the
other (``--part dally`` / ``--part cassini`` write ``repro_dally.json`` /
``repro_cassini.json``); every run then merges the two parts it finds into
``repro.json`` with the acceptance check and each paper claim beside what
netlab measured (``--part merge`` only merges).

Both parts run in every transport regime (``--regimes``, default every registered one: each regime on the
network model spec the registry names for it, :mod:`netlab.repro.regimes`), with the ideal network as the
reference, and report every claim per regime with the regime the paper's setup corresponds to and why.

* Dally: Philly and ITP cluster03 (first ``--max-jobs`` jobs) on a 256-GPU
  leaf-spine, consolidation-based Tiresias vs Dally (full and parts),
  topology-aware best fit and FIFO over a congestion sweep (4:1-32:1, 25/50%
  background at 8:1), trace-time and batch submission
  (:func:`netlab.repro.dally_grid`); ``--dally-seeds report`` (default) runs
  the reporting seeds, ``dev`` the development one.
* CASSINI: 24 one-GPU servers, the ``paper`` (13 models) and ``snapshot`` (one model, 4 GPUs each)
  setups; Themis/Tiresias alone (random phases), in step (aligned) and with CASSINI
  (:mod:`netlab.repro.cassini`); CASSINI against its host in every setup and regime, with the measured
  cause wherever it loses (``cassini_vs_host``); ``--cassini-seeds report`` (default) runs the reporting
  seeds, ``dev`` the development ones.

repro.json: ``claims`` (every claim of both papers per regime, as factors), ``dally_claims`` and
``cassini_claims`` (the same with their setups, seeds and reasons), ``cassini_vs_host``, the per-setup
tables, the acceptance check, ``regimes`` (each regime's model spec) and ``setup`` (with run times).
The notebooks 02 and 03 read it.

Usage: python benchmarks/bench_repro.py [--part dally|cassini|merge|all] [--max-jobs 2000] [--regimes ...]
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
    """The congestion sweep (4:1-32:1, background 25/50% at 8:1) x trace-time and batch submission in every
    regime, plus ideal; developed on DALLY_DEV_SEEDS, reported on DALLY_REPORT_SEEDS (``--dally-seeds``)."""
    t0 = time.perf_counter()
    report = args.dally_seeds == "report"
    seeds = (repro.DALLY_REPORT_SEEDS if report else repro.DALLY_DEV_SEEDS)[:args.seeds]
    # the reporting run: baseline, Dally, topo-bestfit and 50% background only (the ablation is on the dev seed)
    grid = repro.dally_grid(seeds=seeds, max_jobs=args.max_jobs, regimes=args.regimes,
                            **(dict(policies=repro.DALLY_REPORT_POLICIES, background=(0.5,)) if report else {}))
    result = repro.run(grid, out=f"{args.store}/dally-{args.dally_seeds}", backend=args.backend)
    table = repro.dally_table(result)
    claims = repro.dally_claims(table)
    with pd.option_context("display.width", 250, "display.max_columns", 40):
        cols = ["trace", "batch", "oversub", "background", "regime", "label", "baseline_ideal_ratio",
                "makespan_gain", "avg_jct_gain", "p99_jct_gain", "comm_overhead_gain"]
        print(table[cols].round(3).to_string(index=False))
        print(claims.to_string(index=False))
    cell_s = (result.summary.assign(regime=result.summary.regime.fillna("(ideal)")).groupby("regime").cell_s
              .agg(["mean", "max"]).round(2).to_dict(orient="index"))
    return dict(dally=table, dally_claims=claims,
                setup=dict(max_jobs=args.max_jobs, seeds=list(seeds), topology=repro.DALLY_TOPOLOGY, grid=grid["grid"],
                           regimes=list(table.regime.unique()), cell_s_by_regime=cell_s,
                           wall_s=time.perf_counter() - t0, failed_cells=len(result.errors)))


def run_cassini(args) -> dict:
    """Both CASSINI setups x oversub 2/4/8 x Themis/Tiresias x (host alone, in step, CASSINI) in every regime,
    plus ideal; developed on DEV_SEEDS, reported on REPORT_SEEDS (``--cassini-seeds dev|report``)."""
    t0 = time.perf_counter()
    seeds = (repro.REPORT_SEEDS if args.cassini_seeds == "report" else repro.DEV_SEEDS)[:args.seeds]
    runs = repro.cassini_runs(repro.cassini_cells(oversub=(2, 4, 8), seeds=seeds, jobs=args.cassini_jobs,
                                                  regimes=args.regimes),
                              workers=args.workers, progress=True)
    table = repro.cassini_table(runs)
    summary = repro.cassini_summary(table)
    vs_host = repro.cassini_vs_host(table)
    claims = repro.cassini_claims(summary, testbed=repro.testbed_results(RESULTS))  # the testbed's recorded runs
    with pd.option_context("display.width", 250, "display.max_columns", 40, "display.max_colwidth", 400):
        print(summary[["setup", "oversub", "host", "regime", "base_vs_ideal", "avg_jct_s_vs_random",
                       "avg_jct_s_vs_aligned", "p99_jct_s_vs_random", "ecn_s_vs_random", "overload_gbit_vs_random",
                       "worst_avg_vs_random"]].round(3).to_string(index=False))
        print(vs_host.round(3).to_string(index=False))
        print(claims.drop(columns=["paper_regime_why", "testbed"]).to_string(index=False))
    cell_s = runs.assign(regime=runs.regime.fillna("(ideal)")).groupby("regime").wall_s.agg(["mean", "max"])
    return dict(cassini=summary, cassini_seeds=table, cassini_runs=runs, cassini_claims=claims,
                cassini_vs_host=vs_host,
                setup=dict(jobs=args.cassini_jobs, seeds=list(seeds), topology=repro.CASSINI_TOPOLOGY,
                           regimes=list(table.regime.unique()),
                           sim_wall_s_by_regime=cell_s.round(2).to_dict(orient="index"),
                           setups=dict(paper=repro.cassini_trace("paper", args.cassini_jobs),
                                       snapshot=repro.cassini_trace("snapshot", args.cassini_jobs)),
                           wall_s=time.perf_counter() - t0))


def merge(out: Path) -> Path | None:
    """repro.json from the stored parts: both tables, every claim per regime, the acceptance check at 4:1 (per
    regime) and each regime's model spec."""
    parts = {p: json.loads((RESULTS / f"repro_{p}.json").read_text())
             for p in ("dally", "cassini") if (RESULTS / f"repro_{p}.json").exists()}
    for p in [p for p, d in parts.items() if not all("regime" in row for row in d.get(f"{p}_claims", [{}]))]:
        print(f"repro_{p}.json has no regime column (recorded before the regimes): left out; run --part {p}")
        del parts[p]
    if not parts:
        print("no parts stored yet")
        return None
    dally = pd.DataFrame(parts["dally"]["dally"]) if "dally" in parts else None
    frame = lambda part, key: pd.DataFrame(parts[part][key]) if part in parts and key in parts[part] else None  # noqa
    doc = dict(setup={p: d["setup"] for p, d in parts.items()},
               claims=repro.claims_table(frame("dally", "dally_claims"), frame("cassini", "cassini_claims")),
               regimes=repro.regime_specs(), paper_regimes=repro.paper_regimes())
    if dally is not None:
        doc["dally"] = dally
        main = dally[(dally.oversub == 4) & ~dally.batch.astype(bool) & (dally.background == 0)]  # trace-time, 4:1
        doc["acceptance"] = repro.acceptance(main, pd.DataFrame(columns=["oversub", "load"]))
        doc["dally_claims"] = frame("dally", "dally_claims")
    if "cassini" in parts:
        doc["cassini"] = frame("cassini", "cassini")
        doc["cassini_claims"] = frame("cassini", "cassini_claims")
        doc["cassini_vs_host"] = frame("cassini", "cassini_vs_host")
    with pd.option_context("display.width", 250, "display.max_columns", 40):
        print(doc["claims"].to_string(index=False))
    return repro.write_results(out, **doc)


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--part", choices=("dally", "cassini", "merge", "all"), default="all")
    ap.add_argument("--max-jobs", type=int, default=2000)
    ap.add_argument("--seeds", type=int, default=3, help="The first N of the chosen seeds (both parts).")
    ap.add_argument("--dally-seeds", choices=("dev", "report"), default="report")
    ap.add_argument("--regimes", nargs="+", default=None,
                    help="Transport regimes (netlab.network.regimes; default: every registered one).")
    ap.add_argument("--cassini-jobs", type=int, default=120)
    ap.add_argument("--cassini-seeds", choices=("dev", "report"), default="report")
    ap.add_argument("--workers", type=int, default=2, help="Processes for the CASSINI runs.")
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
