"""The tails the incremental re-solve adds after a solve (:mod:`~.rto`, :mod:`~.ratecut`, :mod:`~.slowest`), found
again for every job whose tail inputs changed, not only for the jobs whose solved time moved.

Why: each tail reads the job's own solved time and the state of its links: which of them bind (every job on the
link at its isolated rate at once would exceed the capacity) and, on those, the flows sending at once (each job's
flows times its share of the iteration as solved, :func:`~.rto.offered_and_active`). A job's solved time can stay
(within ``REPORT_RTOL``, :func:`~.incremental.write_back`) while those move: a job alone at its join runs with no
tail, and when another job's join makes its link bind, the solve may give it the same time (the two take turns),
yet it now has a binding link and a rate cut there. Adding the tails only to the jobs whose solved time moved left
such a job without its tail for as long as its time did not move (a two-job case 1.9% short, tests/test_tails.py;
one-solve ``dctcp`` on Philly's first 20,000 jobs 3.4% short on average JCT). The batch solve finds every job's
tails at every solve, so the two ways differed beyond the solve itself.

Which jobs: those with a link whose tail inputs changed since its jobs' tails were last found (kept per link:
whether it bound then and its flows sending at once then; a link that binds neither then nor now changed nothing a
tail reads), and the jobs whose solved time moved (their own time is an input). Every such job is among the rows of
the component the re-solve walked: a link's binding state and its flows sending at once change only by a join,
leave, re-route or class change on it, and a change that touches a link that binds before or after it waits for
the re-solve with its links among the seeds, whose rows the walk takes (and, through binding links, every row
joined to them), while a moved job's links are its own row's. A job whose tail moves its reported time by more
than ``rtol`` (as a solve must move it, :func:`~.incremental.write_back`) is reported with the jobs that moved;
its reported time is kept, so small moves add up until they pass ``rtol``.
"""

from __future__ import annotations

import numpy as np

from .ratecut import demands_cut_s
from .rto import demands_tail_s, solved_share
from .slowest import demands_slowest_s


def has_tails(p) -> bool:
    """Whether a model with parameters ``p`` (:class:`~.params.TcpParams`) adds a tail after its solves."""
    return p.rto_k > 0.0 or p.cut_k > 0.0 or p.slow_k > 0.0


def alone_share(d) -> float:
    """A :class:`~netlab.network.model.CommDemand`'s share of its iteration communicating when it runs alone (its
    communication as a solve gives it, the serial intra-host part included: :func:`~.rto.solved_share`)."""
    rate = d.alone_rate_gbps
    return solved_share(d.iter_s(rate), d.net_s(rate) + d.serial_intra_s)


class TailBook:
    """What the model's incremental ``resolve`` needs to find the tails again where their inputs changed (module doc):
    per link, whether it bound and its flows sending at once when its jobs' tails were last found; per job, its
    solved (iteration s, communication s), before the tails, and the iteration s last reported."""

    def __init__(self, n_links: int):
        self.binding = np.zeros(n_links, dtype=bool)
        self.active = np.zeros(n_links)
        self.solved: dict[int, tuple[float, float]] = {}
        self.reported: dict[int, float] = {}
        self._mark = np.zeros(n_links, dtype=bool)  # scratch: the links that changed (all False between calls)

    def alone(self, job_id: int, d, rate: float) -> None:
        """Job ``job_id`` (demand ``d``) runs alone at ``rate`` per flow: no binding link, no tail."""
        it = d.iter_s(rate)
        self.solved[job_id] = (it, d.net_s(rate) + d.serial_intra_s)
        self.reported[job_id] = it

    def drop(self, job_id: int) -> None:
        """The job left."""
        self.solved.pop(job_id, None)
        self.reported.pop(job_id, None)

    def changed_rows(self, t, rows: np.ndarray, seeds: np.ndarray, offered: np.ndarray, active: np.ndarray,
                     capacity: np.ndarray) -> np.ndarray:
        """Per row of ``rows`` (of the row table ``t``), whether a link of it changed binding state, or binds and
        changed its flows sending at once, since the last call that read it; every link of the rows and ``seeds``
        (the links the changes touched, some perhaps with no row left) is read now."""
        width = t.links.shape[1]
        valid = np.arange(width)[None, :] < t.n_links[rows][:, None]
        sub = np.where(valid, t.links[rows], 0)
        ids = np.unique(np.concatenate([sub[valid], seeds]))
        bind = offered[ids] > capacity[ids] * (1 + 1e-9)  # (rto.py's, ratecut.py's and slowest.py's test)
        moved = ids[(bind != self.binding[ids]) | (bind & (active[ids] != self.active[ids]))]
        self.binding[ids], self.active[ids] = bind, active[ids]
        self._mark[moved] = True
        out = (self._mark[sub] & valid).any(axis=1)
        self._mark[moved] = False
        return out

    def refresh(self, t, rows, seeds, ids, it, comm, demands: dict, share: dict, offered, active, capacity, p,
                stretched, rtol: float) -> tuple[list, list, list]:
        """The re-solve's answer with the tails: (job ids, iteration s, comm s) of the jobs whose solved time moved
        (``ids``, ``it``, ``comm``: arrays, before the tails) and of the other jobs of ``rows`` whose reported time
        the tails move by more than ``rtol``. The moved jobs' shares go into ``share`` and, by difference, the
        flows sending at once (``active``, per link); ``offered`` decides which links bind; ``demands``: per job
        id its demand; ``p``: the model's parameters; ``stretched``: the model's ``_stretched``."""
        ids, it, comm = ids.tolist(), it.tolist(), comm.tolist()
        for j, t_s, c_s in zip(ids, it, comm):  # the moved jobs' shares as now solved, then every changed job's tails
            d = demands[j]
            new = solved_share(t_s, c_s)
            active[d.links] += d.weights * (new - share[j])
            share[j] = new
            self.solved[j] = (t_s, c_s)
        n_moved = len(ids)
        if len(rows):
            moved = set(ids)
            ids = ids + [j for j in t.job_id[rows[self.changed_rows(t, rows, seeds, offered, active, capacity)]]
                         .tolist() if j not in moved]
        else:
            self.changed_rows(t, rows, seeds, offered, active, capacity)
        it = it + [self.solved[j][0] for j in ids[n_moved:]]
        comm = comm + [self.solved[j][1] for j in ids[n_moved:]]
        tailed = [demands[j] for j in ids]
        tails = demands_tail_s(tailed, capacity, offered, active, p) if p.rto_k > 0.0 else [0.0] * len(tailed)
        net = [max(c - d.serial_intra_s, 0.0) for d, c in zip(tailed, comm)]
        if p.cut_k > 0.0:
            tails = [a + b for a, b in zip(tails, demands_cut_s(tailed, capacity, offered, active, net, p))]
        if p.slow_k > 0.0:
            tails = [a + b for a, b in zip(tails, demands_slowest_s(tailed, capacity, offered, net, p))]
        it, comm = stretched(tailed, it, comm, tails)
        out_ids, out_it, out_comm = [], [], []
        for n, j in enumerate(ids):
            if n < n_moved or not abs(it[n] - self.reported[j]) <= rtol * it[n]:
                self.reported[j] = it[n]
                out_ids.append(j)
                out_it.append(it[n])
                out_comm.append(comm[n])
        return out_ids, out_it, out_comm
