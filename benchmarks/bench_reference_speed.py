"""Whole-process speed against the Tiresias reference simulator on the same inputs: writes
benchmarks/results/reference_speed.json.

The cells of ``shared/reference/cross-validation.md`` (four Gavel VC traces x fifo, fjf, dlas-gpu), each run
as a user runs it, a whole process from the command line:

* the reference: ``python2 run_sim.py --scheme=count --schedule=S`` from a checkout of
  SymbioticLab/Tiresias (``--tiresias DIR``; not part of netlab: fetch it yourself) under a Python 2.7 with
  numpy (``--python2``, e.g. ``env PYENV_VERSION=2.7.18 PYTHONPATH=<numpy for 2.7> python``), on a job CSV
  and cluster spec written from netlab's Gavel loader by the rule of cross-validation.md;
* netlab: ``netlab simulate`` with the same trace, cluster, schedule, ``--placement first-fit``,
  ``--network ideal`` and no restart cost (as ``netlab.crossval.run_cell``).

Both sides alternate, ``--repeats`` times per cell; the median wall and user+system CPU seconds are kept (CPU
seconds move less with load from elsewhere on this 2-core machine). The reference's own figures are read
back from its job.csv and checked against cross-validation.md, so the inputs are known to be the same.
netlab's start-up (``import netlab.cli``, median of 5 fresh processes) is reported beside, with what a
simulation imports (``netlab.experiments``) and its floor (numpy, pandas alone).

Target (issue "Today's clusters"): netlab's whole process >= 3x faster than the reference; start-up <= 0.3 s.

``--startup`` needs no reference: netlab's side alone, start-up and one whole ``netlab simulate`` on the 533-job
Gavel trace 2869ce (fifo, as above), and with ``--before DIR`` the same for a checkout of an older commit,
alternating the two, ``--repeats`` fresh processes each (median wall and CPU seconds). Each tree runs with the
same interpreter from an empty working directory with ``PYTHONPATH=<tree>``, bytecode caches written and a
warm-up process first (as an installed netlab runs). Measured per tree: the bare interpreter, ``import
netlab.cli``, ``import netlab.cli`` with the simulator's modules (netlab.sim, .topology, .policies, .network:
what a simulation imports besides reading its trace and writing its results), the libraries alone (numpy,
pandas, pyarrow's parquet writer, pydantic, typer: the floor of the whole process), and the whole process. It
is written to the ``startup`` entry of the JSON (the reference cells stay). Targets (issue 25): the whole process
>= 2x faster than at the commit before; the CLI with the simulator's modules <= 0.3 s (judged by wall and by CPU
seconds: on a loaded machine the wall seconds are mostly waiting for a core).

Usage: python benchmarks/bench_reference_speed.py --tiresias DIR --python2 "CMD ..." [--repeats 3]
       python benchmarks/bench_reference_speed.py --startup [--before DIR] [--repeats 7] [--trace-dir DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

from netlab.crossval import REFERENCE, TOPOLOGIES, TRACES
from netlab.sim.metrics import write_json
from netlab.traces import load_trace

NETLAB = [sys.executable, "-m", "netlab.cli"]
#: cluster size -> (nodes, GPUs per node), as in netlab.crossval.TOPOLOGIES
NODES = {64: (8, 8), 108: (27, 4)}


def write_inputs(vc: str, trace_dir: str | None, folder: Path) -> tuple[Path, Path]:
    """The reference's job CSV and cluster spec for one VC trace (cross-validation.md's input rule)."""
    df = load_trace(f"gavel,vc={vc}", trace_dir=trace_dir)
    jobs = pd.DataFrame({"job_id": np.arange(len(df)), "num_gpu": df.gpus.to_numpy(),
                         "submit_time": df.submit_s.to_numpy().astype(np.int64),
                         "iterations": df.trace_iterations.to_numpy().astype(np.int64), "model_name": "vgg19",
                         "duration": df.duration_s.to_numpy(), "interval": 1})
    job_csv, spec_csv = folder / f"{vc}.csv", folder / f"cluster-{vc}.csv"
    jobs.to_csv(job_csv, index=False)
    nodes, per_node = NODES[TRACES[vc]]
    spec_csv.write_text("num_switch,num_node_p_switch,num_gpu_p_node,num_cpu_p_node,mem_p_node\n"
                        f"1,{nodes},{per_node},40,256\n")
    return job_csv, spec_csv


def timed(argv: list[str], cwd: Path | None = None, env: dict | None = None) -> tuple[float, float]:
    """(wall s, user + system CPU s of the child) of one whole process; it must succeed."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    proc = subprocess.run(argv, cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        raise RuntimeError(f"{argv[:3]}... failed ({proc.returncode}): {proc.stderr[-2000:]}")
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def reference_figures(job_csv: Path) -> dict:
    d = pd.read_csv(job_csv)
    return dict(avg_jct_s=float(d.JCT.mean()), p99_jct_s=float(np.percentile(d.JCT, 99)),
                makespan_s=float(d.end_time.max()), preemptions=int(d.preempt.sum()))


def simulate_argv(vc: str, schedule: str, out: Path, trace_dir: str | None) -> list[str]:
    """``netlab simulate`` of one reference cell, as :func:`netlab.crossval.run_cell` runs it."""
    argv = [*NETLAB, "simulate", "--trace", f"gavel,vc={vc}", "--topology", TOPOLOGIES[TRACES[vc]],
            "--policy", {"dlas-gpu": "tiresias"}.get(schedule, schedule), "--placement", "first-fit",
            "--network", "ideal", "--checkpoint-s", "0", "--restore-s", "0", "--quiet", "--out", str(out)]
    return argv + (["--trace-dir", trace_dir] if trace_dir else [])


def run_cell(vc, schedule, args, folder: Path) -> dict:
    job_csv, spec_csv = write_inputs(vc, args.trace_dir, folder)
    ref_argv = [*shlex.split(args.python2), "run_sim.py", f"--cluster_spec={spec_csv}", "--scheme=count",
                f"--trace_file={job_csv}", f"--schedule={schedule}", f"--log_path={folder / ('ref-' + vc + schedule)}"]
    ours = simulate_argv(vc, schedule, folder / f"netlab-{vc}-{schedule}", args.trace_dir)
    ref, net = [], []
    for _ in range(args.repeats):
        ref.append(timed(ref_argv, cwd=Path(args.tiresias) / "simulator"))
        net.append(timed(ours))
    got = reference_figures(folder / f"ref-{vc}{schedule}" / "job.csv")
    want = REFERENCE.set_index(["vc", "schedule"]).loc[(vc, schedule)]
    same = all(abs(got[m] - float(want[m])) <= 0.06 + 1e-9 * abs(float(want[m]))  # the file rounds to 0.1 s
               for m in ("avg_jct_s", "p99_jct_s", "makespan_s"))
    med = {side: dict(wall_s=statistics.median(w for w, _ in runs), cpu_s=statistics.median(c for _, c in runs))
           for side, runs in (("reference", ref), ("netlab", net))}
    return dict(vc=vc, schedule=schedule, jobs=int(want["jobs"]), reference_reproduced=bool(same), **med,
                speedup_wall=med["reference"]["wall_s"] / med["netlab"]["wall_s"],
                speedup_cpu=med["reference"]["cpu_s"] / med["netlab"]["cpu_s"])


def startup_s(module: str, repeats: int = 5) -> float:
    """Median wall seconds of a fresh process that imports ``module``."""
    return statistics.median(timed([sys.executable, "-c", f"import {module}"])[0] for _ in range(repeats))


#: what a simulation imports besides reading its trace and writing its results
SIMULATION_IMPORTS = "import netlab.cli, netlab.sim, netlab.topology, netlab.policies, netlab.network"
#: the libraries a whole ``netlab simulate`` cannot do without, and nothing of netlab: numpy for the run, pandas to
#: read the trace into its table, pyarrow's parquet writer for the result tables, pydantic for the configuration,
#: typer for the command line. The floor the whole process can reach by importing less of netlab.
LIBRARIES = "import numpy, pandas, pyarrow.parquet, pydantic.main, typer"
STARTUP_TARGETS = dict(whole_process_speedup=2.0, simulation_imports_s=0.3)


def _tree_env(tree: Path) -> dict:
    """The environment a tree runs in: its checkout first on the path, bytecode caches written (as installed)."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONDONTWRITEBYTECODE", "PYTHONPATH")}
    return env | {"PYTHONPATH": str(tree)}


def _commit(tree: Path) -> str:
    def git(*argv):
        return subprocess.run(["git", "-C", str(tree), *argv], capture_output=True, text=True).stdout.strip()

    return git("rev-parse", "--short=12", "HEAD") + ("-dirty" if git("status", "--porcelain", "--", "netlab") else "")


def startup(args) -> dict:
    """netlab's start-up and one whole ``netlab simulate`` (2869ce, fifo) per tree; see the module docstring."""
    trees = {"after": Path(__file__).resolve().parents[1]}
    if args.before:
        trees = {"before": Path(args.before).resolve(), **trees}
    with tempfile.TemporaryDirectory(prefix="netlab-startup-") as tmp:
        work = Path(tmp)
        probes = {"interpreter": [sys.executable, "-c", "pass"],
                  "import_cli": [sys.executable, "-c", "import netlab.cli"],
                  "simulation_imports": [sys.executable, "-c", SIMULATION_IMPORTS],
                  "libraries": [sys.executable, "-c", LIBRARIES],
                  "simulate_2869ce": simulate_argv("2869ce", "fifo", work / "out", args.trace_dir)}
        runs = {name: {probe: [] for probe in probes} for name in trees}
        for name, tree in trees.items():  # warm-up: bytecode and numba caches written, the trace read once
            for argv in probes.values():
                timed(argv, cwd=work, env=_tree_env(tree))
        for _ in range(args.repeats):
            for probe, argv in probes.items():
                for name, tree in trees.items():  # alternating, so load from elsewhere falls on both
                    runs[name][probe].append(timed(argv, cwd=work, env=_tree_env(tree)))
    out = {}
    for name, tree in trees.items():
        out[name] = dict(commit=_commit(tree), **{
            probe: dict(wall_s=statistics.median(w for w, _ in r), cpu_s=statistics.median(c for _, c in r),
                        wall_runs_s=[round(w, 4) for w, _ in r], cpu_runs_s=[round(c, 4) for _, c in r])
            for probe, r in runs[name].items()})
    if "before" in out:
        out["ratio_before_over_after"] = {
            probe: dict(wall=out["before"][probe]["wall_s"] / out["after"][probe]["wall_s"],
                        cpu=out["before"][probe]["cpu_s"] / out["after"][probe]["cpu_s"]) for probe in probes}
    after = out["after"]
    out["targets"] = STARTUP_TARGETS
    # wall seconds on a loaded machine are mostly waiting for a core; CPU seconds are what a quiet machine takes
    out["meets_targets"] = dict(
        simulation_imports_wall=after["simulation_imports"]["wall_s"] <= STARTUP_TARGETS["simulation_imports_s"],
        simulation_imports_cpu=after["simulation_imports"]["cpu_s"] <= STARTUP_TARGETS["simulation_imports_s"],
        whole_process=(out["ratio_before_over_after"]["simulate_2869ce"]["cpu"]
                       >= STARTUP_TARGETS["whole_process_speedup"]) if "before" in out else None)
    if "before" in out:  # can the whole process reach 2x at all while it loads these libraries?
        budget = out["before"]["simulate_2869ce"]["cpu_s"] / STARTUP_TARGETS["whole_process_speedup"]
        out["whole_process_budget_cpu_s"] = dict(
            budget=budget, libraries=after["libraries"]["cpu_s"],
            left_for_netlab_and_the_run=budget - after["libraries"]["cpu_s"])
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--tiresias", help="a checkout of SymbioticLab/Tiresias (not with --startup)")
    ap.add_argument("--python2", help="command line of a Python 2.7 that has numpy (not with --startup)")
    ap.add_argument("--startup", action="store_true", help="netlab's side alone: start-up and one whole process")
    ap.add_argument("--before", default=None, help="with --startup: a checkout of an older commit to compare")
    ap.add_argument("--trace-dir", default=None)
    ap.add_argument("--repeats", type=int, default=None, help="default: 3, with --startup 7")
    ap.add_argument("--cells", default=None, help="comma-separated vc:schedule (default: all 12)")
    ap.add_argument("--out", default=str(Path(__file__).parent / "results" / "reference_speed.json"))
    args = ap.parse_args(argv)
    if args.startup:
        args.repeats = args.repeats or 7
        load_before = os.getloadavg()
        result = startup(args)
        result.update(machine=dict(python=platform.python_version(), cpus=os.cpu_count(), loadavg_before=load_before,
                                   loadavg_after=os.getloadavg()), repeats=args.repeats)
        for probe in ("interpreter", "import_cli", "simulation_imports", "libraries", "simulate_2869ce"):
            line = "  ".join(f"{name} {result[name][probe]['wall_s']:.3f} s ({result[name][probe]['cpu_s']:.3f} cpu)"
                             for name in ("before", "after") if name in result)
            ratio = result.get("ratio_before_over_after", {}).get(probe)
            print(f"{probe:20s} {line}" + (f"  ratio {ratio['wall']:.2f}x wall, {ratio['cpu']:.2f}x cpu" if ratio
                                           else ""))
        path = Path(args.out)
        previous = json.loads(path.read_text()) if path.exists() else {}
        print("wrote", write_json(path, previous | {"startup": result}))
        return 0
    if not (args.tiresias and args.python2):
        ap.error("--tiresias and --python2 are needed (or --startup for netlab's side alone)")
    args.repeats = args.repeats or 3
    cells = ([tuple(c.split(":")) for c in args.cells.split(",")] if args.cells else
             [(vc, s) for vc in TRACES for s in ("fifo", "fjf", "dlas-gpu")])
    load_before = os.getloadavg()
    rows = []
    with tempfile.TemporaryDirectory(prefix="netlab-refspeed-") as tmp:
        for vc, schedule in cells:
            rows.append(run_cell(vc, schedule, args, Path(tmp)))
            r = rows[-1]
            print(f"{vc} {schedule}: reference {r['reference']['wall_s']:.2f} s ({r['reference']['cpu_s']:.2f} cpu), "
                  f"netlab {r['netlab']['wall_s']:.2f} s ({r['netlab']['cpu_s']:.2f} cpu): "
                  f"{r['speedup_cpu']:.2f}x cpu; reference reproduced: {r['reference_reproduced']}", flush=True)
    start = startup_s("netlab.cli")
    # what `netlab simulate` imports before its first event: the interpreter, numpy, pandas, numba, networkx
    floor = {m: startup_s(m) for m in ("numpy", "pandas", "netlab.experiments")}
    table = pd.DataFrame([{k: v for k, v in r.items() if not isinstance(v, dict)} for r in rows])
    out = dict(machine=dict(python=platform.python_version(), cpus=os.cpu_count(), loadavg_before=load_before,
                            loadavg_after=os.getloadavg()),
               repeats=args.repeats, cells=rows, startup_s=start, import_s=floor,
               min_speedup_cpu=float(table.speedup_cpu.min()), median_speedup_cpu=float(table.speedup_cpu.median()),
               target_speedup=3.0, target_startup_s=0.3,
               meets_target=bool(table.speedup_cpu.min() >= 3.0 and start <= 0.3))
    print(f"start-up {start:.2f} s; speed-up (cpu) min {out['min_speedup_cpu']:.2f}x, median "
          f"{out['median_speedup_cpu']:.2f}x")
    print("wrote", write_json(args.out, out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
