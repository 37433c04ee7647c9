"""Training ranks as recorded child processes.

Each rank is ``python -m netlab_agent.train ...`` (an argv list, never a
shell) in its own session, so stopping it signals exactly its process group
and nothing else. Its pid and /proc start time go into the state file before
anything else happens, so a later agent can kill it if this one dies. Rank
output goes to files in the state dir: the agent's stdout is the protocol.

A rank writes a byte to a pipe every second (``--heartbeat-fd``, from a thread
of its own started before torch is imported). A rank that stays silent for
``silence_s`` while its process lives (stopped by SIGSTOP, or hung with the
interpreter blocked) is killed, and its ``job_exit`` event carries the
``reason``, so its job fails at once instead of leaving the other ranks
waiting in an all-reduce until their collective timeout.
"""

from __future__ import annotations

import json
import os
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
from .validate import NAME_WHAT, SOCKET_IFNAME_WHAT, check_args, is_int, is_num, name_id, socket_ifname_ok

JOB_SCHEMA = {
    "job_id": (True, name_id, NAME_WHAT),
    "rank": (True, lambda v: is_int(v) and v >= 0, "a non-negative integer"),
    "world_size": (True, lambda v: is_int(v) and v >= 1, "a positive integer"),
    "master_addr": (True, lambda v: isinstance(v, str) and v != "", "an address"),
    "master_port": (True, lambda v: is_int(v) and 1 <= v <= 65535, "a port in [1, 65535]"),
    "backend": (False, lambda v: v in ("gloo", "nccl", "auto"), "gloo, nccl or auto"),
    "ifname": (True, socket_ifname_ok, SOCKET_IFNAME_WHAT),
    "nccl_ib_disable": (False, lambda v: isinstance(v, bool), "true or false"),
    "grad_bytes": (True, lambda v: is_int(v) and v >= 4, "an integer >= 4"),
    "compute_ms": (True, lambda v: is_num(v) and v >= 0, "a non-negative number"),
    "iterations": (True, lambda v: is_int(v) and v >= 1, "a positive integer"),
    "offset_ms": (False, lambda v: is_num(v) and v >= 0, "a non-negative number"),
    "start_at": (False, is_num, "a unix time in seconds"),
    "device": (False, lambda v: v in ("cpu", "cuda"), "cpu or cuda"),
    "overlap": (False, lambda v: is_num(v) and 0 <= v <= 1, "a number in [0, 1]"),
}
STOP_GRACE_S = 3.0
#: how often a rank writes its heartbeat byte
RANK_HEARTBEAT_S = 1.0
#: the grace a hung rank gets between SIGTERM and SIGKILL
HUNG_GRACE_S = 0.5


@dataclass
class Rank:
    job_id: str
    rank: int
    popen: subprocess.Popen
    start_time: int
    log: Path
    key: str
    waiter: threading.Thread | None = None
    beat_fd: int | None = None  # the read end of the rank's heartbeat pipe (non-blocking)
    last_beat: float = 0.0  # time.monotonic() of the last heartbeat byte (or of the start)
    reason: str | None = None  # why the agent ended the rank, if it did


class JobManager:
    def __init__(self, state: StateStore, emit: Callable[[dict], None], python: str = sys.executable,
                 silence_s: float = 15.0):
        self.state = state
        self.emit = emit
        self.python = python
        self.silence_s = silence_s  # a rank silent this long is declared hung (0: never)
        self.ranks: dict[tuple[str, int], Rank] = {}
        self.lock = threading.Lock()

    def job_dir(self, job_id) -> Path:
        return self.state.dir / "jobs" / str(job_id)

    def start(self, args: dict) -> dict:
        a = check_args(args, JOB_SCHEMA)
        if a["rank"] >= a["world_size"]:
            raise SpecError("rank must be < world_size", "rank")
        job_id = str(a["job_id"])
        key = (job_id, a["rank"])
        with self.lock:
            if key in self.ranks and self.ranks[key].popen.poll() is None:
                raise SpecError(f"job {job_id} rank {a['rank']} is already running", "rank")
        jdir = self.job_dir(job_id)
        jdir.mkdir(parents=True, exist_ok=True)
        log_path = jdir / f"rank{a['rank']}.jsonl"
        log_path.unlink(missing_ok=True)
        argv = [self.python, "-m", "netlab_agent.train", "--job-id", job_id,
                "--rank", str(a["rank"]), "--world-size", str(a["world_size"]),
                "--master-addr", a["master_addr"], "--master-port", str(a["master_port"]),
                "--backend", a.get("backend", "auto"), "--grad-bytes", str(a["grad_bytes"]),
                "--compute-ms", repr(float(a["compute_ms"])), "--iterations", str(a["iterations"]),
                "--offset-ms", repr(float(a.get("offset_ms", 0.0))), "--log", str(log_path),
                "--device", a.get("device", "cpu")]
        if "start_at" in a:
            argv += ["--start-at", repr(float(a["start_at"]))]
        if a.get("overlap"):
            argv += ["--overlap", repr(float(a["overlap"]))]
        env = child_env({
            "GLOO_SOCKET_IFNAME": a["ifname"], "NCCL_SOCKET_IFNAME": a["ifname"],
            "NCCL_IB_DISABLE": "1" if a.get("nccl_ib_disable", True) else "0",
            "MASTER_ADDR": a["master_addr"], "MASTER_PORT": str(a["master_port"]),
            "RANK": str(a["rank"]), "WORLD_SIZE": str(a["world_size"]),
        })
        env.setdefault("OMP_NUM_THREADS", "1")  # emulated ranks share few cores
        beat_r, beat_w = os.pipe()
        argv += ["--heartbeat-fd", str(beat_w), "--heartbeat-s", repr(RANK_HEARTBEAT_S)]
        try:
            with open(jdir / f"rank{a['rank']}.out", "wb") as out:
                popen = subprocess.Popen(argv, env=env, stdin=subprocess.DEVNULL, stdout=out,
                                         stderr=subprocess.STDOUT, start_new_session=True, close_fds=True,
                                         pass_fds=(beat_w,))
        except BaseException:
            os.close(beat_r)
            raise
        finally:
            os.close(beat_w)  # the rank holds the only write end: end of file when it exits
        os.set_blocking(beat_r, False)
        start_time = proc_start_time(popen.pid)
        skey = f"job:{job_id}:{a['rank']}"
        self.state.update(lambda d: d["children"].__setitem__(
            skey, {"pid": popen.pid, "start_time": start_time, "kind": "rank"}))
        r = Rank(job_id, a["rank"], popen, start_time, log_path, skey, beat_fd=beat_r, last_beat=time.monotonic())
        r.waiter = threading.Thread(target=self._wait, args=(r,), name=f"wait-{skey}", daemon=True)
        with self.lock:
            self.ranks[key] = r
        r.waiter.start()
        return {"pid": popen.pid, "log": str(log_path)}

    def _wait(self, r: Rank) -> None:
        rc = r.popen.wait()
        self.state.update(lambda d: d["children"].pop(r.key, None))
        with self.lock:
            fd, r.beat_fd = r.beat_fd, None
        if fd is not None:
            os.close(fd)
        event = {"event": "job_exit", "job_id": _job_id_out(r.job_id), "rank": r.rank, "returncode": rc}
        if r.reason is not None:
            event["reason"] = r.reason
        try:
            self.emit(event)
        except OSError:
            pass

    def check_silent(self) -> list[Rank]:
        """Read every running rank's heartbeats; kill (in the background) the ranks silent for ``silence_s``.

        Called periodically by the agent's heartbeat thread. Returns the ranks declared hung now.
        """
        now, hung = time.monotonic(), []
        with self.lock:
            ranks = [r for r in self.ranks.values() if r.beat_fd is not None and r.reason is None]
            for r in ranks:
                try:
                    while os.read(r.beat_fd, 4096):
                        r.last_beat = now
                except BlockingIOError:
                    pass
                except OSError:
                    continue
                silent = now - r.last_beat
                if self.silence_s > 0 and silent > self.silence_s and r.popen.poll() is None:
                    r.reason = (f"rank {r.rank} of job {r.job_id} sent no heartbeat for {silent:.1f} s (stopped or "
                                f"hung; the limit is {self.silence_s:g} s): killed by the agent")
                    hung.append(r)
        for r in hung:
            log(r.reason)
            try:  # now, not when the kill is done: the controller fails the job at once
                self.emit({"event": "rank_hung", "job_id": _job_id_out(r.job_id), "rank": r.rank, "reason": r.reason})
            except OSError:
                pass
            # a stopped process cannot act on SIGTERM: a short grace, then SIGKILL
            threading.Thread(target=stop_group, args=(r.popen.pid, r.start_time, HUNG_GRACE_S, r.popen),
                             name=f"kill-{r.key}", daemon=True).start()
        return hung

    def _of(self, job_id) -> list[Rank]:
        if not name_id(job_id):
            raise SpecError(f"job_id must be {NAME_WHAT}, got {brief(job_id)}", "job_id")
        with self.lock:
            found = [r for (j, _), r in self.ranks.items() if j == str(job_id)]
        if not found:
            raise NotFound(f"no job {brief(job_id)} on this agent", "job_id")
        return found

    def stop(self, job_id) -> dict:
        stopped = []
        for r in self._of(job_id):
            if r.popen.poll() is None and stop_group(r.popen.pid, r.start_time, STOP_GRACE_S, r.popen):
                stopped.append(r.rank)
        return {"stopped": sorted(stopped)}

    def log(self, job_id) -> dict:
        records = []
        for r in self._of(job_id):
            if r.log.exists():
                for line in r.log.read_text().splitlines():
                    try:
                        records.append(json.loads(line))
                    except ValueError:
                        pass  # a rank killed mid-write leaves a partial last line
        records.sort(key=lambda x: (x.get("rank", 0), x.get("iter", 0)))
        return {"records": records}

    def stop_all(self) -> None:
        with self.lock:
            ranks = list(self.ranks.values())
        for r in ranks:
            if r.popen.poll() is None:
                try:
                    stop_group(r.popen.pid, r.start_time, STOP_GRACE_S, r.popen)
                except Exception as exc:  # noqa: BLE001 - stop the others anyway
                    log(f"stop {r.key}: {exc!r}")
        for r in ranks:  # job_exit written and state updated before cleanup goes on
            r.waiter.join(timeout=5)

    def status(self) -> list[dict]:
        with self.lock:
            return [{"job_id": _job_id_out(r.job_id), "rank": r.rank, "pid": r.popen.pid,
                     "returncode": r.popen.poll()} for r in self.ranks.values()]


def _job_id_out(job_id: str):
    """Integer job ids come back as integers (they travel as strings in argv)."""
    return int(job_id) if job_id.isdigit() and str(int(job_id)) == job_id else job_id
