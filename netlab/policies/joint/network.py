"""``joint`` network policy: per-job weights from the joint program's speeds (see :mod:`.program`).

The program gives each job on a link the jobs could overload a speed ``z_j`` (a fraction of its speed alone).
Weighted max-min sharing (what every contended model and the testbed's HTB ``quantum`` do) gives backlogged
flows rates in proportion to their weights, so a job's weight is the per-flow rate it needs *while it sends*
to iterate at that speed: ``w_j = flow Gbit / (t_iso_j / z_j - compute_j)`` (its iteration stretched to
``t_iso_j / z_j``, the stretch all spent communicating), scaled so the largest is 1. Jobs on no such link
keep the default allocation. Weights, not caps: a cap would waste what a job leaves idle while it computes.
"""

from __future__ import annotations

from ...sched import NetAllocation
from ..base import NETWORK_POLICIES, NetworkPolicy
from .program import MIN_SPEED, job_of, solve

GBIT = 1e9
#: a job's weight changes only when the program's new weight differs from it by more than this fraction
#: (stated, not tuned: a re-solve for a few per cent of share is not worth its cost)
WEIGHT_MARGIN = 0.05


@NETWORK_POLICIES.register("joint")
class JointNetwork(NetworkPolicy):
    """Weights from the joint program's speeds (the most GPU work the links let the running jobs do)."""

    name = "joint"
    traffic_only = True

    def __init__(self, min_speed: float = MIN_SPEED):
        if not 0 < min_speed <= 1:
            raise ValueError(f"joint: min_speed must be in (0, 1], got {min_speed!r}")
        self.min_speed = min_speed
        self.reset(None)

    def reset(self, rng) -> None:
        """A new run: forget the last run's programs, jobs and decision."""
        self.rng = rng
        self._programs: dict = {}  # the bandwidth programs solved so far (program.solve's memo)
        self._jobs: dict = {}  # job id -> (its demand, its JointJob)
        self._last: tuple = ((), {})  # (the (job id, demand) pairs decided on, the decision)

    def allocate(self, view):
        """Solved again only when the running jobs with traffic or their demands changed (a pass that starts
        or stops one-host jobs changes neither); a job keeps its weight while the new one is within
        :data:`WEIGHT_MARGIN` of it (each change costs the network model a re-solve)."""
        now = [(jid, js.demand) for jid, js in view.running.items()
               if js.demand is not None and js.demand.flow_bytes]
        seen, last = self._last
        if len(seen) == len(now) and all(a[0] == b[0] and a[1] is b[1] for a, b in zip(seen, now)):
            return dict(last)
        for gone in self._jobs.keys() - {jid for jid, _ in now}:
            del self._jobs[gone]
        jobs, demands = [], {}
        for jid, d in now:
            hit = self._jobs.get(jid)
            if hit is None or hit[0] is not d:
                hit = self._jobs[jid] = (d, job_of(jid, view.running[jid].gpus, d))
            jobs.append(hit[1])
            demands[jid] = d
        shares = solve(jobs, view.topology.link_capacity_gbps, self.min_speed, self._programs)
        need = {}
        for jj in jobs:
            if jj.job_id not in shares.constrained:
                continue
            d = demands[jj.job_id]
            send_s = max(jj.iso_iter_s / shares.speed[jj.job_id] - d.compute_s, 1e-12)
            need[jj.job_id] = d.flow_bytes * 8 / GBIT / send_s
        out = {}
        if need:
            top = max(need.values())
            for jid, w in need.items():
                w, old = float(w / top), last.get(jid)
                if old is not None and abs(w - old.weight) <= WEIGHT_MARGIN * old.weight:
                    out[jid] = old  # within the margin of its weight: unchanged
                else:
                    out[jid] = NetAllocation(weight=w)
        self._last = (now, out)
        return dict(out)
