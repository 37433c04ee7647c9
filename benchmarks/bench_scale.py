"""Scale benchmark (issues 16 and 28): writes benchmarks/results/scale.json.

1. Busy cluster (``--part busy``, issue 28): an LLM-era trace on a 16,384-GPU 3-tier Clos at 4:1 with hash ECMP
   (``clos3,gpus=16384,oversub=4,ecmp=hash``) under the default network model (``tcp``), Tiresias + consolidated,
   per-link history aggregated per day; 10k, 100k and 1M jobs, and 100k jobs on 131,072 GPUs (``rail`` and
   ``clos3``, 4:1, hash ECMP). The mix (:data:`MIX`): non-LLM jobs of 1-256 GPUs and 20% LLM jobs (the zoo's
   LLMs, TP x PP x DP up to the published run's DP), so that over 10% of jobs have 128+ GPUs (Crux's production
   trace: "over 10% of jobs use 128 GPUs or more"); lognormal durations (median 1 h, sigma 1); the generator's
   load 0.9 of the topology's GPUs, LLM GPU-seconds included. Each run is a fresh process (one core, its own peak
   RSS); the trace is generated in chunks of 100,000 jobs. Reported per run: wall and CPU seconds of the
   simulation, events, cost per job, peak RSS, GPU utilisation over the makespan, the share of jobs that started
   after their submission and the share that waited at all (Tiresias starts a new job by preempting others, so
   jobs wait after preemptions), the mean wait, contention (slowdown = progress time / isolated time > 1.05) as a
   share of jobs, of job running time and of GPU time, and the tcp model's re-solves by path (``exact_solves``:
   the phase-aware exact solver, components of at most 8 jobs; ``mean_field_solves``: the random-phase mean
   field), the share of running time at a time solved blind to phase, and the scheduling passes.
2. Route (``--part route``): one 512-GPU GPT-3 175B job (TP 8, PP 8, DP 8; 176 host-to-host flows) on 131,072
   GPUs (``rail``, ``clos3``, hash ECMP), its 64 hosts scattered: the first route on a fresh topology (routing
   tables built for its destinations), then the median over new placements and job ids with the tables built;
   ``Topology.route`` alone and ``build_demand`` (plan + route).
3. Placement decision (``--part placement``): that job on the same fabrics with 5,000 running jobs scattered over
   them, ``tp-aware`` over ``consolidated`` and over ``topo-bestfit``, and plain ``consolidated``: median of
   ``--decisions`` decisions after one timed first call.
4. Full Philly (``--part philly``): 82,247 jobs, Tiresias + consolidated on the 512-GPU 4:1 leaf-spine, default
   network: wall and CPU seconds, scheduling passes, the tcp model's re-solves by path, and the share of running
   time (job-seconds and GPU-seconds) at an iteration time the model solved blind to phase (its mean field).
   ``--part phase-cores``: the same run with the tcp model's opt-in ``phase_cores`` (``netlab.network.tcp.cores``)
   between two default runs (default, cores, default; each in a fresh process): the phase-blind shares, the CPU
   ratio and the average JCT of each, so what the opt-in buys and costs sits beside the default row.
5. Start-up (``--part startup``): ``python -c "import netlab.cli"`` and ``netlab simulate`` on the 2,000-job Gavel
   VC trace 6214e9 (ideal network).

Idle-network rows (issue 16: the generator's small-job mix, at most 32 GPUs, ``fair``; consolidated placement
keeps nearly every job under one leaf, so almost no byte crosses an oversubscribed tier) and the per-link history
modes are kept in the JSON under ``idle_network`` as measured then, labelled; ``--part idle`` re-runs them.

The machine is shared (2 cores): loadavg is recorded around every run, CPU seconds beside wall seconds (on a
loaded machine CPU time is the better estimate of one quiet core), and ratios are quoted beside seconds.

Usage: python benchmarks/bench_scale.py [--parts busy,route,placement,philly,startup] [--sizes 10000,100000,1000000]
       [--big-jobs 100000] [--trace-dir ../shared/traces]   (each part merged into --out; each busy run is written
       as it finishes, beside the runs of other sizes already there, so 10k and 100k land before a long 1M run)
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import math
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).parent))
CLOS_16K = "clos3,gpus=16384,oversub=4,ecmp=hash"
FABRICS_131K = ("rail,gpus=131072,oversub=4,ecmp=hash", "clos3,gpus=131072,oversub=4,ecmp=hash")
CHUNK_JOBS = 100_000
#: the LLM-era mix: weights for 1, 2, ..., 256 GPUs (non-LLM jobs), the LLM share, durations, load
MIX = dict(gpus=(0.35, 0.10, 0.15, 0.20, 0.10, 0.05, 0.03, 0.01, 0.01), llm=0.2, duration_median_s=3600.0,
           duration_sigma=1.0, load=0.9)
#: the idle-network rows of issue 16: the generator's default (small-job) mix at load 0.9 on clos3,gpus=16384
IDLE = dict(topology="clos3,gpus=16384", network="fair", mix=dict(load=0.9))
CONTENDED = 1.05  # slowdown above which a job counts as contended
GAVEL_VC, GAVEL_TOPOLOGY = "6214e9", "leafspine,racks=1,hosts_per_rack=27,gpus_per_host=4,spines=1"
TARGETS = {"busy_1M_wall_s": 300, "busy_1M_peak_rss_mb": 4096, "busy_131k_100k_wall_s": 300, "route_512_ms": 1.0,
           "philly_tcp_wall_s": 15, "cost_per_job_ratio_10k_to_1M": 1.5, "placement_median_ms": 10, "startup_s": 0.3}


def _loadavg() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def _child(argv: list[str], cpu_limit_s: float | None = None) -> dict:
    """Run this script's ``argv`` part in a fresh Python (its own peak RSS); its JSON answer, with the load.

    ``cpu_limit_s``: the child is stopped after that many CPU seconds (RLIMIT_CPU: the same bound whatever the
    machine's load) and the row says it did not finish, with the limit; nothing is extrapolated."""
    before = _loadavg()
    head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=ROOT)
    dirty = subprocess.run(["git", "status", "--porcelain", "--", "netlab"], capture_output=True, text=True, cwd=ROOT)
    commit = head.stdout.strip() + ("+changes" if dirty.stdout.strip() else "")  # the code the child imports
    limit = None if cpu_limit_s is None else int(math.ceil(cpu_limit_s))
    t0 = time.perf_counter()
    out = subprocess.run([sys.executable, str(Path(__file__).resolve()), *argv], capture_output=True, text=True,
                         cwd=ROOT, preexec_fn=None if limit is None else lambda: _limit_cpu(limit))
    if out.returncode == -signal.SIGXCPU or (limit is not None and out.returncode == -signal.SIGKILL):
        return dict(status=f"NOT FINISHED: stopped by its limit of {limit} s CPU for the whole child (trace, topology, "
                           f"simulation; one core) after "
                           f"{time.perf_counter() - t0:.0f} s wall; no extrapolation made", cpu_limit_s=limit,
                    argv=argv, loadavg_before=before, loadavg_after=_loadavg(), commit=commit)
    if out.returncode:
        raise subprocess.CalledProcessError(out.returncode, argv, out.stdout, out.stderr)
    row = json.loads(out.stdout.strip().splitlines()[-1])
    row.update(loadavg_before=before, loadavg_after=_loadavg(), commit=commit)
    return row


def _limit_cpu(seconds: int) -> None:
    import resource

    resource.setrlimit(resource.RLIMIT_CPU, (seconds, seconds + 5))  # SIGXCPU at the soft limit, SIGKILL after


# -- 1. busy cluster (child) -------------------------------------------------------------------------------------------

def solver_counts(sim) -> dict:
    """The network model's re-solves by path, if it counts them (tcp does)."""
    model = sim.network
    exact, mean = getattr(model, "exact_solves", None), getattr(model, "mean_field_solves", None)
    if exact is None or mean is None:
        return {}
    total = exact + mean
    return dict(exact_solves=exact, mean_field_solves=mean, exact_share=exact / total if total else None,
                mean_field_share=mean / total if total else None)


def phase_blind(summary: dict) -> dict:
    """The share of running time (job-seconds, GPU-seconds) at a time the network model solved blind to phase."""
    return {k: summary[k] for k in ("phase_blind_job_share", "phase_blind_gpu_share")}


def contention(jobs) -> dict:
    """Contended jobs (slowdown > CONTENDED) as a share of jobs, of running time and of GPU time."""
    done = jobs[jobs.slowdown.notna()]
    hit = done.slowdown > CONTENDED
    run_s, gpu_s = done.run_s, done.run_s * done.gpus
    return dict(contended_job_share=float(hit.mean()), contended_time_share=float(run_s[hit].sum() / run_s.sum()),
                contended_gpu_time_share=float(gpu_s[hit].sum() / gpu_s.sum()),
                avg_slowdown=float(done.slowdown.mean()), p99_slowdown=float(done.slowdown.quantile(0.99)),
                max_slowdown=float(done.slowdown.max()))


def busy_run(jobs: int, fabric: str, seed: int = 0, network: str | None = None, mix: dict | None = None,
             policy: str = "tiresias", placement: str = "consolidated") -> dict:
    import resource

    import numpy as np

    from netlab.network.model import DEFAULT_NETWORK
    from netlab.sim import SimConfig, Simulator
    from netlab.topology import load_topology
    from netlab.traces.synthetic import poisson_chunks
    from netlab.workload.job import jobs_from_frame

    network = network or DEFAULT_NETWORK
    mix = MIX if mix is None else mix
    topo = load_topology(fabric)
    t0 = time.perf_counter()
    job_list, work, first, last = [], 0.0, None, None
    for chunk in poisson_chunks(jobs=jobs, cluster_gpus=topo.total_gpus, seed=seed, chunk_jobs=CHUNK_JOBS, **mix):
        work += float((chunk.gpus * chunk.duration_s).sum())
        first = chunk.submit_s.iloc[0] if first is None else first
        last = chunk.submit_s.iloc[-1]
        job_list.extend(jobs_from_frame(chunk, topo, first_id=len(job_list)))
        del chunk
    trace_s = time.perf_counter() - t0
    sizes = np.fromiter((j.gpus for j in job_list), dtype=np.int64, count=len(job_list))
    config = SimConfig(network=network, seed=seed, link_history="aggregate", link_resolution_s=86400.0)
    sim = Simulator(topo, job_list, policy, placement, None, config)
    del job_list
    wall0, cpu0 = time.perf_counter(), time.process_time()
    res = sim.run()
    wall_s, cpu_s = time.perf_counter() - wall0, time.process_time() - cpu0
    s, table = res.summary, res.jobs
    delayed = (table.start_s - table.submit_s) > 1e-6  # started after its submission
    waited = table.wait_s > 1e-6  # spent time not running: before its first start or after a preemption
    return dict(jobs=jobs, fabric=fabric, gpus=topo.total_gpus, network=network, policy=f"{policy}+{placement}",
                seed=seed, trace_s=trace_s, sim_wall_s=wall_s, sim_cpu_s=cpu_s, us_per_job=wall_s / jobs * 1e6,
                cpu_us_per_job=cpu_s / jobs * 1e6, events=s["events"], finished=s["finished"],
                gpu_util=s["gpu_util"], offered_load=work / (last - first) / topo.total_gpus,
                share_128plus=float((sizes >= 128).mean()), start_delay_share=float(delayed.mean()),
                waited_share=float(waited.mean()),
                avg_wait_s=s["avg_wait_s"], avg_jct_s=s["avg_jct_s"], preemptions=s["preemptions"],
                **contention(table), **solver_counts(sim), **phase_blind(s), passes=sim.scheduler.passes,
                routing_tables_mb=topo.router.nbytes() / 2**20,
                peak_rss_mb=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)


def busy_part(sizes: list[int], big_jobs: int, previous: dict | None, save, cpu_limit_s: float | None = None,
              fabrics_131k: tuple = FABRICS_131K) -> dict:
    """The busy-cluster runs, each merged into ``previous`` (its runs of other sizes kept if it ran this mix, compared
    as JSON reads it back) and saved as it finishes."""
    out = {"fabric": CLOS_16K, "mix": MIX, "policy": "tiresias + consolidated", "network": "default (tcp)",
           "link_history": "aggregate, 86,400 s bins", "contended": f"slowdown > {CONTENDED}", "runs": {},
           "fabrics_131k": {}}
    if previous and previous.get("mix") == json.loads(json.dumps(MIX)) and previous.get("fabric") == CLOS_16K:
        out["runs"].update(previous.get("runs", {}))
        out["fabrics_131k"].update(previous.get("fabrics_131k", {}))
    for n in sizes:
        row = _child(["--part", "busy", "--jobs", str(n), "--fabric", CLOS_16K], cpu_limit_s)
        out["runs"][str(n)] = row
        _say(f"busy {n:>9,} jobs on {CLOS_16K}", row)
        save(_cost_ratios(out))
    for fabric in fabrics_131k if big_jobs else ():
        row = _child(["--part", "busy", "--jobs", str(big_jobs), "--fabric", fabric], cpu_limit_s)
        out["fabrics_131k"][fabric] = row
        _say(f"busy {big_jobs:>9,} jobs on {fabric}", row)
        save(out)
    return out


def _cost_ratios(out: dict) -> dict:
    """Cost per job of the largest measured size over each smaller one (wall and CPU)."""
    runs = {n: row for n, row in out["runs"].items() if "cpu_us_per_job" in row}  # finished runs only
    out.pop("cost_per_job_ratio", None)
    if len(runs) < 2:
        return out
    hi = str(max(map(int, runs)))
    out["cost_per_job_ratio"] = {f"{m}->{hi}": {"wall": runs[hi]["us_per_job"] / runs[m]["us_per_job"],
                                               "cpu": runs[hi]["cpu_us_per_job"] / runs[m]["cpu_us_per_job"]}
                                 for m in sorted(runs, key=int) if m != hi}
    return out


def _say(what: str, row: dict) -> None:
    if "status" in row:
        print(f"{what}: {row['status']}", flush=True)
        return
    print(f"{what}: {row['sim_wall_s']:.1f} s wall, {row['sim_cpu_s']:.1f} s CPU ({row['cpu_us_per_job']:.0f} us/job), "
          f"peak {row['peak_rss_mb']:.0f} MB, util {row['gpu_util']:.3f}, contended jobs "
          f"{row['contended_job_share']:.3f}, mean-field re-solves {row.get('mean_field_share')}, "
          f"load {row['loadavg_after'][0]}", flush=True)


# -- 2. route one 512-GPU job (child) --------------------------------------------------------------------------------

def _llm_512():
    from netlab.workload.llm import variant
    from netlab.workload.zoo import ModelZoo

    model = variant(ModelZoo.default()["gpt3-175b"], tp=8, pp=8)
    return model, ModelZoo.default().with_model(model)


def route_run(fabric: str, placements: int, seed: int = 0) -> dict:
    import numpy as np

    from netlab.network.demand import build_demand
    from netlab.topology import load_topology
    from netlab.workload.patterns import PATTERNS

    model, _ = _llm_512()
    gpus = (8,) * 64
    plan = PATTERNS.get("3d")().plan_for(gpus, model)
    flows = np.asarray(plan.flows, dtype=np.int64)
    rng = np.random.default_rng(seed)
    warm = load_topology("clos3,gpus=64,ecmp=hash")  # compiled code loaded before anything is timed
    warm.route(np.array([[0, 1], [1, 2]]), 0)
    topo = load_topology(fabric)
    hosts = np.sort(rng.choice(topo.n_hosts, 64, replace=False))
    t0 = time.perf_counter()
    topo.route(hosts[flows], key=0, flow_weights=plan.flow_weights)
    first_ms = (time.perf_counter() - t0) * 1e3  # router built, tables for 64 destinations
    cold, route_ms, demand_ms = [], [], []
    for i in range(placements):
        hosts = np.sort(rng.choice(topo.n_hosts, 64, replace=False))
        t0 = time.perf_counter()
        topo.route(hosts[flows], key=(i + 1) * 1024, flow_weights=plan.flow_weights)
        cold.append((time.perf_counter() - t0) * 1e3)  # new destinations: some tables built
        t0 = time.perf_counter()
        topo.route(hosts[flows], key=(i + 1) * 1024 + 7, flow_weights=plan.flow_weights)
        route_ms.append((time.perf_counter() - t0) * 1e3)
        t0 = time.perf_counter()
        demand, _ = build_demand(topo, model, "3d", i + 1, hosts, gpus)
        demand.links
        demand_ms.append((time.perf_counter() - t0) * 1e3)
    return {"fabric": fabric, "hosts": topo.n_hosts, "job": f"{model.name}: 512 GPUs, TP 8, PP 8, DP 8",
            "flows": len(flows), "first_route_ms": first_ms, "new_hosts_median_ms": statistics.median(cold),
            "route_median_ms": statistics.median(route_ms), "route_max_ms": max(route_ms),
            "build_demand_median_ms": statistics.median(demand_ms), "placements": placements,
            "tables": len(topo.router._switches.rows), "tables_mb": topo.router.nbytes() / 2**20}


# -- 3. placement decision (child) -------------------------------------------------------------------------------------

def placement_run(fabric: str, decisions: int, n_running: int = 5000, seed: int = 0) -> dict:
    import numpy as np

    from netlab.network import NETWORKS
    from netlab.policies import PLACEMENT
    from netlab.sched import ClusterView, JobState
    from netlab.slowdown.samples import scatter
    from netlab.topology import load_topology
    from netlab.workload.job import Job

    t0 = time.perf_counter()
    topo = load_topology(fabric)
    build_s = time.perf_counter() - t0
    model, zoo = _llm_512()
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


# -- 4. full Philly under the default network (child) --------------------------------------------------------------

def philly_run(trace_dir: str | None, network_kwargs: dict | None = None) -> dict:
    from bench_core import PHILLY_TOPOLOGY

    from netlab.network.model import DEFAULT_NETWORK
    from netlab.sim import SimConfig, Simulator
    from netlab.topology import load_topology
    from netlab.traces import load_trace
    from netlab.workload.job import jobs_from_frame

    topo = load_topology(PHILLY_TOPOLOGY)
    jobs = jobs_from_frame(load_trace("philly", trace_dir=trace_dir, seed=0), topo)
    sim = Simulator(topo, jobs, "tiresias", "consolidated", None,
                    SimConfig(network=DEFAULT_NETWORK, network_kwargs=network_kwargs or {}))
    wall0, cpu0 = time.perf_counter(), time.process_time()
    res = sim.run()
    wall_s, cpu_s = time.perf_counter() - wall0, time.process_time() - cpu0
    return dict(jobs=len(jobs), topology=PHILLY_TOPOLOGY, network=DEFAULT_NETWORK, network_kwargs=network_kwargs or {},
                run_wall_s=wall_s, run_cpu_s=cpu_s, avg_jct_s=res.summary["avg_jct_s"],
                sim_wall_s=res.summary["wall_s"], events=res.summary["events"], passes=sim.scheduler.passes,
                **solver_counts(sim), **phase_blind(res.summary), **contention(res.jobs))


def phase_cores_part(trace_dir: str | None) -> dict:
    """Full Philly by default, with ``phase_cores``, and by default again (each a fresh process): the opt-in's
    phase-blind shares and average JCT beside the default's, and its CPU over the mean of the two default runs."""
    trace = ["--trace-dir", trace_dir] if trace_dir else []
    runs = []
    for part in ("philly", "philly-cores", "philly"):
        runs.append(_child(["--part", part, *trace]))
        row = runs[-1]
        print(f"{part}: {row.get('run_cpu_s', float('nan')):.1f} s CPU, phase-blind "
              f"{row.get('phase_blind_job_share', float('nan')):.3f} of job-s", flush=True)
    default, cores = [runs[0], runs[2]], runs[1]
    keys = ("run_cpu_s", "run_wall_s", "avg_jct_s", "phase_blind_job_share", "phase_blind_gpu_share", "loadavg_before",
            "loadavg_after")
    return dict(order="default, phase_cores, default (fresh processes)",
                default=[{k: r.get(k) for k in keys} for r in default], phase_cores={k: cores.get(k) for k in keys},
                cpu_ratio=cores["run_cpu_s"] / statistics.mean(r["run_cpu_s"] for r in default),
                commit=cores.get("commit"))


# -- 5. start-up, whole process ----------------------------------------------------------------------------------------

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


# -- idle-network rows (issue 16), re-run on demand -------------------------------------------------------------------

def idle_part(sizes: list[int]) -> dict:
    out = {"label": "idle network: the generator's default small-job mix (55% 1-GPU, at most 32 GPUs), load 0.9, "
                    "fair; consolidated placement keeps nearly every job under one leaf", **IDLE, "runs": {}}
    for n in sizes:
        row = _child(["--part", "idle", "--jobs", str(n)])
        out["runs"][str(n)] = row
        _say(f"idle {n:>9,} jobs", row)
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--parts", default="busy,route,placement,philly,startup",
                    help="comma-separated: busy, route, placement, philly, startup, idle (each merged into --out)")
    ap.add_argument("--part", default=None, help="one child measurement (JSON on stdout): busy, idle, route, "
                                                 "placement, philly")
    ap.add_argument("--jobs", type=int, default=10_000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--fabric", default=CLOS_16K)
    ap.add_argument("--sizes", default="10000,100000,1000000")
    ap.add_argument("--big-jobs", type=int, default=100_000, help="jobs on the 131,072-GPU fabrics (0: skip)")
    ap.add_argument("--fabrics-131k", default="rail,clos3",
                    help="which 131,072-GPU fabrics the busy part runs (comma-separated: rail, clos3)")
    ap.add_argument("--idle-sizes", default="10000,100000,1000000")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--decisions", type=int, default=50)
    ap.add_argument("--placements", type=int, default=50)
    ap.add_argument("--trace-dir", default=None)
    ap.add_argument("--cpu-limit-s", type=float, default=None,
                    help="stop each busy run after this many CPU seconds and record it as not finished")
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "scale.json"))
    args = ap.parse_args(argv)
    child = {"busy": lambda: busy_run(args.jobs, args.fabric, args.seed),
             "idle": lambda: busy_run(args.jobs, IDLE["topology"], args.seed, IDLE["network"], IDLE["mix"]),
             "route": lambda: route_run(args.fabric, args.placements, args.seed),
             "placement": lambda: placement_run(args.fabric, args.decisions),
             "philly": lambda: philly_run(args.trace_dir),
             "philly-cores": lambda: philly_run(args.trace_dir, {"phase_cores": True})}
    if args.part is not None:
        print(json.dumps(child[args.part]()))
        return 0
    from netlab.sim.metrics import write_json

    out = Path(args.out)
    results = json.loads(out.read_text()) if out.exists() else {}
    results.update(machine={"python": sys.version.split()[0], "platform": platform.platform(),
                            "cpus": os.cpu_count()}, targets=TARGETS)
    for part in args.parts.split(","):
        before = _loadavg()
        if part == "busy":
            def save(busy: dict) -> None:
                results["busy"] = busy
                write_json(out, results)

            kinds = [k for k in args.fabrics_131k.split(",") if k]
            unknown = [k for k in kinds if k not in ("rail", "clos3")]
            if unknown:
                ap.error(f"--fabrics-131k: unknown {unknown}; allowed: rail, clos3")
            big = tuple(f for f in FABRICS_131K if f.split(",")[0] in kinds)
            results["busy"] = busy_part([int(s) for s in args.sizes.split(",") if s], args.big_jobs,
                                        results.get("busy"), save, args.cpu_limit_s, big)
        elif part == "route":
            results["route"] = [_child(["--part", "route", "--fabric", f, "--placements", str(args.placements)])
                                for f in FABRICS_131K]
            for row in results["route"]:
                print(f"route on {row['fabric']}: first {row['first_route_ms']:.1f} ms, then "
                      f"{row['route_median_ms']:.3f} ms median ({row['flows']} flows)", flush=True)
        elif part == "placement":
            results["placement"] = [_child(["--part", "placement", "--fabric", f, "--decisions", str(args.decisions)])
                                    for f in FABRICS_131K]
            for row in results["placement"]:
                print(f"placement on {row['fabric']}: " + ", ".join(f"{k} {v:.2f} ms"
                                                                    for k, v in row["median_ms"].items()), flush=True)
        elif part == "philly":
            argv_child = ["--part", "philly"] + (["--trace-dir", args.trace_dir] if args.trace_dir else [])
            results["philly"] = _child(argv_child)
            print(f"philly: {results['philly']['run_wall_s']:.1f} s wall, {results['philly']['run_cpu_s']:.1f} s CPU",
                  flush=True)
        elif part == "phase-cores":
            results["phase_cores"] = phase_cores_part(args.trace_dir)
        elif part == "startup":
            results["startup"] = startup_part(args.repeats, args.trace_dir)
        elif part == "idle":
            results.setdefault("idle_network", {})["trace_scale"] = idle_part(
                [int(s) for s in args.idle_sizes.split(",")])
        else:
            ap.error(f"unknown part {part!r}")
        target = results[{"idle": "idle_network", "phase-cores": "phase_cores"}.get(part, part)]
        if isinstance(target, dict):
            target.update(loadavg_before=before, loadavg_after=_loadavg())
        write_json(out, results)
        print(f"wrote {part} into {out}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
