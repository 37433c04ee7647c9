"""SSH client for testbed hosts (paramiko), host keys verified by default.

Why strict: the controller runs commands as root on the hosts. Accepting
any host key would let anything that answers on the address run them. The
testbed writes a known_hosts file with every host's key; a physical lab
provides one. Accepting unknown keys is an explicit, logged opt-in.
"""

from __future__ import annotations

import logging
import socket
from pathlib import Path

import paramiko

from .base import TestbedError


class _WarnAddPolicy(paramiko.AutoAddPolicy):
    """AutoAddPolicy that says loudly what it accepted."""

    def missing_host_key(self, client, hostname, key):
        logging.warning("ssh: accepting unknown host key %s %s for %s (auto_add=True)",
                        key.get_name(), key.get_fingerprint().hex(), hostname)
        super().missing_host_key(client, hostname, key)


def ssh_connect(addr: str, port: int, user: str, key_file, known_hosts, sock: socket.socket | None = None,
                auto_add: bool = False, timeout_s: float = 10) -> paramiko.SSHClient:
    """An authenticated SSHClient; ``sock`` is an already connected socket (e.g. from a namespace).

    Only ``key_file`` is offered (no agent, no ~/.ssh keys), so what works in
    a test works the same on the lab. Unknown or changed host keys raise
    TestbedError naming the host and the known_hosts file.
    """
    client = paramiko.SSHClient()
    where = f"{user}@{addr}:{port}"
    kh = Path(known_hosts) if known_hosts is not None else None
    if kh is not None and kh.exists():
        client.load_host_keys(str(kh))  # AutoAddPolicy saves new keys back to this file
    elif not auto_add:
        client.close()
        raise TestbedError(f"ssh {where}: known_hosts file {kh} does not exist "
                           "(pass auto_add=True to accept unknown host keys explicitly)")
    client.set_missing_host_key_policy(_WarnAddPolicy() if auto_add else paramiko.RejectPolicy())
    try:
        client.connect(addr, port=port, username=user, key_filename=str(key_file), sock=sock,
                       timeout=timeout_s, banner_timeout=timeout_s, auth_timeout=timeout_s,
                       allow_agent=False, look_for_keys=False)
    except paramiko.BadHostKeyException as exc:
        client.close()
        raise TestbedError(f"ssh {where}: host key does not match the one in {kh} "
                           f"(got {exc.key.get_name()} {exc.key.get_fingerprint().hex()})") from None
    except paramiko.SSHException as exc:
        client.close()
        if "not found in known_hosts" in str(exc):
            raise TestbedError(f"ssh {where}: host key of {addr} is not in known_hosts file {kh}; refusing "
                               "(add it, or pass auto_add=True to accept it explicitly)") from None
        raise TestbedError(f"ssh {where}: {type(exc).__name__}: {exc}") from exc
    except OSError as exc:
        client.close()
        raise TestbedError(f"ssh {where}: connection failed: {exc}") from exc
    return client
