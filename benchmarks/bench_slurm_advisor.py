"""netlab's placement advisor on a real Slurm 22.05 (root): plan vs. what Slurm did, per placement policy.

Starts netlab.integrations.slurm_local on a 2-rack leaf-spine (4 nodes x 4 GPUs, oversub 4), replays
seeded sleep traces (netlab.integrations.slurm_advisor.sleep_trace) under each policy, and records how
many jobs Slurm ran on the planned nodes, with the planned GPU total and per-node split, and how long
Slurm took to start them. Writes benchmarks/results/slurm_advisor.json; with --sample PATH also the
sacct dump of every job it ran (the bundled netlab/data/sacct-sample.txt is made this way).

    python benchmarks/bench_slurm_advisor.py [--jobs 10] [--seeds 3] [--sample netlab/data/sacct-sample.txt]
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import tempfile
import time
from pathlib import Path

from netlab.integrations import slurm_local
from netlab.integrations.slurm_advisor import SACCT_FORMAT, compare_placements, replay, sleep_trace
from netlab.integrations.slurm_topology import format_topology_conf, to_tree
from netlab.topology import load_topology

SPEC = "leafspine,racks=2,hosts_per_rack=2,gpus_per_host=4,oversub=4"
POLICIES = ("topo-bestfit", "consolidated")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--jobs", type=int, default=10)
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--sample", type=Path, default=None)
    ap.add_argument("--out", type=Path, default=Path(__file__).parent / "results" / "slurm_advisor.json")
    args = ap.parse_args(argv)
    if slurm_local.missing():
        print("skipped: " + "; ".join(slurm_local.missing()), file=sys.stderr)
        return 0
    topo = load_topology(SPEC)
    runs, ids = [], []
    with tempfile.TemporaryDirectory(prefix="netlab-bench-slurm-") as root:
        c = slurm_local.LocalSlurm(root, {h.name: int(h.gpus) for h in topo.hosts}, format_topology_conf(to_tree(topo)))
        with c:
            for policy in POLICIES:
                for seed in range(args.seeds):
                    t0 = time.monotonic()
                    plans = replay(c, topo, sleep_trace(args.jobs, seed, gap_s=0.5), placement=policy, timeout_s=600)
                    cmp = compare_placements(c, plans)
                    seen = cmp[cmp.same_split.notna()]
                    runs.append(dict(policy=policy, seed=seed, jobs=len(cmp), same_nodes=int(cmp.same_nodes.sum()),
                                     same_gpus=int(cmp.same_gpus.sum()), split_seen=len(seen),
                                     same_split=int(seen.same_split.astype(bool).sum()),
                                     slurm_wait_median_s=float(cmp.slurm_wait_s.median()),
                                     slurm_wait_max_s=float(cmp.slurm_wait_s.max()),
                                     wall_s=round(time.monotonic() - t0, 1)))
                    ids += [p.slurm_id for p in plans]
                    print(runs[-1], flush=True)
            if args.sample is not None:
                dump = c.run(["sacct", "--allusers", "--parsable2", "--allocations", f"--jobs={','.join(ids)}",
                              f"--format={SACCT_FORMAT}"]).stdout
                args.sample.write_text(dump)
                print(f"wrote {args.sample} ({len(dump.splitlines()) - 1} jobs)")
    total = {k: sum(r[k] for r in runs) for k in ("jobs", "same_nodes", "same_gpus", "split_seen", "same_split")}
    result = dict(topology=SPEC, trace=f"sleep_trace(jobs={args.jobs}, seed, gap_s=0.5)", slurm="22.05 (Debian)",
                  machine=platform.node(), runs=runs, total=total)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(total))
    return 0


if __name__ == "__main__":
    sys.exit(main())
