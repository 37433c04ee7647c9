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


class RunningChanges:
    """Which jobs started or stopped running, in order: a consumer reads what changed since its last look.

    Why: a network policy decides for the running jobs with traffic (tens) among hundreds of running jobs, and
    between two of its calls one or two of them start or end. Finding those by comparing every running job with
    what it saw last time cost a scan of the running set per call (on full Philly, tens of thousands of calls).

    The mechanism's running table (:class:`RunningJobs`) logs each job id it sets (a start, a restart, a
    migration's new start) or deletes (an end, a preemption, a migration's stop). A consumer keeps a mark
    (:meth:`mark`) and next time asks :meth:`since` for the ids logged after it: every job whose running status
    or placement may have changed, repeats possible; it reads the running table for each (running or not, on
    which placement). ``since`` answers None when it cannot tell (no mark yet, a mark from another table, one
    older than the log keeps): the consumer then compares the whole running set, as it would without a log.
    The log keeps at least the last :attr:`KEEP` entries, so it stays bounded in a long run.
    """

    KEEP = 1 << 15  # entries kept at least (a consumer further behind compares the running set)

    def __init__(self):
        self._ids: list[int] = []
        self._base = 0  # entries dropped from the front

    def log(self, job_id: int) -> None:
        """``job_id`` started or stopped running."""
        ids = self._ids
        ids.append(job_id)
        if len(ids) > 2 * self.KEEP:
            del ids[:self.KEEP]
            self._base += self.KEEP

    def mark(self):
        """A mark of the log as it stands, for :meth:`since`."""
        return self, self._base + len(self._ids)

    def since(self, mark) -> list[int] | None:
        """The job ids logged since ``mark`` (oldest first, repeats possible), or None if the log cannot tell."""
        if mark is None or mark[0] is not self or mark[1] < self._base:
            return None
        return self._ids[mark[1] - self._base:]


class _Untracked(RunningChanges):
    """No log (a running table that is not a :class:`RunningJobs`: a view built by hand, a freed view's)."""

    def log(self, job_id: int) -> None:  # pragma: no cover - nothing logs to it
        raise TypeError("an untracked running table has no log")

    def mark(self):
        return None

    def since(self, mark) -> None:
        return None


#: the changes of a running table without a log: "cannot tell" at every call
UNTRACKED = _Untracked()


class RunningJobs(dict):
    """A mechanism's running jobs by id, in the order they started, logging every start and stop
    (:attr:`changes`, a :class:`RunningChanges`) for the views it builds (:attr:`ClusterView.changes`).

    Every mechanism keeps its running jobs in one (the simulator, the testbed, the Slurm advisor): a job is set
    when it starts and deleted when it stops. Lookups and iteration are a dict's own; the mutators that would
    change several jobs at once are refused (each change is logged one job at a time)."""

    __slots__ = ("changes",)

    def __init__(self):
        super().__init__()
        self.changes = RunningChanges()

    def __setitem__(self, job_id, js) -> None:
        dict.__setitem__(self, job_id, js)
        self.changes.log(job_id)

    def __delitem__(self, job_id) -> None:
        dict.__delitem__(self, job_id)
        self.changes.log(job_id)

    def pop(self, job_id, *default):
        had = job_id in self
        out = dict.pop(self, job_id, *default)
        if had:
            self.changes.log(job_id)
        return out

    def __reduce__(self):
        """Copied or pickled: the jobs and the log (a dict subclass would be rebuilt through ``__setitem__``
        before its log exists)."""
        return _running_jobs, (dict(self), self.changes)

    def _refused(self, *args, **kwargs):
        raise TypeError("RunningJobs: set or delete one job at a time (each change is logged)")

    popitem = clear = update = setdefault = __ior__ = _refused


def _running_jobs(jobs: dict, changes: RunningChanges) -> RunningJobs:
    """A :class:`RunningJobs` of ``jobs`` with the log ``changes`` (what :meth:`RunningJobs.__reduce__` gives)."""
    out = RunningJobs()
    for job_id, js in jobs.items():
        dict.__setitem__(out, job_id, js)
    out.changes = changes
    return out


class ClusterView:
    """What a policy may look at. Arrays are shared: treat them as read-only.

    ``network`` is the network model in force (a :class:`~netlab.network.model.NetworkModel`; default: a
    fresh ``DEFAULT_NETWORK`` model). Policies ask it what it is (``view.network.capabilities``: whether a
    phase takes effect, whether there is contention at all) and predict speeds with ``view.network.fresh()``,
    never with its name. ``link_load_gbps``: an array, or a snapshot of the loads (``array()`` gives them when a
    policy first asks; :class:`~netlab.network.links.LoadSnapshot`). ``changes``: which jobs started and
    stopped, for a policy that keeps state across calls (:class:`RunningChanges`): the running table's log when
    it is a :class:`RunningJobs` (every mechanism's is), else :data:`UNTRACKED`, which answers "cannot tell"
    (the policy compares the running set).
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
        self.changes: RunningChanges = running.changes if isinstance(running, RunningJobs) else UNTRACKED
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
