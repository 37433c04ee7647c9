"""Cluster state as the policies see it: jobs and a read-only cluster view.

The simulator and the live testbed both build a :class:`ClusterView`, so a
policy object written against it places jobs in both.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Callable, Iterable

import numpy as np

from ..network.model import DEFAULT_NETWORK, NETWORKS, NetworkModel
from ..workload.job import Job
from .allocation import DEFAULT_ALLOCATION
from .decision import Placement


class JobState:
    """A job's run-time state. Policies read it; only the scheduler writes it."""

    __slots__ = ("job", "job_id", "gpus", "submit_s", "status", "placement", "first_start_s", "end_s", "remaining",
                 "iter_s", "comm_s", "last_update_s", "progress_from_s", "attained_gpu_s", "run_s", "progress_s",
                 "comm_time_s", "preemptions", "iso_iter_s", "key", "version", "key_version", "phase", "demand",
                 "last_start_s", "allocation", "extra", "runs", "migrations", "phase_blind", "phase_blind_s")

    def __init__(self, job: Job, iso_iter_s: float):
        self.job = job
        # The job's identity, size and arrival copied from it (a frozen Job: they never change): the pass reads
        # them hundreds of thousands of times a run, a plain slot costs no property call.
        self.job_id: int = job.job_id
        self.gpus: int = job.gpus
        self.submit_s: float = job.submit_s
        self.status = "pending"  # pending -> waiting -> running -> done (running <-> waiting on preemption)
        self.placement: Placement | None = None
        self.first_start_s = None
        self.last_start_s = None
        self.end_s = None
        self.remaining = float(job.iterations)
        self.iter_s = iso_iter_s
        self.comm_s = 0.0
        self.last_update_s = 0.0
        self.progress_from_s = 0.0
        self.attained_gpu_s = 0.0
        self.run_s = 0.0  # time holding GPUs
        self.progress_s = 0.0  # time making progress (run time less restore overheads)
        self.comm_time_s = 0.0
        self.preemptions = 0
        self.migrations = 0  # moves to another placement while running (a migration policy's decisions)
        self.iso_iter_s = iso_iter_s
        self.key = None
        self.version = 0
        self.key_version = 0
        self.phase = None
        self.demand = None
        self.allocation = DEFAULT_ALLOCATION  # its share of the network (a network policy's decision)
        self.extra: dict = {}  # scratch space for policies (e.g. Dally timers)
        self.runs: list = []  # (start_s, end_s, placement) of each run a preemption ended (the timeline draws them)
        self.phase_blind = False  # its current time came from a solve blind to phase (the network model says)
        self.phase_blind_s = 0.0  # progress time at such times

    @property
    def isolated_s(self) -> float:
        return self.job.iterations * self.iso_iter_s

    def remaining_iso_s(self) -> float:
        return self.remaining * self.iso_iter_s

    def attained_at(self, now: float) -> float:
        if self.status == "running":
            return self.attained_gpu_s + self.gpus * (now - self.last_update_s)
        return self.attained_gpu_s

    def __repr__(self) -> str:
        return f"JobState({self.job_id}, {self.job.model}, gpus={self.gpus}, {self.status})"


class ClusterView:
    """What a policy may look at. Arrays are shared: treat them as read-only.

    ``network`` is the network model in force (a :class:`~netlab.network.model.NetworkModel`; default: a
    fresh ``DEFAULT_NETWORK`` model). Policies ask it what it is (``view.network.capabilities``: whether a
    phase takes effect, whether there is contention at all) and predict speeds with ``view.network.fresh()``,
    never with its name. ``link_load_gbps``: an array, or a snapshot of the loads (``array()`` gives them when a
    policy first asks; :class:`~netlab.network.links.LoadSnapshot`).
    """

    def __init__(self, topology, free_gpus: np.ndarray, running: Mapping[int, JobState], now: float,
                 link_load_gbps: np.ndarray | None = None, waiting: Iterable[JobState] = (), zoo=None,
                 network: NetworkModel | None = None, free_total: Callable[[], int] | None = None,
                 restart_s: Callable[[JobState], float] | None = None):
        if network is not None and not isinstance(network, NetworkModel):
            raise TypeError(f"ClusterView: network must be a NetworkModel (e.g. NETWORKS.create({network!r})), "
                            f"got {type(network).__name__}")
        self.topology = topology
        self.free_gpus = free_gpus
        self.running = running
        self.now = now
        self._link_load = link_load_gbps
        self._waiting = waiting
        self.zoo = zoo
        self.network: NetworkModel = network if network is not None else NETWORKS.create(DEFAULT_NETWORK)
        self._free_total = free_total  # the owner's running count of free GPUs, if it keeps one
        self._restart_s = restart_s

    def restart_s(self, job: JobState) -> float:
        """Seconds ``job`` would spend without progress if stopped and started again (its checkpoint and restore,
        as the mechanism charges them; 0 where the mechanism charges nothing)."""
        return 0.0 if self._restart_s is None else float(self._restart_s(job))

    def phase(self, job_id: int) -> float:
        """Where a running job's iterations start, as a fraction of its period: the network model's current
        value where the model moves jobs (``tcp``: jobs in step separate into turns), else the phase set."""
        now = self.network.phase_now(job_id) if self.network.capabilities.moves_phase else None
        return now if now is not None else (self.running[job_id].phase or 0.0) % 1.0

    @property
    def total_free(self) -> int:
        if self._free_total is not None:
            return self._free_total()
        return int(self.free_gpus.sum())

    @property
    def waiting(self) -> list[JobState]:
        """Waiting jobs in priority order."""
        return list(self._waiting)

    def rack_free(self) -> np.ndarray:
        return np.bincount(self.topology.host_rack, weights=self.free_gpus, minlength=self.topology.n_racks).astype(int)

    def link_load_gbps(self) -> np.ndarray:
        """Current time-averaged load per directed link (zeros on the ideal network)."""
        load = self._link_load
        if load is None:
            return np.zeros(self.topology.n_links)
        return load if isinstance(load, np.ndarray) else load.array()

    def with_freed(self, jobs: Iterable[JobState]) -> "ClusterView":
        """The view as it would be if ``jobs`` released their GPUs (for preemption decisions)."""
        free = self.free_gpus.copy()
        jobs = list(jobs)
        for js in jobs:
            for h, g in zip(js.placement.hosts, js.placement.gpus):
                free[h] += g
        # The running table without them is built only if a policy reads it (most placements read free GPUs).
        base = self.running
        running = _LazyRunning(lambda: _without(base, jobs))
        # Free GPUs: the owner's running count (if it keeps one) plus what the jobs release (summed if asked).
        owner = self._free_total
        free_total = None if owner is None else (lambda: owner() + sum(js.gpus for js in jobs))
        return ClusterView(self.topology, free, running, self.now, link_load_gbps=self._link_load,
                           waiting=self._waiting, zoo=self.zoo, network=self.network, free_total=free_total,
                           restart_s=self._restart_s)

    def demand_for(self, job: JobState, placement: Placement, phase: float = 0.0):
        """The network demand ``job`` would have on ``placement`` (None inside one host).

        Lets a policy score candidates before anything starts; running jobs'
        demands are ``JobState.demand``.
        """
        from ..network.demand import build_demand
        from ..workload.zoo import ModelZoo

        zoo = self.zoo or ModelZoo.default()
        return build_demand(self.topology, zoo[job.job.model], job.job.pattern, job.job_id, placement.hosts,
                            placement.gpus, job.iso_iter_s, phase)[0]


def _without(running: Mapping[int, JobState], jobs: list[JobState]) -> dict[int, JobState]:
    gone = {js.job_id for js in jobs}
    return {j: s for j, s in running.items() if j not in gone}


class _LazyRunning(Mapping):
    """A read-only running-jobs table built on first use (``ClusterView.with_freed``)."""

    def __init__(self, build: Callable[[], dict]):
        self._build, self._table = build, None

    def _get(self) -> dict:
        if self._table is None:
            self._table = self._build()
        return self._table

    def __getitem__(self, job_id):
        return self._get()[job_id]

    def __iter__(self):
        return iter(self._get())

    def __len__(self) -> int:
        return len(self._get())
