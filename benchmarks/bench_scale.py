"""Scale benchmark (issue 16): writes benchmarks/results/scale.json.

1. Trace scale: synthetic traces (the generator's default size mix, 55% 1-GPU jobs up to 32 GPUs, the Philly-like
   mix; lognormal durations, median 1 h; load 0.9) on a 16,384-GPU 3-tier Clos (``clos3,gpus=16384``), fair-share
   network, Tiresias + consolidated, per-link history aggregated per day. Each size runs in a fresh process (one
   core) so its peak RSS is its own; the trace is generated in chunks of 100,000 jobs and never held whole.
   Sizes 10k and 100k run ``--repeats`` times (median); 1M once (minutes). Reported: simulation wall time,
   events, cost per job (wall / jobs) and its ratio from 10k and from 100k to 1M, peak RSS, and memory per job:
   (peak RSS(1M) - peak RSS(10k)) / (1M - 10k), which cancels the fixed cost of imports and the topology.
   Targets: 1M jobs <= 5 min and <= 4 GB peak RSS; <= 4 KB per job; cost per job 10k -> 1M <= 1.5x.
2. Placement decision: a 512-GPU LLM job (GPT-3 175B split TP 8, PP 8, DP 8) on a 131,072-GPU rail-optimised
   fabric (and the same on ``clos3``) with 5,000 running jobs scattered over it (``netlab.sim.fixtures.scatter``),
   ``tp-aware`` over ``consolidated`` and over ``topo-bestfit``, and plain ``consolidated``: median of
   ``--decisions`` decisions after one untimed warm-up. Target: <= 10 ms median.
3. Small runs, whole process: ``netlab simulate`` on the 2,000-job Gavel VC trace 6214e9 on its 108-GPU
   reference cluster (Tiresias, first-fit, ideal network: the cross-validation cell), ``--repeats`` times, and
   start-up (``python -c "import netlab.cli"``, plus ``-X importtime``'s total for it). Target: start-up <= 0.3 s.
4. (``--part history``, merged into the JSON) memory per job with each per-link history mode, full / aggregate /
   none, at 10k and 50k jobs: the full history is what grew before.
   The Tiresias reference simulator itself is not available here, so the ">= 3x faster" comparison is not made.

The machine is shared: loadavg is recorded before and after each part, and ratios are quoted beside seconds.

Usage: python benchmarks/bench_scale.py [--repeats 3] [--sizes 10000,100000,1000000] [--trace-dir ../shared/traces]
       python benchmarks/bench_scale.py --part history|startup   (one part again, merged into --out)
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CLOS_16K = "clos3,gpus=16384"
FABRICS_131K = ("rail,gpus=131072", "clos3,gpus=131072")
CHUNK_JOBS = 100_000
GAVEL_VC, GAVEL_TOPOLOGY = "6214e9", "leafspine,racks=1,hosts_per_rack=27,gpus_per_host=4,spines=1"


def _loadavg() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def _child(argv: list[str]) -> dict:
    """Run this script's ``argv`` part in a fresh Python (its own peak RSS); its JSON answer."""
    out = subprocess.run([sys.executable, str(Path(__file__).resolve()), *argv], check=True, capture_output=True,
                         text=True, cwd=ROOT)
    return json.loads(out.stdout.strip().splitlines()[-1])


# -- part 1: trace scale (child) ---------------------------------------------------------------------------------------

def trace_run(jobs: int, seed: int, history: str = "aggregate") -> dict:
    import resource

    import psutil

    from netlab.sim import SimConfig, Simulator
    from netlab.topology import load_topology
    from netlab.traces.synthetic import poisson_chunks
    from netlab.workload.job import jobs_from_frame

    proc = psutil.Process()
    topo = load_topology(CLOS_16K)
    rss_start = proc.memory_info().rss
    t0 = time.perf_counter()
    job_list = []
    for chunk in poisson_chunks(jobs=jobs, load=0.9, cluster_gpus=topo.total_gpus, seed=seed, chunk_jobs=CHUNK_JOBS):
        job_list.extend(jobs_from_frame(chunk, topo, first_id=len(job_list)))
        del chunk
    gen_s = time.perf_counter() - t0
    rss_jobs = proc.memory_info().rss
    config = SimConfig(network="fair", seed=seed, link_history=history, link_resolution_s=86400.0)
    sim = Simulator(topo, job_list, "tiresias", "consolidated", None, config)
    del job_list
    t0 = time.perf_counter()
    res = sim.run()
    wall_s = time.perf_counter() - t0
    s = res.summary
    return dict(jobs=jobs, seed=seed, link_history=history, trace_s=gen_s, sim_wall_s=wall_s, us_per_job=wall_s / jobs * 1e6,
                events=s["events"], finished=s["finished"], avg_jct_s=s["avg_jct_s"], avg_wait_s=s["avg_wait_s"],
                gpu_util=s["gpu_util"], link_rows=len(res.links), rss_start_mb=rss_start / 2**20,
                rss_jobs_mb=rss_jobs / 2**20, rss_end_mb=proc.memory_info().rss / 2**20,
                peak_rss_mb=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)


def trace_part(sizes: list[int], repeats: int, max_once: int) -> dict:
    out = {"topology": CLOS_16K, "trace": "synthetic (default size mix), load 0.9, chunks of 100,000",
           "policy": "tiresias + consolidated", "network": "fair", "link_history": "aggregate, 86,400 s bins",
           "runs": {}}
    for n in sizes:
        reps = 1 if n > max_once else repeats
        runs = []
        for r in range(reps):
            before = _loadavg()
            row = _child(["--part", "trace", "--jobs", str(n), "--seed", "0"])
            row.update(loadavg_before=before, loadavg_after=_loadavg())
            runs.append(row)
            print(f"trace {n:>9,} jobs: {row['sim_wall_s']:8.1f} s sim, {row['us_per_job']:6.1f} us/job, "
                  f"peak {row['peak_rss_mb']:7.0f} MB, load {row['loadavg_after'][0]}", flush=True)
        out["runs"][str(n)] = {"repeats": reps, "median_sim_wall_s": statistics.median(r["sim_wall_s"] for r in runs),
                               "median_us_per_job": statistics.median(r["us_per_job"] for r in runs),
                               "peak_rss_mb": max(r["peak_rss_mb"] for r in runs), "each": runs}
    runs = out["runs"]
    lo, hi = str(min(sizes)), str(max(sizes))
    if lo != hi:
        out["cost_per_job_ratio"] = {f"{lo}->{hi}": runs[hi]["median_us_per_job"] / runs[lo]["median_us_per_job"]}
        mid = [str(n) for n in sizes if str(n) not in (lo, hi)]
        for m in mid:
            out["cost_per_job_ratio"][f"{m}->{hi}"] = runs[hi]["median_us_per_job"] / runs[m]["median_us_per_job"]
        out["memory_per_job_kb"] = ((runs[hi]["peak_rss_mb"] - runs[lo]["peak_rss_mb"]) * 1024
                                    / (int(hi) - int(lo)))
    return out


def history_part(sizes: list[int]) -> dict:
    """Memory per job with each per-link history mode (one run per size and mode): the full history is what
    made memory grow before (issue 16: about 30 KB a job)."""
    out = {}
    for mode in ("full", "aggregate", "none"):
        runs = {}
        for n in sizes:
            before = _loadavg()
            row = _child(["--part", "trace", "--jobs", str(n), "--history", mode])
            row.update(loadavg_before=before, loadavg_after=_loadavg())
            runs[str(n)] = row
            print(f"history {mode:9s} {n:>9,} jobs: {row['sim_wall_s']:7.1f} s, peak {row['peak_rss_mb']:7.0f} MB, "
                  f"{row['link_rows']:,} link rows", flush=True)
        lo, hi = str(min(sizes)), str(max(sizes))
        out[mode] = {"memory_per_job_kb": (runs[hi]["peak_rss_mb"] - runs[lo]["peak_rss_mb"]) * 1024
                     / (int(hi) - int(lo)), "runs": runs}
    return out


# -- part 2: placement decision (child) --------------------------------------------------------------------------------

def placement_run(fabric: str, decisions: int, n_running: int = 5000, seed: int = 0) -> dict:
    import numpy as np

    from netlab.network import NETWORKS
    from netlab.policies import PLACEMENT
    from netlab.sched import ClusterView, JobState
    from netlab.sim.fixtures import scatter
    from netlab.topology import load_topology
    from netlab.workload.job import Job
    from netlab.workload.llm import variant
    from netlab.workload.zoo import ModelZoo

    t0 = time.perf_counter()
    topo = load_topology(fabric)
    build_s = time.perf_counter() - t0
    model = variant(ModelZoo.default()["gpt3-175b"], tp=8, pp=8)
    zoo = ModelZoo.default().with_model(model)
    rng = np.random.default_rng(seed)
    free = topo.host_gpus.copy()
    running = {}
    sizes = rng.choice([1, 2, 4, 8, 16, 32, 64], size=n_running, p=[0.4, 0.15, 0.15, 0.15, 0.08, 0.05, 0.02])
    for i, g in enumerate(sizes):  # scatter the running jobs so the fabric is fragmented
        placement = scatter(free, int(g), rng)
        js = JobState(Job(i, 0.0, int(g), "resnet50", 100), 1.0)
        js.placement, js.status = placement, "running"
        running[i] = js
    view = ClusterView(topo, free, running, 0.0, zoo=zoo, network=NETWORKS.create("fair"))
    job = JobState(Job(n_running, 0.0, 512, model.name, 100, pattern="3d"), 1.0)
    out = {"fabric": fabric, "gpus": topo.total_gpus, "hosts": topo.n_hosts, "build_s": build_s,
           "running_jobs": len(running), "free_gpus": int(free.sum()), "wholly_free_hosts": int((free == 8).sum()),
           "job": f"{model.name}: 512 GPUs, TP 8, PP 8, DP 8", "median_ms": {}, "first_ms": {}, "hosts_used": {}}
    for label, name, kw in (("tp-aware(consolidated)", "tp-aware", {}),
                            ("tp-aware(topo-bestfit)", "tp-aware", {"base": "topo-bestfit"}),
                            ("consolidated", "consolidated", {})):
        policy = PLACEMENT.create(name, **kw)
        policy.reset(np.random.default_rng(seed))
        t0 = time.perf_counter()
        p = policy.place(job, view)
        out["first_ms"][label] = (time.perf_counter() - t0) * 1e3
        times = []
        for _ in range(decisions):
            t0 = time.perf_counter()
            p = policy.place(job, view)
            times.append((time.perf_counter() - t0) * 1e3)
        out["median_ms"][label] = statistics.median(times)
        out["hosts_used"][label] = len(p.hosts) if p else None
        if p is not None and name == "tp-aware":
            assert all(g % 8 == 0 for g in p.gpus), "a TP group was split"
    return out


# -- part 3: small runs, whole process ---------------------------------------------------------------------------------

def startup_part(repeats: int, trace_dir: str | None) -> dict:
    py = sys.executable
    env = dict(os.environ, PYTHONDONTWRITEBYTECODE="0")
    walls = []
    for _ in range(max(repeats, 5)):
        t0 = time.perf_counter()
        subprocess.run([py, "-c", "import netlab.cli"], check=True, cwd=ROOT, env=env)
        walls.append(time.perf_counter() - t0)
    imp = subprocess.run([py, "-X", "importtime", "-c", "import netlab.cli"], check=True, cwd=ROOT, env=env,
                         capture_output=True, text=True).stderr
    netlab_cli_us = next((int(m.group(1)) for m in re.finditer(r"\|\s+(\d+) \| netlab\.cli$", imp, re.M)), None)
    out = {"python_import_netlab_cli_s": {"median": statistics.median(walls), "each": walls},
           "importtime_netlab_cli_cumulative_ms": netlab_cli_us / 1e3 if netlab_cli_us else None}
    cli = str(Path(py).with_name("netlab"))
    trace_dir = trace_dir or str(ROOT.parent / "shared" / "traces")
    if not Path(trace_dir, "gavel-philly-vc").exists():
        out["gavel_simulate"] = f"skipped: {trace_dir}/gavel-philly-vc not found"
        return out
    runs = []
    for _ in range(repeats):
        with tempfile.TemporaryDirectory() as tmp:
            runs.append(_gavel_run(cli, trace_dir, Path(tmp) / "out"))
    out["gavel_simulate"] = {"command": f"netlab simulate --trace gavel,vc={GAVEL_VC} --topology {GAVEL_TOPOLOGY} "
                                        "--policy tiresias --placement first-fit --network ideal --quiet",
                             "median_process_wall_s": statistics.median(r["process_wall_s"] for r in runs),
                             "median_sim_wall_s": statistics.median(r["sim_wall_s"] for r in runs), "each": runs}
    return out


def _gavel_run(cli: str, trace_dir: str, outdir: Path) -> dict:
    t0 = time.perf_counter()
    done = subprocess.run([cli, "simulate", "--trace", f"gavel,vc={GAVEL_VC}", "--topology", GAVEL_TOPOLOGY,
                           "--policy", "tiresias", "--placement", "first-fit", "--network", "ideal",
                           "--trace-dir", trace_dir, "--out", str(outdir), "--quiet"],
                          check=True, cwd=ROOT, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    summary = json.loads(done.stdout[:done.stdout.rindex("}") + 1])
    return {"process_wall_s": wall, "sim_wall_s": summary["wall_s"], "jobs": summary["jobs"]}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--part", choices=["trace", "placement", "all", "history", "startup"], default="all",
                    help="all: every part; history, startup: that part only, merged into --out; trace, placement: "
                         "one child measurement (JSON on stdout)")
    ap.add_argument("--history", default="aggregate", help="link history of a trace child run")
    ap.add_argument("--history-sizes", default="10000,50000")
    ap.add_argument("--jobs", type=int, default=10_000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--fabric", default=FABRICS_131K[0])
    ap.add_argument("--sizes", default="10000,100000,1000000")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--max-repeated", type=int, default=100_000, help="sizes above this run once")
    ap.add_argument("--decisions", type=int, default=50)
    ap.add_argument("--trace-dir", default=None)
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "scale.json"))
    args = ap.parse_args(argv)
    if args.part == "trace":
        print(json.dumps(trace_run(args.jobs, args.seed, args.history)))
        return 0
    if args.part == "placement":
        print(json.dumps(placement_run(args.fabric, args.decisions)))
        return 0
    from netlab.sim.metrics import write_json

    if args.part in ("history", "startup"):  # one part again, into the existing results
        results = json.loads(Path(args.out).read_text())
        key = "history_modes" if args.part == "history" else "startup"
        before = _loadavg()
        results[key] = (history_part([int(s) for s in args.history_sizes.split(",")]) if args.part == "history"
                        else startup_part(args.repeats, args.trace_dir))
        results[key].update(loadavg_before=before, loadavg_after=_loadavg())
        write_json(args.out, results)
        print(f"wrote {key} into {args.out}")
        return 0
    results = {"machine": {"python": sys.version.split()[0], "platform": platform.platform(), "cpus": os.cpu_count()},
               "loadavg_start": _loadavg(), "targets": {
                   "1M_jobs_wall_s": 300, "1M_jobs_peak_rss_mb": 4096, "memory_per_job_kb": 4,
                   "placement_median_ms": 10, "cost_per_job_ratio_10k_to_1M": 1.5, "startup_s": 0.3}}
    results["placement"] = []
    for fabric in FABRICS_131K:
        before = _loadavg()
        row = _child(["--part", "placement", "--fabric", fabric, "--decisions", str(args.decisions)])
        row.update(loadavg_before=before, loadavg_after=_loadavg())
        results["placement"].append(row)
        print(f"placement on {fabric}: " + ", ".join(f"{k} {v:.2f} ms" for k, v in row["median_ms"].items()),
              flush=True)
    results["startup"] = startup_part(args.repeats, args.trace_dir)
    print("startup:", json.dumps({k: v for k, v in results["startup"].items() if k != "gavel_simulate"}), flush=True)
    results["trace_scale"] = trace_part([int(s) for s in args.sizes.split(",")], args.repeats, args.max_repeated)
    results["loadavg_end"] = _loadavg()
    write_json(args.out, results)
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
