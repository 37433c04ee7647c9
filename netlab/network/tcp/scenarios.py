"""A testbed scenario run by the ``tcp`` fluid: every job's iteration starts from given start times."""

from __future__ import annotations

import numpy as np

from ..model import GBIT, incidence
from ..slots import Entries, jobs_of
from .components import share_weights
from .fluid import (NOISE, WAIT, FluidJobs, FluidLinks, FluidRun, FluidState, Starts, lead_per_job, link_stats,
                    simulate)
from .exposed import comm_of_period, exposed_s
from .goodput import effective_capacity, link_flows_offered
from .ratecut import cut_s
from .slowest import slowest_s
from .rto import demand_duty, solved_share, tail_s


def simulate_starts(model, demands, capacity_gbps, start_s: dict, iterations: dict, draw: int = 0) -> dict:
    """Every job's iteration start times (s) when each starts at ``start_s[job]`` and all run together.

    What a testbed scenario does: jobs launched at a common time (plus their offsets), each running
    ``iterations[job]`` iterations. The fluid is simulated until every job has started its last iteration
    plus one (that start marks the end of the previous one), jobs going on past their own count; a caller
    measuring a window where all run (as :func:`netlab.testbed.scenarios.summarise_logs` does) sees the same
    contention as on the testbed. Deterministic: jitter draws come from a fixed table; ``draw`` picks
    another set of them (another run of the same experiment). ``model``: a
    :class:`~netlab.network.tcp.TcpNetwork` (its parameters).
    """
    if not demands:
        return {}
    p = model.params
    job, link, weight, links = incidence(demands)
    n = len(demands)
    flows = np.zeros((n, len(links)))
    np.add.at(flows, (job, link), weight)
    cap_link = np.ascontiguousarray(capacity_gbps[links], dtype=np.float64)
    jobs = jobs_of(demands)
    cap_job = np.minimum(jobs.rate_cap_gbps, jobs.iso_rate_gbps)
    cap_link = effective_capacity(cap_link, *link_flows_offered(Entries(job, link, weight.astype(float)), len(links),
                                                                cap_job), p.goodput_k, p.buffer_packets)
    gbit = jobs.flow_bytes * 8 / GBIT
    most = max(int(iterations[d.job_id]) for d in demands) + 1
    starts = Starts(np.zeros((n, most + 1)), np.zeros(n, np.int64))
    until = np.array([float(start_s[d.job_id]) for d in demands])
    phi = share_weights(gbit, p.alpha) * jobs.share  # bytes in flight x allocation weight
    fjobs = FluidJobs(flows, cap_job, phi, jobs.priority, gbit,
                      jobs.intra_s, jobs.compute_s, jobs.overlap, (jobs.job_id * 977 + draw * 1543) % len(NOISE))
    state = FluidState(np.full(n, WAIT, np.int64), np.zeros(n), until, np.zeros(n))
    fluid_links = FluidLinks(cap_link, cap_link * p.ecn_threshold_us * 1e-6, cap_link * p.buffer_us * 1e-6)
    run = FluidRun(p.jitter, lead_per_job(p.lead, jobs.own_queue), NOISE, -1, most, max(p.max_events, 40 * n * most))
    simulate(fjobs, state, fluid_links, run, starts, link_stats(len(links)))
    out = {d.job_id: starts.time_s[i, :min(starts.count[i], most + 1)].copy() for i, d in enumerate(demands)}
    tails = None
    if p.rto_k > 0.0 or p.cut_k > 0.0 or p.slow_k > 0.0:  # rto.py, ratecut.py, slowest.py: each job at its
        shares = [_simulated_share(out[d.job_id], d) for d in demands]  # share of the iteration in the run
        tails = tail_s(demands, capacity_gbps, p, shares) if p.rto_k > 0.0 else [0.0] * n
        net = [_simulated_net_s(out[d.job_id], d) for d in demands]
        if p.cut_k > 0.0:
            tails = [t + c for t, c in zip(tails, cut_s(demands, capacity_gbps, p, shares, net))]
        if p.slow_k > 0.0:
            tails = [t + c for t, c in zip(tails, slowest_s(demands, capacity_gbps, p, net))]
    return stretch_starts(out, demands, p.stretch, tails)


def _simulated_comm_s(period_s: float, d) -> float:
    """A job's communication seconds per iteration (intra-host phase included) in a fluid run of mean period
    ``period_s`` (:func:`~.exposed.comm_of_period`, at least its communication alone)."""
    return comm_of_period(d.compute_s, d.overlap, period_s, d.net_s(d.alone_rate_gbps) + d.serial_intra_s)


def _simulated_net_s(starts: np.ndarray, d) -> float:
    """A job's network seconds per iteration in the fluid run: its communication less its serial intra-host phase
    (0 if it has no whole iteration)."""
    if len(starts) < 2:
        return 0.0
    return max(_simulated_comm_s(float(np.mean(np.diff(starts))), d) - d.serial_intra_s, 0.0)


def _simulated_share(starts: np.ndarray, d) -> float:
    """A job's communicating share of its iteration in the fluid run: its communication over its period
    (:func:`~.rto.solved_share`); its share alone if it has no whole iteration."""
    if len(starts) < 2:
        return demand_duty(d)
    period = float(np.mean(np.diff(starts)))
    return solved_share(period, _simulated_comm_s(period, d))


def stretch_starts(starts: dict, demands, stretch: float, tails: list | None = None) -> dict:
    """Each job's mean delay per iteration beyond its time alone, ``stretch`` times, plus its expected timeout
    tail (``tails``, :mod:`~.rto`), added to every iteration as far as the overlapped compute cannot hide it
    (:mod:`~.exposed`; the model's ``stretch`` and tail, as its solve applies them to the mean; unchanged when 0
    and None)."""
    if stretch == 0.0 and tails is None:
        return starts
    out = {}
    for n, d in enumerate(demands):
        s = starts[d.job_id]
        if len(s) < 2:
            out[d.job_id] = s
            continue
        period = float(np.mean(np.diff(s)))
        extra = stretch * max(period - d.iter_s(d.alone_rate_gbps), 0.0)
        extra += tails[n] if tails is not None else 0.0
        out[d.job_id] = s + exposed_s(d.compute_s, _simulated_comm_s(period, d), d.overlap, extra) * np.arange(len(s))
    return out
