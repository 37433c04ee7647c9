"""Where the shared traces live, and the registry of trace loaders.

The real traces are data beside the project (``shared/traces``), not part of
the package, so their directory is looked up at load time: an explicit
``trace_dir``, else ``$NETLAB_TRACE_DIR``, else the first existing of
``./shared/traces``, ``../shared/traces``, ``../../shared/traces`` (relative to
the working directory, so notebooks and the repository root both work).
"""

from __future__ import annotations

import os
from pathlib import Path

import pandas as pd

from ..registry import Registry
from .schema import TraceNotFound

#: name -> loader(trace_dir=None, seed=0, skip_bad=False, **params) -> DataFrame
TRACES: Registry[pd.DataFrame] = Registry("trace")

#: name -> (needs the shared directory, default file relative to it or to netlab/data)
DEFAULT_FILES: dict[str, tuple[bool, str]] = {}

CANDIDATES = ("shared/traces", "../shared/traces", "../../shared/traces")


def find_trace_dir(trace_dir=None) -> Path:
    """The shared trace directory; a clear FileNotFoundError if there is none."""
    if trace_dir is not None:
        path = Path(trace_dir)
        if not path.is_dir():
            raise TraceNotFound(f"trace_dir {str(path)!r} is not a directory")
        return path
    env = os.environ.get("NETLAB_TRACE_DIR")
    if env:
        if not Path(env).is_dir():
            raise TraceNotFound(f"NETLAB_TRACE_DIR={env!r} is not a directory")
        return Path(env)
    for rel in CANDIDATES:
        path = Path.cwd() / rel
        if path.is_dir():
            return path.resolve()
    raise TraceNotFound(
        "the shared traces directory was not found: pass trace_dir=, set NETLAB_TRACE_DIR, or run from a "
        f"directory where one of {', '.join(CANDIDATES)} exists (cwd {Path.cwd()}); "
        "the bundled 'philly-sample' and 'synthetic' traces need no shared directory")


def shared_file(trace_dir, rel: str) -> Path:
    """``rel`` inside the shared trace directory, or a FileNotFoundError naming both."""
    root = find_trace_dir(trace_dir)
    path = root / rel
    if not path.exists():
        raise TraceNotFound(f"trace file {str(path)!r} not found (trace dir {str(root)!r} has no {rel!r})")
    return path


def register(name: str, default_file: str, needs_shared: bool = True):
    """Register a loader under ``name`` in :data:`TRACES` and note its default file."""
    DEFAULT_FILES[name] = (needs_shared, default_file)
    return TRACES.register(name)
