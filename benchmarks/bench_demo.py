"""The main job's speed (not a timed test): writes benchmarks/results/demo.json.

1. Fresh clone: the README's first command, timed step by step, on a clone of
   this repository's HEAD in a temporary directory: ``python3 -m venv .venv``,
   ``.venv/bin/pip install -q --no-compile .``, ``.venv/bin/netlab demo --out results/demo``
   (numba compiles from nothing: the new site-packages has no cache). Target:
   under 4 minutes in all on the 2-core machine. The report's one-sentence
   answer is recorded, and the verdicts per transport regime (the demo runs
   in :data:`netlab.sweep.grid.DEMO_REGIMES`: the default network's and the
   rate-fair one; each verdict names the regime it was computed for).
2. Warm-up or not (``--ab``): the demo's sweep alone, on this environment, with
   an empty numba cache each time (``NUMBA_CACHE_DIR``, a fresh directory),
   with the process backend's ``warm_up`` (the first cell in the parent, so
   numba compiles once and the workers load its cache) and without (every
   worker compiles the same kernels); alternated, each in its own process.

Records the load average before and after each part (the machine is shared).

Usage: python benchmarks/bench_demo.py [--ab] [--repeats N]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from netlab.sim.metrics import write_json

ROOT = Path(__file__).resolve().parents[1]
TARGET_S = 240.0


def _run(argv: list[str], cwd: Path, env: dict | None = None) -> tuple[float, str]:
    t0 = time.perf_counter()
    done = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, check=True)
    return time.perf_counter() - t0, done.stdout


def fresh_clone(tmp: Path) -> dict:
    clone = tmp / "clone"
    commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True,
                            check=True).stdout.strip()
    subprocess.run(["git", "clone", "-q", str(ROOT), str(clone)], check=True)
    load_before = os.getloadavg()[0]
    steps = {}
    steps["venv_s"], _ = _run([shutil.which("python3") or sys.executable, "-m", "venv", ".venv"], clone)
    steps["install_s"], _ = _run([str(clone / ".venv/bin/pip"), "install", "-q", "--no-compile", "."], clone)
    steps["demo_s"], out = _run([str(clone / ".venv/bin/netlab"), "demo", "--out", "results/demo"], clone)
    manifest = json.loads((clone / "results/demo/manifest.json").read_text())
    total = sum(steps.values())
    return dict(commit=commit, **{k: round(v, 1) for k, v in steps.items()}, total_s=round(total, 1),
                sweep_wall_s=round(manifest["runs"][-1]["wall_s"], 1), cells=manifest["runs"][-1]["ran"],
                answer=json.loads((clone / "results/demo/report/report.json").read_text())["answer"],
                verdicts_by_regime=verdicts_by_regime(clone / "results/demo/report/comparison.csv"),
                loadavg_1min_before=load_before, loadavg_1min_after=os.getloadavg()[0],
                target_s=TARGET_S, met=bool(total <= TARGET_S))


def verdicts_by_regime(comparison_csv: Path) -> dict:
    """The report's verdicts (:func:`netlab.compare.verdicts`, one line per policy and setting, each naming its
    regime) grouped by the transport regime they were computed for."""
    import pandas as pd

    from netlab.compare import verdicts

    cmp = pd.read_csv(comparison_csv)
    return {str(r): verdicts(g) for r, g in cmp.groupby("regime", sort=False)}


def _cold_sweep(warm_up: bool, tmp: Path) -> dict:
    """The demo sweep in a new process with an empty numba cache."""
    cache = Path(tempfile.mkdtemp(dir=tmp, prefix="numba-"))
    env = dict(os.environ, NUMBA_CACHE_DIR=str(cache))
    load = os.getloadavg()[0]
    wall, out = _run([sys.executable, __file__, "--sweep-only", "warm" if warm_up else "plain"], ROOT, env)
    return dict(warm_up=warm_up, process_s=round(wall, 1), **json.loads(out.splitlines()[-1]),
                loadavg_1min_before=load, loadavg_1min_after=os.getloadavg()[0])


def sweep_only(mode: str) -> None:
    from netlab.sweep import demo_grid, run_sweep

    t0 = time.perf_counter()
    res = run_sweep(demo_grid(), backend="processes", warm_up=mode == "warm", progress=False)
    print(json.dumps(dict(sweep_s=round(time.perf_counter() - t0, 1), cells=len(res.summary),
                          failed=len(res.errors), first_cell_s=round(float(res.summary.cell_s.iloc[0]), 1))))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ab", action="store_true", help="also compare the sweep with and without the warm-up")
    ap.add_argument("--repeats", type=int, default=1, help="warm-up/no warm-up pairs (alternated)")
    ap.add_argument("--sweep-only", choices=["warm", "plain"], help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.sweep_only:
        sweep_only(args.sweep_only)
        return
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        out = dict(cpus=os.cpu_count(), fresh_clone=fresh_clone(tmp))
        if args.ab:
            runs = []
            for i in range(args.repeats):
                for warm in ((True, False) if i % 2 == 0 else (False, True)):
                    runs.append(_cold_sweep(warm, tmp))
            out["warm_up_ab"] = runs
    path = ROOT / "benchmarks" / "results" / "demo.json"
    write_json(path, out)
    print(json.dumps(out, indent=1))
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
