"""What a scheduling pass needs from the thing that carries its decisions out.

The pass (:class:`~netlab.sched.scheduler.Scheduler`) decides; a mechanism
acts. Three mechanisms implement this interface: the simulator (simulated
time), the live testbed (wall time, ranks started by agents) and the Slurm
advisor (``sbatch``). The pass asks the mechanism what it can do rather than
knowing which one it talks to: a mechanism that cannot preempt (a killed rank
on the testbed loses its state; the advisor submits, it does not requeue)
says so with :attr:`Mechanism.can_preempt`, and one that cannot move a
running job with :attr:`Mechanism.can_migrate`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Callable

import numpy as np

from .allocation import NetAllocation
from .decision import Placement, PolicyError
from .state import ClusterView, JobState


class Mechanism:
    """The interface a scheduling pass drives.

    ``free_gpus`` (per host) and ``free_total`` are the mechanism's own count
    of idle GPUs and ``running`` its running jobs; :meth:`start` and
    :meth:`preempt` keep them current, and the pass reads them between
    decisions.
    """

    free_gpus: np.ndarray
    free_total: int
    running: Mapping[int, JobState]  # running jobs by id, in the order they started
    #: whether :meth:`preempt` can be carried out at all (the pass never asks otherwise)
    can_preempt: bool = False
    #: whether :meth:`migrate` can be carried out (a migration policy that moves jobs is refused otherwise)
    can_migrate: bool = False

    def view(self, now: float) -> ClusterView:  # pragma: no cover - every mechanism builds its own
        """What the policies may look at, at ``now``."""
        raise NotImplementedError

    def start(self, job: JobState, placement: Placement, now: float) -> None:  # pragma: no cover
        """Run ``job`` on ``placement`` (already checked against the free GPUs), including its ``shifts``.

        Sets the job running and claims its GPUs (``free_gpus``, ``free_total``).
        """
        raise NotImplementedError

    def preempt(self, job: JobState, now: float) -> None:
        """Stop running ``job`` and return its GPUs; it waits again (only called if :attr:`can_preempt`)."""
        raise PolicyError(f"{type(self).__name__} cannot preempt job {job.job_id}")

    def migrate(self, job: JobState, placement: Placement, now: float) -> None:
        """Move running ``job`` to ``placement`` (checked against the GPUs free once it releases its own): it
        stops, pays its checkpoint and restore, and runs on. Only called if :attr:`can_migrate`."""
        raise PolicyError(f"{type(self).__name__} cannot migrate job {job.job_id}")

    def allocate(self, allocations: Mapping[int, NetAllocation], now: float) -> None:
        """Give running jobs (by id) their network allocations (the scheduler hands over the policy's decisions
        that change a job's allocation, those for jobs started at this instant, and the jobs it left out that go
        back to the default; the others keep theirs).

        A mechanism that cannot enforce an allocation refuses it, naming itself, the job and the kind. This
        one enforces none (its network is not shaped per job).
        """
        for jid, alloc in allocations.items():
            if alloc.kinds():
                raise PolicyError(f"{type(self).__name__} cannot enforce a per-job network allocation: job {jid} "
                                  f"asks for {', '.join(sorted(alloc.kinds()))} ({alloc})")
            self.running[jid].allocation = alloc

    def advance(self, job: JobState, now: float) -> None:
        """Bring a running job's accounting (attained service, progress) up to ``now``, before its key is read."""

    def wake_at(self, t: float, fn: Callable[..., bool], *args) -> None:  # pragma: no cover
        """At time ``t`` call ``fn(t, *args)``; if it returns True, run a scheduling pass at that instant
        (after every event of the instant)."""
        raise NotImplementedError


def check_placement(policy_name: str, job: JobState, p: Placement, free_gpus: np.ndarray) -> None:
    """Refuse a placement that does not give ``job`` exactly its GPUs on distinct hosts that have them free.

    The :class:`PolicyError` names the placement policy: the policy is wrong, not the mechanism.
    """
    hosts, gpus = p.hosts, p.gpus
    if len(hosts) == 1 and len(gpus) == 1:  # most starts: one host, checked without building a set
        h, g = hosts[0], gpus[0]
        if g == job.gpus and 0 <= h < len(free_gpus) and 0 < g <= free_gpus[h]:
            return  # otherwise the checks below name what is wrong
    if p.n_gpus != job.gpus or len(p.hosts) != len(p.gpus) or len(set(p.hosts)) != len(p.hosts):
        raise PolicyError(f"{policy_name}: placement {p} for job {job.job_id} does not give exactly "
                          f"{job.gpus} GPUs on distinct hosts")
    n_hosts = len(free_gpus)
    for h, g in zip(p.hosts, p.gpus):
        if not 0 <= h < n_hosts:
            raise PolicyError(f"{policy_name}: placement {p} for job {job.job_id} names host {h}, "
                              f"the cluster has hosts 0..{n_hosts - 1}")
        if g <= 0 or free_gpus[h] < g:
            raise PolicyError(f"{policy_name}: placement {p} for job {job.job_id} asks {g} GPUs on host "
                              f"{h}, which has {int(free_gpus[h])} free")
