"""The main job's output: a comparison table and figures, written atomically."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # the main job writes files; it never opens a window

import matplotlib.pyplot as plt  # noqa: E402

from . import plotting  # noqa: E402
from .experiments import DEMO_POLICIES, compare  # noqa: E402
from .sim.metrics import atomic_write  # noqa: E402

TABLE_COLUMNS = ["label", "network", "finished", "avg_jct_s", "p99_jct_s", "makespan_s", "avg_queue_s", "gpu_util",
                 "overload_gbit", "avg_slowdown", "jct_vs_ideal", "wall_s"]


def comparison_table(summary):
    """Mean over seeds per (policy, network), fair network first."""
    cols = [c for c in TABLE_COLUMNS if c in summary.columns]
    num = [c for c in cols if c not in ("label", "network")]
    table = summary.groupby(["label", "network"], as_index=False)[num].mean()
    return table.sort_values(["network", "avg_jct_s"], ascending=[True, True])[cols]


def save_figure(fig, path: Path) -> None:
    atomic_write(path, lambda p: fig.savefig(p, dpi=110, bbox_inches="tight", format="png"))
    plt.close(fig)


def demo_report(out, trace, topology, seeds=(0,), max_jobs=None, policies=DEMO_POLICIES) -> Path:
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    cmp = compare(trace=trace, topology=topology, policies=policies, networks=("fair", "ideal"), seeds=tuple(seeds),
                  max_jobs=max_jobs)
    table = comparison_table(cmp.summary)
    import pandas as pd

    with pd.option_context("display.width", 200, "display.max_columns", 20, "display.float_format", "{:,.2f}".format):
        print(f"trace={trace}  topology={topology}  seeds={list(seeds)}")
        print(table.to_string(index=False))
    atomic_write(out / "summary.csv", lambda p: table.to_csv(p, index=False))
    atomic_write(out / "runs.csv", lambda p: cmp.summary.to_csv(p, index=False))
    atomic_write(out / "jobs.parquet", lambda p: cmp.jobs.to_parquet(p, index=False))
    fair = cmp.jobs[cmp.jobs.network == "fair"]
    fig, ax = plt.subplots(figsize=(7, 4.5))
    plotting.jct_cdf(fair, hue="label", ax=ax)
    ax.set_title("JCT CDF per policy (fair-share network)")
    save_figure(fig, out / "jct_cdf.png")
    links = cmp.links[(cmp.links.network == "fair") & (cmp.links.seed == min(seeds))]
    worst = cmp.summary[cmp.summary.network == "fair"].sort_values("overload_gbit").label.iloc[-1]
    fig, ax = plt.subplots(figsize=(9, 5))
    plotting.link_utilisation(links[links.label == worst], ax=ax)
    ax.set_title(f"Per-link utilisation over time ({worst}, busiest links)")
    save_figure(fig, out / "link_utilisation.png")
    fig, ax = plt.subplots(figsize=(7, 4))
    plotting.jct_bars(cmp.summary, x="label", y="avg_jct_s", hue="network", ax=ax)
    ax.set_title("Average JCT: fair-share network vs ideal network")
    save_figure(fig, out / "avg_jct.png")
    return out / "summary.csv"
