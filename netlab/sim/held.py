"""Running multi-host jobs' progress held in arrays, so that a network re-solve writes it back in one compiled call.

Why: a re-solve moves the iteration times of tens of jobs (full Philly under ``fair``: 39,181 re-solves moving
1,754,791 jobs' times). Each moved job's progress must be brought up to the re-solve at its old speed and its
completion time recomputed at the new one (``Simulator.advance`` then ``_schedule_completion``); written out in
Python that was ~1 us a moved job, about a tenth of a full-Philly run. Here the fields that write-back touches
live in one array per field, indexed by the job's row in the run, and :func:`advance_moved` updates all moved
jobs at once, with the same floating-point operations in the same order as the Python did (bit for bit).

A held job's fields are not in its :class:`~netlab.sched.JobState` while they are here: :meth:`HeldProgress.hold`
removes them from the object (its slots left unset) and ``JobState.__getattr__`` hands any read of one of them
to :meth:`HeldProgress.release`, which puts every held field back into the object first. So every reader (a
policy, the result tables, the simulator's own Python paths) sees exactly the values it saw when the object held
them, and the arrays are authoritative only between two re-solves in which nobody looked. Writers in the
simulator read before they write (``advance`` does), so a write never meets a held job.
"""

from __future__ import annotations

import numpy as np

from ..jit import njit  # numba is imported at the first kernel call

#: the fields held (taken out of the job while held), in the arrays' row order
HELD = ("remaining", "iter_s", "comm_s", "last_update_s", "attained_gpu_s", "run_s", "progress_s", "comm_time_s",
        "phase_blind_s", "phase_blind", "version")
_REM, _IT, _CS, _LU, _ATT, _RUN, _PROG, _CT, _PBS, _PB = range(10)  # float rows (phase_blind as 0.0 / 1.0)
_PF, _GPUS = 10, 11  # copies the write-back reads, left in the job too (fixed while it runs)
_N_FLOAT = 12


@njit(cache=True)
def advance_moved(f, version, rows, iter_s, comm_s, blind, now, out_t):  # pragma: no cover  (compiled)
    """For each held row of ``rows`` (in order): progress up to ``now`` at its old speed
    (``Simulator.advance``), then the new (iteration s, communication s, phase-blind) and its completion time
    at the new speed into ``out_t`` (``Simulator._schedule_completion``), the version bumped: the Python
    operations, in their order."""
    for i in range(rows.shape[0]):
        r = rows[i]
        last, start = f[_LU, r], f[_PF, r]
        held = now - last
        f[_ATT, r] += f[_GPUS, r] * held
        dt = now - (start if start > last else last)
        f[_RUN, r] += held
        old = f[_IT, r]
        if dt > 0 and old > 0:
            f[_REM, r] -= dt / old
            f[_PROG, r] += dt
            f[_CT, r] += dt * (f[_CS, r] / old)
            if f[_PB, r] != 0.0:
                f[_PBS, r] += dt
        f[_LU, r] = now
        f[_IT, r], f[_CS, r], f[_PB, r] = iter_s[i], comm_s[i], blind[i]
        version[r] += 1
        remaining = f[_REM, r]
        out_t[i] = (start if start > now else now) + (0.0 if 0.0 > remaining else remaining) * iter_s[i]


class HeldProgress:
    """The held fields of ``n`` jobs (rows 0..n-1; a job's row is ``JobState.row``), and which rows are held."""

    __slots__ = ("f", "version", "held")

    def __init__(self, n: int):
        self.f = np.zeros((_N_FLOAT, n))
        self.version = np.zeros(n, dtype=np.int64)
        self.held = np.zeros(n, dtype=np.bool_)

    def hold(self, js) -> None:
        """Take ``js``'s held fields into the arrays (it must be running, with its fields in the object)."""
        r = js.row
        self.f[:, r] = (js.remaining, js.iter_s, js.comm_s, js.last_update_s, js.attained_gpu_s, js.run_s,
                        js.progress_s, js.comm_time_s, js.phase_blind_s, 1.0 if js.phase_blind else 0.0,
                        js.progress_from_s, js.gpus)
        self.version[r] = js.version
        del (js.remaining, js.iter_s, js.comm_s, js.last_update_s, js.attained_gpu_s, js.run_s, js.progress_s,
             js.comm_time_s, js.phase_blind_s, js.phase_blind, js.version)
        js.held_by = self
        self.held[r] = True

    def release(self, js) -> None:
        """Put ``js``'s held fields back into the object (exact: float64 to float and back is the identity)."""
        r = js.row
        (js.remaining, js.iter_s, js.comm_s, js.last_update_s, js.attained_gpu_s, js.run_s, js.progress_s,
         js.comm_time_s, js.phase_blind_s, blind) = self.f[:_PF, r].tolist()
        js.phase_blind = blind != 0.0
        js.version = int(self.version[r])
        js.held_by = None
        self.held[r] = False

    def release_all(self, states) -> None:
        """Release every held job of ``states`` (the end of a run: the result tables read the objects)."""
        for js in states:
            if js.held_by is self:
                self.release(js)
