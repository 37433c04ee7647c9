"""The agent's JSON-lines loop on stdin/stdout.

The controller reaches the agent only through the SSH channel's stdin/stdout
(the agent opens no port), so the channel's life is the agent's life: stdin
EOF, SIGTERM, SIGINT, SIGHUP and the ``shutdown`` command all run the same
cleanup (stop telemetry, traffic and ranks, restore shaping) before exit.
Signals only set a flag and wake the ``select`` loop, so cleanup never runs
in the middle of a command. Replies and events from other threads (telemetry,
job_exit) share one lock, so every stdout line is one whole JSON object. fd 1
is pointed at stderr after start, so a stray print cannot corrupt the stream.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import select
import shutil
import signal
import socket
import sys
import threading
import traceback
from pathlib import Path

from . import __version__
from .errors import AgentError, SpecError
from .jobs import JobManager
from .shaping import Shaper
from .state import SafeStderr, StateStore, log, recover_stale
from .telemetry import Sampler, check_ifnames, sample
from .traffic import TrafficManager


def _gpus() -> int:
    """Count NVIDIA GPUs from the driver's /proc entries (no torch import needed)."""
    try:
        return len(os.listdir("/proc/driver/nvidia/gpus"))
    except OSError:
        return 0


class Agent:
    def __init__(self, state_dir: str, host: str | None, out, python: str = sys.executable):
        self.host = host or socket.gethostname()
        self.out = out
        self.out_lock = threading.Lock()
        self.stop_reason: str | None = None
        self.wake_r, self.wake_w = os.pipe()
        self.state = StateStore(state_dir)
        self.shaper = Shaper(self.state)
        self.stale = recover_stale(state_dir, self.shaper.restore_snapshot, self.shaper.delete_link)
        self.state.save()  # claim the directory: from now on a dead agent can be undone
        self.shaper.probe()
        self.sampler = Sampler(self.emit)
        self.jobs = JobManager(self.state, self.emit, python)
        self.traffic = TrafficManager(self.state, self.emit, python)
        self.handlers = {
            "hello": lambda a: self.hello_payload(),
            "shape": self.shaper.shape,
            "clear": lambda a: self.shaper.clear(_arg(a, "ifname")),
            "telemetry_start": lambda a: self.sampler.start(_arg(a, "interval_ms"), check_ifnames(a)),
            "telemetry_stop": lambda a: self.sampler.stop(),
            "telemetry_sample": lambda a: sample(self.shaper.ipr, check_ifnames(a)),
            "job_start": self.jobs.start,
            "job_stop": lambda a: self.jobs.stop(_arg(a, "job_id")),
            "job_log": lambda a: self.jobs.log(_arg(a, "job_id")),
            "traffic_start": self.traffic.start,
            "traffic_stop": lambda a: self.traffic.stop(_arg(a, "flow_id")),
            "status": lambda a: self.status(),
            "shutdown": self._shutdown,
        }

    # ---- output ---------------------------------------------------------------
    def emit(self, obj: dict) -> None:
        """Write one JSON line; a broken channel stops the agent (OSError re-raised)."""
        data = (json.dumps(obj, separators=(",", ":")) + "\n").encode()
        with self.out_lock:
            try:
                self.out.write(data)
                self.out.flush()
            except OSError:
                self.request_stop("stdout closed")
                raise

    def request_stop(self, reason: str) -> None:
        if self.stop_reason is None:
            self.stop_reason = reason
        try:
            os.write(self.wake_w, b"x")
        except OSError:
            pass

    # ---- commands -------------------------------------------------------------
    def hello_payload(self) -> dict:
        return {"event": "hello", "version": __version__, "pid": os.getpid(), "host": self.host,
                "capabilities": {"qdiscs": list(self.shaper.available), "gpus": _gpus(),
                                 "torch": importlib.util.find_spec("torch") is not None,
                                 "iperf3": shutil.which("iperf3") is not None},
                "stale_state": self.stale}

    def status(self) -> dict:
        return {"jobs": self.jobs.status(), "shaping": dict(self.shaper.current),
                "telemetry": {"running": self.sampler.running, "interval_ms": self.sampler.interval_ms,
                              "samples": self.sampler.seq, "lost": self.sampler.lost},
                "traffic": self.traffic.status()}

    def _shutdown(self, args: dict) -> dict:
        self.request_stop("shutdown command")
        return {}

    def handle_line(self, line: bytes) -> None:
        req_id = None
        try:
            try:
                msg = json.loads(line)
            except ValueError as exc:
                raise SpecError(f"not a JSON object: {exc}") from None
            if not isinstance(msg, dict):
                raise SpecError("a request must be a JSON object")
            req_id = msg.get("id")
            handler = self.handlers.get(msg.get("cmd"))
            if handler is None:
                raise SpecError(f"unknown cmd {msg.get('cmd')!r}; known: {sorted(self.handlers)}", "cmd")
            args = msg.get("args", {})
            if not isinstance(args, dict):
                raise SpecError("args must be an object", "args")
            reply = {"id": req_id, "ok": True, "result": handler(args)}
        except AgentError as exc:
            reply = {"id": req_id, "ok": False, "error": exc.to_json()}
        except Exception as exc:  # noqa: BLE001 - the loop must survive any command
            traceback.print_exc(file=sys.stderr)
            reply = {"id": req_id, "ok": False,
                     "error": {"type": "AgentError", "message": f"{type(exc).__name__}: {exc}", "field": None}}
        try:
            self.emit(reply)
        except OSError:
            pass

    # ---- loop -----------------------------------------------------------------
    def serve(self, in_fd: int) -> None:
        self.emit(self.hello_payload())
        buf = b""
        while self.stop_reason is None:
            ready, _, _ = select.select([in_fd, self.wake_r], [], [])
            if self.wake_r in ready:
                os.read(self.wake_r, 4096)
                continue
            chunk = os.read(in_fd, 1 << 16)
            if not chunk:
                self.request_stop("stdin EOF")
                break
            buf += chunk
            while b"\n" in buf and self.stop_reason is None:
                line, buf = buf.split(b"\n", 1)
                if line.strip():
                    self.handle_line(line)

    def cleanup(self) -> None:
        log(f"cleanup ({self.stop_reason})")
        steps = [("telemetry", self.sampler.stop), ("traffic", self.traffic.stop_all),
                 ("jobs", self.jobs.stop_all), ("shaping", self.shaper.clear_all)]
        for name, step in steps:
            try:
                step()
            except Exception as exc:  # noqa: BLE001 - undo the rest regardless
                log(f"cleanup {name}: {exc!r}")
        left = self.state.get("children") or self.state.get("shaping")
        if left:
            log("state left for the next agent: children or shaping could not be undone")
        else:
            self.state.remove()


def _arg(args: dict, key: str):
    if key not in args:
        raise SpecError(f"missing field {key!r}", key)
    return args[key]


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog="python -m netlab_agent",
        description="netlab testbed agent: JSON lines on stdin/stdout (see README). "
                    "Stops and undoes everything on stdin EOF, SIGTERM, SIGINT or SIGHUP.")
    p.add_argument("--state-dir", required=True, help="directory for state.json, job logs and child output")
    p.add_argument("--host", default=None, help="host name reported in hello (default: hostname)")
    p.add_argument("--python", default=sys.executable, help="interpreter for training ranks and traffic")
    p.add_argument("--version", action="version", version=f"netlab-agent {__version__}")
    return p.parse_args(argv)


def main(argv=None) -> int:
    args = parse_args(argv)
    out = os.fdopen(os.dup(1), "wb", buffering=0)
    os.dup2(2, 1)  # stray prints go to stderr, never into the protocol stream
    Path(args.state_dir).mkdir(parents=True, exist_ok=True)
    sys.stderr = SafeStderr(sys.stderr, Path(args.state_dir) / "agent.log")
    sys.stdout = sys.stderr
    pending: list[int] = []
    agent: Agent | None = None

    def on_signal(signum, frame):
        if agent is None:
            pending.append(signum)
        else:
            agent.request_stop(f"signal {signal.Signals(signum).name}")

    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        if signal.getsignal(sig) != signal.SIG_IGN:  # an inherited SIG_IGN (nohup, `cmd &`) stays ignored
            signal.signal(sig, on_signal)
    try:
        agent = Agent(args.state_dir, args.host, out, args.python)
    except Exception as exc:  # noqa: BLE001 - report why no hello will come
        traceback.print_exc(file=sys.stderr)
        err = exc.to_json() if isinstance(exc, AgentError) else \
            {"type": "AgentError", "message": f"{type(exc).__name__}: {exc}", "field": None}
        try:
            out.write((json.dumps({"event": "fatal", "error": err}) + "\n").encode())
        except OSError:
            pass
        return 2
    if pending:
        agent.request_stop(f"signal {signal.Signals(pending[0]).name}")
    try:
        if agent.stop_reason is None:
            agent.serve(sys.stdin.fileno())
    except OSError as exc:
        agent.request_stop(f"channel error: {exc!r}")
    finally:
        agent.cleanup()
        try:
            agent.emit({"event": "bye"})
        except OSError:
            pass
    return 0
