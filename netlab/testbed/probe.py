"""What this machine lacks for the emulated testbed, in words a user can act on."""

from __future__ import annotations

import importlib.util
import os
import shutil
import uuid


def sshd_path() -> str | None:
    return shutil.which("sshd")  # on root's PATH (an sbin directory); the testbed needs root anyway


def netadmin_missing() -> str | None:
    """Why network namespaces cannot be made here, or None if they can (tries one)."""
    if os.geteuid() != 0:
        return "needs root (CAP_NET_ADMIN) to create network namespaces"
    try:
        from pyroute2 import netns
    except ImportError as exc:  # pragma: no cover
        return f"pyroute2 is not importable: {exc}"
    name = f"nlprobe-{uuid.uuid4().hex[:6]}"
    try:
        netns.create(name)
        netns.remove(name)
    except Exception as exc:  # noqa: BLE001 - any failure means no namespaces here
        return f"cannot create a network namespace here: {exc!r}"
    return None


def missing(torch: bool = True) -> list[str]:
    """Everything the namespace testbed with training jobs needs and does not find."""
    out = []
    why = netadmin_missing()
    if why:
        out.append(why)
    if sshd_path() is None:
        out.append("needs OpenSSH's sshd (Debian: apt-get install openssh-server)")
    if torch and importlib.util.find_spec("torch") is None:
        out.append("needs torch==2.13.0 for training ranks (pip install -e '.[testbed]')")
    return out
