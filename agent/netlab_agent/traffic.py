"""Background traffic flows: a sink that discards, a source that sends.

``python -m netlab_agent.traffic --role sink|source --addr A --port P
[--rate-mbit R] [--duration-s D]`` is the built-in generator; the agent runs
it (or iperf3 when asked and installed) as a recorded child, like a rank.
Every flow is bounded: sources need a duration, and any flow is stopped by
``traffic_stop``, by agent cleanup, and by a watchdog at duration + grace.
Sources pace with a token bucket so a rate below the link rate is a steady
background load rather than bursts.
"""

from __future__ import annotations

import argparse
import json
import selectors
import shutil
import socket
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from .errors import NotFound, SpecError, brief
from .procs import child_env, proc_start_time, stop_group
from .state import StateStore, log
from .validate import NAME_WHAT, check_args, is_int, is_num, name_id

CHUNK = 64 * 1024
CONNECT_RETRY_S = 10.0
WATCHDOG_GRACE_S = 5.0


# ---- the generator (child process) ---------------------------------------------
def run_sink(addr: str, port: int, duration_s: float | None) -> dict:
    srv = socket.create_server((addr, port), reuse_port=False)
    sel = selectors.DefaultSelector()
    sel.register(srv, selectors.EVENT_READ)
    received = 0
    end = None if duration_s is None else time.monotonic() + duration_s
    while end is None or time.monotonic() < end:
        timeout = 1.0 if end is None else max(0.0, min(1.0, end - time.monotonic()))
        for key, _ in sel.select(timeout):
            if key.fileobj is srv:
                conn, _ = srv.accept()
                sel.register(conn, selectors.EVENT_READ)
                continue
            data = key.fileobj.recv(CHUNK)
            if not data:
                sel.unregister(key.fileobj)
                key.fileobj.close()
            received += len(data)
    return {"role": "sink", "bytes": received}


def run_source(addr: str, port: int, rate_mbit: float | None, duration_s: float) -> dict:
    deadline = time.monotonic() + CONNECT_RETRY_S
    while True:  # the sink may be started a moment later on another host
        try:
            sock = socket.create_connection((addr, port), timeout=2.0)
            break
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)
    buf = b"\0" * CHUNK
    sent = 0
    t0 = time.monotonic()
    end = t0 + duration_s
    rate_bps = None if rate_mbit is None else rate_mbit * 1e6 / 8
    with sock:
        while (now := time.monotonic()) < end:
            if rate_bps is not None:
                ahead = sent - rate_bps * (now - t0)  # token bucket with one chunk of burst
                if ahead > CHUNK:
                    time.sleep(min(ahead / rate_bps, end - now))
                    continue
            # A flow in a starved class (strict priority) may not move for longer than the connect timeout:
            # that is the link's answer, not an error; the duration still bounds the flow.
            sock.settimeout(max(0.05, end - now))
            try:
                sent += sock.send(buf)
            except TimeoutError:
                continue
    return {"role": "source", "bytes": sent, "seconds": time.monotonic() - t0}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m netlab_agent.traffic")
    p.add_argument("--role", choices=["sink", "source"], required=True)
    p.add_argument("--addr", required=True)
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--rate-mbit", type=float, default=None)
    p.add_argument("--duration-s", type=float, default=None)
    a = p.parse_args(argv)
    if a.role == "source":
        if a.duration_s is None:
            p.error("a source needs --duration-s")
        out = run_source(a.addr, a.port, a.rate_mbit, a.duration_s)
    else:
        out = run_sink(a.addr, a.port, a.duration_s)
    print(json.dumps(out), flush=True)
    return 0


# ---- the agent side -------------------------------------------------------------
TRAFFIC_SCHEMA = {
    "flow_id": (True, name_id, NAME_WHAT),
    "role": (True, lambda v: v in ("sink", "source"), "sink or source"),
    "addr": (True, lambda v: isinstance(v, str) and v != "", "an address"),
    "port": (True, lambda v: is_int(v) and 1 <= v <= 65535, "a port in [1, 65535]"),
    "rate_mbit": (False, lambda v: is_num(v) and v > 0, "a positive number"),
    "duration_s": (False, lambda v: is_num(v) and v > 0, "a positive number"),
    "tool": (False, lambda v: v in ("python", "iperf3"), "python or iperf3"),
}


@dataclass
class Flow:
    flow_id: str
    popen: subprocess.Popen
    start_time: int
    key: str
    out: Path
    waiter: threading.Thread | None = None


class TrafficManager:
    def __init__(self, state: StateStore, emit: Callable[[dict], None], python: str = sys.executable):
        self.state, self.emit, self.python = state, emit, python
        self.flows: dict[str, Flow] = {}
        self.lock = threading.Lock()

    def _argv(self, a: dict) -> list[str]:
        if a.get("tool") == "iperf3":
            iperf3 = shutil.which("iperf3")
            if iperf3 is None:
                raise SpecError("iperf3 is not installed on this host", "tool")
            if a["role"] == "sink":
                return [iperf3, "-s", "-B", a["addr"], "-p", str(a["port"])]
            rate = f"{a['rate_mbit']}M" if "rate_mbit" in a else "0"
            return [iperf3, "-c", a["addr"], "-p", str(a["port"]), "-t", str(a["duration_s"]), "-b", rate]
        argv = [self.python, "-m", "netlab_agent.traffic", "--role", a["role"],
                "--addr", a["addr"], "--port", str(a["port"])]
        if "rate_mbit" in a:
            argv += ["--rate-mbit", repr(float(a["rate_mbit"]))]
        if "duration_s" in a:
            argv += ["--duration-s", repr(float(a["duration_s"]))]
        return argv

    def start(self, args: dict) -> dict:
        a = check_args(args, TRAFFIC_SCHEMA)
        if a["role"] == "source" and "duration_s" not in a:
            raise SpecError("a source needs duration_s (flows are always bounded)", "duration_s")
        if a["role"] == "sink" and "rate_mbit" in a:
            raise SpecError("rate_mbit applies to a source only", "rate_mbit")
        flow_id = str(a["flow_id"])
        with self.lock:
            if flow_id in self.flows and self.flows[flow_id].popen.poll() is None:
                raise SpecError(f"flow {flow_id} is already running", "flow_id")
        argv = self._argv(a)
        fdir = self.state.dir / "traffic"
        fdir.mkdir(parents=True, exist_ok=True)
        out_path = fdir / f"{flow_id}.out"
        env = child_env()
        with open(out_path, "wb") as out:
            popen = subprocess.Popen(argv, env=env, stdin=subprocess.DEVNULL, stdout=out,
                                     stderr=subprocess.STDOUT, start_new_session=True, close_fds=True)
        start_time = proc_start_time(popen.pid)
        key = f"traffic:{flow_id}"
        self.state.update(lambda d: d["children"].__setitem__(
            key, {"pid": popen.pid, "start_time": start_time, "kind": "traffic"}))
        flow = Flow(flow_id, popen, start_time, key, out_path)
        flow.waiter = threading.Thread(target=self._wait, args=(flow, a.get("duration_s")), daemon=True,
                                       name=f"wait-{key}")
        with self.lock:
            self.flows[flow_id] = flow
        flow.waiter.start()
        return {"flow_id": a["flow_id"], "pid": popen.pid}

    def _wait(self, flow: Flow, duration_s: float | None) -> None:
        if duration_s is not None:  # watchdog: the flow must end by itself, else it is stopped
            try:
                flow.popen.wait(timeout=duration_s + WATCHDOG_GRACE_S)
            except subprocess.TimeoutExpired:
                stop_group(flow.popen.pid, flow.start_time, 2.0, flow.popen)
        rc = flow.popen.wait()
        self.state.update(lambda d: d["children"].pop(flow.key, None))
        try:
            self.emit({"event": "traffic_exit", "flow_id": flow.flow_id, "returncode": rc})
        except OSError:
            pass

    def stop(self, flow_id) -> dict:
        if not name_id(flow_id):
            raise SpecError(f"flow_id must be {NAME_WHAT}, got {brief(flow_id)}", "flow_id")
        with self.lock:
            flow = self.flows.get(str(flow_id))
        if flow is None:
            raise NotFound(f"no flow {brief(flow_id)} on this agent", "flow_id")
        stopped = flow.popen.poll() is None and stop_group(flow.popen.pid, flow.start_time, 2.0, flow.popen)
        return {"flow_id": flow_id, "stopped": bool(stopped), "returncode": flow.popen.poll()}

    def stop_all(self) -> None:
        with self.lock:
            flows = list(self.flows.values())
        for f in flows:
            if f.popen.poll() is None:
                try:
                    stop_group(f.popen.pid, f.start_time, 2.0, f.popen)
                except Exception as exc:  # noqa: BLE001
                    log(f"stop {f.key}: {exc!r}")
        for f in flows:
            f.waiter.join(timeout=5)

    def status(self) -> list[dict]:
        with self.lock:
            return [{"flow_id": f.flow_id, "pid": f.popen.pid, "returncode": f.popen.poll()}
                    for f in self.flows.values()]


if __name__ == "__main__":
    raise SystemExit(main())
