"""The running jobs' shares of every link, kept as jobs start and end, for the ``joint`` network policy.

:func:`.program.programs` builds the links x jobs matrix ``a[e, j]`` (the share of link ``e`` job ``j`` takes at
full speed) from every running job's route at every call: on Philly's first 20k jobs, 5,949 calls over ~67
running jobs each, 13% of the policy's run. Between two calls only a few jobs start or end, so
:class:`LinkShares` keeps the matrix (all of the topology's links x one slot per job) and changes a job's column
when it starts or ends; a call reads the links' loads off it and hands the binding rows to the same
:func:`.program.split`. The programs are the same bits as :func:`.program.programs`' (the loads near the
threshold are summed again in the caller's order, as it sums them).
"""

from __future__ import annotations

import numpy as np

from .program import BINDS, JointJob, Program, binding_rows, split

#: loads within this of :data:`~.program.BINDS` are summed again in the caller's order (a sum in another order
#: differs by rounding, ~1e-16; stated, not tuned: far above it)
RESUM = 1e-12


class LinkShares:
    """``a[e, slot]`` for the jobs added and not removed; :meth:`programs` as :func:`.program.programs`."""

    def __init__(self, capacity_gbps: np.ndarray, slots: int = 64):
        self.cap = np.asarray(capacity_gbps, dtype=float)
        self.a = np.zeros((len(self.cap), slots))
        self.slot: dict[int, int] = {}  # job id -> its column
        self.free = list(range(slots - 1, -1, -1))
        self.util, self.ids = np.zeros(slots), np.zeros(slots, dtype=np.int64)  # each column's G_j and job id

    def add(self, job: JointJob) -> None:
        """``job``'s column (replacing the one of the job with its id, if any)."""
        if job.job_id in self.slot:
            self.remove(job.job_id)
        if not self.free:  # twice the columns
            n = self.a.shape[1]
            self.a = np.concatenate([self.a, np.zeros_like(self.a)], axis=1)
            self.util, self.ids = np.resize(self.util, 2 * n), np.resize(self.ids, 2 * n)
            self.free = list(range(2 * n - 1, n - 1, -1))
        s = self.free.pop()
        np.add.at(self.a[:, s], job.links, job.gbps / self.cap[job.links])  # as programs() sums a job's entries
        self.slot[job.job_id] = s
        self.util[s], self.ids[s] = job.util_alone, job.job_id

    def remove(self, job_id: int) -> None:
        s = self.slot.pop(job_id)
        self.a[:, s] = 0.0
        self.free.append(s)

    def programs(self, jobs: list[JointJob]) -> list[Program]:
        """The programs of ``jobs`` (every one added, and only they): :func:`.program.programs`' answer."""
        if len(jobs) != len(self.slot):
            raise ValueError(f"joint: {len(jobs)} jobs asked, {len(self.slot)} kept")
        if not jobs:
            return []
        cols = np.fromiter(map(self.slot.__getitem__, (j.job_id for j in jobs)), np.int64, len(jobs))
        load = self.a.sum(axis=1)
        near = np.flatnonzero(np.abs(load - BINDS) <= RESUM)
        if len(near):  # programs() sums a link's row over the jobs in the caller's order
            load[near] = self.a[near][:, cols].sum(axis=1)
        rows = binding_rows(load)
        return split(self.a[np.ix_(rows, cols)], self.util[cols], self.ids[cols])
