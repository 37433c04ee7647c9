"""Simulator vs emulated testbed, in two steps.

``--collect`` runs :func:`netlab.congestion.fidelity.fidelity_scenarios` on
the namespace testbed ``--repeats`` times (every job 600+ iterations) and
writes every rank's raw per-iteration timestamps, with each job's and
scenario's parameters, to ``benchmarks/results/fidelity_runs.parquet``. It
resumes: runs already in the file (same scenario definition) are skipped,
and the file is replaced atomically after every run. Needs root
(namespaces), sshd and torch. Then it scores.

Scoring (the default step; no testbed needed) reads the parquet and, for
every model of ("fair", "phase", "link_bound", "tcp") that exists now
(``tcp`` once ``netlab.network.NETWORKS`` registers it), predicts every
job's iteration time and reports median and p90 absolute percentage error
over *contended* jobs (their path shares a link with another job of the
scenario; ``contended_median_ape``, ``contended_p90_ape``), jobs alone
separately, per scenario and overall. The target is the measured iteration
time over the steady window: the mean period after ``warmup`` iterations
while every job of the scenario runs. It also reports the relative-phase
dynamics of every pair of jobs and the compute/iteration jitter of jobs
alone. Writes ``benchmarks/results/fidelity.json``.

``sim_r2_second_collection`` is computed elsewhere (the simulator's R2 on
the second testbed collection); pass it with ``--sim-r2-second-collection``
or it is carried over from the existing JSON.

Usage:
    python benchmarks/bench_fidelity.py --collect [--repeats 2]   # testbed, then score
    python benchmarks/bench_fidelity.py                            # score the stored runs
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

from netlab.congestion import fidelity as fid
from netlab.sim.metrics import write_json
from netlab.testbed import NetnsTestbed
from netlab.topology import load_topology

ROOT = Path(__file__).resolve().parents[1]
TOPOLOGY = ROOT / "testbed" / "topologies" / "leafspine-2rack.yaml"
RESULTS = ROOT / "benchmarks" / "results"


def boost_priority(tb, nice: int) -> int:
    """Renice the testbed's own sshd listeners (it started them; their pids are in its records) before the
    agents are deployed: every agent and training rank forked below them inherits the priority, so other
    CPU-bound work on a shared 2-core machine delays their sleeps' wake-ups and packet handling less.
    The ranks use ~10% of a core each, so they take little from anyone. Returns the niceness set."""
    for proc in list(getattr(tb, "_procs", [])):
        try:
            os.setpriority(os.PRIO_PROCESS, proc.pid, nice)
        except (OSError, AttributeError) as exc:
            print(f"could not renice testbed process {proc.pid}: {exc}", file=sys.stderr)
            return 0
    return nice


def collect(runs_path: Path, repeats: int, iterations: int, nice: int = -10) -> pd.DataFrame:
    from netlab.testbed.controller import Controller

    t0 = time.time()
    with NetnsTestbed(load_topology(TOPOLOGY)) as tb:
        niceness = boost_priority(tb, nice) if nice else 0
        with Controller(tb, progress=False) as ctl:
            scenarios = fid.fidelity_scenarios(tb, iterations=iterations)
            runs = fid.collect_runs(ctl, scenarios, repeats=repeats, out=runs_path, progress=False,
                                    log=lambda msg: print(msg, flush=True), extra=dict(rank_nice=niceness))
    print(f"collection: {time.time() - t0:.0f} s; {len(runs)} rows in {runs_path}")
    return runs


def _records(df: pd.DataFrame, digits: int = 5) -> list[dict]:
    return json.loads(df.round(digits).to_json(orient="records"))


def phase_vs_model(runs: pd.DataFrame, tb, wire_overhead: dict) -> dict:
    """The tcp model's relative-phase series beside the testbed's, per pair of jobs (each pair once): where
    the phase ended, how locked it was, when the pair left being in step, and the errors."""
    cmp = fid.phase_comparison(runs, fid.simulated_runs(runs, tb, "tcp", wire_overhead))
    cmp = cmp[cmp.ref_job < cmp.job_id]
    cols = ["scenario", "repeat", "ref_job", "job_id", "phase_end_measured", "phase_end_model", "lock_end_measured",
            "lock_end_model", "left_step_iter_measured", "left_step_iter_model", "drift_measured", "drift_model",
            "phase_end_error", "spacing_end_error"]
    per_scenario = cmp.groupby("scenario", sort=False).agg(
        spacing_end_error_median=("spacing_end_error", "median"), lock_end_measured=("lock_end_measured", "median"),
        lock_end_model=("lock_end_model", "median"), left_step_iter_measured=("left_step_iter_measured", "median"),
        left_step_iter_model=("left_step_iter_model", "median")).reset_index()
    return dict(pairs=_records(cmp[cols], 4), per_scenario=_records(per_scenario, 4),
                spacing_end_error_median=float(cmp.spacing_end_error.median()),
                spacing_end_error_p90=float(cmp.spacing_end_error.quantile(0.9)))


def score(runs_path: Path, out: Path, sim_r2_second_collection: float | None = None) -> dict:
    runs = pd.read_parquet(runs_path)
    rate_scale = float(runs.rate_scale.iloc[0])
    tb = NetnsTestbed(load_topology(TOPOLOGY), rate_scale=rate_scale)  # never brought up: topology and rates only
    rows = fid.score_runs(runs, tb)
    models = rows.attrs["models"]
    all_models = ["fair_raw", *models]
    overall = fid.ape_summary(rows, all_models)
    per_scenario = fid.per_scenario_summary(rows, all_models)

    # Dynamics: relative phase of every pair of jobs, iteration times, jitter.
    phases = fid.phase_summary(fid.phase_series(runs))
    jitter = fid.compute_jitter(runs)
    jobs_per_run = runs.groupby(list(fid.RUN_KEYS)).job_id.nunique().rename("n_jobs").reset_index()
    jitter = jitter.merge(jobs_per_run, on=list(fid.RUN_KEYS))
    jitter = jitter.merge(rows[["scenario", "repeat", "job_id", "contended"]], on=["scenario", "repeat", "job_id"])
    alone = jitter[jitter.n_jobs == 1]  # the one-job scenarios
    uncontended = jitter[~jitter.contended]
    walls = runs.groupby(list(fid.RUN_KEYS)).run_wall_s.first() if "run_wall_s" in runs.columns else None
    phase_model = phase_vs_model(runs, tb, rows.attrs["wire_overhead"]) if "tcp" in models else None

    # Hook: sim_r2_second_collection is computed by the simulator's network-model work elsewhere; it is only
    # accepted here (argument) or carried over from an existing fidelity.json, never computed.
    if sim_r2_second_collection is None and out.exists():
        try:
            sim_r2_second_collection = json.loads(out.read_text()).get("sim_r2_second_collection")
        except (ValueError, OSError):
            sim_r2_second_collection = None

    def best_of(names):
        names = [m for m in names if m in overall and overall[m]["contended_median_ape"] is not None]
        return min(names, key=lambda m: overall[m]["contended_median_ape"]) if names else None

    best = best_of(models)
    # "met": judged on the simulator's own network models (link_bound is an analytic bound, not one of them)
    best_sim = best_of([m for m in models if m != "link_bound"])
    report = dict(
        machine=dict(python=platform.python_version(), cpus=os.cpu_count()), topology=TOPOLOGY.name,
        runs_file=str(runs_path.relative_to(ROOT)) if runs_path.is_relative_to(ROOT) else str(runs_path),
        rate_scale=rate_scale, repeats=int(runs.repeat.nunique()), scenarios=int(runs.scenario.nunique()),
        collection_wall_s_per_repeat={int(r): float(w.sum()) for r, w in walls.groupby(level=1)}
        if walls is not None else None,
        target="per job: mean period over the steady window (after warm-up, while every job of the scenario runs)",
        calibration=("wire_overhead fitted per repeat on the one-job scenarios whose 2-rank job crosses a rack "
                     "uplink (the contended jobs' bottleneck): median of measured / predicted (iteration - nominal "
                     "compute); applied to every model; fair_raw is fair without it. wire_overhead_all_solo: the "
                     "first report's fit on every one-job scenario, for reference"),
        wire_overhead_fitted=rows.attrs["wire_overhead"],
        wire_overhead_all_solo=rows.attrs["wire_overhead_all_solo"],
        models_scored=models, models_skipped=rows.attrs["notes"],
        models={m: overall[m] for m in all_models if m in overall},
        per_scenario=_records(per_scenario),
        contended_jobs=_records(rows[rows.contended][["scenario", "repeat", "job_id", "hosts"]]),
        alone_jobs=_records(rows[~rows.contended][["scenario", "repeat", "job_id", "hosts"]]),
        phase_dynamics=_records(phases, 4),
        phase_vs_tcp=phase_model,
        jitter_alone=dict(
            compute_cv_median=float(alone.compute_cv.median()), compute_cv_max=float(alone.compute_cv.max()),
            iter_cv_median=float(alone.iter_cv.median()), iter_cv_max=float(alone.iter_cv.max()),
            compute_rcv_median=float(alone.compute_rcv.median()), iter_rcv_median=float(alone.iter_rcv.median()),
            allreduce_cv_median=float(alone.allreduce_cv.median()),
            allreduce_rcv_median=float(alone.allreduce_rcv.median()),
            compute_overshoot_ms_median=float(alone.compute_overshoot_ms.median()),
            uncontended_compute_cv_median=float(uncontended.compute_cv.median()),
            uncontended_iter_cv_median=float(uncontended.iter_cv.median()),
            per_job=_records(jitter[["scenario", "repeat", "job_id", "n_jobs", "contended", "compute_mean_ms",
                                     "compute_std_ms", "compute_cv", "compute_rcv", "allreduce_mean_ms",
                                     "allreduce_cv", "iter_mean_ms", "iter_std_ms", "iter_cv", "iter_rcv"]], 5)),
        # ---- hook: filled in by the other side of issue 12 (not computed here) ----
        sim_r2_second_collection=sim_r2_second_collection,
        target_contended_median_ape=0.05, target_contended_p90_ape=0.15,
        best_model=best, best_simulator_model=best_sim,
        met=bool(best_sim is not None and overall[best_sim]["contended_median_ape"] <= 0.05
                 and overall[best_sim]["contended_p90_ape"] <= 0.15),
        # per job and repeat (the notebook reads these)
        rows=_records(rows.drop(columns=["window"])),
        summary=_records(fid.fidelity_summary(rows)),
    )
    write_json(out, report)
    print(pd.DataFrame(overall).T.round(3).to_string())
    cols = ["scenario", "contended_jobs", "measured_iter_ms"] + [f"{m}_median_ape" for m in all_models]
    with pd.option_context("display.width", 250, "display.max_colwidth", 60):
        print(per_scenario[cols].round(3).to_string(index=False))
    for m, note in rows.attrs["notes"].items():
        print(f"note: {m}: {note}")
    print("wrote", out)
    return report


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--collect", action="store_true", help="run the testbed first (root, sshd, torch)")
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--iterations", type=int, default=fid.ITERATIONS, help="iterations of each scenario's slowest job")
    ap.add_argument("--nice", type=int, default=-10,
                    help="niceness of the testbed's processes while collecting (0: leave as is)")
    ap.add_argument("--runs", default=str(RESULTS / "fidelity_runs.parquet"))
    ap.add_argument("--out", default=str(RESULTS / "fidelity.json"))
    ap.add_argument("--sim-r2-second-collection", type=float, default=None,
                    help="hook: the simulator's R2 on the second collection, computed elsewhere")
    args = ap.parse_args(argv)
    runs_path, out = Path(args.runs), Path(args.out)
    if args.collect:
        if os.geteuid() != 0:
            print("bench_fidelity --collect needs root (network namespaces)", file=sys.stderr)
            return 2
        collect(runs_path, args.repeats, args.iterations, args.nice)
    if not runs_path.exists():
        print(f"no runs at {runs_path}; run with --collect first", file=sys.stderr)
        return 2
    score(runs_path, out, args.sim_r2_second_collection)
    return 0


if __name__ == "__main__":
    sys.exit(main())
