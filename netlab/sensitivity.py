"""Network sensitivity of a job model: how much its iteration time grows when bandwidth is lost.

Why: network-aware schedulers (Dally's delay timers and preemption) need one
number per job saying how much a worse placement will hurt it. A model that
sends few gradient bytes per second of compute barely notices a congested
uplink; one with a high communication/compute ratio slows down a lot.

Definition (one place)::

    s = iter(B / 2) / iter(B) - 1

the relative growth of the job's iteration time when the bandwidth available
to its collective halves, at a *reference spread placement*:

* the job's GPUs on the fewest hosts (``consolidated_split``), but on at
  least two hosts: a job that fits one host is split evenly over two
  (``ceil(g/2), floor(g/2)``), the placement it gets when it is not
  consolidated;
* ``iter(B)``: alone on a non-blocking fabric at the hosts' NIC rate (the
  per-flow rate the pattern gets from the NICs, capped by the intra-host
  interconnect for a ring), i.e. ``placement_comm``;
* ``iter(B / 2)``: the same with the network seconds doubled.

Iteration time follows the network model's rule
``compute + comm - overlap * min(compute, comm)``, so with no overlap
``s = c / (compute + c)`` where ``c`` is the network seconds at ``B``: ``s``
grows with the communication/compute ratio (``r / (1 + r)``), is 0 for a
model with no gradient bytes or a 1-GPU job (nothing crosses the network),
and stays below 1.

:func:`sensitivity` is analytic and cached. :func:`profile_sensitivity`
measures the slowdown in the simulator instead: the job alone on the ideal
network, then alone on a given placement on the fair network; on a placement
whose bottleneck is exactly half the NIC rate (e.g. two hosts in two racks
behind 2:1 oversubscribed uplinks) its ``slowdown`` equals ``sensitivity``.
"""

from __future__ import annotations

from functools import lru_cache

from .network.model import iteration_time
from .workload.job import consolidated_split, placement_comm
from .workload.zoo import JobModel, ModelZoo


def reference_split(gpus: int, gpus_per_host: int) -> tuple[int, ...]:
    """GPUs per host of the reference spread placement (fewest hosts, at least two)."""
    gpus = int(gpus)
    if gpus <= 1:
        return (gpus,)
    if gpus <= gpus_per_host:
        return ((gpus + 1) // 2, gpus // 2)
    return consolidated_split(gpus, gpus_per_host)


@lru_cache(maxsize=8192)
def _sensitivity(model: JobModel, pattern: str, gpus: int, gpus_per_host: int, nic_gbps: float,
                 intra_gbps: float) -> float:
    split = reference_split(gpus, gpus_per_host)
    if len(split) < 2:
        return 0.0
    net_s, intra_s = placement_comm(model, pattern, split, nic_gbps, intra_gbps)
    full = iteration_time(model.compute_s, net_s + intra_s, model.overlap)
    half = iteration_time(model.compute_s, 2 * net_s + intra_s, model.overlap)
    return float(half / full - 1.0) if full > 0 else 0.0


def _model(model, zoo: ModelZoo | None) -> JobModel:
    if isinstance(model, JobModel):
        return model
    return (zoo or ModelZoo.default())[model]



def sensitivity(model: JobModel | str, gpus: int, topology, pattern: str = "ring",
                zoo: ModelZoo | None = None) -> float:
    """Relative iteration-time growth when the job's bandwidth halves (see the module docstring).

    ``model`` is a :class:`JobModel` or a zoo name. Cached on (model, pattern,
    gpus, the topology's largest host, NIC and interconnect rates).
    """
    return _sensitivity(_model(model, zoo), pattern, int(gpus), int(topology.host_gpus.max()),
                        float(topology.host_nic_gbps.max()), float(topology.host_intra_gbps.max()))


def job_sensitivity(job, topology, zoo: ModelZoo | None = None) -> float:
    """:func:`sensitivity` of a running or waiting ``JobState``, memoised in ``job.extra``."""
    s = job.extra.get("sensitivity")
    if s is None:
        s = job.extra["sensitivity"] = sensitivity(job.job.model, job.gpus, topology, job.job.pattern, zoo)
    return s


class _Fixed:
    """A placement policy that always answers the same placement (for profiling)."""

    name = "fixed"

    def __init__(self, placement):
        self.placement = placement

    def reset(self, rng):
        pass

    def place(self, job, view):
        return self.placement

    def retry_at(self, job, view):
        return None

    def describe(self):
        return {"name": self.name}


def profile_sensitivity(model_name: str, gpus: int, topology, placement=None, zoo: ModelZoo | None = None,
                        pattern: str = "ring", iterations: float = 100.0) -> dict:
    """Measure a job's network slowdown in the simulator: alone, ideal network vs. ``placement`` on the fair one.

    ``placement`` is a :class:`~netlab.policies.base.Placement` (default: the
    reference spread placement on hosts 0, 1, ...). Returns a row: both
    iteration times, their ``ratio``, ``slowdown = ratio - 1`` and the
    analytic ``sensitivity`` for comparison. The ideal run uses the
    simulator's own placement-free isolated speed (consolidated, non-blocking).
    """
    from .policies.base import Placement
    from .sim.simulator import SimConfig, Simulator
    from .workload.job import Job

    zoo = zoo or ModelZoo.default()
    if placement is None:
        split = reference_split(gpus, int(topology.host_gpus.max()))
        placement = Placement(tuple(range(len(split))), split)
    job = Job(0, 0.0, int(gpus), model_name, float(iterations), pattern)
    iters = {}
    for network in ("ideal", "fair"):
        cfg = SimConfig(network=network, record_links=False)
        res = Simulator(topology, [job], "fifo", _Fixed(placement), "none", cfg, zoo=zoo).run()
        row = res.jobs.iloc[0]
        iters[network] = float(row.end_s - row.start_s) / iterations
    ratio = iters["fair"] / iters["ideal"]
    return dict(model=model_name, gpus=int(gpus), pattern=pattern,
                placement=",".join(f"{h}:{g}" for h, g in zip(placement.hosts, placement.gpus)),
                ideal_iter_s=iters["ideal"], placed_iter_s=iters["fair"], ratio=ratio, slowdown=ratio - 1.0,
                sensitivity=sensitivity(zoo[model_name], gpus, topology, pattern))
