"""``joint`` network policy: per-job weights from the joint program's speeds (see :mod:`.program`).

The program gives each job on a link the jobs could overload a speed ``z_j`` (a fraction of its speed alone).
Weighted max-min sharing (what every contended model and the testbed's HTB ``quantum`` do) gives backlogged
flows rates in proportion to their weights, so a job's weight is the per-flow rate it needs *while it sends*
to iterate at that speed: ``w_j = flow Gbit / (t_iso_j / z_j - compute_j)`` (its iteration stretched to
``t_iso_j / z_j``, the stretch all spent communicating), scaled so the largest of its program (the jobs the
binding links connect: the only ones whose weights meet) is 1. Jobs on no such link keep the default
allocation. Weights, not caps: a cap would waste what a job leaves idle while it computes.

**When**: every running job is decided afresh at most once per ``redecide_s`` (:data:`REDECIDE_S`), at the first
change of the running jobs after it (as ``crux``). In between, the jobs decided keep their weights, jobs that end
change nothing for the others, and a job that starts runs on the default allocation (weight 1, the share every
job has without a policy) until the next decision: nothing is solved between decisions. Why: on Philly's first
20k jobs the calls between decisions that solved a started job's program again were 3,465 of 8,659 calls and
60% of the policy's time, and each moved the weights of the jobs that program connects, which costs the network
model a re-solve each (64,706 weight changes a run); a start already changes the shares the network model
computes, and the program's answer for it would hold only until the next decision anyway, at most
``redecide_s`` later. Chosen on those 20k jobs (tiresias, consolidated, ``tcp``): 1,938 programs solved a run
instead of 5,329, 29,622 weight changes instead of 64,706, average JCT 74,919 s instead of 75,885 s (92,432 s
without a policy). Not taken: a longer period (900 s: 1,196 programs, but 75,725 s) and a wider
:data:`WEIGHT_MARGIN` (0.2: still 28,021 weight changes; the changes are not small ones). ``fit_starts=True``
keeps the earlier rule (a program that holds a started job is solved again at once, the jobs it connects get new
weights) for comparison. A program whose jobs (and their demands) are those of a program solved before is not
solved again. ``redecide_s=0`` decides everything at every change.
"""

from __future__ import annotations

import numpy as np

from ...sched import NetAllocation
from ..base import NETWORK_POLICIES, NetworkPolicy
from .program import MEMO_PROGRAMS, MIN_SPEED, job_of, solve_program
from .shares import LinkShares

GBIT = 1e9
#: a job's weight changes only when the program's new weight differs from it by more than this fraction
#: (stated, not tuned: a re-solve for a few per cent of share is not worth its cost)
WEIGHT_MARGIN = 0.05
#: the running jobs are decided afresh at most once per this many seconds (0: at every change; stated, not tuned:
#: crux's period, five minutes, short beside the hours a trace's multi-host jobs run)
REDECIDE_S = 300.0


@NETWORK_POLICIES.register("joint")
class JointNetwork(NetworkPolicy):
    """Weights from the joint program's speeds (the most GPU work the links let the running jobs do)."""

    name = "joint"
    traffic_only = True

    def __init__(self, min_speed: float = MIN_SPEED, redecide_s: float = REDECIDE_S, fit_starts: bool = False):
        if not 0 < min_speed <= 1:
            raise ValueError(f"joint: min_speed must be in (0, 1], got {min_speed!r}")
        if not (isinstance(redecide_s, (int, float)) and 0 <= redecide_s < np.inf):
            raise ValueError(f"joint: redecide_s must be a number of seconds >= 0, got {redecide_s!r}")
        self.min_speed, self.redecide_s = min_speed, float(redecide_s)
        self.fit_starts = bool(fit_starts)
        self.reset(None)

    def reset(self, rng) -> None:
        """A new run: forget the last run's programs, jobs and decision."""
        self.rng = rng
        self._programs: dict = {}  # the bandwidth programs solved so far (program.solve's memo)
        self._jobs: dict = {}  # job id -> (its demand, its JointJob)
        self._weights: dict = {}  # a program's job ids -> (its JointJobs, their weights) as last solved
        self._last: dict = {}  # the last decision
        self._decided_s = -np.inf  # when the running jobs were last decided afresh
        self._shares = None  # the jobs' shares of every link (LinkShares), made at the first call
        self._traffic: dict = {}  # the running jobs with traffic, in the running order: job id -> its demand
        self._mark = None  # where this policy last read the view's log of starts and stops (ClusterView.changes)

    def _running_traffic(self, view):
        """Bring ``self._traffic`` up to the view's running jobs with traffic (their order and demands). Returns
        None if it did not change, else the ids that may have changed (None inside a list: any may have). Read
        from the view's log of starts and stops since the last call (``ClusterView.changes``: one or two jobs,
        where a pass runs hundreds: a scan of every running job at every call cost about 4% of a full-Philly
        run), or, where the log cannot tell, from every running job. A job the log names is taken out and, if it
        runs with traffic, put back last (each at its last entry, in their order): a start puts a job last in
        the running order, and a started job's demand is a new object; so the table is the one a scan of the
        running order would build."""
        log, running, traffic = view.changes, view.running, self._traffic
        ids = log.since(self._mark)
        self._mark = log.mark()
        if ids is None:  # cannot tell: every running job (the order and demands compared as a scan finds them)
            now = {jid: js.demand for jid, js in running.items() if js.demand is not None and js.demand.flow_bytes}
            changed = len(now) != len(traffic) or any(a != b or d is not e for (a, d), (b, e) in
                                                      zip(now.items(), traffic.items()))
            self._traffic = now
            return [None] if changed else None
        if len(ids) > 1:  # each id once, at its last entry
            ids = list(dict.fromkeys(reversed(ids)))[::-1]
        changed = False
        for jid in ids:
            if traffic.pop(jid, None) is not None:
                changed = True
            js = running.get(jid)
            if js is not None and js.demand is not None and js.demand.flow_bytes:
                traffic[jid] = js.demand
                changed = True
        return ids if changed else None

    def allocate(self, view):
        """Asked again only when the running jobs with traffic or their demands changed (a pass that starts
        or stops one-host jobs changes neither); what is solved then is in the module doc. A job keeps its
        weight while the new one is within :data:`WEIGHT_MARGIN` of it (each change costs the network model a
        re-solve)."""
        last = self._last
        touched = self._running_traffic(view)
        if touched is None:
            return dict(last)
        now = self._traffic.items()
        fresh = view.now >= self._decided_s + self.redecide_s
        if not fresh and not self.fit_starts:  # between decisions: the jobs decided (on the same demand) keep theirs
            known = self._jobs  # brought up to date at the next decision, not here: nothing reads it before
            if None in touched:
                out = {jid: last[jid] for jid, d in now if jid in last and known[jid][0] is d}
            else:  # the same jobs (in another order, which nothing reads: every one keeps the allocation it has)
                out = dict(last)
                traffic = self._traffic
                for jid in touched:
                    if jid in out and traffic.get(jid) is not known[jid][0]:
                        del out[jid]
            self._last = out
            return dict(out)
        if self._shares is None:
            self._shares = LinkShares(view.topology.link_capacity_gbps)
        for gone in self._jobs.keys() - {jid for jid, _ in now}:
            del self._jobs[gone]
            self._shares.remove(gone)
        jobs, started = [], set()
        for jid, d in now:
            hit = self._jobs.get(jid)
            if hit is None or hit[0] is not d:
                hit = self._jobs[jid] = (d, job_of(jid, view.running[jid].gpus, d))
                self._shares.add(hit[1])
                started.add(jid)
            jobs.append(hit[1])
        if not fresh and not started:  # jobs only ended: the others keep theirs
            out = {jid: last[jid] for jid, _ in now if jid in last}
            self._last = out
            return dict(out)
        if fresh:
            self._decided_s = view.now
        out = {} if fresh else {jid: last[jid] for jid, _ in now if jid in last and jid not in started}
        solved = {}
        for prog in self._shares.programs(jobs):  # programs(jobs, capacities), kept as jobs come and go
            members = [jobs[i] for i in prog.members]
            if not fresh and not started.intersection(m.job_id for m in members):
                continue  # fitted in: a program without a started job keeps its weights
            key = tuple(m.job_id for m in members)
            hit = self._weights.get(key)
            if hit is None or any(a is not b for a, b in zip(hit[0], members)):
                hit = (members, self._program_weights(prog, members))
            solved[key] = hit
            for jid, w in hit[1].items():
                old = last.get(jid)
                keep = old is not None and abs(w - old.weight) <= WEIGHT_MARGIN * old.weight
                out[jid] = old if keep else NetAllocation(weight=w)
        # what the next calls may reuse: this period's programs (a fresh decision starts again from its own)
        self._weights = solved if fresh or len(self._weights) > MEMO_PROGRAMS else {**self._weights, **solved}
        self._last = out
        return dict(out)

    def _program_weights(self, prog, members) -> dict[int, float]:
        """Each member's weight from the program's speeds, the largest 1 (the module doc)."""
        z = solve_program(prog, self.min_speed, self._programs)
        need = {}
        for jj, speed in zip(members, z):
            compute_s = self._jobs[jj.job_id][0].compute_s
            send_s = max(jj.iso_iter_s / float(speed) - compute_s, 1e-12)
            need[jj.job_id] = self._jobs[jj.job_id][0].flow_bytes * 8 / GBIT / send_s
        top = max(need.values())
        return {jid: float(w / top) for jid, w in need.items()}
