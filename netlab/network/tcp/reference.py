"""A plain-numpy restatement of the ``tcp`` fluid, for a handful of jobs: the referee of the compiled model.

Written from the rules in the package doc (:mod:`netlab.network.tcp`), not from
the kernels, and without their shortcuts (work arrays, incremental weights,
one pass over links per event): slow, short and easy to check by hand. The
tests hold :func:`~netlab.network.tcp.scenarios.simulate_starts` and
:meth:`~netlab.network.tcp.TcpNetwork.solve` (jitter 0) to it on two- and
three-job cases.

The rules, as implemented here:

* a job repeats: ``pre = (1 - overlap) x compute + intra`` seconds of work,
  then its all-reduce (``gbit`` per flow), then it waits until its iteration
  has lasted ``compute + comm - overlap x min(compute, comm)``, ``comm`` being
  the time since the iteration began less the non-overlapped compute;
* the jobs communicating share each link by weighted max-min (water-filling:
  a common level rises, each job's rate is ``weight x level`` until it reaches
  its cap, its isolated rate, or one of its links fills); weights are
  ``(gbit / largest gbit) ** alpha x (1 + lead x fraction sent)``, taken anew
  whenever a transfer starts or ends;
* the mean period of a solve is taken over the window from the moment every
  job is past ``warmup`` starts to the last start of the job that started
  last (each job's own starts inside it).
"""

from __future__ import annotations

import numpy as np


def water_fill(flows: np.ndarray, cap_link: np.ndarray, cap_job: np.ndarray, weight: np.ndarray,
               active: np.ndarray) -> np.ndarray:
    """Per-flow rates of the ``active`` jobs by weighted max-min (``flows[i, l]``: job i's flows on link l)."""
    n = len(cap_job)
    rate = np.zeros(n)
    free = active.copy()
    while free.any():
        used = flows[~free].T @ rate[~free]  # what frozen jobs take from each link
        pull = flows[free].T @ weight[free]  # how fast free jobs fill each link per unit of level
        with np.errstate(divide="ignore", invalid="ignore"):
            link_level = np.where(pull > 0, (cap_link - used) / pull, np.inf)
        job_level = np.where(free, cap_job / weight, np.inf)
        level = min(link_level.min(), job_level.min())
        if not np.isfinite(level):
            break
        full = link_level <= level * (1 + 1e-12)
        stop = free & ((job_level <= level * (1 + 1e-12)) | ((flows[:, full] > 0).any(axis=1)))
        rate[stop] = np.minimum(weight[stop] * level, cap_job[stop])
        free &= ~stop
    return rate


def run(flows, cap_link, cap_job, gbit, compute_s, intra_s, overlap, start_s=None, elapsed_s=None,
        until_starts: int = 10, alpha: float = 1.0, lead: float = 2.0, max_events: int = 100_000) -> list:
    """Every job's iteration start times until each has ``until_starts`` of them.

    Each job either starts its first iteration at ``start_s[i]`` (idle before), or, with ``elapsed_s``, is
    ``elapsed_s[i]`` seconds into an iteration at time 0 at its alone pace (inside its work, its all-reduce
    with the part not yet sent proportional to the time left, or its wait): where a running job stands when
    the model re-solves it.
    """
    flows, cap_link, cap_job, gbit = (np.asarray(x, dtype=float) for x in (flows, cap_link, cap_job, gbit))
    compute_s, intra_s, overlap = (np.asarray(x, dtype=float) for x in (compute_s, intra_s, overlap))
    n = len(gbit)
    pre = (1 - overlap) * compute_s + intra_s
    phi = (np.maximum(gbit, 1e-300) / gbit.max()) ** alpha
    stage = np.array(["wait"] * n, dtype=object)
    rem, until, began = np.zeros(n), np.zeros(n), np.zeros(n)
    starts = [[] for _ in range(n)]
    if elapsed_s is None:
        until[:] = start_s
    else:
        net = gbit / cap_job
        comm = net + intra_s
        period = compute_s + comm - overlap * np.minimum(compute_s, comm)
        for i, e in enumerate(np.asarray(elapsed_s, dtype=float) % period):
            began[i] = -e
            if e < pre[i]:
                stage[i], rem[i] = "pre", pre[i] - e
            elif e < pre[i] + net[i]:
                stage[i], rem[i] = "comm", gbit[i] * (1 - (e - pre[i]) / net[i])
            else:
                stage[i], until[i] = "wait", period[i] - e
    t, weight, rate = 0.0, phi.copy(), np.zeros(n)
    changed = True
    for _ in range(max_events):
        if min(len(s) for s in starts) >= until_starts:
            break
        if changed:
            sent = np.where(gbit > 0, 1 - rem / np.where(gbit > 0, gbit, 1), 0)
            weight = phi * (1 + lead * np.clip(sent, 0, None) * (stage == "comm"))
            rate = water_fill(flows, cap_link, cap_job, weight, stage == "comm")
            changed = False
        left = [rem[i] if stage[i] == "pre" else (rem[i] / rate[i] if rate[i] > 0 else np.inf)
                if stage[i] == "comm" else until[i] - t for i in range(n)]
        dt = max(min(left), 0.0)
        t += dt
        for i in range(n):
            if stage[i] == "pre":
                rem[i] -= dt
            elif stage[i] == "comm":
                rem[i] -= rate[i] * dt
        for i in range(n):
            if stage[i] == "pre" and rem[i] <= 1e-12 * (1 + compute_s[i] + intra_s[i]):
                stage[i], rem[i], changed = "comm", gbit[i], True
            if stage[i] == "comm" and rem[i] <= 1e-9 * gbit[i]:
                comm = t - began[i] - (1 - overlap[i]) * compute_s[i]
                length = compute_s[i] + comm - overlap[i] * min(compute_s[i], comm)
                stage[i], until[i], changed = "wait", max(t, began[i] + length), True
            if stage[i] == "wait" and until[i] - t <= 1e-12 * (1 + t):
                began[i], stage[i], rem[i] = t, "pre", pre[i]
                starts[i].append(t)
    return [np.array(s) for s in starts]


def mean_periods(starts: list, warmup: int) -> np.ndarray:
    """Each job's mean period over the common window (see the module doc)."""
    opens = max(s[min(warmup, len(s) - 3)] for s in starts)
    closes = max(s[-1] for s in starts)
    out = []
    for s in starts:
        inside = s[(s >= opens - 1e-12) & (s <= closes + 1e-12)]
        if len(inside) < 2:
            inside = s[min(warmup, len(s) - 3):]
        out.append((inside[-1] - inside[0]) / (len(inside) - 1))
    return np.array(out)
