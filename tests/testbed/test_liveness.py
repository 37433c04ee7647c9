"""A frozen agent or rank is noticed in seconds; the agent's protocol is bounded (issue 30 items 3 and 4).

* On the namespace testbed, SIGSTOP on an agent or on a rank mid-job fails the job within the bound, with the
  reason (the client's side alone, without root: ``tests/test_agent_client.py``).
* The agent refuses a request line over its limit, quoting only its first bytes, and keeps serving; it stops
  and undoes everything when the controller is silent past ``--controller-timeout-s``.

Every wait polls a condition with a deadline; the processes stopped here are the ones the test started or
recorded (by pid, with SIGCONT in a ``finally``).
"""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path

import pytest

from .backend_helpers import wait_until as _wait
from .conftest import needs_netadmin, needs_sshd, needs_torch

# ---------------------------------------------------------------------------- the agent's own bounds (root)

@needs_netadmin
def test_a_long_request_line_is_refused_quoting_a_prefix_and_the_agent_goes_on(tmp_path):
    from .test_agent import Agent, Pair

    pair = Pair()
    try:
        agent = Agent(pair, pair.a, tmp_path / "state")
        big = b'{"id": 1, "cmd": "shape", "args": {"ifname": "' + b"x" * (4 * 2**20) + b'"}}\n'  # 4x the limit
        t0 = time.monotonic()
        agent.proc.stdin.write(big)
        agent.proc.stdin.flush()
        with agent.cond:  # the refusal has no request id to answer (the line was never parsed)
            assert agent.cond.wait_for(lambda: None in agent.replies, 30), agent.stderr()
            refused = agent.replies.pop(None)
        assert refused["ok"] is False and "longer than" in refused["error"]["message"]
        assert len(json.dumps(refused)) < 1000  # a prefix quoted, not the megabytes
        assert time.monotonic() - t0 < 20
        # a long value within the limit: the reply quotes a prefix of it
        res = agent.request("shape", ifname="y" * 100_000, kind="htb", rate_mbit=10)
        assert res["ok"] is False and res["error"]["field"] == "ifname" and len(json.dumps(res)) < 1000, res
        assert agent.ok("status")["jobs"] == []  # still serving
        rss_kb = int(next(line.split()[1] for line in Path(f"/proc/{agent.proc.pid}/status").read_text()
                          .splitlines() if line.startswith("VmHWM:")))
        assert rss_kb < 200_000, f"the agent's peak RSS was {rss_kb / 1024:.0f} MB for a 4 MB line"
        agent.ok("shutdown")
        assert agent.proc.wait(timeout=20) == 0
    finally:
        pair.close()


@needs_netadmin
def test_the_agent_stops_when_the_controller_falls_silent(tmp_path):
    from .test_agent import Agent, Pair

    pair = Pair()
    try:
        agent = Agent(pair, pair.a, tmp_path / "state", ("--controller-timeout-s", "2", "--heartbeat-s", "0.2"))
        beats = [agent.event("heartbeat", timeout=10) for _ in range(2)]
        assert beats[1]["seq"] > beats[0]["seq"]
        t0 = time.monotonic()
        # keep it alive for a while with heartbeats, then fall silent
        for _ in range(8):
            agent.proc.stdin.write(b'{"cmd": "heartbeat"}\n')
            agent.proc.stdin.flush()
            time.sleep(0.5)
        assert agent.proc.poll() is None, "stopped although the controller's heartbeats came"
        assert agent.proc.wait(timeout=20) == 0
        assert time.monotonic() - t0 < 4 + 2 + 10
        assert "nothing from the controller" in agent.stderr(), agent.stderr()
        assert agent.event("bye", timeout=5)
    finally:
        pair.close()


# --------------------------------------------------------------------- end to end: SIGSTOP mid-job (root)

DUMBBELL = Path(__file__).resolve().parents[2] / "testbed" / "topologies" / "dumbbell.yaml"


def _rank_pids(agent, job_id):
    return [r["pid"] for r in agent.call("status")["jobs"] if r.get("job_id") == job_id and r["returncode"] is None]


@needs_netadmin
@needs_sshd
@needs_torch
@pytest.mark.parametrize("what", ["agent", "rank"])
def test_a_stopped_agent_or_rank_fails_its_job_at_once_with_the_reason(what):
    from netlab.testbed import NetnsTestbed, TestbedError
    from netlab.testbed.controller import Controller, TrainSpec
    from netlab.topology import load_topology

    bound = 3.0
    with NetnsTestbed(load_topology(DUMBBELL)) as testbed:
        c = Controller(testbed, progress=False, dead_after_s=bound, rank_silence_s=bound).deploy(hosts=["l0", "r0"])
        stopped = []
        try:
            c.start_job(TrainSpec(7, [("l0", 1), ("r0", 1)], grad_bytes=100_000, compute_ms=50, iterations=100000))
            _wait(lambda: all(_rank_pids(c.agent(h), 7) for h in ("l0", "r0")), 60, "both ranks")
            # both ranks past their start (torch imported, heartbeats flowing): a few iterations logged
            _wait(lambda: len(c.agent("r0").call("job_log", job_id=7)["records"]) >= 3, 120, "iterations")
            target = c.agent("r0").hello["pid"] if what == "agent" else _rank_pids(c.agent("r0"), 7)[0]
            os.kill(target, signal.SIGSTOP)
            stopped.append(target)
            t0 = time.monotonic()
            with pytest.raises(TestbedError) as err:
                c.wait_job(7, timeout_s=60)
            took = time.monotonic() - t0
            msg = str(err.value)
            assert took < bound + 3, f"noticed after {took:.1f} s (bound {bound} s): {msg}"
            assert "job 7 failed" in msg and "r0" in msg, msg
            assert ("silent for" in msg) if what == "agent" else ("sent no heartbeat" in msg), msg
            if what == "agent":  # every later call to it fails at once
                t1 = time.monotonic()
                with pytest.raises(Exception):
                    c.agent("r0").call("status", timeout_s=60)
                assert time.monotonic() - t1 < 1
            else:  # the agent killed the stopped rank, and the controller stops the job's other rank
                gone = lambda pid: not Path(f"/proc/{pid}").exists() or \
                    Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0] == "Z"  # noqa: E731
                _wait(lambda: gone(target), 15, "the stopped rank to be killed")
                _wait(lambda: not _rank_pids(c.agent("l0"), 7), 30, "the other rank to stop")
        finally:
            for pid in stopped:
                try:
                    os.kill(pid, signal.SIGCONT)
                except ProcessLookupError:
                    pass
            t2 = time.monotonic()
            c.close()
            assert time.monotonic() - t2 < 30
        if what == "agent":  # woken up, it found its channel closed and undid everything
            agent_pid = stopped[0]
            _wait(lambda: not Path(f"/proc/{agent_pid}").exists(), 30, "the woken agent to exit")
