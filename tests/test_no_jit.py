"""The network tests again with ``NUMBA_DISABLE_JIT=1``: every compiled kernel run as plain Python.

Why: a kernel that only works compiled (or only interpreted) would otherwise go unseen, and a coverage run
(``coverage run -m pytest`` with ``COVERAGE_PROCESS_START`` set, which this subprocess inherits) sees the
kernels' lines only when they run as Python. The chosen tests reach every network kernel: max-min filling,
the fair model's incremental re-solve and shortcuts, the slot table's component search, the tcp fluid, mean
field, binding components, phase state, one-call and exact solves, and the incremental tcp path (through
small simulations). About 15 s of CPU; under a minute and a half on the loaded 2-core machine.
"""

import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
NO_JIT_TESTS = [
    "tests/test_tcp_reference.py",
    "tests/test_tcp_fast_paths.py",
    "tests/test_tcp_network.py",
    "tests/test_network.py",
    "tests/test_cluster_view.py",
    "tests/test_network_interface.py",
    "tests/test_net_allocation.py",
    "tests/test_relink.py",
    "tests/test_reclass.py",
    "tests/test_start_path.py::test_join_and_leave_keep_the_per_link_sums_worked_out_by_hand",
    "tests/test_simulator.py::test_incremental_fair_network_matches_a_full_resolve",
    # the beat-down's incremental two solves: its weights, its flow path table, both of its re-solve paths
    "tests/test_beatdown_resolve.py::test_the_incremental_model_gives_the_hand_computed_beat_down_and_re_solves"
    "_after_a_leave",
    "tests/test_beatdown_resolve.py::test_the_flow_path_table_keeps_the_live_rows_through_compaction",
    "tests/test_beatdown_resolve.py::test_the_beat_down_s_re_solves_report_the_mean_field_as_phase_blind",
]


def test_network_tests_pass_with_the_kernels_interpreted():
    env = {**os.environ, "NUMBA_DISABLE_JIT": "1"}
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *NO_JIT_TESTS],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=1200)
    tail = "\n".join(proc.stdout.splitlines()[-30:])
    assert proc.returncode == 0, tail + proc.stderr[-2000:]
    passed = re.search(r"(\d+) passed", proc.stdout)
    assert passed and int(passed.group(1)) >= 40, tail  # the whole set ran, not an empty selection
