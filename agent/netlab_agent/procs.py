"""Child processes identified by (pid, /proc start time), killed by process group.

A pid alone can be reused after the process is gone; the start time (field 22
of ``/proc/<pid>/stat``, in clock ticks since boot) makes the pair unique, so a
recorded child is only ever signalled while it is provably the same process.
Nothing is ever killed by name.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time


def proc_start_time(pid: int) -> int | None:
    """Start time of a live (non-zombie) process, or None if it is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            raw = fh.read().decode("ascii", "replace")
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return None
    # comm (field 2) may contain spaces and parentheses: split after the last ')'.
    fields = raw[raw.rindex(")") + 2:].split()
    if fields[0] in ("Z", "X"):
        return None
    return int(fields[19])


def is_same_process(pid: int, start_time: int) -> bool:
    return proc_start_time(pid) == start_time


def stop_group(pid: int, start_time: int, grace_s: float = 3.0,
               popen: subprocess.Popen | None = None) -> bool:
    """SIGTERM the child's process group, SIGKILL after ``grace_s``.

    The child was started with ``start_new_session=True``, so its process
    group id equals its pid. Returns True if a signal was sent.
    """
    if not is_same_process(pid, start_time):
        return False
    try:
        os.killpg(pid, signal.SIGTERM)
    except ProcessLookupError:
        return False
    deadline = time.monotonic() + grace_s
    while time.monotonic() < deadline:
        if popen is not None:
            try:
                popen.wait(timeout=0.05)
                break
            except subprocess.TimeoutExpired:
                continue
        if not is_same_process(pid, start_time):
            break
        time.sleep(0.05)
    else:
        if is_same_process(pid, start_time):
            try:
                os.killpg(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
    if popen is not None:
        try:
            popen.wait(timeout=grace_s)
        except subprocess.TimeoutExpired:
            pass
    else:
        end = time.monotonic() + grace_s
        while is_same_process(pid, start_time) and time.monotonic() < end:
            time.sleep(0.02)
    return True


def child_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """The agent's environment for a child, with this package importable.

    The agent may run from a source tree via PYTHONPATH or from a venv; either
    way its children (``-m netlab_agent.train`` / ``.traffic``) must import the
    same copy, so the package's parent directory goes first on PYTHONPATH.
    """
    env = dict(os.environ)
    pkg_parent = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    rest = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p and p != pkg_parent]
    env["PYTHONPATH"] = os.pathsep.join([pkg_parent] + rest)
    env.update(extra or {})
    return env
