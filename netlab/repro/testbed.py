"""CASSINI against its host scheduler on the live testbed, and the simulator on the same trace.

Why: the interleaving experiment (:mod:`netlab.congestion.interleave`) fixes every start by hand; this one
lets the policies decide, as in the paper: the same placement objects place a short trace's jobs on the
emulated testbed (:class:`~netlab.testbed.cluster.TestbedCluster`), once with the host scheduler alone and
once with CASSINI over it, and the simulator replays the same trace on the same topology with the ``tcp``
network. The comparison is the ratio CASSINI / host, measured on the testbed and simulated.

Setup (:data:`TOPOLOGY`): three racks of two one-GPU hosts behind one spine, 12.5 Gbit/s host links (the
scaled NICs of :mod:`.cassini`) and 4:1 oversubscribed rack uplinks; every job is BERT-base on 3 GPUs, so
none fits in a rack and two running jobs always share the uplink of the rack they split (the placements
the host proposes all do). A job alone communicates about 45% of its iteration across the uplink.

* host: Themis ordering, ``consolidated`` placement, phases where the jobs happen to start (two jobs
  submitted together start in step);
* cassini: the same ordering, ``cassini`` over ``consolidated`` (the host's short list, scored, the new
  job's phase chosen); ``max_rephase=0`` as the testbed cannot move a running job (the simulator gets the
  same policy object settings).

Neither preempts: the testbed does not carry preemption out (a killed rank loses its state), so the
simulator runs with ``preemption="none"`` too. On the testbed every job starts ``START_DELAY_S`` after its
decision, at its phase (TestbedCluster's ``start_delay_s``); link rates are scaled by ``RATE_SCALE`` and
times by ``TIME_SCALE``, results are in trace seconds.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..workload.job import Job

TOPOLOGY = "leafspine,racks=3,hosts_per_rack=2,gpus_per_host=1,host_gbps=12.5,oversub=4,spines=1"
MODEL, GPUS = "bert-base", 3
RATE_SCALE = 0.016  # 12.5 Gbit hosts -> 200 Mbit, 6.25 Gbit uplinks -> 100 Mbit (the interleaving scale)
TIME_SCALE = 0.1  # BERT's 0.92 s compute -> 92 ms; an iteration alone ~170 ms of wall time
START_DELAY_S = 12.0  # wall s from a decision to the job's start: 6 ranks importing torch on 2 busy cores took ~8 s
ORDERING = "themis"
HOST = "consolidated"
POLICIES = ("host", "cassini")


def trace(n_jobs: int = 5, iterations=(150, 250), gap_s: float = 30.0, seed: int = 0) -> list[Job]:
    """``n_jobs`` BERT-base 3-GPU jobs: the first two submitted together at 0, the rest ``gap_s`` apart
    (trace seconds); iterations uniform in ``iterations`` (seeded)."""
    rng = np.random.default_rng(seed)
    lo, hi = iterations
    return [Job(i, 0.0 if i < 2 else gap_s * (i - 1), GPUS, MODEL, int(rng.integers(lo, hi + 1)))
            for i in range(n_jobs)]


def placement(policy: str):
    """The placement object of ``policy`` ("host" or "cassini"), fresh (policies keep per-run state)."""
    from ..policies import PLACEMENT

    if policy == "host":
        return PLACEMENT.create(HOST)
    if policy == "cassini":
        return PLACEMENT.create("cassini", host=HOST, max_rephase=0)
    raise ValueError(f"policy must be one of {POLICIES}, got {policy!r}")


def run_testbed(ctl, jobs: list[Job], policy: str, seed: int = 0, timeout_s: float = 900.0,
                time_scale: float = TIME_SCALE, start_delay_s: float = START_DELAY_S):
    """The trace on the live testbed behind controller ``ctl`` (a SimResult, trace seconds)."""
    from ..testbed.cluster import TestbedCluster

    return TestbedCluster(ctl, ordering=ORDERING, placement=placement(policy), time_scale=time_scale, seed=seed,
                          start_delay_s=start_delay_s).run(jobs, timeout_s=timeout_s)


def run_simulator(jobs: list[Job], policy: str, network: str = "tcp", seed: int = 0):
    """The same trace in the simulator on :data:`TOPOLOGY` (full rates; SimResult)."""
    from ..sim import SimConfig, Simulator
    from ..topology import load_topology

    return Simulator(load_topology(TOPOLOGY), jobs, ORDERING, placement(policy), "none",
                     config=SimConfig(network=network, seed=seed)).run()


def job_rows(res, where: str, policy: str, seed: int) -> pd.DataFrame:
    """Per job: JCT, start, placement and, on the testbed, the phase it got and measured iteration times."""
    cols = [c for c in ("job_id", "submit_s", "start_s", "end_s", "jct_s", "placement", "racks", "iso_iter_s",
                        "phase", "offset_ms", "start_error_ms", "measured_iter_s", "measured_iter_p99_s")
            if c in res.jobs.columns]
    return res.jobs[cols].assign(where=where, policy=policy, seed=seed)


def compare(jobs_by_policy: dict) -> pd.DataFrame:
    """Per (where, seed): avg and p99 JCT of host and CASSINI and the ratios CASSINI / host (< 1: CASSINI
    better), from ``{(where, policy, seed): SimResult}``."""
    rows = []
    keys = sorted({(w, s) for w, _, s in jobs_by_policy})
    for where, seed in keys:
        h, c = jobs_by_policy.get((where, "host", seed)), jobs_by_policy.get((where, "cassini", seed))
        if h is None or c is None:
            continue
        row = dict(where=where, seed=seed)
        for m in ("avg_jct_s", "p99_jct_s", "makespan_s"):
            row[f"host_{m}"], row[f"cassini_{m}"] = float(h.summary[m]), float(c.summary[m])
            row[f"cassini_over_host_{m}"] = float(c.summary[m]) / float(h.summary[m])
        row["finished"] = f"{h.summary['finished']}/{c.summary['finished']}"
        rows.append(row)
    return pd.DataFrame(rows)
