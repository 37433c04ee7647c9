"""The agent's JSON-lines loop on stdin/stdout.

The controller reaches the agent only through the SSH channel's stdin/stdout
(the agent opens no port), so the channel's life is the agent's life: stdin
EOF, SIGTERM, SIGINT, SIGHUP and the ``shutdown`` command all run the same
cleanup (stop telemetry, traffic and ranks, restore shaping) before exit.
Signals only set a flag and wake the ``select`` loop, so cleanup never runs
in the middle of a command. Replies and events from other threads (telemetry,
job_exit) share one lock, so every stdout line is one whole JSON object. fd 1
is pointed at stderr after start, so a stray print cannot corrupt the stream.

Liveness, both ways on the channel (a host that hangs keeps its SSH channel
open, so end of file never comes): a thread writes a ``heartbeat`` event every
``--heartbeat-s``, which the controller expects; and with
``--controller-timeout-s`` the agent stops (and undoes everything) when
nothing has come from the controller for that long, the controller sending a
``heartbeat`` notification (no reply) every second. The same thread reads the
ranks' heartbeats (:meth:`JobManager.check_silent`).

Requests are bounded: a line longer than :data:`MAX_LINE_BYTES` is refused
(its rest skipped as it arrives, never held), the buffer is scanned for a
newline only where new bytes arrived, and replies quote at most a prefix of a
bad value (:func:`~netlab_agent.errors.brief`).
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
import time
import traceback
from pathlib import Path

from . import __version__
from .errors import AgentError, SpecError, brief
from .jobs import JobManager
from .shaping import Shaper
from .state import SafeStderr, StateStore, log, recover_stale
from .telemetry import Sampler, check_ifnames, sample
from .traffic import TrafficManager

#: the longest request line (a request is a few hundred bytes; a megabyte is a bug or an attack)
MAX_LINE_BYTES = 1 << 20


def _readable(fd: int) -> bool:
    """Whether ``fd`` has bytes (or end of file) waiting, without reading them."""
    try:
        return bool(select.select([fd], [], [], 0)[0])
    except (OSError, ValueError):
        return True


def _gpus() -> int:
    """Count NVIDIA GPUs from the driver's /proc entries (no torch import needed)."""
    try:
        return len(os.listdir("/proc/driver/nvidia/gpus"))
    except OSError:
        return 0


class Agent:
    def __init__(self, state_dir: str, host: str | None, out, python: str = sys.executable,
                 heartbeat_s: float = 1.0, controller_timeout_s: float = 0.0, rank_silence_s: float = 15.0):
        self.host = host or socket.gethostname()
        self.out = out
        self.out_lock = threading.Lock()
        self.stop_reason: str | None = None
        self.heartbeat_s, self.controller_timeout_s = heartbeat_s, controller_timeout_s
        self.last_input = time.monotonic()
        self._beats_stop = threading.Event()
        self._beats: threading.Thread | None = None
        self.wake_r, self.wake_w = os.pipe()
        self.state = StateStore(state_dir)
        self.shaper = Shaper(self.state)
        self.stale = recover_stale(state_dir, self.shaper.restore_snapshot, self.shaper.delete_link)
        self.state.save()  # claim the directory: from now on a dead agent can be undone
        self.shaper.probe()
        self.sampler = Sampler(self.emit)
        self.jobs = JobManager(self.state, self.emit, python, silence_s=rank_silence_s)
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
            except (ValueError, RecursionError) as exc:
                raise SpecError(f"not a JSON object: {str(exc)[:200]}") from None
            if not isinstance(msg, dict):
                raise SpecError("a request must be a JSON object")
            if msg.get("cmd") == "heartbeat" and "id" not in msg:  # the controller's, answered by ours
                return
            req_id = msg.get("id")
            if not (req_id is None or isinstance(req_id, (int, str)) and len(str(req_id)) <= 64):
                req_id = None
                raise SpecError("id must be an integer or a string of at most 64 characters", "id")
            handler = self.handlers.get(msg.get("cmd"))
            if handler is None:
                raise SpecError(f"unknown cmd {brief(msg.get('cmd'))}; known: {sorted(self.handlers)}", "cmd")
            args = msg.get("args", {})
            if not isinstance(args, dict):
                raise SpecError("args must be an object", "args")
            reply = {"id": req_id, "ok": True, "result": handler(args)}
        except AgentError as exc:
            reply = {"id": req_id, "ok": False, "error": exc.to_json()}
        except Exception as exc:  # noqa: BLE001 - the loop must survive any command
            traceback.print_exc(file=sys.stderr)
            reply = {"id": req_id, "ok": False,
                     "error": AgentError(f"{type(exc).__name__}: {str(exc)[:500]}").to_json()}
        try:
            self.emit(reply)
        except OSError:
            pass

    # ---- loop -----------------------------------------------------------------
    def serve(self, in_fd: int) -> None:
        self.emit(self.hello_payload())
        self.start_heartbeats(in_fd)
        buf = bytearray()
        skipping = False  # inside a line that was too long: drop bytes up to its newline
        while self.stop_reason is None:
            ready, _, _ = select.select([in_fd, self.wake_r], [], [])
            if self.wake_r in ready:
                os.read(self.wake_r, 4096)
                continue
            chunk = os.read(in_fd, 1 << 16)
            if not chunk:
                self.request_stop("stdin EOF")
                break
            self.last_input = time.monotonic()
            start = len(buf)  # only the new bytes are searched for a newline
            buf += chunk
            while self.stop_reason is None:
                nl = buf.find(b"\n", start)
                if nl < 0:
                    if len(buf) > MAX_LINE_BYTES:
                        if not skipping:
                            self._refuse_long(bytes(buf[:40]))
                            skipping = True
                        del buf[:]
                    break
                line = bytes(buf[:nl])
                del buf[:nl + 1]
                start = 0
                if skipping:  # the end of the long line
                    skipping = False
                elif len(line) > MAX_LINE_BYTES:
                    self._refuse_long(line[:40])
                elif line.strip():
                    self.handle_line(line)

    def _refuse_long(self, head: bytes) -> None:
        err = SpecError(f"request line longer than {MAX_LINE_BYTES:,} bytes (it began {brief(head, 40)}); refused "
                        "and skipped up to its end")
        try:
            self.emit({"id": None, "ok": False, "error": err.to_json()})
        except OSError:
            pass

    # ---- liveness ---------------------------------------------------------------
    def start_heartbeats(self, in_fd: int) -> None:
        if self.heartbeat_s > 0 and self._beats is None:
            self._beats = threading.Thread(target=self._heartbeats, args=(in_fd,), name="heartbeat", daemon=True)
            self._beats.start()

    def _heartbeats(self, in_fd: int) -> None:
        seq = 0
        while not self._beats_stop.wait(self.heartbeat_s):
            seq += 1
            try:
                self.emit({"event": "heartbeat", "seq": seq, "t": time.time()})
            except OSError:
                return
            silent = time.monotonic() - self.last_input
            # bytes waiting unread also show the controller alive (the loop may be busy with a long command)
            if 0 < self.controller_timeout_s < silent and not _readable(in_fd):
                self.request_stop(f"nothing from the controller for {silent:.0f} s (its limit "
                                  f"{self.controller_timeout_s:g} s): controller or connection gone")
                return
            try:
                self.jobs.check_silent()
            except Exception as exc:  # noqa: BLE001 - the heartbeat must go on
                log(f"rank check: {exc!r}")

    def cleanup(self) -> None:
        log(f"cleanup ({self.stop_reason})")
        steps = [("telemetry", self.sampler.stop), ("traffic", self.traffic.stop_all),
                 ("jobs", self.jobs.stop_all), ("shaping", self.shaper.clear_all)]
        for name, step in steps:
            try:
                step()
            except Exception as exc:  # noqa: BLE001 - undo the rest regardless
                log(f"cleanup {name}: {exc!r}")
        self._beats_stop.set()  # heartbeats went on while undoing (it can take seconds); the bye comes next
        left = self.state.get("children") or self.state.get("shaping")
        if left:
            log("state left for the next agent: children or shaping could not be undone")
        else:
            self.state.remove()


def _arg(args: dict, key: str):
    if key not in args:
        raise SpecError(f"missing field {brief(key)}", key)
    return args[key]


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog="python -m netlab_agent",
        description="netlab testbed agent: JSON lines on stdin/stdout (see README). "
                    "Stops and undoes everything on stdin EOF, SIGTERM, SIGINT or SIGHUP.")
    p.add_argument("--state-dir", required=True, help="directory for state.json, job logs and child output")
    p.add_argument("--host", default=None, help="host name reported in hello (default: hostname)")
    p.add_argument("--python", default=sys.executable, help="interpreter for training ranks and traffic")
    p.add_argument("--heartbeat-s", type=float, default=1.0,
                   help="seconds between heartbeat events on stdout (0: none)")
    p.add_argument("--controller-timeout-s", type=float, default=0.0,
                   help="stop and undo everything when nothing came from the controller for this long (0: never)")
    p.add_argument("--rank-silence-s", type=float, default=15.0,
                   help="kill a training rank whose heartbeats stop for this long (0: never)")
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
        agent = Agent(args.state_dir, args.host, out, args.python, heartbeat_s=args.heartbeat_s,
                      controller_timeout_s=args.controller_timeout_s, rank_silence_s=args.rank_silence_s)
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
