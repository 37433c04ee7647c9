"""A frozen agent or rank is noticed in seconds; the agent's protocol is bounded (issue 30 items 3 and 4).

* The controller's client declares an agent dead after ``dead_after_s`` without a line from it (an agent
  stopped with SIGSTOP keeps its channel open, so end of file never comes): pending calls fail at once with
  the reason, and it sends heartbeats the agent can count on. Tested first on a stand-in agent (a local
  process, no root), then end to end on the namespace testbed: SIGSTOP on an agent and on a rank mid-job.
* The agent refuses a request line over its limit, quoting only its first bytes, and keeps serving; it stops
  and undoes everything when the controller is silent past ``--controller-timeout-s``.

Every wait polls a condition with a deadline; the processes stopped here are the ones the test started or
recorded (by pid, with SIGCONT in a ``finally``).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from .conftest import needs_netadmin, needs_sshd, needs_torch

# ------------------------------------------------------------------------- the client, on a stand-in agent

STAND_IN = r"""
import json, os, sys, threading, time
out = os.fdopen(1, "w", buffering=1)
lock = threading.Lock()
def say(obj):
    with lock:
        out.write(json.dumps(obj) + "\n")
say({"event": "hello", "version": "x", "pid": os.getpid(), "host": "h"})
def beat():
    while True:
        time.sleep(0.2)
        say({"event": "heartbeat"})
threading.Thread(target=beat, daemon=True).start()
heard = 0
for line in sys.stdin:
    msg = json.loads(line)
    if msg.get("cmd") == "heartbeat" and "id" not in msg:
        heard += 1
    elif msg.get("cmd") == "count":
        say({"id": msg["id"], "ok": True, "result": {"heartbeats": heard}})
    elif msg.get("cmd") == "never":
        pass  # no reply: the caller waits
"""


class ProcessChannel:
    """What AgentClient needs of a paramiko channel, over a local process's pipes."""

    def __init__(self, proc: subprocess.Popen):
        self.proc = proc

    def makefile(self, mode):
        return self.proc.stdout

    def makefile_stderr(self, mode):
        return self.proc.stderr

    def sendall(self, data: bytes):
        self.proc.stdin.write(data)
        self.proc.stdin.flush()

    def exit_status_ready(self):
        return self.proc.poll() is not None

    def recv_ready(self):
        import select

        return bool(select.select([self.proc.stdout], [], [], 0)[0])

    @property
    def exit_status(self):
        return self.proc.returncode

    def close(self):
        try:
            self.proc.stdin.close()
        except OSError:
            pass


@pytest.fixture
def stand_in():
    proc = subprocess.Popen([sys.executable, "-c", STAND_IN], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    try:
        yield proc
    finally:
        os.kill(proc.pid, signal.SIGCONT) if proc.poll() is None else None
        proc.kill()
        proc.wait(timeout=10)


def _wait(pred, timeout_s: float, what: str):
    deadline = time.monotonic() + timeout_s
    while not pred():
        assert time.monotonic() < deadline, f"timed out after {timeout_s} s waiting for {what}"
        time.sleep(0.02)


def test_a_stopped_agent_is_declared_dead_within_the_bound_and_its_calls_fail(stand_in):
    from netlab.testbed.agent_client import AgentClient, AgentError

    closed = []
    client = AgentClient("h", ProcessChannel(stand_in), on_close=lambda host, why: closed.append((host, why)),
                         heartbeat_s=0.2, dead_after_s=2.0)
    client.wait_hello(30)
    _wait(lambda: client.call("count", timeout_s=30)["heartbeats"] >= 3, 30, "our heartbeats to reach the agent")
    time.sleep(2.5)  # longer than dead_after_s: its heartbeats keep it alive
    assert client.alive and not closed
    waiting = client.submit("never")  # a call in flight when the agent stops
    os.kill(stand_in.pid, signal.SIGSTOP)
    t0 = time.monotonic()
    with pytest.raises(AgentError) as err:
        waiting.result(timeout=30)
    took = time.monotonic() - t0
    assert err.value.type == "AgentDead" and "silent for" in str(err.value), err.value
    assert took < 2.0 + 1.5, f"declared dead after {took:.1f} s (bound 2 s)"
    assert not client.alive and len(closed) == 1 and "silent for" in closed[0][1]
    with pytest.raises(AgentError):  # later calls fail at once, not after their timeout
        client.call("count", timeout_s=30)
    t1 = time.monotonic()
    client.close(timeout_s=30)  # bounded: a dead agent is not asked to shut down
    assert time.monotonic() - t1 < 2
    assert len(closed) == 1  # once, although the reader sees the channel end too


def test_the_default_bound_is_at_most_ten_seconds():
    import inspect

    from netlab.testbed.agent_client import AgentClient
    from netlab.testbed.controller import Controller

    assert inspect.signature(AgentClient).parameters["dead_after_s"].default <= 10
    assert inspect.signature(Controller).parameters["dead_after_s"].default <= 10


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
