"""Per-testbed SSH identities and one sshd per host namespace.

Why one sshd per host: the agent is reached the way it is on a physical lab
(SSH to the host's management address), so the controller code path is the
same on both. Every testbed has its own client key and host keys, and a
known_hosts file listing each host's key, so host keys are verified and no
key of the user's own ~/.ssh is touched.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
from pathlib import Path
from typing import Callable

from .base import TestbedError



def find_binary(name: str) -> str:
    """Absolute path of a program on PATH (sshd must be started by absolute path: it re-executes itself)."""
    path = shutil.which(name)
    if path is None:
        raise TestbedError(f"{name} not found on PATH (Debian: apt-get install openssh-server openssh-client; "
                           f"sshd lives in an sbin directory, which root's PATH holds)")
    return os.path.abspath(path)


def make_keys(specs: list[tuple[Path, str]], timeout_s: float = 30) -> None:
    """Generate ed25519 key pairs ``path``/``path.pub`` (comment) with ssh-keygen, all at once."""
    keygen = find_binary("ssh-keygen")
    procs = []
    for path, comment in specs:
        argv = [keygen, "-q", "-t", "ed25519", "-N", "", "-C", comment, "-f", str(path)]
        procs.append((path, subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                             stderr=subprocess.STDOUT)))
    errors = []
    for path, proc in procs:
        try:
            out, _ = proc.communicate(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            proc.kill()
            out, _ = proc.communicate()
        if proc.returncode != 0:
            errors.append(f"{path}: ssh-keygen exited {proc.returncode}: {out.decode(errors='replace').strip()}")
    if errors:
        raise TestbedError("generating SSH keys failed: " + "; ".join(errors))


def public_key(path: Path) -> str:
    """'type base64' of a key pair's public half (comment dropped)."""
    return " ".join(Path(f"{path}.pub").read_text().split()[:2])


def write_sshd_config(path: Path, listen_addr: str, port: int, host_key: Path, pid_file: Path,
                      authorized_keys: Path) -> None:
    """An sshd_config for a host namespace: key login only, files outside any home (StrictModes no).

    Every value must be one plain token: a newline would add a directive of its own (sshd takes the
    first value of a keyword, so an injected line would win over the ones below) and whitespace,
    quotes or '#' change how sshd splits the line.
    """
    for key, value in (("ListenAddress", listen_addr), ("Port", port), ("HostKey", host_key),
                       ("PidFile", pid_file), ("AuthorizedKeysFile", authorized_keys)):
        text = str(value)
        if not text or any(c.isspace() or not c.isprintable() or c in "\"'#%\\" for c in text):
            raise TestbedError(f"sshd_config {path}: {key} value {text!r} is not one plain token "
                               "(no whitespace, control characters, quotes, '#', '%' or backslashes)")
    path.write_text(
        f"# netlab testbed sshd (generated)\n"
        f"ListenAddress {listen_addr}\n"
        f"Port {port}\n"
        f"HostKey {host_key}\n"
        f"PidFile {pid_file}\n"
        f"AuthorizedKeysFile {authorized_keys}\n"
        "UsePAM no\n"
        "PermitRootLogin prohibit-password\n"
        "PasswordAuthentication no\n"
        "KbdInteractiveAuthentication no\n"
        "StrictModes no\n"
        "UseDNS no\n"
        "PrintMotd no\n"
        "Subsystem sftp internal-sftp\n"
    )


def write_known_hosts(path: Path, entries: list[tuple[str, int, str]]) -> None:
    """known_hosts lines for (addr, port, 'type base64') entries ([addr]:port when port != 22)."""
    lines = [f"{addr if port == 22 else f'[{addr}]:{port}'} {key}\n" for addr, port, key in entries]
    path.write_text("".join(lines))


def ensure_privsep_dir() -> None:
    """sshd refuses to start without /run/sshd; shared with the system sshd, so created but never removed."""
    os.makedirs("/run/sshd", mode=0o755, exist_ok=True)


def start_sshd(config: Path, netns_name: str, log_path: Path) -> subprocess.Popen:
    """Start ``sshd -D -e -f config`` inside ``netns_name`` (the namespace is entered before exec)."""
    from pyroute2 import netns

    sshd = find_binary("sshd")

    def enter():
        netns.setns(netns_name, flags=0)  # flags=0: never create a namespace that is missing

    with open(log_path, "ab") as log:
        return subprocess.Popen([sshd, "-D", "-e", "-f", str(config)], stdin=subprocess.DEVNULL,
                                stdout=log, stderr=log, preexec_fn=enter, close_fds=True)


def wait_listening(connect: Callable[[], socket.socket], what: str, proc: subprocess.Popen | None = None,
                   log_path: Path | None = None, timeout_s: float = 10.0) -> float:
    """Connect until the server accepts (bounded); returns seconds waited.

    Polls with a short growing interval: a refused connection means sshd has
    not bound yet. If the server process exits, its log tail is in the error.
    """
    t0 = time.monotonic()
    delay_s = 0.002
    last = None
    while time.monotonic() - t0 < timeout_s:
        if proc is not None and proc.poll() is not None:
            tail = log_path.read_text(errors="replace")[-800:] if log_path and log_path.exists() else ""
            raise TestbedError(f"{what}: sshd exited with {proc.returncode} before listening; log: {tail.strip()}")
        try:
            sock = connect()
        except OSError as exc:
            last = exc
            time.sleep(delay_s)
            delay_s = min(delay_s * 2, 0.05)
            continue
        sock.close()
        return time.monotonic() - t0
    raise TestbedError(f"{what}: sshd not listening after {timeout_s:.1f} s (last error: {last})")
