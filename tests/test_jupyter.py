"""`netlab notebooks`: JupyterLab on the notebooks with this environment's Python, also as root."""

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from netlab.jupyter import JupyterError, lab_argv

NOTEBOOKS = Path(__file__).resolve().parents[1] / "notebooks"


def test_allow_root_only_as_root(tmp_path):
    pytest.importorskip("jupyterlab")
    assert lab_argv(tmp_path, ["--no-browser"], euid=0, python="/py") == [
        "/py", "-m", "jupyterlab", str(tmp_path), "--allow-root", "--no-browser"]
    assert lab_argv(tmp_path, [], euid=1000, python="/py") == ["/py", "-m", "jupyterlab", str(tmp_path)]
    with pytest.raises(JupyterError, match="no such folder"):
        lab_argv(tmp_path / "missing")


def test_netlab_notebooks_serves_the_notebooks_as_whoever_runs_it(tmp_path):
    pytest.importorskip("jupyterlab")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = dict(os.environ, JUPYTER_RUNTIME_DIR=str(tmp_path / "runtime"), JUPYTER_CONFIG_DIR=str(tmp_path / "cfg"))
    argv = [sys.executable, "-m", "netlab.cli", "notebooks", "--dir", str(NOTEBOOKS), "--no-browser",
            f"--port={port}", "--ServerApp.ip=127.0.0.1"]
    proc = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        answer, t0 = None, time.monotonic()
        while answer is None and time.monotonic() - t0 < 120 and proc.poll() is None:
            try:  # /api answers without the token
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/api", timeout=2) as r:
                    answer = json.loads(r.read())
            except OSError:
                time.sleep(0.5)
        assert proc.poll() is None, proc.stdout.read().decode(errors="replace")[-2000:]
        assert answer and "version" in answer
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=60)
