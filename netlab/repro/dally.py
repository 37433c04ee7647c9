"""Dally's reproduction: consolidation-based Tiresias against Dally (full and each part) on congested
leaf-spines (:func:`dally_grid`) and the paper-style table (:func:`dally_table`)."""

from __future__ import annotations

import pandas as pd

from .common import BASELINE

# ------------------------------------------------------------------- Dally
DALLY_TOPOLOGY = "leafspine,racks=8,hosts_per_rack=4,gpus_per_host=8,host_gbps=100,spines=2"
DALLY_POLICIES = (
    dict(policy="tiresias", placement="consolidated"),  # consolidation-based baseline
    dict(policy="dally", placement=None),  # full Dally: its own placement and preemption
    dict(policy="dally-delay", placement=None),
    dict(policy="dally-preempt", placement=None),
    dict(policy="dally-autotune", placement=None),
    dict(policy="tiresias", placement="topo-bestfit"),
    dict(policy="fifo", placement="consolidated"),
    dict(policy="fifo", placement="random"),
)


def dally_grid(traces=("philly", "itp,cluster=03"), oversub=(4, 8), background=(0.0,), seeds: int = 3,
               max_jobs: int | None = 2000, topology: str = DALLY_TOPOLOGY, ideal: bool = True) -> dict:
    """Consolidation-based Tiresias vs Dally (full and each part) vs FIFO, on congested leaf-spines."""
    grid = dict(trace=list(traces), oversub=list(oversub), pairs=list(DALLY_POLICIES),
                network=["fair", "ideal"] if ideal else ["fair"], seed=list(range(seeds)))
    if any(background):
        grid["background"] = list(background)
    return dict(name="dally-repro", topology=topology, max_jobs=max_jobs, grid=grid)


def comm_overhead(jobs: pd.DataFrame) -> pd.Series:
    """Seconds each job spent communicating: its share of progress time (slowdown x isolated)."""
    return jobs.comm_fraction * jobs.slowdown * jobs.isolated_s


def dally_table(result, by=("trace", "oversub", "background")) -> pd.DataFrame:
    """Makespan, average/p99 JCT, queueing and communication overhead per policy (mean over seeds).

    ``*_gain`` columns are 1 - policy / consolidation-based Tiresias on the
    same trace, topology and seed (the papers' "X% better").
    """
    jobs = result.jobs.assign(comm_s=comm_overhead(result.jobs))
    keys = [k for k in by if k in jobs.columns] + ["label", "network", "seed"]
    per_run = jobs.groupby(keys, as_index=False).agg(comm_overhead_s=("comm_s", "sum"))
    s = result.summary.merge(per_run, on=keys, how="left")
    s = s[s.network == "fair"].copy()
    group = [k for k in by if k in s.columns] + ["seed"]
    base = s[s.label == BASELINE].set_index(group)
    for metric in ("makespan_s", "avg_jct_s", "p99_jct_s", "comm_overhead_s"):
        ref = base[metric].reindex(pd.MultiIndex.from_frame(s[group])).to_numpy()
        s[metric.replace("_s", "_gain")] = 1 - s[metric].to_numpy() / ref
    cols = ["makespan_s", "avg_jct_s", "p99_jct_s", "avg_queue_s", "comm_overhead_s", "jct_vs_ideal",
            "makespan_gain", "avg_jct_gain", "p99_jct_gain", "comm_overhead_gain"]
    cols = [c for c in cols if c in s.columns]
    out = s.groupby([k for k in by if k in s.columns] + ["label"], as_index=False)[cols].mean()
    return out.sort_values([k for k in by if k in out.columns] + ["avg_jct_s"])
