"""Network models: from the running jobs' flows to their iteration times, and what each model is.

A job's iteration time is compute plus communication, less the overlapped
part (documented rule, one place)::

    iter = compute + comm - overlap * min(compute, comm)

``overlap`` is 0 (strict compute-then-communicate, CASSINI's on/off picture)
to 1 (communication fully hidden behind compute when it is shorter).
Communication is ``flow_bytes / rate`` over the network plus any serial
intra-host phase.

Models (registry ``NETWORKS``; each one module): ``tcp`` (the default),
``fair``, ``phase`` and ``ideal``. Link accounting is time-averaged over the
iteration: ``load`` is the mean Gbit/s a link carries, ``overload`` the mean
demand above capacity: for each job bottlenecked on the link, the rate it
would have alone minus the rate it gets, while it communicates. Integrated
over time this is the ECN-mark proxy.

What a model is, the simulator and the policies learn from its
:class:`Capabilities`, never from its name. Every model answers two ways:

* **batch**: :meth:`NetworkModel.solve` of a list of demands (policies that
  score candidate placements, testbed predictions, tests);
* **incremental**: the simulator's fabric tells it that jobs :meth:`join`,
  :meth:`leave` or :meth:`change`, then asks it to :meth:`resolve` what those
  touched; it returns the jobs whose times moved and writes link loads into
  the fabric's :class:`~netlab.network.links.LinkState`. The base class does
  this by re-solving every running job through :meth:`solve` (right for any
  model, cheap for small ones); a model that can do better (``fair``, ``tcp``)
  overrides the five methods.

**Per-job network allocation** (issue 27): a running job's share of the
network, a :class:`netlab.sched.allocation.NetAllocation` (``priority`` 0-7,
0 served first; ``weight`` > 0, its share inside its class; ``rate_cap_gbps``,
a ceiling per flow, or None; ``paths``, the equal-cost path index per flow, or
None for the fabric's ECMP). The network package does not import it (it sits
below ``netlab.sched``): a model reads those four fields and ``kinds()``.
It reaches a model three ways, all through :class:`CommDemand.allocation`
(None: the default, which changes nothing, bit for bit):

* batch: each demand passed to :meth:`NetworkModel.solve` carries its own;
* incremental: the demand a job joins with (:meth:`join`) carries it, and
  :meth:`change` ``(job_id, now_s, allocation=...)`` replaces it while the job
  runs; :meth:`resolve` then re-solves what that touched;
* paths: a path index changes which links a flow loads, so it is applied
  where the demand is built (``build_demand(..., paths=...)``); a new path
  choice for a running job is a new demand, passed to
  :meth:`netlab.sim.fabric.Fabric.reallocate` (the job leaves and joins again).

What a model honours it declares in ``Capabilities.allocations`` (kinds of
:data:`ALLOCATION_KINDS`); :meth:`NetworkModel.check_allocation` refuses the
rest with :class:`UnsupportedAllocation`, naming the model, the job and the
kind, before anything changes. A model without contention (``ideal``) ignores
allocations: every job runs at its isolated speed whatever its share. The
semantics every contended model follows: a class is served strictly before
the classes below it, each class getting what the higher ones leave (the
models that average over time, ``fair`` and ``tcp``'s mean field, leave the
lower classes the capacity minus the higher classes' time-averaged load: a
higher class communicates only part of each iteration); inside a class the
shares follow the weights (2:1 weights give 2/3 and 1/3 of a link both
saturate); a cap bounds each flow's rate, as a narrower path would.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np

from ..registry import Registry
from .links import LinkState

NETWORKS: Registry["NetworkModel"] = Registry("network model")
#: the model a simulation uses unless told otherwise: ``tcp``, the one that matches the testbed under contention
#: (benchmarks/results/fidelity.json: contended jobs 2.6% median error against 30% for ``fair``); ``fair``
#: (max-min, about 1.6-1.8x faster on full Philly), ``phase`` and ``ideal`` remain as bounds
DEFAULT_NETWORK = "tcp"
#: the kinds of per-job network allocation a model may honour (``Capabilities.allocations``): priority class
#: (0-7), share weight, rate cap (Gbit/s), path choice
ALLOCATION_KINDS = ("priority", "weight", "rate_cap", "path")

GBIT = 1e9


def iteration_time(compute_s: float, comm_s: float, overlap: float) -> float:
    return compute_s + comm_s - overlap * min(compute_s, comm_s)


@dataclass
class CommDemand:
    """The network demand of one running multi-host job."""

    job_id: int
    links: np.ndarray  # directed link ids
    weights: np.ndarray  # flows of this job on each link (fractional under split ECMP)
    flow_bytes: float  # bytes per flow per iteration
    compute_s: float
    serial_intra_s: float = 0.0
    overlap: float = 0.0
    rate_cap_gbps: float = math.inf
    iso_rate_gbps: float = math.inf  # per-flow rate alone on this placement
    iso_iter_s: float = 0.0  # iteration time on the ideal network
    phase: float = 0.0  # offset of the iteration start, as a fraction of the period
    #: the job's network allocation (a ``NetAllocation``: ``priority``, ``weight``, ``rate_cap_gbps``, ``paths``;
    #: see the module doc); None: the default (class 0, weight 1, no cap, ECMP)
    allocation: object | None = None
    steps: int = 1  # the all-reduce's sequential steps over the network, each flow_bytes / steps (ring: 2(n - 1))
    #: per flow of the job, (its link ids, the share of the flow on each): for a term that reads single flows' paths
    #: (``dctcp``'s beat-down, :mod:`netlab.network.tcp.beatdown`), which ``links``' sums lose; None: not known
    flow_paths: tuple | None = field(default=None, repr=False, compare=False)

    @property
    def priority(self) -> int:
        """Its class, 0 (served first) to 7."""
        return 0 if self.allocation is None else int(self.allocation.priority)

    @property
    def own_queue(self) -> bool:
        """True if its allocation gives it a queue of its own (``NetAllocation.queue_of_its_own``: the testbed's
        per-job HTB class, or a per-job weight), so the shared-FIFO effects between jobs (``tcp``'s leader
        advantage) do not reach it; a job with a class or a path only shares its class's queue."""
        return self.allocation is not None and bool(self.allocation.queue_of_its_own)

    @property
    def share(self) -> float:
        """Its weight inside its class."""
        return 1.0 if self.allocation is None else float(self.allocation.weight)

    @property
    def allocation_cap_gbps(self) -> float:
        """The allocation's per-flow cap (inf: none)."""
        cap = None if self.allocation is None else self.allocation.rate_cap_gbps
        return math.inf if cap is None else float(cap)

    @property
    def flow_cap_gbps(self) -> float:
        """The per-flow cap in force: the pattern's and the allocation's, the smaller."""
        return min(self.rate_cap_gbps, self.allocation_cap_gbps)

    def net_s(self, rate_gbps: float) -> float:
        return self.flow_bytes * 8 / (rate_gbps * GBIT) if self.flow_bytes else 0.0

    def iter_s(self, rate_gbps: float) -> float:
        return iteration_time(self.compute_s, self.net_s(rate_gbps) + self.serial_intra_s, self.overlap)

    @property
    def alone_rate_gbps(self) -> float:
        """Its per-flow rate alone: the isolated rate, at most the pattern's cap and the allocation's."""
        return min(self.iso_rate_gbps, self.flow_cap_gbps)


@dataclass
class NetSolution:
    iter_s: dict[int, float]
    comm_s: dict[int, float]
    links: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    load_gbps: np.ndarray = field(default_factory=lambda: np.zeros(0))  # time-averaged
    overload_gbps: np.ndarray = field(default_factory=lambda: np.zeros(0))  # time-averaged
    rate_gbps: dict[int, float] = field(default_factory=dict)  # per-flow rate while communicating (fair)
    rate_load_gbps: np.ndarray | None = None  # sum of flow rates per link while all communicate (fair)
    queue_frac: np.ndarray | None = None  # per link: share of time queued above the ECN threshold (tcp)
    #: per job: its time came from a solve blind to the jobs' phases (``Moved.phase_blind``); None: not said
    phase_blind: dict[int, bool] | None = None


class Moved(NamedTuple):
    """The jobs whose times a re-solve moved, as parallel lists (one object per re-solve, not per job).

    ``phase_blind`` says whether each moved job's new time came from a solve that ignores the jobs' phases
    (a random-phase mean field, a time-averaged sharing rule): a list parallel to ``job_id``, or one bool for
    all of them; None: the model's capabilities answer (a model that does not use phase is blind to it). The
    simulator reports the share of job-time run at such times (``phase_blind_*_share``).
    """

    job_id: list
    iter_s: list
    comm_s: list
    phase_blind: list | bool | None = None


@dataclass(frozen=True)
class Capabilities:
    """What a network model is: the questions the simulator and the policies ask instead of its name."""

    #: False: a non-blocking network, every job at its isolated speed; the simulator sends it no flows
    contention: bool = True
    #: a job's phase (``Placement.phase``, ``shifts``) changes its speed, so policies may set one
    uses_phase: bool = False
    #: the model moves jobs' phases itself as they interact (:meth:`NetworkModel.phase_now` answers)
    moves_phase: bool = False
    #: a change re-solves only the jobs it reaches (else every running job, through ``solve``)
    incremental: bool = False
    #: the per-job allocation kinds (of :data:`ALLOCATION_KINDS`) the model honours; the others it refuses
    #: (:meth:`NetworkModel.check_allocation`). Ignored without ``contention``.
    allocations: frozenset = frozenset()
    #: a re-routed job's flows move in place (:meth:`NetworkModel.relink`), else they leave and join again
    relinks: bool = False


class UnsupportedAllocation(ValueError):
    """A per-job network allocation the model cannot honour."""


class NetworkModel:
    """A network model: see the module doc. Subclasses set ``name``, ``capabilities`` and :meth:`solve`."""

    name = "base"
    capabilities = Capabilities()

    # ---------------------------------------------------------------- batch
    def solve(self, demands: list[CommDemand], capacity_gbps: np.ndarray) -> NetSolution:  # pragma: no cover
        raise NotImplementedError

    def forget(self, job_id: int) -> None:
        """A job left the network (models that keep per-job state drop it)."""

    def phase_now(self, job_id: int) -> float | None:
        """Where the job's iterations start now, as a fraction of its period (``phase x period + k x
        period``), for models that move it as jobs interact; None: the phase a policy set still holds."""
        return None

    def fresh(self) -> NetworkModel:
        """A model of the same kind and parameters with no jobs: what a policy predicts speeds with, leaving
        the simulation's own model untouched."""
        return type(self)()

    def check_allocation(self, allocation, job_id: int | None = None) -> None:
        """Refuse, with one clear error naming the model, the job and the kind, a per-job allocation (a
        ``NetAllocation``, or an iterable of kinds) the model cannot honour. A model without contention
        ignores allocations: nothing to refuse."""
        if allocation is None:
            return
        kinds = set(allocation.kinds() if hasattr(allocation, "kinds") else allocation)
        unknown = kinds - set(ALLOCATION_KINDS)
        if unknown:
            raise UnsupportedAllocation(f"network allocation kind(s) {sorted(unknown)} unknown; "
                                        f"known: {', '.join(ALLOCATION_KINDS)}")
        if not self.capabilities.contention:
            return
        missing = kinds - self.capabilities.allocations
        if missing:
            have = ", ".join(sorted(self.capabilities.allocations)) or "none"
            job = "" if job_id is None else f" (job {job_id})"
            raise UnsupportedAllocation(f"network model {self.name!r} cannot honour a per-job "
                                        f"{', '.join(sorted(missing))} allocation{job}; it honours: {have}")

    # ---------------------------------------------------------- incremental
    # The generic way: keep the running demands, re-solve them all through ``solve`` after any change.
    pending = False  # a change waits for resolve()

    def attach(self, links: LinkState) -> None:
        """Start incremental use on the fabric's links, with no job."""
        self._links = links
        self._demands: dict[int, CommDemand] = {}
        self._iter_s: dict[int, float] = {}  # last time reported per job
        self._new: set[int] = set()
        self._touched = np.zeros(len(links.capacity_gbps), dtype=bool)
        self.pending = False

    def _await_resolve(self, demand: CommDemand, new_job: int | None = None) -> None:
        """A change waits for :meth:`resolve`: the demand's links are touched (and a joining job is new)."""
        self._touched[demand.links] = True
        if new_job is not None:
            self._new.add(new_job)
        self.pending = True

    def join(self, job_id: int, demand: CommDemand, now_s: float) -> float | None:
        """A job's flows join (the fabric has counted them on ``links.jobs``), with ``demand.allocation``. Its
        per-flow rate if known at once (nobody else moves), else None: :meth:`resolve` gives its time."""
        self.check_allocation(demand.allocation, job_id)
        self._demands[job_id] = demand
        self._await_resolve(demand, job_id)
        return None

    def leave(self, job_id: int, now_s: float) -> None:
        """A job's flows leave (already uncounted on ``links.jobs``)."""
        demand = self._demands.pop(job_id)
        self._iter_s.pop(job_id, None)
        self._new.discard(job_id)
        self.forget(job_id)
        self._await_resolve(demand)

    def relink(self, job_id: int, demand: CommDemand, now_s: float) -> float | None:  # pragma: no cover
        """A running job's flows moved to ``demand``'s links (a new path choice: the job's demand built again;
        the fabric has moved its count on ``links.jobs``), in place: the result :meth:`leave` and :meth:`join`
        give, as :meth:`join` answers. Only a model whose ``capabilities.relinks`` says so has one."""
        raise NotImplementedError

    def change_allocations(self, changes, now_s: float) -> None:
        """:meth:`change` with ``allocation`` of each ``(job id, allocation)`` in ``changes``, in order (one call
        for a policy's decision: a model may take them at once, as ``tcp`` does)."""
        for job_id, allocation in changes:
            self.change(job_id, now_s, allocation=allocation)

    def change(self, job_id: int, now_s: float, *, phase: float | None = None, allocation=None) -> None:
        """Something about a running job changed: ``phase`` (a policy's shift), ``allocation`` (its new
        ``NetAllocation``; refused by :meth:`check_allocation` if not honoured, before anything changes; its
        ``paths`` must be those the demand was built with: a new path choice is a new demand, see the module
        doc). None: that part did not change."""
        if allocation is not None:
            demand = self._demands[job_id]
            self.check_allocation(allocation, job_id)
            _same_paths(demand, allocation, job_id)
            moved = _treatment(demand.allocation) != _treatment(allocation)
            demand.allocation = allocation
            if moved:
                self._await_resolve(demand)
        if phase is not None and self.capabilities.uses_phase:
            demand = self._demands[job_id]
            demand.phase = phase
            self._await_resolve(demand)

    def resolve(self, now_s: float) -> Moved:
        """Solve what the changes touched; the jobs whose times moved (and every joined one). Writes the
        touched links' load, overload (and queue) into the fabric's links."""
        self.pending = False
        links = self._links
        ids = list(self._demands)
        sol = self.solve([self._demands[j] for j in ids], links.capacity_gbps)
        blind = sol.phase_blind
        moved = Moved([], [], [], None if blind is None else [])
        for jid in ids:
            it = sol.iter_s[jid]
            if jid in self._new or abs(it - self._iter_s[jid]) > 1e-12 * max(it, 1.0):
                moved.job_id.append(jid)
                moved.iter_s.append(it)
                moved.comm_s.append(sol.comm_s[jid])
                if blind is not None:
                    moved.phase_blind.append(blind[jid])
                self._iter_s[jid] = it
        touched = self._touched | (links.jobs > 0)
        links.write()
        links.load_gbps[touched] = links.overload_gbps[touched] = 0.0
        links.load_gbps[sol.links] = sol.load_gbps
        links.overload_gbps[sol.links] = sol.overload_gbps
        if sol.queue_frac is not None:
            links.queue_frac[touched] = 0.0
            links.queue_frac[sol.links] = sol.queue_frac
        self._new.clear()
        self._touched[:] = False
        return moved


class GenericIncremental(NetworkModel):
    """The generic incremental interface (every running job re-solved through ``solve`` at each change) over
    ``model``, whatever ``model`` itself overrides: how the fabric drives a model whose ``capabilities`` say it is
    not incremental. Why a wrapper: a model may keep an incremental interface of its own that a parameter turns off
    (``tcp``'s transports with ``beatdown_beta``), and the generic state must not mix with its own. The state is
    the wrapper's; the model gives its ``solve``, ``forget``, name and capabilities."""

    def __init__(self, model: NetworkModel):
        self.model, self.name, self.capabilities = model, model.name, model.capabilities

    def solve(self, demands, capacity_gbps):
        return self.model.solve(demands, capacity_gbps)

    def forget(self, job_id: int) -> None:
        self.model.forget(job_id)


def _treatment(allocation) -> tuple:
    """What of an allocation a solve reads once the paths are in the demand: (class, weight, cap)."""
    if allocation is None:
        return 0, 1.0, None
    return int(allocation.priority), float(allocation.weight), allocation.rate_cap_gbps


def _same_paths(demand: CommDemand, allocation, job_id: int) -> None:
    """A change of allocation may not change the paths: the demand's links were routed with the old ones."""
    old = None if demand.allocation is None else demand.allocation.paths
    if allocation.paths != old:
        raise UnsupportedAllocation(f"job {job_id}: a new path choice ({allocation.paths!r}, was {old!r}) is a new "
                                    "demand (build_demand(..., paths=...)), passed to Fabric.reallocate; "
                                    "change() takes class, weight and cap only")


class LiveNetwork(NetworkModel):
    """The network of a live backend (the emulated testbed, a Slurm cluster): measured, not solved here.

    It declares what the backend does with a job's phase (the testbed starts each job at its phase), and
    policies that predict speeds get ``stand_in`` (a ``NETWORKS`` name) from :meth:`fresh`.
    """

    def __init__(self, name: str, capabilities: Capabilities = Capabilities(), stand_in: str = "fair"):
        self.name, self.capabilities, self.stand_in = name, capabilities, stand_in

    def fresh(self) -> NetworkModel:
        return NETWORKS.create(self.stand_in)

    def solve(self, demands, capacity_gbps):
        raise TypeError(f"network {self.name!r} is a live backend: it is measured, not solved")


def make_network(model: NetworkModel | None = None, name: str | None = None, kwargs: dict | None = None
                 ) -> NetworkModel:
    """The model a run uses. A model object wins: ``name``, if also given, must be its name, and ``kwargs``
    must be empty (they would be ignored). Otherwise ``NETWORKS.create(name or DEFAULT_NETWORK, **kwargs)``."""
    if model is None:
        return NETWORKS.create(name or DEFAULT_NETWORK, **(kwargs or {}))
    if not isinstance(model, NetworkModel):
        raise TypeError(f"network: expected a NetworkModel, got {type(model).__name__}")
    if name is not None and name != model.name:
        raise ValueError(f"network: the model passed is {model.name!r} but the config names {name!r}; "
                         "give one of them (or the same name)")
    if kwargs:
        raise ValueError(f"network: network_kwargs {sorted(kwargs)} given with a model object; "
                         "build the model with them instead")
    return model


def capabilities_of(name) -> Capabilities | None:
    """The capabilities of the registered model ``name``; None for other names (a live backend's, missing)."""
    if not isinstance(name, str) or name not in NETWORKS:
        return None
    return getattr(NETWORKS.get(name), "capabilities", None)


def is_ideal(name) -> bool:
    """True for the name of a registered model without contention: the bound results are compared with."""
    caps = capabilities_of(name)
    return caps is not None and not caps.contention


def ideal_networks() -> list[str]:
    """The registered models without contention, by name: the bounds, for tables of results
    (``summary[summary.network.isin(ideal_networks())]``)."""
    return [n for n in NETWORKS.names() if is_ideal(n)]


def incidence(demands: list[CommDemand]):
    """Stack the demands into local (job, link, weight) arrays over the links they use, and those links."""
    sizes = [len(d.links) for d in demands]
    job = np.repeat(np.arange(len(demands)), sizes)
    all_links = np.concatenate([d.links for d in demands]) if demands else np.zeros(0, dtype=np.int64)
    weight = np.concatenate([d.weights for d in demands]) if demands else np.zeros(0)
    links, local = np.unique(all_links, return_inverse=True)
    return job, local, weight, links
