"""The agent's state file: what it changed on this host, so it can be undone.

``state.json`` is rewritten atomically (tempfile + ``os.replace``) on every
change, so a reader (or a later agent) never sees a half-written file. If the
agent dies without cleaning up (SIGKILL, OOM, power loss of the SSH session),
the next agent started with the same ``--state-dir`` finds the file, sees that
its owner is dead (pid + start time) and undoes the recorded shaping and kills
the recorded children before doing anything else.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import threading
from pathlib import Path
from typing import Callable

from .errors import AgentError
from .procs import is_same_process, proc_start_time, stop_group


def log(msg: str) -> None:
    print(f"netlab_agent[{os.getpid()}]: {msg}", file=sys.stderr, flush=True)


class SafeStderr:
    """stderr that never raises, mirrored to ``DIR/agent.log``.

    Why: when the SSH connection drops, sshd closes the agent's stderr pipe
    too; a log line written during cleanup would raise BrokenPipeError and
    abort the very cleanup the drop triggered. The file keeps the log.
    """

    def __init__(self, stream, path: Path):
        self.stream, self.broken = stream, False
        try:
            self.file = open(path, "a", buffering=1)
        except OSError:
            self.file = None

    def write(self, text: str) -> int:
        if self.file is not None:
            try:
                self.file.write(text)
            except (OSError, ValueError):
                pass
        if not self.broken:
            try:
                self.stream.write(text)
                self.stream.flush()
            except (OSError, ValueError):
                self.broken = True
        return len(text)

    def flush(self) -> None:
        if not self.broken:
            try:
                self.stream.flush()
            except (OSError, ValueError):
                self.broken = True

    def fileno(self) -> int:
        return self.stream.fileno()


class StateStore:
    """Thread-safe view of ``DIR/state.json`` (commands and waiter threads update it)."""

    def __init__(self, state_dir: str | os.PathLike):
        self.dir = Path(state_dir)
        self.dir.mkdir(parents=True, exist_ok=True)
        self.path = self.dir / "state.json"
        self._lock = threading.Lock()
        self.data: dict = {
            "agent": {"pid": os.getpid(), "start_time": proc_start_time(os.getpid())},
            "shaping": {},      # ifname -> snapshot of the tree before the first shape
            "children": {},     # key -> {pid, start_time, kind}
            "probe_links": [],  # veth names created by the qdisc probe (deleted right after)
        }

    def _write(self) -> None:
        fd, tmp = tempfile.mkstemp(dir=self.dir, prefix=".state.", suffix=".tmp")
        try:
            with os.fdopen(fd, "w") as fh:
                json.dump(self.data, fh, indent=1, sort_keys=True)
                fh.flush()
                os.fsync(fh.fileno())
            os.replace(tmp, self.path)
        except BaseException:
            try:
                os.unlink(tmp)
            except FileNotFoundError:
                pass
            raise

    def update(self, fn: Callable[[dict], None]) -> None:
        """Apply ``fn`` to the state dict and persist it before returning."""
        with self._lock:
            fn(self.data)
            self._write()

    def get(self, section: str) -> dict:
        with self._lock:
            return json.loads(json.dumps(self.data[section]))

    def save(self) -> None:
        with self._lock:
            self._write()

    def remove(self) -> None:
        """Everything is undone: the file would only mislead a later agent."""
        with self._lock:
            try:
                self.path.unlink()
            except FileNotFoundError:
                pass


def recover_stale(state_dir: str | os.PathLike,
                  restore_shaping: Callable[[str, dict], None],
                  delete_link: Callable[[str], None]) -> dict:
    """Undo what a dead agent left in ``state_dir``; return a summary.

    Raises AgentError if the recorded agent is still alive: two agents must not
    share a state directory.
    """
    path = Path(state_dir) / "state.json"
    summary = {"found": False, "restored": [], "killed": [], "errors": []}
    if not path.exists():
        return summary
    try:
        old = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise AgentError(f"unreadable state file {path}: {exc}") from exc
    summary["found"] = True
    agent = old.get("agent") or {}
    pid, start = agent.get("pid"), agent.get("start_time")
    if pid and pid != os.getpid() and start is not None and is_same_process(pid, start):
        raise AgentError(f"state dir {state_dir} belongs to a live agent (pid {pid})")
    # Children first: a dead agent's rank may still be sending into the link.
    for key, child in (old.get("children") or {}).items():
        try:
            if stop_group(int(child["pid"]), int(child["start_time"])):
                summary["killed"].append({"key": key, "pid": child["pid"]})
        except Exception as exc:  # noqa: BLE001 - keep undoing the rest
            summary["errors"].append(f"child {key}: {exc!r}")
    for ifname, snap in (old.get("shaping") or {}).items():
        try:
            restore_shaping(ifname, snap)
            summary["restored"].append(ifname)
        except Exception as exc:  # noqa: BLE001
            summary["errors"].append(f"shaping {ifname}: {exc!r}")
    for ifname in old.get("probe_links") or []:
        try:
            delete_link(ifname)
        except Exception as exc:  # noqa: BLE001
            summary["errors"].append(f"probe link {ifname}: {exc!r}")
    path.unlink()
    for err in summary["errors"]:
        log(f"stale state: {err}")
    return summary
