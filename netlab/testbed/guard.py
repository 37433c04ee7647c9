"""Guardian: removes a testbed when its controller dies without cleaning up.

SIGKILL cannot be caught, so the controller cannot clean up after it. The
guardian is a separate process in its own session (so a terminal's Ctrl-C
does not reach it) that holds the read end of a pipe from the controller. The
kernel closes the controller's end when the controller dies, however it dies;
the guardian then reads EOF. If the controller wrote ``done`` first, it had
already cleaned up and the guardian just exits; otherwise the guardian tears
down everything in the ledger.

Run as ``python -m netlab.testbed.guard LEDGER`` (the controller does this).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from .ledger import Ledger

DONE = b"done\n"


def start_guard(ledger_path, log_path, python: str = sys.executable) -> subprocess.Popen:
    """Start the guardian for ``ledger_path``; the returned Popen's stdin is the lifeline."""
    root = str(Path(__file__).resolve().parents[2])  # so the guardian imports this very netlab
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [root, os.environ.get("PYTHONPATH")])))
    with open(log_path, "ab") as log:
        return subprocess.Popen([python, "-m", "netlab.testbed.guard", str(ledger_path)],
                                stdin=subprocess.PIPE, stdout=log, stderr=log, env=env,
                                start_new_session=True, close_fds=True)


def release_guard(proc: subprocess.Popen, timeout_s: float = 2.0) -> None:
    """Tell the guardian the controller cleaned up, and reap it (kill it if it does not exit)."""
    try:
        proc.stdin.write(DONE)
        proc.stdin.close()
    except (BrokenPipeError, ValueError, OSError):
        pass
    try:
        proc.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        proc.kill()  # our own unreaped child: its pid cannot have been reused
        proc.wait()


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 1:
        print("usage: python -m netlab.testbed.guard LEDGER.json", file=sys.stderr)
        return 2
    path = Path(argv[0])
    for sig in (signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, signal.SIG_IGN)
    stdin = sys.stdin.buffer
    while True:
        line = stdin.readline()
        if line == DONE:
            return 0
        if not line:
            break
    t0 = time.monotonic()
    try:
        ledger = Ledger.load(path)
    except FileNotFoundError:
        return 0  # nothing was ever recorded, or it was cleaned up already
    except ValueError as exc:
        print(f"guard: unreadable ledger {path}: {exc}", file=sys.stderr)
        return 1
    report = ledger.teardown(skip_roles={"guard"})
    print(f"guard: controller went away; removed {len(report.removed)} resources, killed "
          f"{len(report.killed)} processes in {time.monotonic() - t0:.3f} s", file=sys.stderr)
    for line in report.failures:
        print(f"guard: FAILED: {line}", file=sys.stderr)
    return 0 if report.ok else 1


if __name__ == "__main__":
    sys.exit(main())
