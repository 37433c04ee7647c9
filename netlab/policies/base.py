"""The five narrow policy interfaces (ordering, placement, preemption, network, migration) the simulator and testbed
share.

Policy is kept apart from mechanism: a policy reads a
:class:`~netlab.sched.ClusterView` (free GPUs per host, running jobs, link
loads, the clock) and returns a decision. It never advances time, starts or
stops anything itself; the simulator (or the live testbed) carries decisions
out. The view and the decision types live in :mod:`netlab.sched`, below both
sides, so this layer never imports the simulator.

* :class:`OrderingPolicy`: who goes first. ``key(job, now)`` sorts jobs
  (smaller first); ``backfill`` says whether a job that cannot start blocks
  the jobs behind it (False: strict order, head-of-line blocking, as strict
  ``fifo``) or is walked past (True: ``fjf`` and most others);
  ``preemptive`` lets a better waiting job displace worse running ones;
  ``next_key_change`` tells when a running job's key changes (e.g. a
  Tiresias demotion) so the scheduler can look again then; ``round_s`` asks
  for a full re-evaluation every so often (Themis leases).
* :class:`PlacementPolicy`: where a job goes. ``place(job, view)`` returns a
  :class:`~netlab.sched.Placement` or None (not now: wait).
* :class:`PreemptionPolicy`: which running jobs to displace for a waiting
  one, given the candidates worst-first.
* :class:`NetworkPolicy`: how much of the network each running job gets.
  ``allocate(view)`` returns a :class:`~netlab.sched.NetAllocation` per
  running job (priority class, weight, rate cap, paths); the scheduling pass
  asks after every pass that started or stopped a job, and every
  ``period_s`` while jobs run if the policy asks for it.
* :class:`MigrationPolicy`: which running jobs to move, and where.
  ``migrations(view)`` returns a new :class:`~netlab.sched.Placement` per job
  to move; the scheduling pass asks every ``period_s`` while jobs run and the
  mechanism stops the job and starts it on the new placement, paying its
  checkpoint and restore (a mechanism that cannot move a job refuses).

Policies that need randomness get a seeded ``numpy.random.Generator`` through
``reset(rng)`` at the start of every run.
"""

from __future__ import annotations

from typing import Iterable

import numpy as np

from ..registry import Registry
from ..sched import ClusterView, JobState, NetAllocation, Placement

ORDERING: Registry["OrderingPolicy"] = Registry("ordering policy")
PLACEMENT: Registry["PlacementPolicy"] = Registry("placement policy")
PREEMPTION: Registry["PreemptionPolicy"] = Registry("preemption policy")
NETWORK_POLICIES: Registry["NetworkPolicy"] = Registry("network policy")
MIGRATION: Registry["MigrationPolicy"] = Registry("migration policy")


class Policy:
    name = "base"

    def reset(self, rng: np.random.Generator) -> None:
        """Called once per run with the policy's own random stream."""
        self.rng = rng

    def describe(self) -> dict:
        """Parameters, for config.json."""
        return {"name": self.name, **{k: v for k, v in vars(self).items()
                                      if not k.startswith("_") and k != "rng" and isinstance(v, (int, float, str, bool, list, tuple, type(None)))}}


class OrderingPolicy(Policy):
    # A scheduling pass walks the waiting jobs in key order. backfill=True: a job that cannot start
    # (too few GPUs, or the placement declined) is skipped and later ones may start (no reservations).
    # backfill=False: the pass stops there; nothing behind it starts first. SimConfig.backfill overrides.
    backfill: bool = True
    preemptive: bool = False
    preempt_on_events: bool = True  # False: preempt only at round boundaries (leases)
    round_s: float | None = None
    dynamic_keys: bool = False  # keys drift continuously: recompute them on every pass
    # A policy may bring its own placement/preemption (e.g. a full scheduler).
    default_placement: str | None = None
    default_preemption: str | None = None

    def key(self, job: JobState, now: float) -> tuple:  # pragma: no cover
        raise NotImplementedError

    def next_key_change(self, job: JobState, now: float) -> float | None:
        return None


class PlacementPolicy(Policy):
    def place(self, job: JobState, view: ClusterView) -> Placement | None:  # pragma: no cover
        raise NotImplementedError

    def retry_at(self, job: JobState, view: ClusterView) -> float | None:
        """After ``place`` declined ``job`` (returned None): when to look again even if
        nothing else happens (e.g. a delay-scheduling timer). None: at the next event."""
        return None


class PreemptionPolicy(Policy):
    def victims(self, job: JobState, candidates: Iterable[JobState], view: ClusterView) -> list[JobState]:
        """Running jobs to displace so ``job`` can start; [] for none.

        ``candidates`` is a lazy iterator over the running jobs ranked below
        ``job``, worst first: consume only as many as needed.
        """
        return []


class NetworkPolicy(Policy):
    """Per-job network allocations for the running jobs (the fourth decision).

    ``allocate`` returns the allocation of every running job it wants
    treated other than by default; a running job it leaves out gets the
    default (class 0, weight 1, no cap, the fabric's ECMP). The mechanism
    carries the decisions out, or refuses one its network cannot honour.
    """

    #: ask again every ``period_s`` seconds while jobs run (None: only after passes that start or stop jobs)
    period_s: float | None = None
    #: False: the policy never allocates anything, so the pass need not ask it (results as without one)
    allocates: bool = True
    #: True: the decision reads only the running jobs with network traffic, so a pass that started or stopped
    #: only one-host jobs (no traffic) need not ask it (their default allocation stands)
    traffic_only: bool = False

    def allocate(self, view: ClusterView) -> dict[int, NetAllocation]:  # pragma: no cover
        raise NotImplementedError


class MigrationPolicy(Policy):
    """Re-placement of running jobs (the fifth decision).

    ``migrations`` returns, for each running job to move, its new placement
    (GPUs free once the job has released its own; the pass checks it). It
    reads the view only: measured speeds (``JobState.iter_s`` over
    ``iso_iter_s``), the network model for predictions, and
    ``view.restart_s(job)``, what a move costs that job.
    """

    #: ask every ``period_s`` seconds while jobs run
    period_s: float = 60.0
    #: False: the policy never moves anything, so the pass need not ask it (results as without one)
    migrates: bool = True

    def migrations(self, view: ClusterView) -> dict[int, Placement]:  # pragma: no cover
        raise NotImplementedError
