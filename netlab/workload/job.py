"""Jobs, and binding a trace (the documented DataFrame schema) to a cluster.

A trace row gives a job's GPUs, model and either its iterations or its
duration. Durations are turned into iterations at the model's *isolated*
speed on the target topology: consolidated on the fewest hosts, alone on a
non-blocking network (:func:`isolated_iter_s`). On the ideal network a job
therefore runs exactly as long as the trace says.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from ..errors import InputError, UnknownNameError
from ..network.model import iteration_time
from .patterns import PATTERNS
from .zoo import JobModel, ModelZoo


class JobError(InputError):
    """A job (a trace row) the cluster cannot run: too many GPUs, a duplicate id, a size its pattern cannot split;
    the message names the row or job."""


@dataclass(frozen=True)
class Job:
    job_id: int
    submit_s: float
    gpus: int
    model: str
    iterations: float
    pattern: str = "ring"
    name: str = ""
    #: the trace's priority or QoS class as an integer, larger first (0 when the trace has none)
    priority: int = 0
    #: when the job should have finished, on the trace's clock (seconds, like ``submit_s``); inf: no deadline
    deadline_s: float = math.inf
    #: who submitted it (user, group or virtual cluster) for fair-share ordering; "" when the trace has none
    tenant: str = ""


def consolidated_split(gpus: int, gpus_per_host: int) -> tuple[int, ...]:
    """GPUs per host when ``gpus`` sit on the fewest hosts of ``gpus_per_host`` each."""
    full, rest = divmod(gpus, gpus_per_host)
    return tuple([gpus_per_host] * full + ([rest] if rest else []))


def placement_comm(model: JobModel, pattern: str, gpus_per_host: tuple[int, ...], nic_gbps: float,
                   intra_gbps: float) -> tuple[float, float]:
    """(network seconds, serial intra-host seconds) per iteration, alone on a non-blocking fabric."""
    plan = PATTERNS.get(pattern)().plan_for(tuple(gpus_per_host), model)
    intra_s = plan.serial_intra_bytes * 8 / (intra_gbps * 1e9)
    if not plan.flows:
        return 0.0, intra_s
    w = plan.flow_weights  # None: one unit per flow (the weights are bytes relative to flow_bytes)
    out = np.bincount([s for s, _ in plan.flows], weights=w, minlength=len(gpus_per_host))
    inn = np.bincount([d for _, d in plan.flows], weights=w, minlength=len(gpus_per_host))
    rate = nic_gbps / max(out.max(), inn.max())
    if plan.ring_intra_cap:
        rate = min(rate, intra_gbps)
    return plan.flow_bytes * 8 / (rate * 1e9), intra_s


@lru_cache(maxsize=4096)
def _iso(model: JobModel, pattern: str, gpus: int, gpus_per_host: int, nic_gbps: float,
         intra_gbps: float) -> tuple[float, float]:
    net, intra = placement_comm(model, pattern, consolidated_split(gpus, gpus_per_host), nic_gbps, intra_gbps)
    return iteration_time(model.compute_s, net + intra, model.overlap), net + intra


def _iso_of(model: JobModel, pattern: str, gpus: int, topology) -> tuple[float, float]:
    return _iso(model, pattern, int(gpus), int(topology.host_gpus.max()), float(topology.host_nic_gbps.max()),
                float(topology.host_intra_gbps.max()))


def isolated_iter_s(model: JobModel, pattern: str, gpus: int, topology) -> float:
    """Iteration time alone, consolidated, on a non-blocking version of ``topology``."""
    return _iso_of(model, pattern, gpus, topology)[0]


def isolated_comm_s(model: JobModel, pattern: str, gpus: int, topology) -> float:
    """Communication seconds per iteration (network plus intra-host, overlapped or not) in the same setting."""
    return _iso_of(model, pattern, gpus, topology)[1]


def jobs_from_frame(trace, topology, zoo: ModelZoo | None = None, first_id: int = 0) -> list[Job]:
    """Turn a trace DataFrame (see :mod:`netlab.traces.schema`) into Jobs for ``topology``.

    Rows with ``iterations`` keep them; otherwise ``duration_s`` is converted at
    the isolated speed. Jobs larger than the cluster are an error (they could
    never run), named with their trace row: a :class:`JobError`, or an
    :class:`~netlab.errors.UnknownNameError` for a model or pattern that is not
    registered. Job ids count from ``first_id`` (a trace read in chunks numbers
    each chunk after the last).
    """
    zoo = zoo or ModelZoo.default()
    total = topology.total_gpus
    jobs = []
    has_iter = "iterations" in trace.columns
    has_pattern = "pattern" in trace.columns
    has_priority, has_deadline, has_tenant = (c in trace.columns for c in ("priority", "deadline_s", "tenant"))
    iso: dict = {}  # (model, pattern, gpus) -> isolated iteration s, computed once per kind of job (~10 us each)
    for i, row in enumerate(trace.itertuples(index=False)):
        gpus = int(row.gpus)
        if gpus > total:
            raise JobError(f"trace row {i} (job {row.job_id}): needs {gpus} GPUs, the topology has {total}")
        try:
            model = zoo[row.model]
        except UnknownNameError as exc:
            raise UnknownNameError(f"trace row {i} (job {row.job_id}): {exc}") from None
        pattern = row.pattern if has_pattern else "ring"
        iters = getattr(row, "iterations", math.nan) if has_iter else math.nan
        if iters is None or not np.isfinite(iters):
            try:
                alone_s = iso.get((row.model, pattern, gpus))
                if alone_s is None:
                    alone_s = iso[(row.model, pattern, gpus)] = isolated_iter_s(model, pattern, gpus, topology)
                iters = row.duration_s / alone_s
            except UnknownNameError as exc:  # an unknown pattern
                raise UnknownNameError(f"trace row {i} (job {row.job_id}): {exc}") from None
            except ValueError as exc:  # a size the pattern cannot split
                raise JobError(f"trace row {i} (job {row.job_id}): {exc}") from None
        deadline = float(row.deadline_s) if has_deadline else math.inf
        jobs.append(Job(job_id=first_id + i, submit_s=float(row.submit_s), gpus=gpus, model=row.model,
                        iterations=max(float(iters), 1e-9), pattern=pattern, name=str(row.job_id),
                        priority=int(row.priority) if has_priority else 0,
                        deadline_s=deadline if np.isfinite(deadline) else math.inf,
                        tenant=str(row.tenant) if has_tenant else ""))
    return jobs
