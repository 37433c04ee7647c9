"""The simulator's side of the network: which running jobs load which links, and the loads' history.

The simulator tells the fabric when a multi-host job joins or leaves, or a
policy shifts its phase; the fabric counts the job on its links and passes
the change on to the network model, which decides what must be re-solved
(:class:`~netlab.network.model.NetworkModel`'s incremental interface). What
stays here is what every model shares:

* the per-link state (:class:`~netlab.network.links.LinkState`): running jobs
  per link and the loads, copied on write so a view handed to a policy never
  changes under its feet;
* the per-link history (:mod:`netlab.sim.history`: all segments, per-link
  loads aggregated at a resolution, or nothing), recorded after every change
  of the loads, which :mod:`netlab.sim.metrics` turns into ``links.parquet``.
  Changes at one instant come in bursts (a completion, the starts of the
  pass it allows, a re-solve): only the loads at the end of an instant hold
  for any time, so the history is handed them once, just before the first
  change at a later instant (or at :meth:`Fabric.close`), with the links
  the writes of that instant named (:meth:`LinkState.take_changed`) for a
  history that reads them: on a 131,072-GPU fabric one record of every
  link reads ~400,000 links, a change reaches a few hundred.
"""

from __future__ import annotations

import numpy as np

from ..network.links import LinkState
from ..network.model import CommDemand, GenericIncremental, Moved, NetworkModel
from .history import FullHistory, LinkHistory, NoHistory


class Fabric:
    def __init__(self, topology, model: NetworkModel, record_links: bool = True, history: LinkHistory | None = None):
        self.topology = topology
        self.model = model
        self.history = history if history is not None else FullHistory() if record_links else NoHistory()
        self.record_links = not isinstance(self.history, NoHistory)
        self.links = LinkState(topology.link_capacity_gbps, track_changes=self.history.reads_changed)
        self.demands: dict[int, CommDemand] = {}
        self._unrecorded: float | None = None  # the loads changed at this instant; the history has not seen them
        # what the changes go to: the model, or the generic interface over it if it says it is not incremental
        self._net = model if model.capabilities.incremental else GenericIncremental(model)
        self._net.attach(self.links)

    # -------------------------------------------------------------- changes
    def join(self, job_id: int, demand: CommDemand, now: float) -> float | None:
        """Add a job's flows; its per-flow rate if known at once, else None (wait for :meth:`solve`)."""
        self._flush(now)
        self.demands[job_id] = demand
        self.links.jobs[demand.links] += 1
        return self._recorded(now, self._net.join, job_id, demand, now)

    def leave(self, job_id: int, now: float) -> bool:
        """Remove a job's flows; False if it had none."""
        demand = self.demands.pop(job_id, None)
        if demand is None:
            return False
        self._flush(now)
        self.links.jobs[demand.links] -= 1
        self._recorded(now, self._net.leave, job_id, now)
        return True

    def _recorded(self, now: float, change, *args):
        """``change(*args)``'s answer; the history records the loads at ``now`` if the change wrote any link."""
        version = self.links.version
        out = change(*args)
        if self.links.version != version:
            self._record(now)
        return out

    def rephase(self, job_id: int, phase: float, now: float) -> None:
        """A policy shifted a running job's phase."""
        self._flush(now)
        self._net.change(job_id, now, phase=phase)

    def reallocate(self, job_id: int, allocation, now: float, demand: CommDemand | None = None) -> float | None:
        """A network policy gave a running job a new ``NetAllocation``. Without ``demand`` the model takes its
        class, weight and cap in place (:meth:`NetworkModel.change`; the paths must be those the job's demand
        was built with); with ``demand`` (the job's demand built again with the new paths: ``build_demand(...,
        allocation=allocation)``) the job's flows leave their old links and join the new ones (in place, as
        :meth:`NetworkModel.relink`, where the model's ``capabilities.relinks`` says it can). Either way the
        model refuses, before anything changes, what it cannot honour; :meth:`solve` then gives the times (with
        ``demand``, the rejoined job's per-flow rate if known at once, as :meth:`join`)."""
        if demand is None:
            self._flush(now)
            self._net.change(job_id, now, allocation=allocation)
            return None
        demand.allocation = allocation
        self._net.check_allocation(allocation, job_id)
        if self._net.capabilities.relinks:  # the model moves the flows in place (as leave + join would)
            old = self.demands.get(job_id)
            if old is None:
                raise KeyError(f"job {job_id} has no flows in the fabric")
            self._flush(now)
            self.demands[job_id] = demand
            self.links.jobs[old.links] -= 1
            self.links.jobs[demand.links] += 1
            return self._recorded(now, self._net.relink, job_id, demand, now)
        if not self.leave(job_id, now):
            raise KeyError(f"job {job_id} has no flows in the fabric")
        return self.join(job_id, demand, now)

    def reallocate_many(self, changes, now: float) -> None:
        """:meth:`reallocate` without a new demand (a new class, weight or cap each) of each ``(job id,
        allocation)`` in ``changes``, in order, handed to the model at once (``NetworkModel.change_allocations``:
        a policy's decision changes tens of jobs' classes or weights)."""
        if changes:
            self._flush(now)
            self._net.change_allocations(changes, now)

    @property
    def dirty(self) -> bool:
        """A change waits for :meth:`solve`."""
        return self._net.pending

    # ---------------------------------------------------------------- solve
    def solve(self, now: float) -> Moved:
        """Re-solve what changed; the jobs whose time moved (job ids, iteration s, communication s)."""
        self._flush(now)
        moved = self._net.resolve(now)
        self._record(now)
        return moved

    # ---------------------------------------------------------------- loads
    @property
    def load_gbps(self) -> np.ndarray:
        """Time-averaged load per directed link (Gbit/s); the array returned never changes afterwards."""
        return self.links.lend_load()

    def load_snapshot(self):
        """The loads of this moment for a reader that may read them later (a policy's view): a
        :class:`~netlab.network.links.LoadSnapshot`, which costs nothing until the loads change and then only
        the entries they change."""
        return self.links.snapshot()

    @property
    def overload_gbps(self) -> np.ndarray:
        """Time-averaged demand above capacity per directed link (the ECN proxy)."""
        return self.links.overload_gbps

    @property
    def queue_frac(self) -> np.ndarray:
        """Share of time each link's queue is above the ECN threshold (models with a queue; else 0)."""
        return self.links.queue_frac

    # -------------------------------------------------------------- history
    def _record(self, now: float) -> None:
        """The loads changed at ``now``: the history gets them when they have held for some time."""
        if self.record_links:
            self._unrecorded = now

    def _flush(self, now: float | None = None) -> None:
        """Hand the history the loads of the last instant they changed at, unless that instant is ``now``
        (more changes may follow there). Called before the loads change; ``None``: in any case."""
        t = self._unrecorded
        if t is not None and (now is None or now > t):
            self._unrecorded = None
            self.history.record(t, self.links.load_gbps, self.links.overload_gbps, self.links.take_changed())

    def close(self, now: float) -> None:
        """End the current segment at ``now`` (and start the next one there)."""
        self._flush()
        self.history.close(now)

    @property
    def segments(self) -> list:
        """The full history's segments (start, end, links, load, overload); empty in the other modes."""
        self._flush()
        return getattr(self.history, "segments", [])
