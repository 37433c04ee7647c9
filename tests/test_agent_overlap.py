"""The agent's overlapped iteration (a zoo model's ``overlap`` on the testbed): a real two-rank gloo job on the
loopback interface, no namespaces. The all-reduce starts after ``1 - overlap`` of the compute and the iteration
lasts at least what netlab's rule says for the all-reduce time it measured."""

import json
import os
import secrets
import subprocess
import sys
from pathlib import Path

import pytest

AGENT = Path(__file__).resolve().parents[1] / "agent"


def test_an_overlapped_iteration_starts_its_all_reduce_early_and_lasts_as_the_rule_says(tmp_path):
    pytest.importorskip("torch", reason="needs torch==2.13.0 (pip install torch==2.13.0)")
    compute_s, overlap = 0.4, 0.5
    port = str(29000 + secrets.randbelow(2000))
    env = dict(os.environ, PYTHONPATH=str(AGENT), GLOO_SOCKET_IFNAME="lo", OMP_NUM_THREADS="1")
    procs = [subprocess.Popen([sys.executable, "-m", "netlab_agent.train", "--job-id", "1", "--rank", str(r),
                               "--world-size", "2", "--master-addr", "127.0.0.1", "--master-port", port,
                               "--backend", "gloo", "--grad-bytes", str(4 << 20), "--compute-ms",
                               str(compute_s * 1000), "--iterations", "3", "--log", str(tmp_path / f"r{r}.jsonl"),
                               "--overlap", str(overlap), "--timeout-s", "120"], env=env)
             for r in (0, 1)]
    assert [p.wait(timeout=300) for p in procs] == [0, 0]
    records = [json.loads(line) for line in (tmp_path / "r0.jsonl").read_text().splitlines()]
    assert len(records) == 3
    for a, b in zip(records, records[1:]):
        early = a["allreduce_start"] - a["compute_start"]
        assert 0.5 * compute_s - 0.002 <= early < compute_s  # (1 - overlap) of the compute, then the all-reduce
        comm = a["allreduce_end"] - a["allreduce_start"]
        rule = compute_s + comm - overlap * min(compute_s, comm)  # netlab.network.model.iteration_time
        assert b["compute_start"] - a["compute_start"] >= rule - 0.002
