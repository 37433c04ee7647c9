"""Small testbed experiments described once, run on the testbed or predicted.

A :class:`Scenario` is a few jobs with fixed placements (one rank per listed
host), each iteration's compute time and gradient bytes *at testbed scale*,
optional time shifts, and link rates. :func:`run_scenario` measures it on a
live testbed; :func:`predict_scenario` asks the simulator's network model
the same question (the topology at full rate and the bytes divided by the
testbed's ``rate_scale``, which gives identical seconds). The notebook's
experiments and the fidelity report are both built from these.
"""

from __future__ import annotations

import copy
import time
import warnings
from dataclasses import dataclass, field, replace

import numpy as np
import pandas as pd

from ..sched.allocation import NetAllocation
from .controller import Controller, TrainSpec


@dataclass(frozen=True)
class ScenarioJob:
    job_id: int
    hosts: tuple[str, ...]  # one rank per host, ring in this order
    grad_bytes: int  # testbed bytes all-reduced per iteration
    compute_ms: float
    iterations: int = 12
    offset_ms: float = 0.0
    allocation: NetAllocation | None = None  # its network share on the testbed (None: the shared default class)


@dataclass(frozen=True)
class Scenario:
    name: str
    jobs: tuple[ScenarioJob, ...]
    rates_mbit: dict = field(default_factory=dict)  # (src, dst) -> Mbit/s; both directions if given once
    warmup: int = 2  # iterations dropped from each job's start


def _set_rates(testbed, rates: dict) -> None:
    for (a, b), mbit in both_ways(rates).items():
        testbed.set_link_rate(a, b, mbit)


def run_scenario(ctl: Controller, sc: Scenario, start_delay_s: float = 6.0, timeout_s: float = 300.0) -> pd.DataFrame:
    """Run every job of ``sc`` at once (ranks wait for a common start time); per job, the measured times.

    Iteration times are medians over the iterations after ``warmup`` that lie
    inside the window where every job of the scenario was running, so a job
    that finishes first does not flatter the others. The raw per-iteration
    timestamps are what :func:`run_scenario_logs` returns.
    """
    return summarise_logs(sc, split_logs(run_scenario_logs(ctl, sc, start_delay_s, timeout_s)))


def run_scenario_logs(ctl: Controller, sc: Scenario, start_delay_s: float = 6.0,
                      timeout_s: float = 300.0) -> pd.DataFrame:
    """Run every job of ``sc`` at once; every rank's raw per-iteration log, one row per (job, rank, iteration).

    Columns: ``job_id`` (the scenario's id), ``testbed_job_id`` (the controller's), ``host``, ``rank``,
    ``iter``, the unix timestamps ``compute_start``, ``allreduce_start`` and ``allreduce_end`` (every
    host of a testbed on one machine shares the clock) and ``start_at``, the common start time the ranks
    waited for (a job's ``offset_ms`` runs after it). Nothing is summarised or dropped.
    """
    tb = ctl.testbed
    before = tb.link_rates().set_index(["src", "dst"]).rate_mbit.to_dict() if sc.rates_mbit else {}
    _set_rates(tb, sc.rates_mbit)
    try:
        start_at = time.time() + start_delay_s
        ids = {j.job_id: ctl.new_job_id() for j in sc.jobs}  # testbed ids: unique per controller
        for j in sc.jobs:
            ctl.start_job(TrainSpec(ids[j.job_id], [(h, 1) for h in j.hosts], grad_bytes=j.grad_bytes,
                                    compute_ms=j.compute_ms, iterations=j.iterations, offset_ms=j.offset_ms,
                                    start_at=start_at, backend="gloo", allocation=j.allocation))
        for j in sc.jobs:
            ctl.wait_job(ids[j.job_id], timeout_s=timeout_s)
        logs = {j.job_id: ctl.job_log(ids[j.job_id]) for j in sc.jobs}
    finally:
        if before:
            _set_rates(tb, {k: before[k] for k in sc.rates_mbit})
    frames = []
    for jid, df in logs.items():
        df = df[[c for c in ("host", "rank", "iter", "compute_start", "allreduce_start", "allreduce_end")
                 if c in df.columns]].copy()
        df.insert(0, "testbed_job_id", ids[jid])
        df.insert(0, "job_id", jid)
        frames.append(df)
    out = pd.concat(frames, ignore_index=True)
    out["start_at"] = start_at
    return out


def split_logs(raw: pd.DataFrame) -> dict[int, pd.DataFrame]:
    """Raw logs (as :func:`run_scenario_logs` returns them) per scenario job id, with the durations
    :meth:`Controller.job_log` adds (``compute_s``, ``allreduce_s``, ``iter_s``)."""
    out = {}
    for jid, df in raw.groupby("job_id", sort=False):
        df = df.sort_values(["rank", "iter"]).reset_index(drop=True)
        df["compute_s"] = df.allreduce_start - df.compute_start
        df["allreduce_s"] = df.allreduce_end - df.allreduce_start
        df["iter_s"] = df.groupby("rank").compute_start.diff().shift(-1)
        out[int(jid)] = df
    return out


def summarise_logs(sc: Scenario, logs: dict[int, pd.DataFrame]) -> pd.DataFrame:
    """Per job: median iteration, all-reduce and compute seconds in the common window, and the mean period
    there (``mean_iter_s``: the window's span over its iterations).

    Why both: the median is robust to a stray slow iteration, but a job whose periods take a few distinct
    values (a lower class behind a higher one with compute phases: blocked for one, two or no turns of the
    other's all-reduce) has a median that lands on one of them, depending on how many of each the window
    holds; its throughput (and its GPUs' utilisation) is the mean.

    ``overlapped`` says whether the job's numbers come from that common window (at least two of
    its steady iterations while every job of the scenario ran). When it is False the job's own
    steady state is reported instead, which for a scenario of several jobs is *not* a shared
    measurement: a RuntimeWarning names the jobs, and callers that need contention must check
    the column.
    """
    r0 = {jid: df[df["rank"] == 0].sort_values("iter") for jid, df in logs.items()}
    lo = max(float(df.compute_start.iloc[min(sc.warmup, len(df) - 1)]) for df in r0.values())
    hi = min(float(df.allreduce_end.iloc[-1]) for df in r0.values())
    rows, apart = [], []
    for j in sc.jobs:
        df = r0[j.job_id]
        steady = df[(df.compute_start >= lo) & (df.allreduce_end <= hi) & (df.iter >= sc.warmup)]
        overlapped = len(steady) >= 2
        if not overlapped:  # no common window: fall back to the job's own steady state, and say so
            steady = df[df.iter >= sc.warmup]
            apart.append(j.job_id)
        period = steady.compute_start.diff().dropna()
        rows.append(dict(scenario=sc.name, job_id=j.job_id, hosts=",".join(j.hosts), grad_bytes=j.grad_bytes,
                         compute_ms=j.compute_ms, offset_ms=j.offset_ms, iterations=len(steady),
                         iter_s=float(period.median()) if len(period) else float("nan"),
                         mean_iter_s=float(period.mean()) if len(period) else float("nan"),
                         allreduce_s=float(steady.allreduce_s.median()),
                         compute_s=float(steady.compute_s.median()), overlapped=overlapped))
    if apart and len(sc.jobs) > 1:
        warnings.warn(f"scenario {sc.name!r}: jobs {apart} had fewer than 2 steady iterations in the window "
                      f"where all {len(sc.jobs)} jobs ran ({max(hi - lo, 0.0):.3f} s); their rows "
                      "(overlapped=False) are each job's own steady state, not a shared measurement",
                      RuntimeWarning, stacklevel=2)
    return pd.DataFrame(rows)


def ring_busbw_mbit(grad_bytes: float, allreduce_s: float, ranks: int) -> float:
    """nccl-tests' bus bandwidth of a ring all-reduce: algbw x 2(n-1)/n."""
    return grad_bytes * 8 / allreduce_s / 1e6 * 2 * (ranks - 1) / ranks


def predict_scenario(testbed, sc: Scenario, network: str = "fair", wire_overhead: float = 1.0,
                     **network_kwargs) -> pd.DataFrame:
    """The simulator's iteration times for ``sc`` (seconds), on the testbed's topology and rates.

    ``wire_overhead`` multiplies the bytes on the wire (1.047 for TCP/IP
    headers at MTU 1500); 1.0 is the simulator's payload-only model.
    """
    topo = topology_at(testbed.topology, testbed.rate_scale, scenario_rates(testbed, sc))
    return predict_on(topo, testbed.rate_scale, sc, network, wire_overhead, **network_kwargs)


def _demands(topo, rate_scale: float, sc: Scenario, wire_overhead: float) -> list:
    """(scenario job, its demand or None inside one host, its job model) per job of ``sc``."""
    from ..network.demand import build_demand
    from ..workload.zoo import JobModel

    index = {h.name: i for i, h in enumerate(topo.hosts)}
    demands = []
    for j in sc.jobs:
        model = JobModel(f"job{j.job_id}", j.compute_ms / 1000.0, j.grad_bytes / rate_scale * wire_overhead)
        hosts = [index[h] for h in j.hosts]
        # the testbed serves every allocated job from an HTB class of its own (jobnet), so its queue is its own
        alloc = None if j.allocation is None else replace(j.allocation, own_queue=True)
        iso_d, _ = build_demand(topo, model, "ring", j.job_id, hosts, [1] * len(hosts), allocation=alloc)
        iso = iso_d.iter_s(iso_d.iso_rate_gbps) if iso_d is not None else model.compute_s
        phase = (j.offset_ms / 1000.0 / iso) % 1.0 if iso > 0 else 0.0
        d, _ = build_demand(topo, model, "ring", j.job_id, hosts, [1] * len(hosts), iso, phase, alloc)
        demands.append((j, d, model))
    return demands


def predict_on(topo, rate_scale: float, sc: Scenario, network: str = "fair", wire_overhead: float = 1.0,
               **network_kwargs) -> pd.DataFrame:
    """:func:`predict_scenario` on a topology already at the scenario's rates (simulator units).

    Steady-state models (``fair``, ``phase``, ``ideal``) solve once. A model
    that simulates time (``tcp``: it has ``simulate_starts``) runs the
    scenario as the testbed does (:func:`simulated_logs`) and its iteration
    times are taken from the simulated logs by :func:`summarise_logs`, the
    testbed's own rule; with jitter, averaged over the model's ``draws``.
    """
    from ..network.model import NETWORKS

    demands = _demands(topo, rate_scale, sc, wire_overhead)
    net = NETWORKS.create(network, **network_kwargs)
    if hasattr(net, "simulate_starts"):
        per_draw = [summarise_logs(sc, _logs(net, sc, demands, topo, draw))[["job_id", "iter_s", "mean_iter_s"]]
                    for draw in range(getattr(net, "draws", 1))]
        by_job = pd.concat(per_draw).groupby("job_id", sort=False)
        out, mean = by_job.iter_s.mean(), by_job.mean_iter_s.mean()
        compute = pd.Series({j.job_id: m.compute_s for j, _, m in demands})
        return pd.DataFrame(dict(scenario=sc.name, job_id=out.index, predicted_iter_s=out.to_numpy(),
                                 predicted_allreduce_s=(out - compute[out.index]).to_numpy(),
                                 predicted_mean_iter_s=mean[out.index].to_numpy()))
    active = [d for _, d, _ in demands if d is not None]
    sol = net.solve(active, topo.link_capacity_gbps) if active else None
    rows = []
    for j, d, model in demands:
        if d is None:
            it = model.compute_s
            comm = 0.0
        else:
            it = float(sol.iter_s[j.job_id])
            comm = it - model.compute_s
        rows.append(dict(scenario=sc.name, job_id=j.job_id, predicted_iter_s=it, predicted_allreduce_s=comm,
                         predicted_mean_iter_s=it))
    return pd.DataFrame(rows)


def simulated_logs(testbed, sc: Scenario, network: str = "tcp", wire_overhead: float = 1.0, draw: int = 0,
                   **network_kwargs) -> dict:
    """Per job id, the iteration log (rank 0, the testbed's columns, times from the common start) of one
    simulated run of ``sc`` by a model that simulates time: what the testbed's agents would have logged."""
    from ..network.model import NETWORKS

    topo = topology_at(testbed.topology, testbed.rate_scale, scenario_rates(testbed, sc))
    net = NETWORKS.create(network, **network_kwargs)
    if not hasattr(net, "simulate_starts"):
        raise ValueError(f"network model {network!r} does not simulate time; it has no iteration logs")
    return _logs(net, sc, _demands(topo, testbed.rate_scale, sc, wire_overhead), topo, draw)


def _logs(net, sc: Scenario, demands, topo, draw: int) -> dict:
    """One simulated run of the scenario: every job from the common start plus its offset, for its own
    iterations (:meth:`~netlab.network.tcp.TcpNetwork.simulate_starts`), as per-job iteration logs."""
    active = [d for _, d, _ in demands if d is not None]
    starts = net.simulate_starts(active, topo.link_capacity_gbps, {j.job_id: j.offset_ms / 1000.0 for j in sc.jobs},
                                 {j.job_id: j.iterations for j in sc.jobs}, draw) if active else {}
    logs = {}
    for j, d, model in demands:
        s = starts.get(j.job_id)
        if s is None:  # inside one host: compute only
            s = j.offset_ms / 1000.0 + model.compute_s * np.arange(j.iterations + 1)
        k = np.arange(len(s) - 1)
        logs[j.job_id] = pd.DataFrame(dict(rank=0, iter=k, compute_start=s[:-1],
                                           allreduce_start=s[:-1] + model.compute_s, allreduce_end=s[1:],
                                           compute_s=model.compute_s, allreduce_s=s[1:] - s[:-1] - model.compute_s))
    return logs


def both_ways(rates_mbit: dict) -> dict:
    """Rates given per cable ``(a, b)`` for both directed links."""
    return {**rates_mbit, **{(b, a): r for (a, b), r in rates_mbit.items()}}


def scenario_rates(testbed, sc: Scenario) -> dict:
    """Every directed link's rate (Mbit/s) while ``sc`` runs: the testbed's shaped rates, the scenario's on top."""
    return {**testbed.link_rates().set_index(["src", "dst"]).rate_mbit.to_dict(), **both_ways(sc.rates_mbit)}


def topology_at(topo, rate_scale: float, rates_mbit: dict):
    """A shallow copy of ``topo`` whose links run at testbed rates ``rates_mbit`` (directed; others keep
    theirs), in simulator units: Mbit/s / 1000 / ``rate_scale``. Routes are the same cables."""
    cap = topo.link_capacity_gbps.copy()
    for i, link in enumerate(zip(topo.link_src, topo.link_dst)):
        if link in rates_mbit:
            cap[i] = rates_mbit[link] / 1000.0 / rate_scale
    t = copy.copy(topo)
    t.link_capacity_gbps = cap
    return t
