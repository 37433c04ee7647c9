"""A new user's first hour, checked: the README's three commands in order on a fresh clone, then notebook 01.

On a ``git clone`` of this repository's HEAD in a temporary directory, runs the
README's own commands, read from its bash blocks (not a copy of them):

1. the main job (``python3 -m venv .venv && .venv/bin/pip install -q --no-compile . && .venv/bin/netlab demo ...``);
2. the test command (``python3 -m venv .venv-test && ... pytest -q``); ``--pytest-args`` narrows the
   pytest part (the whole suite takes 15-40 minutes on the shared 2-core machine), and the result says so;
3. the notebook command in the main job's environment (``.venv/bin/pip install -q -e '.[notebooks,testbed]'
   && .venv/bin/netlab notebooks``): the install as written, then JupyterLab is started as written with
   ``--no-browser --port N`` appended, answers on ``/api`` and is stopped;

then executes ``notebooks/01-quickstart.ipynb`` with its own parameters in ``.venv`` (``jupyter nbconvert
--execute``). Step 3 after step 1 is what broke ``.venv`` when numba cached into ``site-packages``. Each
step's exit status and time go to ``benchmarks/results/fresh_clone.json``, with the load average (the
machine is shared). Exit status 1 if any step failed.

Usage: python benchmarks/bench_fresh_clone.py [--pytest-args "tests/test_cli.py -x"] [--keep DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

from netlab.sim.metrics import write_json

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "benchmarks" / "results" / "fresh_clone.json"


def readme_commands(readme: Path) -> dict:
    """The README's main-job, test and notebook commands (its bash blocks that make or use ``.venv``)."""
    blocks = re.findall(r"```bash\n(.*?)```", readme.read_text(), flags=re.S)
    found = {}
    for block in blocks:
        text = " ".join(line.rstrip("\\").strip() for line in block.strip().splitlines())
        if "python3 -m venv .venv &&" in text:
            found["main_job"] = text
        elif "python3 -m venv .venv-test" in text:
            found["tests"] = text
        elif text.startswith(".venv/bin/pip install") and "notebooks" in text:
            found["notebooks"] = text
    missing = {"main_job", "tests", "notebooks"} - set(found)
    if missing:
        raise SystemExit(f"README.md: no bash block for {', '.join(sorted(missing))}")
    return found


def _step(name: str, command: str, cwd: Path, timeout_s: float, log: Path) -> dict:
    t0 = time.perf_counter()
    with open(log, "w") as out:
        try:
            rc = subprocess.run(["bash", "-c", command], cwd=cwd, stdout=out, stderr=subprocess.STDOUT,
                                timeout=timeout_s).returncode
        except subprocess.TimeoutExpired:
            rc = "timeout"
    seconds = time.perf_counter() - t0
    tail = log.read_text(errors="replace").splitlines()[-15:]
    print(f"{name}: exit {rc} in {seconds:.0f} s", flush=True)
    return dict(command=command, exit=rc, seconds=round(seconds, 1), ok=rc == 0, tail=tail if rc != 0 else [])


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _jupyter(command: str, cwd: Path, log: Path, timeout_s: float = 180) -> dict:
    """Start JupyterLab as the README says (plus --no-browser and a free port), wait for /api, stop it."""
    port = _free_port()
    argv = shlex.split(command) + ["--no-browser", f"--port={port}", "--ServerApp.ip=127.0.0.1"]
    t0 = time.perf_counter()
    with open(log, "w") as out:
        proc = subprocess.Popen(argv, cwd=cwd, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        answer = None
        while time.perf_counter() - t0 < timeout_s and proc.poll() is None:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/api", timeout=2) as r:
                    answer = json.loads(r.read())
                break
            except OSError:
                time.sleep(1)
        seconds = time.perf_counter() - t0
        exited = proc.poll()
        if exited is None:
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
    ok = answer is not None and "version" in answer
    print(f"jupyter: {'answered' if ok else 'no answer'} in {seconds:.0f} s", flush=True)
    return dict(command=" ".join(argv), ok=ok, seconds=round(seconds, 1), server_version=(answer or {}).get("version"),
                exited_early=exited, tail=[] if ok else log.read_text(errors="replace").splitlines()[-15:])


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pytest-args", default=None,
                    help="replace the test command's pytest arguments (default: the README's, the whole suite)")
    ap.add_argument("--keep", type=Path, default=None, help="clone here and keep it (default: a temporary folder)")
    ap.add_argument("--out", type=Path, default=OUT)
    args = ap.parse_args(argv)
    tmp = args.keep or Path(tempfile.mkdtemp(prefix="netlab-fresh-"))
    clone = tmp / "clone"
    commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True,
                            check=True).stdout.strip()
    subprocess.run(["git", "clone", "-q", str(ROOT), str(clone)], check=True)
    cmds = readme_commands(clone / "README.md")
    env_set = [k for k in ("NETLAB_TRACE_DIR",) if k in os.environ]  # whether set, not this machine's path
    result = dict(commit=commit, clone="<tmp>/clone", euid=os.geteuid(), cpus=os.cpu_count(), env_set=env_set,
                  loadavg_1min_before=os.getloadavg()[0], steps={})
    steps = result["steps"]
    t0 = time.perf_counter()
    steps["main_job"] = _step("main job", cmds["main_job"], clone, 3600, tmp / "main_job.log")
    tests = cmds["tests"]
    if args.pytest_args is not None:
        tests = re.sub(r"-m pytest -q.*$", f"-m pytest -q {args.pytest_args}", tests)
    steps["tests"] = _step("tests", tests, clone, 3 * 3600, tmp / "tests.log")
    steps["tests"]["whole_suite"] = args.pytest_args is None
    install, _, start = cmds["notebooks"].partition(" && ")
    steps["notebook_install"] = _step("notebook install", install, clone, 3600, tmp / "notebook_install.log")
    steps["jupyter"] = _jupyter(start, clone, tmp / "jupyter.log")
    executed = tmp / "01-quickstart.executed.ipynb"
    steps["notebook_01"] = _step(
        "notebook 01", f".venv/bin/jupyter nbconvert --to notebook --execute --ExecutePreprocessor.timeout=3600 "
                       f"notebooks/01-quickstart.ipynb --output {shlex.quote(str(executed))}",
        clone, 3600, tmp / "notebook_01.log")
    if executed.exists():
        nb = json.loads(executed.read_text())
        outputs = [o for c in nb["cells"] if c["cell_type"] == "code" for o in c.get("outputs", [])]
        steps["notebook_01"]["figures"] = sum("image/png" in o.get("data", {}) for o in outputs)
        steps["notebook_01"]["errors"] = sum(o.get("output_type") == "error" for o in outputs)
    # the main job's environment still runs its own command after the notebook install (the order the bug needed)
    steps["main_job_again"] = _step("netlab policies in .venv", ".venv/bin/netlab policies", clone, 600,
                                    tmp / "policies.log")
    result.update(total_s=round(time.perf_counter() - t0, 1), loadavg_1min_after=os.getloadavg()[0],
                  passed=all(s["ok"] for s in steps.values()))
    report = clone / "results" / "demo" / "report" / "report.json"
    if report.exists():
        result["demo_answer"] = json.loads(report.read_text())["answer"]
    # the temporary folder is this machine's: the result names paths inside it as <tmp>/...
    result = json.loads(json.dumps(result).replace(str(tmp), "<tmp>"))
    write_json(args.out, result)
    print(json.dumps({k: v for k, v in result.items() if k != "steps"}, indent=2))
    return 0 if result["passed"] else 1


if __name__ == "__main__":
    sys.exit(main())
