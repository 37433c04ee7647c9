"""Trace loaders: real GPU-cluster traces and synthetic workloads as one DataFrame schema.

>>> df = load_trace("philly-sample")                 # bundled, needs no shared dir
>>> df = load_trace("gavel,vc=b436b2")              # a spec string
>>> df = load_trace("synthetic,jobs=200,load=0.8")
>>> df = load_trace("path/to/cluster02.csv")        # format detected from the header

Every loader returns the schema of :mod:`netlab.traces.schema`; the shared
traces are found as described in :mod:`netlab.traces.files`. Traces without
model names get seeded models (:mod:`netlab.traces.models`).
"""

from __future__ import annotations

import inspect
import numbers
from pathlib import Path

import pandas as pd

from ..spec import Spec, SpecError, check_params
from . import alibaba, gavel, itp, philly, pollux, synthetic  # noqa: F401  (registers the loaders)
from . import sacct  # noqa: F401,E402  (Slurm accounting dumps)
from .files import DEFAULT_FILES, TRACES, find_trace_dir
from .models import assign_models
from .reader import read_header
from .schema import COLUMNS, TraceError, TraceNotFound, validate
from .synthetic import poisson_trace

__all__ = ["load_trace", "resolve_trace", "list_traces", "TRACES", "TraceError", "TraceNotFound", "validate", "assign_models",
           "poisson_trace", "find_trace_dir", "COLUMNS"]

#: (columns the header must have, reader) in the order tried; supersets first
FORMATS = [
    (itp.EF_HEADER, lambda p, seed, skip_bad, trace_dir: itp.read_elasticflow(p, skip_bad=skip_bad)),
    (itp.RAW_HEADER, lambda p, seed, skip_bad, trace_dir: itp.read_itp(p, seed=seed, skip_bad=skip_bad)),
    (philly.HEADER, lambda p, seed, skip_bad, trace_dir: philly.read_philly(p, seed=seed, skip_bad=skip_bad)),
    (alibaba.HEADER, lambda p, seed, skip_bad, trace_dir: alibaba.read_alibaba(p, seed=seed, skip_bad=skip_bad)),
    (pollux.HEADER, lambda p, seed, skip_bad, trace_dir: pollux.read_pollux(p, trace_dir=trace_dir,
                                                                            skip_bad=skip_bad)),
]


def _read_file(path: Path, seed: int, skip_bad: bool, trace_dir) -> pd.DataFrame:
    if path.suffix == ".trace":
        return gavel.read_gavel(path, skip_bad=skip_bad)
    header = {h.strip() for h in read_header(path)}
    for columns, reader in FORMATS:
        if header.issuperset(columns):
            return reader(path, seed, skip_bad, trace_dir)
    raise TraceError(f"{path}, line 1 (header): unknown trace format, columns {sorted(header)}; "
                     f"known formats need one of {[list(c) for c, _ in FORMATS]}")


def _spec_params(text: str, spec: Spec, loader) -> dict:
    """Spec params checked against the loader; string-typed ones keep their raw text.

    ``Spec`` turns ``vc=6214e9`` into a float and ``cluster=02`` into 2; a VC or
    cluster name is a string, so those take the text as written.
    """
    sig = inspect.signature(loader).parameters
    allowed = {k: p.default for k, p in sig.items() if k not in ("trace_dir", "seed", "skip_bad")}
    for key in ("trace_dir", "seed", "skip_bad"):
        if key in spec.params:
            raise SpecError(f"trace spec {text!r}: {key!r} is not a spec parameter (pass it to load_trace, or "
                            f"--seed/--trace-dir on the command line); known: {sorted(allowed)}")
    params = check_params(f"trace {spec.kind!r}", spec.params, allowed)
    raw = dict(part.strip().partition("=")[::2] for part in text.split(",")[1:] if part.strip())
    for key in spec.params:
        if isinstance(allowed[key], str):
            params[key] = raw[key].strip()
    return {k: params[k] for k in spec.params}


def resolve_trace(what) -> tuple[Path | None, object, dict]:
    """Where a trace reference points, checked without reading any rows: ``(path, None, {})`` for a
    ``.csv``/``.trace`` file, or ``(None, loader, spec params)`` for a registered name or spec string.

    One dispatch for :func:`load_trace` and for checks that must refuse a bad trace before anything runs
    (a sweep grid). Raises :class:`TraceNotFound`, :class:`TraceError` (a directory) or ``SpecError``.
    """
    text = str(what)
    path = Path(text)
    if path.suffix in (".csv", ".trace"):
        if not path.exists():
            raise TraceNotFound(f"trace file {text!r} not found")
        if path.is_dir():
            raise TraceError(f"{path}: is a directory, expected a trace file")
        return path, None, {}
    spec = Spec.parse(text)
    try:
        loader = TRACES.get(spec.kind)
    except KeyError as exc:
        raise SpecError(f"trace spec {text!r}: {exc.args[0]}") from None
    return None, loader, _spec_params(text, spec, loader)


def load_trace(what, trace_dir=None, seed: int = 0, max_jobs: int | None = None, skip_bad: bool = False,
               cluster_gpus: int | None = None, **params) -> pd.DataFrame:
    """A trace DataFrame from a registered name, a spec string (``"gavel,vc=b436b2"``) or a file path.

    ``seed`` drives model assignment for traces without models (and the
    synthetic generator); ``max_jobs`` keeps the first N jobs by submit time;
    ``skip_bad`` drops bad rows (recorded in ``attrs["skipped"]``, with a warning)
    instead of raising :class:`TraceError`; ``cluster_gpus``, the GPUs of the
    cluster the trace will run on, sizes a generated trace whose spec does not
    (a loader with a ``cluster_gpus`` parameter).
    """
    if not isinstance(seed, numbers.Integral) or isinstance(seed, bool) or not 0 <= seed < 2**63:
        raise TraceError(f"seed {seed!r}: must be an integer >= 0")
    if max_jobs is not None and (not isinstance(max_jobs, numbers.Integral) or isinstance(max_jobs, bool)
                                 or max_jobs < 1):
        raise TraceError(f"max_jobs {max_jobs!r}: must be an integer >= 1 (or None for every job)")
    text = str(what)
    path, loader, spec_params = resolve_trace(text)
    if path is not None:
        df = _read_file(path, seed, skip_bad, trace_dir)
    else:
        merged = {**spec_params, **params}
        if cluster_gpus is not None and "cluster_gpus" in inspect.signature(loader).parameters:
            merged.setdefault("cluster_gpus", cluster_gpus)
        try:
            df = loader(trace_dir=trace_dir, seed=seed, skip_bad=skip_bad, **merged)
        except TraceError as exc:
            if text in str(exc) or isinstance(exc, TraceNotFound):
                raise
            raise TraceError(f"trace spec {text!r}: {exc}") from None
    if not len(df):
        raise TraceError(f"trace {text!r}: no jobs left to simulate (filtered: {df.attrs.get('filtered', {})})")
    if max_jobs is not None and len(df) > max_jobs:
        attrs = dict(df.attrs, filtered={**df.attrs.get("filtered", {}), f"beyond max_jobs={max_jobs}": len(df) - max_jobs})
        df = df.head(max_jobs).copy()
        df.attrs = attrs
    return df


def list_traces() -> pd.DataFrame:
    """One row per registered trace: name, description, needs_shared, default file."""
    return pd.DataFrame([
        dict(name=name, description=doc, needs_shared=DEFAULT_FILES[name][0], default_file=DEFAULT_FILES[name][1])
        for name, doc in TRACES.describe().items()
    ])
