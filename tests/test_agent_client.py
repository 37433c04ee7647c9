"""The controller's agent client notices a frozen agent in seconds (issue 30 item 3), without root.

An agent stopped with SIGSTOP (or a hung host) keeps its SSH channel open, so end of file never comes: the
client must declare it dead after ``dead_after_s`` without a line from it, fail what waits on it at once with
the reason, and keep sending the heartbeats an agent counts on. Tested on a stand-in agent (a local process
speaking the protocol's lines); ``tests/testbed/test_liveness.py`` does the same end to end as root.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

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
