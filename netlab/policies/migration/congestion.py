"""``migrate``: move a running job whose measured slowdown stays high to a placement predicted to be faster.

Why: a placement is chosen once, with what runs at that moment; jobs that
arrive later can pile onto the same oversubscribed links. Preemption can
only stop a job and restart it wherever the ordering policy next puts it;
this policy moves a congested job on purpose, and only when the move pays.

Rule, checked every ``period_s`` seconds while jobs run:

1. a running job is *congested* while its measured slowdown (its current
   iteration time over its isolated one, ``iter_s / iso_iter_s``) is at least
   ``threshold``; a job that has been congested at every check for at least
   ``hold_s`` seconds (on its current placement) is a candidate;
2. for a candidate, the best placement on the GPUs free once it releases its
   own is found and scored by the ``oracle`` placement policy (the network
   model in force, solved with the running jobs that share links with the
   candidate placement): its predicted slowdown;
3. it moves if the predicted slowdown is lower than the measured one by at
   least ``margin``, and the time saved on its remaining iterations,
   ``remaining x (iter_s - predicted iteration)``, exceeds what the move costs
   it (``view.restart_s``: its checkpoint and restore, from its model's size);
4. at most one job moves per check, the one that saves the most time (ties:
   the smaller job id): a move changes every other job's prediction, so the
   next check decides on the new state.

The move itself (stopping the job, its checkpoint and restore, its new
placement) is the mechanism's (:meth:`netlab.sched.Mechanism.migrate`).
"""

from __future__ import annotations

import numpy as np

from ..base import MIGRATION, MigrationPolicy
from ..placement.predictive import Oracle


@MIGRATION.register("migrate")
class CongestionMigration(MigrationPolicy):
    """Move a job congested for ``hold_s`` to a placement predicted faster by ``margin`` (see the module doc)."""

    name = "migrate"

    def __init__(self, threshold: float = 1.2, hold_s: float = 300.0, margin: float = 0.1, period_s: float = 60.0,
                 n_candidates: int = 8):
        if not threshold >= 1.0 or not hold_s >= 0 or not margin >= 0 or not period_s > 0 or n_candidates < 1:
            raise ValueError(f"migrate: need threshold >= 1, hold_s >= 0, margin >= 0, period_s > 0 and "
                             f"n_candidates >= 1; got threshold={threshold}, hold_s={hold_s}, margin={margin}, "
                             f"period_s={period_s}, n_candidates={n_candidates}")
        self.threshold, self.hold_s, self.margin, self.period_s = threshold, hold_s, margin, period_s
        self.n_candidates = n_candidates
        self._oracle = Oracle(n_candidates=n_candidates)
        self._since: dict[int, float] = {}
        self.reset(np.random.default_rng(0))

    def reset(self, rng: np.random.Generator) -> None:
        self.rng = rng
        self._oracle.reset(np.random.default_rng(int(rng.integers(2**63))))
        self._since = {}

    def _candidates(self, view) -> list:
        """Running jobs congested at every check for ``hold_s`` on their current placement."""
        now, out = view.now, []
        for jid in list(self._since):
            if jid not in view.running:
                del self._since[jid]
        for jid, js in view.running.items():
            if js.progress_from_s > now or js.iso_iter_s <= 0 or js.iter_s / js.iso_iter_s < self.threshold:
                self._since.pop(jid, None)
                continue
            since = self._since.get(jid)
            if since is None or since < js.last_start_s:  # congested from this check on (on this placement)
                since = self._since[jid] = now
            if now - since >= self.hold_s:
                out.append(js)
        return out

    def migrations(self, view) -> dict:
        best = None
        for js in self._candidates(view):
            freed = view.with_freed([js])
            placement = self._oracle.place(js, freed)
            if placement is None or (placement.hosts, placement.gpus) == (js.placement.hosts, js.placement.gpus):
                continue
            predicted = float(self._oracle.score(js, [placement], freed)[0])
            measured = js.iter_s / js.iso_iter_s
            if predicted > measured - self.margin:
                continue
            saved_s = js.remaining * (js.iter_s - predicted * js.iso_iter_s)
            if saved_s <= view.restart_s(js):
                continue
            if best is None or (saved_s, -js.job_id) > best[0]:
                best = ((saved_s, -js.job_id), js.job_id, placement)
        if best is None:
            return {}
        self._since.pop(best[1], None)
        return {best[1]: best[2]}
