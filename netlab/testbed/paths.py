"""The strict patterns for everything the testbed turns into a file name, a config line or an argument.

Host names are checked when a topology is made (:func:`netlab.topology.check_name`, one pattern for
every backend); this module holds the testbed's own rules (remote paths, interface and user names)
and the defensive check where a host's files are named: a path is built from a checked name and must
stay inside its directory, so a name never acts as a path.
"""

from __future__ import annotations

import re
from pathlib import Path

from ..topology import TopologyError, check_name
from .base import TestbedError

# One path component of a remote path (workdir, interpreter): no whitespace, quotes, ';', '#' or '$',
# so it is one sshd_config token, one argv word and one pip requirement (pip reads "a;b" as a marker).
_COMPONENT = r"[A-Za-z0-9_.+-]+"
REMOTE_PATH_PATTERN = f"(/{_COMPONENT})+"
COMMAND_PATTERN = _COMPONENT  # an interpreter named by the command the host's PATH finds
IFNAME_PATTERN = r"[A-Za-z0-9_.-]{1,15}"  # Linux: at most 15 bytes, no '/', ':' or whitespace
USER_PATTERN = r"[A-Za-z_][A-Za-z0-9_.-]{0,31}"


def remote_path_ok(path) -> bool:
    """An absolute path of plain components (no '.' or '..')."""
    return (isinstance(path, str) and re.fullmatch(REMOTE_PATH_PATTERN, path) is not None
            and not any(part in (".", "..") for part in path.split("/")))


def workdir_ok(path) -> bool:
    """A remote work folder: an absolute path (:func:`remote_path_ok`) or one of plain components relative to the
    SSH login's home directory (``.netlab``), resolved on the host when the agent is installed."""
    return remote_path_ok(path) or (isinstance(path, str) and re.fullmatch(f"{_COMPONENT}(/{_COMPONENT})*", path)
                                    is not None and not any(part in (".", "..") for part in path.split("/")))


def interpreter_ok(python) -> bool:
    """A command name found on the host's PATH (``python3``) or an absolute path (:func:`remote_path_ok`): one
    argv word either way."""
    return remote_path_ok(python) or (isinstance(python, str) and re.fullmatch(_COMPONENT, python) is not None
                                      and python not in (".", ".."))


def ifname_ok(name) -> bool:
    return isinstance(name, str) and re.fullmatch(IFNAME_PATTERN, name) is not None and name not in (".", "..")


def require_remote_path(path, what: str) -> str:
    if not remote_path_ok(path):
        raise TestbedError(f"{what}: {path!r} is not allowed: must be an absolute path matching "
                           f"{REMOTE_PATH_PATTERN} without '.' or '..' components")
    return path


def host_file(directory: Path, name: str, suffix: str = "") -> Path:
    """``directory/<name><suffix>`` for a host name; the name is checked and the path stays in ``directory``."""
    try:
        check_name(name, f"host name in a path under {directory}")
    except TopologyError as exc:
        raise TestbedError(str(exc)) from None
    path = directory / f"{name}{suffix}"
    if path.parent != directory or path.name != f"{name}{suffix}":
        raise TestbedError(f"host name {name!r}: {path} is not a file directly in {directory}")
    return path
