"""``netlab notebooks``: JupyterLab on the notebooks with this environment's Python, as root too.

Jupyter refuses to start as root without ``--allow-root``; the testbed notebook (04)
needs root, so the README's one command must work either way. The flag is added
only when the effective user is root.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path

from .errors import InputError


class JupyterError(InputError):
    """JupyterLab cannot be started (not installed, no notebooks folder)."""


def lab_argv(folder, extra=(), euid: int | None = None, python: str = sys.executable) -> list[str]:
    """The argv that starts JupyterLab in ``folder`` with ``python`` (``--allow-root`` when ``euid`` is 0)."""
    folder = Path(folder)
    if not folder.is_dir():
        raise JupyterError(f"{folder}: no such folder; run from a netlab checkout (its notebooks/ folder) or give "
                           "--dir")
    if importlib.util.find_spec("jupyterlab") is None:
        raise JupyterError("JupyterLab is not installed in this environment: pip install 'netlab-sched[notebooks]' "
                           "(the README's notebook command installs it)")
    euid = os.geteuid() if euid is None else euid
    return [python, "-m", "jupyterlab", str(folder), *(["--allow-root"] if euid == 0 else []), *extra]
