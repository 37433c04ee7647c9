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
asks the network model instead, for any placement: the job alone on the ideal
network, then alone on that placement of the real topology (the iteration
times the simulator would run it at; it does not run the simulator, so the
policies that use sensitivities stay below it). On a placement whose
bottleneck is exactly half the NIC rate (e.g. two hosts in two racks behind
2:1 oversubscribed uplinks) its ``slowdown`` equals ``sensitivity``.
"""

from __future__ import annotations

from functools import lru_cache

from .network.demand import alone_iter_s
from .network.model import iteration_time
from .workload.job import consolidated_split, isolated_iter_s, placement_comm
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


def profile_sensitivity(model_name: str, gpus: int, topology, placement=None, zoo: ModelZoo | None = None,
                        pattern: str = "ring") -> dict:
    """A job's network slowdown on ``placement`` from the network model: ideal network vs. alone there.

    ``placement`` is a :class:`~netlab.sched.Placement` (or anything with
    ``hosts`` and ``gpus``; default: the reference spread placement on hosts
    0, 1, ...). The ideal iteration time is the simulator's placement-free
    isolated speed (consolidated, non-blocking: ``isolated_iter_s``); the
    placed one is the job alone on ``placement`` with its flows at the rate
    the topology's links give them (``alone_iter_s``), which is what the
    simulator runs it at on the fair network. Returns a row: both iteration
    times, their ``ratio``, ``slowdown = ratio - 1`` and the analytic
    ``sensitivity`` for comparison.
    """
    zoo = zoo or ModelZoo.default()
    model = zoo[model_name]
    if placement is None:
        split = reference_split(gpus, int(topology.host_gpus.max()))
        hosts = tuple(range(len(split)))
    else:
        hosts, split = tuple(placement.hosts), tuple(placement.gpus)
    ideal = isolated_iter_s(model, pattern, int(gpus), topology)
    placed = alone_iter_s(topology, model, pattern, hosts, split)
    ratio = placed / ideal
    return dict(model=model_name, gpus=int(gpus), pattern=pattern,
                placement=",".join(f"{h}:{g}" for h, g in zip(hosts, split)),
                ideal_iter_s=ideal, placed_iter_s=placed, ratio=ratio, slowdown=ratio - 1.0,
                sensitivity=sensitivity(model, gpus, topology, pattern))
