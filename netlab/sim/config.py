"""How a simulation runs, beside its inputs (topology, jobs) and its policies: :class:`SimConfig`.

A pydantic model (:class:`netlab.errors.Schema`), so a bad field is refused
where the configuration is built, by the command line, a sweep cell or a
notebook alike: one :class:`~netlab.errors.InputError` naming the field, the
value and what is allowed (:class:`~netlab.errors.UnknownNameError` for a
network model or link history that is not registered).

The field types here (:data:`Network`, :data:`Seed`, :data:`Seconds`, ...) are
the one definition of each field's rule; the parameters of one simulation
from names (:class:`netlab.run.RunParams`) and of a sweep cell
(:class:`netlab.sweep.grid.CellParams`) use the same ones.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import AfterValidator, BeforeValidator, Field, StrictBool

from ..errors import Float, Int, Schema, not_bool, registered
from ..workload.checkpoint import LAUNCH_S, STORAGE_GBPS, CheckpointCost


def _networks():
    from ..network import NETWORKS

    return NETWORKS


def _regimes():
    from ..network.regimes import REGIMES

    return REGIMES


def _histories():
    from .history import HISTORIES

    return HISTORIES


def _positive_or_inf(value: float) -> float:
    if not (value > 0):
        raise ValueError("must be > 0")
    return value


#: a registered network model (``netlab policies`` lists them)
Network = registered(_networks)
#: a registered network model, or None: the model passed to the simulator as ``network=``, else the default
NetworkOrModel = registered(_networks, nullable=True)
#: a registered transport regime (netlab.network.regimes), or None: the network is named directly
Regime = registered(_regimes, nullable=True)
#: a seed for every random stream of a run (numpy's SeedSequence entropy)
Seed = Int(ge=0, le=2**63 - 1, what="an integer >= 0")
#: a finite duration in seconds
Seconds = Float(ge=0, what="a finite number of seconds >= 0")
#: a fixed restart cost for every job, or None: each job's own from its model's size
RestartSeconds = Annotated[Seconds | None, Field(description="seconds >= 0, or null: from the model's size")]
#: the bandwidth a job's checkpoints get to and from storage (Gbit/s)
StorageRate = Float(gt=0, what="a finite number of Gbit/s > 0")
#: walk past a waiting job that cannot start? None: the ordering policy's own rule
Backfill = Annotated[StrictBool | None, Field(description="true, false, or null for the ordering policy's own rule")]
#: a registered per-link history mode (None: "full", or "none" when record_links is false)
LinkHistory = registered(_histories, nullable=True)
#: the bin width of the "aggregate" history: > 0 seconds, or infinity for one bin
Resolution = Annotated[float, BeforeValidator(not_bool),
                       Field(description="a number of seconds > 0, or inf for one bin"),
                       AfterValidator(_positive_or_inf)]


class SimConfig(Schema):
    """The simulator's settings (every field checked when set)."""

    # A NETWORKS name; None: the model passed to the Simulator as ``network=``, else DEFAULT_NETWORK. A model
    # object wins; naming another model beside it is an error (netlab.network.model.make_network).
    network: NetworkOrModel = None
    seed: Seed = 0
    # What a stopped job pays when it starts again (preemption, migration): by default each job's own, from its
    # model's size (netlab.workload.checkpoint: state bytes over storage_gbps, plus launch_s at the restore).
    # checkpoint_s / restore_s, when given, replace the formula by fixed seconds for every job.
    checkpoint_s: RestartSeconds = None
    restore_s: RestartSeconds = None
    storage_gbps: StorageRate = STORAGE_GBPS
    launch_s: Seconds = LAUNCH_S
    # Walk past a waiting job that cannot start (no reservations)? None: the ordering policy's own
    # choice (OrderingPolicy.backfill: False for strict fifo, True for fjf and the others).
    backfill: Backfill = None
    record_links: StrictBool = True  # False: link_history "none" (kept for existing callers)
    # Per-link history (netlab.sim.history): "full" (every interval; default), "aggregate" (per-link time-weighted
    # load per link_resolution_s bin) or "none". None: "full" if record_links else "none".
    link_history: LinkHistory = None
    link_resolution_s: Resolution = 3600.0
    progress: StrictBool | None = False  # tqdm bar over finished jobs (None: auto)
    network_kwargs: dict[str, Any] = Field(default_factory=dict)

    def restart_s(self, model) -> float:
        """Seconds a restarted job of ``model`` (a zoo ``JobModel``) holds its GPUs without progress: its checkpoint
        written at the stop, then its restore (``checkpoint_s`` / ``restore_s`` if given, else the formula)."""
        cost = CheckpointCost(self.storage_gbps, self.launch_s)
        checkpoint = cost.checkpoint_s(model) if self.checkpoint_s is None else self.checkpoint_s
        restore = cost.restore_s(model) if self.restore_s is None else self.restore_s
        return checkpoint + restore

    @property
    def history_mode(self) -> str:
        """The link history in force: ``link_history``, else "full" or "none" by ``record_links``."""
        return self.link_history or ("full" if self.record_links else "none")

