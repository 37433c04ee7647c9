"""bench_identity's bad input: a --check without the file to compare with stops before any run, in one line."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "bench_identity.py"


def test_check_against_a_missing_file_stops_before_any_run(tmp_path):
    missing = tmp_path / "none.json"
    out = subprocess.run([sys.executable, str(SCRIPT), "--check", "--quick", "--out", str(missing)],
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 2
    assert f"--check compares with --out {missing}, which is not a file" in out.stderr
    assert "Traceback" not in out.stderr
    assert "reference:" not in out.stdout  # the first item it computes prints this: nothing ran
    assert not missing.exists()
