"""Simulator vs emulated testbed: writes benchmarks/results/fidelity.json.

Runs :func:`netlab.congestion.fidelity.fidelity_scenarios` (one job alone,
two and three jobs sharing the rack uplink, a consolidated and a spread
placement next to a cross-rack job, two jobs in step and shifted by half an
iteration) on the namespace testbed ``--repeats`` times and compares each
job's measured iteration time with the simulator's network models.

Target: median absolute percentage error of iteration time 10% or less.
Needs root (namespaces), sshd and torch.

Usage: python benchmarks/bench_fidelity.py [--repeats 2] [--out ...]
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
from pathlib import Path

import pandas as pd

from netlab.congestion.fidelity import fidelity_summary, run_fidelity
from netlab.sim.metrics import write_json
from netlab.testbed import NetnsTestbed
from netlab.testbed.controller import Controller
from netlab.topology import load_topology

ROOT = Path(__file__).resolve().parents[1]
TOPOLOGY = ROOT / "testbed" / "topologies" / "leafspine-2rack.yaml"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "fidelity.json"))
    args = ap.parse_args(argv)
    if os.geteuid() != 0:
        print("bench_fidelity needs root (network namespaces)", file=sys.stderr)
        return 2
    frames, overheads = [], []
    with NetnsTestbed(load_topology(TOPOLOGY)) as tb, Controller(tb, progress=False) as ctl:
        for r in range(args.repeats):
            df = run_fidelity(ctl).assign(repeat=r)
            overheads.append(df.attrs["wire_overhead"])
            frames.append(df)
    df = pd.concat(frames, ignore_index=True)
    summary = fidelity_summary(df)
    per_scenario = df.groupby("scenario")[["fair_raw_ape", "fair_ape", "phase_ape", "link_bound_ape"]].median()
    print(summary.round(3).to_string(index=False))
    print(per_scenario.round(3).to_string())
    best = summary.loc[summary.median_ape.idxmin()]
    write_json(args.out, dict(
        machine=dict(python=platform.python_version(), cpus=os.cpu_count()), topology=TOPOLOGY.name,
        repeats=args.repeats, wire_overhead_fitted=overheads, summary=summary.to_dict(orient="records"),
        per_scenario_median_ape=per_scenario.reset_index().to_dict(orient="records"),
        rows=df.to_dict(orient="records"), target_median_ape=0.10,
        default_model_median_ape=float(summary.set_index("model").loc["fair", "median_ape"]),
        best_model=str(best.model), met=bool(best.median_ape <= 0.10)))
    print("wrote", args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
