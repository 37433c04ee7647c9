"""The interleaving experiment on the namespace testbed (issue 13, part 4), measured vs the simulator.

``--collect`` brings up ``testbed/topologies/leafspine-2rack.yaml`` (as ``bench_fidelity --collect``
does, with the testbed's processes reniced), runs :func:`netlab.congestion.interleave.interleave_scenarios`
``--repeats`` times (repeat-major, resumable, the parquet replaced after every run) and writes the raw
per-iteration logs with link counters and telemetry (HTB overlimits/drops/backlog, TCP retransmits) to
``benchmarks/results/interleave_runs.parquet``. SIGINT stops it cleanly (the testbed is torn down; the
runs already written stay). Then, or alone (no testbed needed), it scores: per scenario and job the
measured mean and p99 iteration time beside the ``fair`` and ``tcp`` models' means and the ``tcp``
model's own run's mean and p99, the shifted/aligned ratios measured vs simulated, the relative-phase
summaries (measured and the tcp model's) and the uplink telemetry: ``benchmarks/results/interleave.json``.

Parts (``--part``), each with its own runs file; ``interleave.json`` holds the main part's report at the
top level and every other part that has runs under ``parts``:

* ``main``: every scenario, 2-rank jobs, the default queue (a pfifo of ``netns.QUEUE_PKTS`` packets under
  each HTB class): ``interleave_runs.parquet``;
* ``byte_queue``: alone / aligned / CASSINI's shift / two random shifts with a small byte-limited queue
  (a bfifo of ``BYTE_QUEUE`` bytes, 10 full-size frames = 1.2 ms at the 100 Mbit uplink) on every shaped
  link, for HTB overlimits, drops and backlog where a switch port's buffer would overflow:
  ``interleave_bytequeue_runs.parquet``;
* ``byte_queue_100``: the same scenarios with a bfifo of ``BYTE_QUEUE_100`` bytes (100 full-size frames, 12 ms at
  100 Mbit/s: the queue ``tcp-shallow`` assumes, ``buffer_packets`` 100, and the referee's shallow switch ports
  hold), to tell what the 10-frame queue asks of the model from what a 100-packet queue asks:
  ``interleave_bytequeue100_runs.parquet``;
* ``four_rank``: two 4-rank jobs (two hosts in each rack each) on ``leafspine-2rack-4.yaml``, alone,
  aligned, at CASSINI's shift and at two random shifts: ``interleave_4rank_runs.parquet``.

Usage:
    python benchmarks/bench_interleave.py --collect [--part main] [--repeats 2]   # testbed (root), then score
    python benchmarks/bench_interleave.py                                          # score the stored runs
"""

from __future__ import annotations

import argparse
import os
import platform
import signal
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_fidelity import _records as fidelity_records  # noqa: E402
from bench_fidelity import boost_priority  # noqa: E402

from netlab.congestion import fidelity as fid  # noqa: E402
from netlab.congestion import interleave as il  # noqa: E402
from netlab.sim.metrics import write_json  # noqa: E402
from netlab.testbed import NetnsTestbed  # noqa: E402
from netlab.topology import load_topology  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
TOPOLOGY = ROOT / "testbed" / "topologies" / "leafspine-2rack.yaml"
RESULTS = ROOT / "benchmarks" / "results"
TARGET = 0.10  # |measured - simulated| / measured of the shifted/aligned ratio
BYTE_QUEUE = 15_140  # bytes: 10 full-size frames, 1.2 ms at 100 Mbit (a shallow switch-port buffer)
BYTE_QUEUE_100 = 151_400  # bytes: 100 full-size frames, the queue tcp-shallow assumes (buffer_packets 100), 12 ms
_SHORT = ("job 1 alone", "job 2 alone", "2 jobs aligned", "2 jobs at CASSINI's shift", "2 jobs at random shift 0",
          "2 jobs at random shift 1")
# name -> topology, ranks per job, queue_bytes (None: the default pfifo), scenario names (None: all), runs file
PARTS = {
    "main": dict(topology=TOPOLOGY, ranks=2, queue_bytes=None, scenarios=None, runs="interleave_runs.parquet"),
    "byte_queue": dict(topology=TOPOLOGY, ranks=2, queue_bytes=BYTE_QUEUE, scenarios=_SHORT,
                       runs="interleave_bytequeue_runs.parquet"),
    "byte_queue_100": dict(topology=TOPOLOGY, ranks=2, queue_bytes=BYTE_QUEUE_100, scenarios=_SHORT,
                           runs="interleave_bytequeue100_runs.parquet"),
    "four_rank": dict(topology=ROOT / "testbed" / "topologies" / "leafspine-2rack-4.yaml", ranks=4,
                      queue_bytes=None, scenarios=_SHORT, runs="interleave_4rank_runs.parquet"),
}

def _records(df: pd.DataFrame, digits: int = 4) -> list[dict]:
    """The fidelity report's records, at 4 digits by default."""
    return fidelity_records(df, digits)


def part_scenarios(tb, part: dict, iterations: int, three: bool = True) -> list:
    """The part's scenarios on testbed ``tb`` (brought up or not: only its topology and rates are read)."""
    scenarios = il.interleave_scenarios(tb, iterations=iterations, three=three and part["scenarios"] is None,
                                        ranks=part["ranks"])
    if part["scenarios"] is not None:
        scenarios = [sc for sc in scenarios if sc.name in part["scenarios"]]
        missing = set(part["scenarios"]) - {sc.name for sc in scenarios}
        assert not missing, f"scenarios not made: {missing}"
    return scenarios


def collect(runs_path: Path, repeats: int, iterations: int, nice: int = -10, three: bool = True,
            part: dict = PARTS["main"]) -> None:
    from netlab.testbed.controller import Controller

    # SIGINT unwinds the context managers (testbed torn down), also when started in the background (`... &`
    # in a script starts it with SIGINT ignored). Not SIGTERM: pyroute2 forks a child per namespace socket and
    # ends it with SIGTERM; a SIGTERM handler that raises (inherited by the child) made a child continue the
    # parent's code instead of exiting, and the parent waited for it forever (seen on the first attempts).
    signal.signal(signal.SIGINT, signal.default_int_handler)
    t0 = time.time()
    with NetnsTestbed(load_topology(part["topology"]), queue_bytes=part["queue_bytes"]) as tb:
        niceness = boost_priority(tb, nice) if nice else 0
        leaf = " ".join(str(x) for x in tb.leaf_queue) if tb.leaf_queue else "kernel default"
        with Controller(tb, progress=False) as ctl:
            scenarios = part_scenarios(tb, part, iterations, three)
            runs = il.collect_interleave(ctl, scenarios, repeats=repeats, out=runs_path,
                                         log=lambda msg: print(msg, flush=True),
                                         extra=dict(rank_nice=niceness, leaf_queue=leaf))
    print(f"collection: {time.time() - t0:.0f} s; {len(runs)} rows in {runs_path}")


def score(runs_path: Path, out: Path | None, part: dict = PARTS["main"], extra_parts: dict | None = None) -> dict:
    """The part's report (written to ``out`` when given, with ``extra_parts``' reports under ``parts``)."""
    runs = pd.read_parquet(runs_path)
    topology = part["topology"]
    tb = NetnsTestbed(load_topology(topology), rate_scale=float(runs.rate_scale.iloc[0]))  # never brought up
    table, info = il.interleave_table(runs, tb)
    sim = info.pop("simulated", None)
    ratios = il.shift_ratios(table)
    ratios_p99 = il.shift_ratios(table, "p99_ms")

    # headline: CASSINI's shift vs aligned (and the random shifts' mean) per repeat, measured vs tcp model
    head = []
    for rep, d in ratios.groupby("repeat"):
        row = dict(repeat=int(rep))
        for label, sel in (("cassini", d.scenario == "2 jobs at CASSINI's shift"),
                           ("random_mean", d.scenario.str.startswith("2 jobs at random shift"))):
            if not sel.any():
                continue
            m = float(d[sel].measured.mean())
            row[f"{label}_over_aligned_measured"] = m
            for col in [c for c in d.columns if c.endswith("_mean")]:
                p = float(d[sel][col].mean())
                row[f"{label}_over_aligned_{col}"] = p
                row[f"{label}_over_aligned_{col}_rel_error"] = abs(p - m) / m
        p = ratios_p99[(ratios_p99.repeat == rep) & (ratios_p99.scenario == "2 jobs at CASSINI's shift")]
        if len(p):
            row["cassini_over_aligned_p99_measured"] = float(p.measured.iloc[0])
            if "tcp_sim_p99" in p.columns:
                row["cassini_over_aligned_p99_tcp_sim"] = float(p.tcp_sim_p99.iloc[0])
                row["cassini_over_aligned_p99_tcp_sim_rel_error"] = abs(
                    float(p.tcp_sim_p99.iloc[0]) - float(p.measured.iloc[0])) / float(p.measured.iloc[0])
        head.append(row)

    phases = fid.phase_summary(fid.phase_series(runs))
    phase_model = None
    if sim is not None:
        cmp = fid.phase_comparison(runs, sim)
        cmp = cmp[cmp.ref_job < cmp.job_id]
        phase_model = _records(cmp[["scenario", "repeat", "ref_job", "job_id", "phase_start_measured",
                                    "phase_end_measured", "phase_end_model", "lock_end_measured", "lock_end_model",
                                    "drift_measured", "drift_model", "frac_in_step_measured",
                                    "frac_in_step_model", "left_step_iter_measured", "left_step_iter_model",
                                    "phase_end_error", "spacing_end_error"]])
    series = fid.phase_series(runs)
    series = [dict(scenario=k[0], repeat=int(k[1]), ref_job=int(k[2]), job_id=int(k[3]),
                   iter=d["iter"].astype(int).tolist(), t_s=d.t_s.round(3).tolist(), phase=d.phase.round(4).tolist())
              for k, d in series[series.ref_job < series.job_id].dropna(subset=["phase"])
              .groupby(["scenario", "repeat", "ref_job", "job_id"], sort=False)]
    tel = il.telemetry_rows(runs, tb.topology)
    per_scn = table.groupby(["scenario", "repeat"], sort=False).agg(
        mean_ms=("mean_ms", "mean"), p99_ms=("p99_ms", "mean"),
        **{c: (c, "mean") for c in table.columns if c.endswith("_mean_ms") or c == "tcp_sim_p99_ms"}
    ).reset_index().merge(tel, on=["scenario", "repeat"], how="left")

    tcp_err = None
    cassini_rows = [h for h in head if "cassini_over_aligned_tcp_mean_rel_error" in h]
    if cassini_rows:
        tcp_err = float(np.median([h["cassini_over_aligned_tcp_mean_rel_error"] for h in cassini_rows]))
    report = dict(
        machine=dict(python=platform.python_version(), cpus=os.cpu_count()), topology=Path(topology).name,
        runs_file=str(runs_path.relative_to(ROOT)) if runs_path.is_relative_to(ROOT) else str(runs_path),
        repeats=sorted(int(r) for r in runs.repeat.unique()),
        scenarios_collected=list(dict.fromkeys(runs.scenario)),
        setup=dict(uplink_mbit=fid.UPLINK_MBIT, grad_bytes=fid.GRAD_BYTES, compute_over_C=il.COMPUTE_OVER_C,
                   C_ms=fid.GRAD_BYTES * 8 / (fid.UPLINK_MBIT * 1e6) * fid.HEADER_OVERHEAD * 1000.0,
                   C_ms_this_part=il.uplink_ms(fid.GRAD_BYTES, fid.UPLINK_MBIT, part["ranks"]),
                   ranks_per_job=part["ranks"],
                   comm_share_alone=1.0 / (1.0 + il.COMPUTE_OVER_C), iterations_slowest_job=il.ITERATIONS,
                   random_shift_seed=il.SEED, unequal_ratio=il.UNEQUAL,
                   cassini_shift=("netlab.policies.cassini.score.scan (CASSINI's per-link score over every shift "
                                  "of a job against those placed) + ranker.plateau_centre, jobs placed one by one"),
                   queue=(f"a bfifo of {part['queue_bytes']} bytes under each HTB class (NetnsTestbed queue_bytes)"
                          if part["queue_bytes"] else
                          "default bounded pfifo of netns.QUEUE_PKTS packets under each HTB class; the byte-limited "
                          "queue is the byte_queue part"),
                   leaf_queue=sorted(runs.leaf_queue.unique().tolist()) if "leaf_queue" in runs.columns else None,
                   rank_nice=int(runs.rank_nice.iloc[0]) if "rank_nice" in runs.columns else None,
                   load_avg_1m=_records(runs.groupby(["scenario", "repeat"], sort=False).load_avg_1m.first()
                                        .reset_index(), 2)),
        wire_overhead=info["wire_overhead"], models=info["models"], notes=info["notes"],
        target=dict(claim="testbed: shifted vs aligned iteration time, measured vs simulator", within=TARGET,
                    measure="|simulated ratio - measured ratio| / measured ratio, CASSINI's shift over aligned, "
                            "mean iteration time of the two jobs, tcp model (calibrated mean); median over repeats",
                    tcp_rel_error=tcp_err, met=bool(tcp_err is not None and tcp_err <= TARGET)),
        headline=head,
        not_done=["ECN marks: not available; HTB overlimits, drops and backlog stand in"],
        ratios_mean=_records(ratios), ratios_p99=_records(ratios_p99),
        per_scenario=_records(per_scn),
        per_job=_records(table),
        phase_summary=_records(phases[phases.ref_job < phases.job_id]),
        phase_vs_tcp=phase_model,
        phase_series=series,
    )
    if extra_parts:
        report["parts"] = extra_parts
    if out is not None:
        write_json(out, report)
    with pd.option_context("display.width", 250, "display.max_columns", 30):
        print(per_scn.drop(columns=[c for c in per_scn.columns if c.startswith("uplink_packets")]).round(2)
              .to_string(index=False))
        print(ratios.round(3).to_string(index=False))
        print(pd.DataFrame(head).round(3).T.to_string())
        print(phases[phases.ref_job < phases.job_id][["scenario", "repeat", "ref_job", "job_id", "phase_start",
                                                      "phase_end", "lock_end", "drift", "frac_in_step"]]
              .round(3).to_string(index=False))
        if phase_model:
            print(pd.DataFrame(phase_model)[["scenario", "repeat", "ref_job", "job_id", "phase_end_measured",
                                             "phase_end_model", "left_step_iter_measured", "left_step_iter_model",
                                             "spacing_end_error"]].to_string(index=False))
    if out is not None:
        print("wrote", out)
    return report


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--collect", action="store_true", help="run the testbed first (root, sshd, torch)")
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--iterations", type=int, default=il.ITERATIONS)
    ap.add_argument("--no-three", action="store_true", help="skip the three-job scenarios")
    ap.add_argument("--nice", type=int, default=-10)
    ap.add_argument("--part", choices=list(PARTS), default="main", help="which part to collect (see the doc)")
    ap.add_argument("--results", default=str(RESULTS), help="directory of the runs files and interleave.json")
    args = ap.parse_args(argv)
    results = Path(args.results)
    out = results / "interleave.json"
    if args.collect:
        if os.geteuid() != 0:
            print("bench_interleave --collect needs root (network namespaces)", file=sys.stderr)
            return 2
        collect(results / PARTS[args.part]["runs"], args.repeats, args.iterations, args.nice,
                three=not args.no_three, part=PARTS[args.part])
    main_runs = results / PARTS["main"]["runs"]
    if not main_runs.exists():
        print(f"no runs at {main_runs}; run with --collect first", file=sys.stderr)
        return 2
    extra = {}
    for name, part in PARTS.items():
        if name != "main" and (results / part["runs"]).exists():
            print(f"--- part {name}")
            rep = score(results / part["runs"], None, part)
            rep.pop("phase_series", None)  # the main part's series are the ones notebook 06 plots
            extra[name] = rep
    print("--- part main")
    score(main_runs, out, PARTS["main"], extra)
    return 0


if __name__ == "__main__":
    sys.exit(main())
