"""Do the results that were not meant to change stay bit-identical? Writes benchmarks/results/identity.json.

A refactor (a new boundary between the simulator and the network model, one scheduling pass, a split module)
must leave every result where it was. This benchmark hashes what netlab computes on fixed inputs:

* full Philly (82,247 jobs), Tiresias + consolidated, 512-GPU 4:1 leaf-spine, under ``fair`` and ``tcp``: the
  per-job table (the columns in :data:`JOB_COLUMNS`, every float by its exact bits);
* the 12 cross-validation cells of ``reference.json`` and its variants (ideal network): their job tables;
* ``fidelity.json``'s model predictions (every network model on the testbed's scenarios; no testbed needed).

``--check`` compares with the committed ``identity.json`` and exits 1 naming every item that moved;
without it the file is rewritten. ``--quick`` leaves out full Philly (the reference and fidelity items take
about a minute).

Usage: python benchmarks/bench_identity.py [--check] [--quick] [--trace-dir DIR]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).parent))
RESULTS = ROOT / "benchmarks" / "results"

#: the job-table columns hashed (columns added later do not change a hash)
JOB_COLUMNS = ["job_id", "gpus", "submit_s", "start_s", "end_s", "jct_s", "queue_s", "run_s", "placement",
               "preemptions", "comm_frac", "slowdown"]


def table_hash(df: pd.DataFrame, columns: list[str] | None = None) -> str:
    """SHA-256 over the columns' exact values (floats by their bits, text as UTF-8), rows in order."""
    h = hashlib.sha256()
    for col in columns or list(df.columns):
        v = df[col].to_numpy()
        h.update(col.encode())
        if v.dtype.kind in "fiub":
            h.update(np.ascontiguousarray(v.astype(np.float64)).tobytes())
        else:
            h.update("\x1f".join(map(str, v.tolist())).encode())
    return h.hexdigest()


def philly_items(trace_dir) -> dict:
    from bench_core import PHILLY_TOPOLOGY

    from netlab.sim import SimConfig, Simulator
    from netlab.topology import load_topology
    from netlab.traces import load_trace
    from netlab.workload.job import jobs_from_frame

    trace = load_trace("philly", trace_dir=trace_dir, seed=0)
    out = {}
    for net in ("fair", "tcp"):
        topo = load_topology(PHILLY_TOPOLOGY)
        t0 = time.perf_counter()
        res = Simulator(topo, jobs_from_frame(trace, topo), "tiresias", "consolidated", None,
                        SimConfig(network=net, record_links=True)).run()
        cols = [c for c in JOB_COLUMNS if c in res.jobs.columns]
        out[f"philly_{net}"] = dict(hash=table_hash(res.jobs, cols), jobs=len(res.jobs),
                                    avg_jct_s=float(res.summary["avg_jct_s"]), wall_s=time.perf_counter() - t0)
        print(f"philly {net}: {out[f'philly_{net}']}", flush=True)
    return out


def reference_items(trace_dir) -> dict:
    from bench_reference import VARIANTS

    from netlab import crossval
    from netlab.policies.base import ORDERING
    from netlab.sim import SimConfig, Simulator

    out = {}
    for vc in crossval.TRACES:
        jobs = crossval.load_jobs(vc, trace_dir)
        for schedule in crossval.SCHEDULES:
            res = crossval.run_cell(vc, schedule, jobs=jobs)
            cols = [c for c in JOB_COLUMNS if c in res.jobs.columns]
            out[f"reference_{vc}_{schedule}"] = dict(hash=table_hash(res.jobs, cols), jobs=len(res.jobs))
        topo, job_list = jobs
        for name, kw in VARIANTS.items():
            cfg = SimConfig(network="ideal", checkpoint_s=0.0, restore_s=0.0)
            res = Simulator(topo, job_list, ORDERING.create("tiresias", **kw), crossval.PLACEMENT, None, cfg).run()
            cols = [c for c in JOB_COLUMNS if c in res.jobs.columns]
            out[f"reference_{vc}_{name}"] = dict(hash=table_hash(res.jobs, cols), jobs=len(res.jobs))
    print(f"reference: {len(out)} tables", flush=True)
    return out


def fidelity_items() -> dict:
    from bench_fidelity import TOPOLOGY

    from netlab.congestion import fidelity as fid
    from netlab.testbed import NetnsTestbed
    from netlab.topology import load_topology

    runs = pd.read_parquet(RESULTS / "fidelity_runs.parquet")
    tb = NetnsTestbed(load_topology(TOPOLOGY), rate_scale=float(runs.rate_scale.iloc[0]))
    rows = fid.score_runs(runs, tb)
    cols = sorted(c for c in rows.columns if c.endswith("_s") and c not in ("iter_s", "iter_median_s"))
    out = {"fidelity_predictions": dict(hash=table_hash(rows, ["scenario", "repeat", "job_id", *cols]),
                                        rows=len(rows), columns=cols)}
    print(f"fidelity: {out}", flush=True)
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--check", action="store_true", help="compare with the committed identity.json")
    ap.add_argument("--quick", action="store_true", help="leave out full Philly")
    ap.add_argument("--trace-dir", default=None)
    ap.add_argument("--out", default=str(RESULTS / "identity.json"),
                    help="where the hashes are written; with --check, the file they are compared with")
    args = ap.parse_args(argv)
    if args.check and not Path(args.out).is_file():  # before an hour of runs, not after
        ap.error(f"--check compares with --out {args.out}, which is not a file (leave --out out to compare with "
                 "the committed identity.json)")
    items = {}
    items.update(reference_items(args.trace_dir))
    items.update(fidelity_items())
    if not args.quick:
        items.update(philly_items(args.trace_dir))
    out = Path(args.out)
    if args.check:
        base = json.loads(out.read_text())["items"]
        moved = [k for k, v in items.items() if k in base and base[k]["hash"] != v["hash"]]
        missing = [k for k in base if k not in items and not (args.quick and k.startswith("philly"))]
        for k in moved:
            print(f"MOVED {k}: {base[k]} -> {items[k]}")
        print(f"{len(items) - len(moved)}/{len(items)} identical; {len(missing)} not computed: {missing}")
        return 1 if moved else 0
    from netlab.sim.metrics import write_json

    commit = __import__("subprocess").run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"],
                                          capture_output=True, text=True).stdout.strip()
    write_json(out, dict(commit=commit, job_columns=JOB_COLUMNS, items=items))
    print("wrote", out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
