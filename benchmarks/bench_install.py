"""The core install (the README's first command, ``pip install .``): its size and time. Writes
benchmarks/results/install.json.

For each checkout given (``--tree NAME=DIR``, e.g. the commit before the extras moved and this one), a fresh
venv gets ``pip install -q DIR``; the wall and CPU seconds of pip, the venv's size on disk (``du``) and its
number of installed distributions are recorded, the checkouts alternating ``--repeats`` times (pip's own cache
is warm after the first install of each package, so every install after the first reads the same cache). Then,
in the last venv of each checkout, ``netlab simulate`` runs on the bundled trace (the install works), and the
packages that moved to extras (jupyterlab to ``notebooks``; pyroute2, paramiko, psutil to ``testbed``) are
looked up (the core install no longer brings them; ipykernel moved to ``notebooks`` too: its IPython requires
psutil, and JupyterLab brings it anyway).

Usage: python benchmarks/bench_install.py --tree before=../before --tree after=. [--repeats 2]
       (``after@<commit>=DIR`` names the commit of a copy that is not a git checkout)
"""

from __future__ import annotations

import argparse
import os
import platform
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from netlab.sim.metrics import write_json

MOVED = ("jupyterlab", "ipykernel", "pyroute2", "paramiko", "psutil")


def _run(argv, **kw) -> subprocess.CompletedProcess:
    proc = subprocess.run(argv, capture_output=True, text=True, **kw)
    if proc.returncode != 0:
        raise RuntimeError(f"{argv[:4]}... failed ({proc.returncode}): {proc.stderr[-2000:]}")
    return proc


def du_bytes(path: Path) -> int:
    """Bytes on disk under ``path`` (``du -sb``: apparent sizes, hard links once)."""
    return int(_run(["du", "-sb", str(path)]).stdout.split()[0])


def install(tree: Path, venv: Path) -> dict:
    """A fresh venv with ``pip install -q tree``: pip's wall and CPU seconds, the venv's size and contents."""
    _run([sys.executable, "-m", "venv", str(venv)])
    empty = du_bytes(venv)
    py = venv / "bin" / "python"
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    _run([str(py), "-m", "pip", "install", "-q", "--disable-pip-version-check", str(tree)], cwd=venv)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    listed = _run([str(py), "-m", "pip", "list", "--format=freeze", "--disable-pip-version-check"]).stdout.split()
    return dict(wall_s=wall, cpu_s=(after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime),
                venv_bytes=du_bytes(venv), empty_venv_bytes=empty, distributions=len(listed))


def check(venv: Path, work: Path) -> dict:
    """Does the install run the simulator, and which moved packages does it still have?"""
    py = venv / "bin" / "python"
    _run([str(venv / "bin" / "netlab"), "simulate", "--max-jobs", "20", "--quiet", "--out", str(work / "out")],
         cwd=work)
    probe = "import importlib.util as u; print(' '.join(m for m in %r if u.find_spec(m)))" % (MOVED,)
    present = _run([str(py), "-c", probe], cwd=work).stdout.split()
    return dict(simulate_runs=True, moved_packages_installed=present)


def commit_of(tree: Path) -> str | None:
    """The checkout's commit (None for a plain copy, e.g. ``git archive HEAD``: give ``NAME@COMMIT=DIR``)."""
    proc = subprocess.run(["git", "-C", str(tree), "rev-parse", "--short=12", "HEAD"], capture_output=True, text=True)
    return proc.stdout.strip() if proc.returncode == 0 else None


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--tree", action="append", required=True,
                    help="NAME=DIR or NAME@COMMIT=DIR, a checkout to install (repeatable)")
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--out", default=str(Path(__file__).parent / "results" / "install.json"))
    args = ap.parse_args(argv)
    given = [t.split("=", 1) for t in args.tree]
    trees = {label.split("@")[0]: Path(d).resolve() for label, d in given}
    commits = {label.split("@")[0]: (label.split("@", 1)[1] if "@" in label else commit_of(Path(d)))
               for label, d in given}
    load_before = os.getloadavg()
    runs: dict[str, list[dict]] = {name: [] for name in trees}
    checks = {}
    with tempfile.TemporaryDirectory(prefix="netlab-install-") as tmp:
        for i in range(args.repeats):
            for name, tree in trees.items():
                venv = Path(tmp) / f"{name}-{i}"
                runs[name].append(install(tree, venv))
                r = runs[name][-1]
                print(f"{name} #{i}: {r['wall_s']:.0f} s ({r['cpu_s']:.0f} cpu), {r['venv_bytes'] / 2**20:.0f} MiB, "
                      f"{r['distributions']} distributions", flush=True)
                if i == args.repeats - 1:
                    work = Path(tmp) / f"work-{name}"
                    work.mkdir()
                    checks[name] = check(venv, work)
    out = dict(machine=dict(python=platform.python_version(), cpus=os.cpu_count(), loadavg_before=load_before,
                            loadavg_after=os.getloadavg()), repeats=args.repeats, moved_to_extras=list(MOVED))
    for name, r in runs.items():
        out[name] = dict(commit=commits[name], runs=r, checks=checks[name],
                         median_wall_s=statistics.median(x["wall_s"] for x in r),
                         median_cpu_s=statistics.median(x["cpu_s"] for x in r),
                         venv_bytes=r[-1]["venv_bytes"], distributions=r[-1]["distributions"])
    names = list(trees)
    if len(names) == 2:
        a, b = names
        out["ratio"] = {f"{a}/{b}": dict(venv_bytes=out[a]["venv_bytes"] / out[b]["venv_bytes"],
                                          wall=out[a]["median_wall_s"] / out[b]["median_wall_s"],
                                          cpu=out[a]["median_cpu_s"] / out[b]["median_cpu_s"])}
        print(out["ratio"])
    print("wrote", write_json(args.out, out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
