"""The referee's retransmission timeouts against the Reno analysis' count, per job, by packets per ring step.

Why: shallow Reno's timeout tail (:mod:`netlab.network.tcp.rto`) counts, per ring step, ``sum over a job's flows'
binding links of flows x packets per step x p(w) x Q(w)`` timeouts, scaled by ``rto_k``. Its scale was fitted where a
ring step is 4-40 packets, and a 100 Gbit/s job has thousands: whether the count per packet holds, falls (steps too
short to lose, or at most one stall per step) or rises with the step's length decides what the tail does at real
rates. Each job's row has the analysis' count at ``rto_k`` 1 per step (``per_step_k1``: the flows counted at their
job's share of the iteration as the given model solves it, as the tail does) beside the referee's measured count, so
``measured / (iterations x steps x per_step_k1)`` is the scale the referee implies (``k_eff``) at that step length.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from .compare import contended_jobs
from .predict import demand
from .runs import record_job_loss
from .scenario import RefereeScenario

#: packets per ring step bins the summary reads ``k_eff`` in
STEP_BINS = (0, 8, 16, 32, 64, 128, 256, 512, 1024, 4096)


def job_rows(sc: RefereeScenario, rec: dict, network: str = "tcp-shallow", **kwargs) -> pd.DataFrame:
    """Per job of ``sc`` with the referee's record ``rec``: its steps, packets per step (``segment_bytes``
    packets), iterations run, measured timeouts and the analysis' count per step at ``rto_k`` 1 (module doc);
    ``kwargs`` go to ``network`` (e.g. ``rtt_us`` where the scenario's round trip is not the default's)."""
    loss = record_job_loss(rec)
    if loss is None:
        return pd.DataFrame()
    rows = count_rows(sc, network, **kwargs)
    rows["iterations"] = [int(rec["iterations_run"][str(j)]) for j in rows.job_id]
    rows["rtos"] = [int(loss[j]["rtos"]) for j in rows.job_id]
    rows["drops"] = [int(loss[j]["drops"]) for j in rows.job_id]
    return rows[["scenario", "job_id", "contended", "steps", "packets_per_step", "iterations", "rtos", "drops",
                 "per_step_k1"]]


def count_rows(sc: RefereeScenario, network: str = "tcp-shallow", **kwargs) -> pd.DataFrame:
    """Per job of ``sc``: its steps, packets per ring step and the analysis' timeout count per step at ``rto_k`` 1
    (module doc), with no measured record: what another reference's counts (the testbed's real Linux) are set
    beside."""
    from ..network.model import NETWORKS
    from ..network.tcp.rto import link_timeouts_per_packet, offered_and_active, solved_share

    net = NETWORKS.create(network, **{**kwargs, "rto_k": 0.0})
    ds = [demand(sc, j) for j in sc.jobs]
    cap = sc.topology.link_capacity_gbps
    sol = net.solve(ds, cap)
    shares = [solved_share(sol.iter_s[d.job_id], sol.comm_s[d.job_id]) for d in ds]
    offered, active = offered_and_active(ds, len(cap), shares)
    p = net.params._replace(rto_k=1.0)
    per_packet = link_timeouts_per_packet(cap, active, offered > cap * (1 + 1e-9), p)
    cont = contended_jobs(sc)
    rows = []
    for j, d in zip(sc.jobs, ds):
        packets = d.flow_bytes / p.segment_bytes / max(d.steps, 1)
        rows.append(dict(scenario=sc.name, job_id=j.job_id, contended=cont[j.job_id], steps=int(d.steps),
                         packets_per_step=float(packets),
                         per_step_k1=float(np.dot(d.weights, per_packet[d.links])) * packets))
    return pd.DataFrame(rows)


def k_eff_by_step(rows: pd.DataFrame, bins=STEP_BINS) -> list[dict]:
    """Per bin of packets per ring step (contended jobs): jobs, measured timeouts, the analysis' count at ``rto_k``
    1 and their ratio ``k_eff`` (the scale the referee implies there), and the most timeouts per step of one job."""
    r = rows[rows.contended].copy()
    r["bin"] = pd.cut(r.packets_per_step, list(bins))
    out = []
    for b, x in r.groupby("bin", observed=True):
        predicted = float((x.iterations * x.steps * x.per_step_k1).sum())
        out.append(dict(packets_per_step=[float(b.left), float(b.right)], jobs=int(len(x)), rtos=int(x.rtos.sum()),
                        predicted_at_k1=predicted, k_eff=float(x.rtos.sum() / predicted) if predicted > 0 else None,
                        most_rtos_per_step=float((x.rtos / (x.iterations * x.steps)).max())))
    return out


def counted(rows: pd.DataFrame, k: float = 1.0, ramp_packets: float = 0.0, bounded: bool = True) -> float:
    """The timeouts ``rows`` (:func:`job_rows`) expect over their runs: per job and step ``lam = k x per_step_k1 x
    n / (n + ramp_packets)`` (n its packets per step; ``ramp_packets`` 0: the analysis' count per packet as it is),
    ``bounded``: ``1 - exp(-lam)`` per step (at most one stall per ring step, :func:`netlab.network.tcp.rto.
    step_stalls`), else ``lam``."""
    n = rows.packets_per_step
    lam = k * rows.per_step_k1 * n / (n + ramp_packets)
    per_step = -np.expm1(-lam) if bounded else lam
    return float((rows.iterations * rows.steps * per_step).sum())


def ramp_packets_for(rows: pd.DataFrame, k: float = 1.0) -> float | None:
    """The ``ramp_packets`` at which ``rows`` expect (:func:`counted`, bounded, scale ``k``) the timeouts they
    measured (bisection; the count falls as it grows), or None if even 0 expects fewer. Why a ramp: a ring step
    starts its flows' transfer anew, so a short step ends before its flows' windows fill the shallow queue and lose,
    while the analysis counts every packet as if in steady congestion avoidance; ``n / (n + ramp)`` is the share of
    a step of n packets that is."""
    measured = float(rows.rtos.sum())
    if counted(rows, k, 0.0) < measured:
        return None
    lo, hi = 0.0, 1.0
    while counted(rows, k, hi) > measured:
        hi *= 2.0
    for _ in range(60):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if counted(rows, k, mid) > measured else (lo, mid)
    return (lo + hi) / 2
