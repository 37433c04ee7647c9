"""Cross-validation against Tiresias' simulator: writes benchmarks/results/reference.json.

Runs the 12 cells of ``shared/reference/cross-validation.md`` (four Gavel VC
traces x strict ``fifo``, ``fjf`` and ``dlas-gpu`` = ``tiresias``) with the
reference's inputs and semantics (:mod:`netlab.crossval`: ideal network, no
restart cost, any-free-GPUs placement, 64 or 108 GPUs) and records, per cell,
netlab's average / p99 JCT, makespan and preemptions, the reference's, the
relative differences, and whether each is within target (0.1% for fifo and
fjf, 2% for dlas-gpu). Figures outside their target carry the measured
cause (``netlab.crossval.RESIDUALS``).

The dlas-gpu cells run ``tiresias`` with the reference's demotion timing
(``netlab.crossval.OPTIONS``). For context it also runs netlab's default,
exact demotion (``tiresias-exact``), and the two variants that the former
default stood for (submit order inside a queue, with Tiresias' thresholds and
with the former 3,600 / 36,000 GPU-s) on the dlas-gpu cells.

Usage: python benchmarks/bench_reference.py [--trace-dir ../shared/traces] [--out ...]
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import time
from pathlib import Path

from netlab import crossval
from netlab.policies.base import ORDERING
from netlab.sim import SimConfig, Simulator
from netlab.sim.metrics import write_json

ROOT = Path(__file__).resolve().parents[1]
VARIANTS = {"tiresias-exact": dict(demotion="exact"), "tiresias-submit": dict(within_queue="submit"),
            "tiresias-former": dict(within_queue="submit", thresholds_gpu_s=(3600.0, 36000.0))}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--trace-dir", default=None, help="the shared traces (default: looked up as usual)")
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "reference.json"))
    args = ap.parse_args(argv)
    cells, variants = [], []
    for vc in crossval.TRACES:
        t0 = time.perf_counter()
        jobs = crossval.load_jobs(vc, args.trace_dir)
        load_s = time.perf_counter() - t0
        for schedule in crossval.SCHEDULES:
            t0 = time.perf_counter()
            res = crossval.run_cell(vc, schedule, jobs=jobs)
            row = crossval.compare(vc, schedule, crossval.figures(res))
            row.update(sim_wall_s=time.perf_counter() - t0, load_wall_s=load_s)
            cells.append(row)
            print(f"{vc} {schedule:8s} " + "  ".join(
                f"{m.removesuffix('_s')} {row[f'netlab_{m}']:>13,.1f} vs {row[f'reference_{m}']:>13,.1f} "
                f"({row[f'rel_{m}']:+.3%})" for m in crossval.METRICS)
                + f"  preempt {row['netlab_preemptions']:.0f} vs {row['reference_preemptions']:.0f}"
                + ("" if row["within_target"] else "  OUTSIDE TARGET"))
        topo, job_list = jobs
        for name, kw in VARIANTS.items():
            cfg = SimConfig(network="ideal", checkpoint_s=0.0, restore_s=0.0)
            res = Simulator(topo, job_list, ORDERING.create("tiresias", **kw), crossval.PLACEMENT, None, cfg).run()
            row = crossval.compare(vc, "dlas-gpu", crossval.figures(res))
            variants.append(dict(variant=name, params={k: list(v) if isinstance(v, tuple) else v
                                                       for k, v in kw.items()},
                                 **{k: v for k, v in row.items() if not k.startswith(("within", "residual"))}))
            print(f"{vc} {name:16s} avg {row['rel_avg_jct_s']:+.1%}  p99 {row['rel_p99_jct_s']:+.1%}")
    missed = [dict(vc=r["vc"], schedule=r["schedule"], metric=m, rel=r[f"rel_{m}"], **r[f"residual_{m}"])
              for r in cells for m in crossval.METRICS if not r[f"within_{m}"] and f"residual_{m}" in r]
    unexplained = [(r["vc"], r["schedule"], m) for r in cells for m in crossval.METRICS
                   if not r[f"within_{m}"] and f"residual_{m}" not in r]
    write_json(args.out, dict(
        machine=dict(python=platform.python_version(), cpus=os.cpu_count()),
        source="shared/reference/cross-validation.md (Tiresias simulator, --scheme=count)",
        setup=dict(network="ideal", checkpoint_s=0.0, restore_s=0.0, placement=crossval.PLACEMENT,
                   topologies={str(k): v for k, v in crossval.TOPOLOGIES.items()}, schedules=crossval.SCHEDULES),
        targets=crossval.TARGETS, cells=cells, within_target=sum(r["within_target"] for r in cells),
        of=len(cells), residuals=missed, unexplained=unexplained, variants=variants))
    print(f"{sum(r['within_target'] for r in cells)}/{len(cells)} cells within target; "
          f"{len(missed)} documented residual(s), {len(unexplained)} unexplained")
    print("wrote", args.out)
    return 0 if not unexplained else 1


if __name__ == "__main__":
    sys.exit(main())
