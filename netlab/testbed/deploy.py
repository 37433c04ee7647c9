"""Build the agent's wheel and install it on a host over SSH/SFTP.

The agent is its own distribution (``agent/``) so hosts get a small package
(stdlib + pyroute2) and never the controller's dependencies. The wheel is
built once per agent source and cached by a hash of the source.
"""

from __future__ import annotations

import hashlib
import os
import posixpath
import shlex
import shutil
import subprocess
import sys
import sysconfig
import tempfile
from pathlib import Path

from .base import TestbedError

WHEEL_ENV = "NETLAB_AGENT_WHEEL"
#: where the agent's source is: a checkout's ``agent/``, else the copy an installed netlab carries as data files
#: (pyproject.toml: ``[tool.setuptools.data-files]``, installed under ``<prefix>/share/netlab-agent``)
AGENT_SOURCES = (Path(__file__).resolve().parents[2] / "agent",
                 Path(sysconfig.get_path("data")) / "share" / "netlab-agent",
                 Path(sys.prefix) / "share" / "netlab-agent")
AGENT_SRC = next((p for p in AGENT_SOURCES if (p / "pyproject.toml").is_file()), AGENT_SOURCES[0])


def _source_hash(src: Path) -> str:
    h = hashlib.sha256()
    for p in sorted(src.rglob("*")):
        if p.is_file() and "__pycache__" not in p.parts and not p.name.endswith(".pyc") \
                and ".egg-info" not in str(p) and "build" not in p.relative_to(src).parts[:1]:
            h.update(str(p.relative_to(src)).encode())
            h.update(p.read_bytes())
    return h.hexdigest()[:16]


def agent_wheel(wheel: str | os.PathLike | None = None, cache_dir: str | os.PathLike | None = None) -> Path:
    """The agent wheel to deploy: ``wheel``, else ``$NETLAB_AGENT_WHEEL``, else built from ``agent/``."""
    given = wheel or os.environ.get(WHEEL_ENV)
    if given:
        path = Path(given)
        if not path.is_file() or path.suffix != ".whl":
            raise TestbedError(f"agent wheel {path} does not exist or is not a .whl file")
        return path
    if not (AGENT_SRC / "pyproject.toml").is_file():
        raise TestbedError(f"no agent wheel given and no agent source at {AGENT_SRC} (nor in "
                           f"{AGENT_SOURCES[1]}: reinstall netlab); build one with "
                           f"`pip wheel --no-deps agent/` in a netlab checkout and pass it as wheel= "
                           f"or ${WHEEL_ENV}")
    cache = Path(cache_dir or os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "netlab" / "agent-wheels"
    out = cache / _source_hash(AGENT_SRC)
    found = sorted(out.glob("netlab_agent-*.whl"))
    if found:
        return found[-1]
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="netlab-agent-") as tmp:  # pip builds in tree: never in site-packages
        src = shutil.copytree(AGENT_SRC, Path(tmp) / "agent",
                              ignore=shutil.ignore_patterns("build", "*.egg-info", "__pycache__", "*.pyc"))
        argv = [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(out), str(src)]
        proc = subprocess.run(argv, capture_output=True, text=True)
    found = sorted(out.glob("netlab_agent-*.whl"))
    if proc.returncode != 0 or not found:
        raise TestbedError(f"building the agent wheel failed ({shlex.join(argv)}): {proc.stderr[-2000:]}")
    return found[-1]


def wheel_version(wheel: Path) -> str:
    """The version in a wheel's file name (``netlab_agent-0.1.0-py3-none-any.whl`` -> ``0.1.0``)."""
    parts = Path(wheel).name.split("-")
    if len(parts) < 5:
        raise TestbedError(f"{wheel}: not a wheel file name")
    return parts[1]


def run_checked(ssh, argv: list[str], host: str, timeout_s: float = 300.0) -> str:
    """Run ``argv`` over SSH (quoted, never a shell string from input); raise with its stderr on failure."""
    cmd = shlex.join(argv)
    _, stdout, stderr = ssh.exec_command(cmd, timeout=timeout_s)
    out = stdout.read().decode(errors="replace")
    status = stdout.channel.recv_exit_status()
    if status != 0:
        err = stderr.read().decode(errors="replace")
        raise TestbedError(f"{host}: `{cmd}` exited {status}: {err[-2000:]}")
    return out


def _sftp_makedirs(sftp, path: str) -> None:
    parts = []
    while path not in ("", "/"):
        parts.append(path)
        path = posixpath.dirname(path)
    for p in reversed(parts):
        try:
            sftp.stat(p)
        except FileNotFoundError:
            sftp.mkdir(p)


def install_agent(ssh, host, wheel: Path, mode: str = "target") -> tuple[list[str], str]:
    """Upload ``wheel`` to ``host.workdir`` and install it; return the argv prefix that runs the agent and the
    work folder as an absolute path on the host (a relative ``workdir`` is in the SSH login's home directory).

    ``mode="target"`` installs into a directory with ``--no-deps`` (the host's
    Python already has pyroute2: the emulated testbed's hosts share the
    controller's interpreter). ``mode="venv"`` makes a venv on the host and
    installs the wheel with its dependencies (a physical lab).
    """
    from .paths import require_remote_path, workdir_ok

    if not workdir_ok(host.workdir):  # refused before any SSH; pip reads "a;b" as a marker
        require_remote_path(host.workdir, f"{host.name}: workdir")
    if "/" in host.python:
        require_remote_path(host.python, f"{host.name}: python")
    with ssh.open_sftp() as sftp:
        # an SFTP session starts in the login's home: normalize(".") is that folder as the host names it
        work = host.workdir if host.workdir.startswith("/") else posixpath.join(sftp.normalize("."), host.workdir)
        require_remote_path(work, f"{host.name}: workdir")
        remote_wheel = posixpath.join(work, wheel.name)
        _sftp_makedirs(sftp, work)
        sftp.put(str(wheel), remote_wheel)
    if mode == "target":
        lib = posixpath.join(work, "agent-lib")
        run_checked(ssh, [host.python, "-m", "pip", "install", "-q", "--no-deps", "--no-index",
                          "--disable-pip-version-check", "--upgrade", "--target", lib, remote_wheel], host.name)
        return ["env", f"PYTHONPATH={lib}", host.python], work
    if mode == "venv":
        venv = posixpath.join(work, "venv")
        run_checked(ssh, [host.python, "-m", "venv", venv], host.name)
        py = posixpath.join(venv, "bin", "python")
        run_checked(ssh, [py, "-m", "pip", "install", "-q", "--disable-pip-version-check", "--upgrade",
                          remote_wheel], host.name)
        return [py], work
    raise TestbedError(f"unknown install mode {mode!r}: use 'target' or 'venv'")
