"""CASSINI's reproduction: host schedulers with and without CASSINI on 24 one-GPU servers
(:func:`cassini_grid`) and the paper-style table (:func:`cassini_table`)."""

from __future__ import annotations

import pandas as pd

# ----------------------------------------------------------------- CASSINI
CASSINI_MODELS = ("vgg11", "vgg16", "vgg19", "resnet50", "wideresnet101", "bert-base", "roberta-base", "xlm",
                  "camembert-base", "gpt1", "gpt2", "gpt3-xl", "dlrm")
# 24 one-GPU servers in 8 racks of 3 (small racks, so distributed jobs cross the spine). CASSINI paired A100s with 50 Gbit/s NICs; the zoo's compute times are
# V100/T4-era (about 4x slower), so the NICs are scaled to 12.5 Gbit/s to keep CASSINI's comm/compute ratio.
CASSINI_TOPOLOGY = "leafspine,racks=8,hosts_per_rack=3,gpus_per_host=1,host_gbps=12.5,spines=1"
CASSINI_POLICIES = (
    dict(policy="themis", placement="consolidated"),
    dict(policy="themis", placement="cassini"),
    dict(policy="tiresias", placement="consolidated"),
    dict(policy="tiresias", placement="cassini"),
    dict(policy="tiresias", placement="topo-bestfit"),  # the other network-aware policies, for the
    dict(policy="dally", placement=None),  # acceptance check ("the best network-aware policy")
)


CASSINI_GPUS = "0+0.35+0.4+0.25"  # weights for 1, 2, 4, 8 GPUs: every job is distributed, as in CASSINI


def cassini_trace(jobs: int = 120, load: float = 0.9, duration_median_s: float = 1800.0) -> str:
    """Poisson arrivals of the 13 CASSINI models (2-8 GPUs each) on 24 one-GPU servers."""
    return (f"synthetic,jobs={jobs},load={load},cluster_gpus=24,duration_median_s={duration_median_s},"
            f"gpus={CASSINI_GPUS},models={'+'.join(CASSINI_MODELS)}")


def cassini_grid(oversub=(4,), loads=(0.9,), jobs: int = 120, seeds: int = 3, ideal: bool = True) -> dict:
    """Themis and Tiresias, each with and without CASSINI, on the phase-aware network (plus Dally and
    topology-aware best fit, so the acceptance check sees every network-aware policy)."""
    return dict(name="cassini-repro", topology=CASSINI_TOPOLOGY,
                grid=dict(trace=[cassini_trace(jobs, load) for load in loads], oversub=list(oversub),
                          pairs=list(CASSINI_POLICIES), network=["phase", "ideal"] if ideal else ["phase"],
                          seed=list(range(seeds))))


def load_of(trace: str) -> float:
    return float(trace.split("load=")[1].split(",")[0]) if "load=" in trace else float("nan")


def cassini_table(result) -> pd.DataFrame:
    """Average/p99 JCT, the ECN proxy and iteration-time slowdown per policy.

    ``*_ratio`` = the host scheduler with consolidated placement / this policy
    (> 1: better than the host scheduler alone).
    """
    s = result.summary.copy()
    s["load"] = s.trace.map(load_of)
    s["host"] = s.policy
    s["cassini"] = s.placement == "cassini"
    fair = s[s.network == "phase"].copy()
    key = ["oversub", "load", "host", "seed"]
    base = fair[fair.placement == "consolidated"].set_index(key)  # the host scheduler alone
    for metric in ("avg_jct_s", "p99_jct_s", "overload_gbit"):
        ref = base[metric].reindex(pd.MultiIndex.from_frame(fair[key])).to_numpy()
        fair[f"{metric}_ratio"] = ref / fair[metric].to_numpy()  # > 1: CASSINI better
    cols = ["avg_jct_s", "p99_jct_s", "overload_gbit", "avg_slowdown", "jct_vs_ideal", "avg_jct_s_ratio",
            "p99_jct_s_ratio", "overload_gbit_ratio"]
    cols = [c for c in cols if c in fair.columns]
    return fair.groupby(["oversub", "load", "label"], as_index=False)[cols].mean()
