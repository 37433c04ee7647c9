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


@NETWORK_POLICIES.register("joint")
class JointNetwork(NetworkPolicy):
    """Weights from the joint program's speeds (the most GPU work the links let the running jobs do)."""

    name = "joint"

    def __init__(self, min_speed: float = MIN_SPEED):
        if not 0 < min_speed <= 1:
            raise ValueError(f"joint: min_speed must be in (0, 1], got {min_speed!r}")
        self.min_speed = min_speed

    def allocate(self, view):
        jobs, demands = [], {}
        for jid, js in view.running.items():
            jj = job_of(jid, js.gpus, js.demand)
            if jj is not None:
                jobs.append(jj)
                demands[jid] = js.demand
        shares = solve(jobs, view.topology.link_capacity_gbps, self.min_speed)
        need = {}
        for jj in jobs:
            if jj.job_id not in shares.constrained:
                continue
            d = demands[jj.job_id]
            send_s = max(jj.iso_iter_s / shares.speed[jj.job_id] - d.compute_s, 1e-12)
            need[jj.job_id] = d.flow_bytes * 8 / GBIT / send_s
        if not need:
            return {}
        top = max(need.values())
        return {jid: NetAllocation(weight=float(w / top)) for jid, w in need.items()}
