"""What the Dally and CASSINI reproductions share: the papers' claims, the acceptance check against
consolidation-based Tiresias, each claim beside what netlab measured, and result files.

Every policy also runs on the ideal (non-blocking) network; ``jct_vs_ideal``
is a policy's average JCT over its own average JCT on the ideal network: how
close it gets to the physical limit.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from ..sweep import run_sweep

# ------------------------------------------------------------------- claims
CLAIMS = pd.DataFrame([
    dict(system="Dally", metric="makespan", claim="up to 69% better than consolidation-based scheduling",
         claim_gain=0.69),
    dict(system="Dally", metric="avg_jct", claim="up to 83% better average JCT", claim_gain=0.83),
    dict(system="Dally", metric="comm_overhead", claim="up to 98% less communication overhead", claim_gain=0.98),
    dict(system="CASSINI", metric="avg_jct", claim="up to 1.6x better average JCT than Themis alone",
         claim_gain=1 - 1 / 1.6),
    dict(system="CASSINI", metric="p99_jct", claim="up to 2.5x better p99 JCT", claim_gain=1 - 1 / 2.5),
    dict(system="CASSINI", metric="ecn_marks", claim="up to 33x fewer ECN-marked packets", claim_gain=1 - 1 / 33),
])

BASELINE = "tiresias+consolidated"  # the consolidation-based baseline every gain is measured against
NETWORK_AWARE = ("cassini", "dally", "topo-bestfit")


# ------------------------------------------------------------ acceptance
def acceptance(dally: pd.DataFrame, cassini: pd.DataFrame) -> dict:
    """Does the best network-aware policy beat consolidation-based Tiresias on avg and p99 JCT (per trace, regime
    and oversubscription)?

    Ratios are Tiresias+consolidated / policy (> 1: the network-aware policy wins).
    """
    out = {}
    by = ["trace", "regime", "oversub"] if "regime" in dally else ["trace", "oversub"]
    for key, g in dally.groupby(by):
        where = "/".join(map(str, key[:-1]))
        out[f"dally-setup/{where}/oversub={key[-1]}"] = _best_vs_baseline(g)
    for (oversub, load), g in cassini.groupby(["oversub", "load"]):
        if (g.label == BASELINE).any():
            out[f"cassini-setup/oversub={oversub}/load={load}"] = _best_vs_baseline(g)
    return out


def _best_vs_baseline(g: pd.DataFrame) -> dict:
    """The network-aware policy with the lowest average JCT in ``g`` against the baseline row."""
    base = g[g.label == BASELINE].iloc[0]
    aware = g[g.label.str.contains("|".join(NETWORK_AWARE))]
    best = aware.loc[aware.avg_jct_s.idxmin()]
    return dict(best=best.label, avg_jct_ratio=float(base.avg_jct_s / best.avg_jct_s),
                p99_jct_ratio=float(base.p99_jct_s / best.p99_jct_s),
                beats_on_both=bool(best.avg_jct_s < base.avg_jct_s and best.p99_jct_s < base.p99_jct_s))


def seed_range(frame: pd.DataFrame, keys: list[str], cols: list[str]) -> pd.DataFrame:
    """Per ``keys``: the smallest and largest value of each of ``cols`` over the seeds (``<col>_seed_min``,
    ``<col>_seed_max``; infinities as missing). One run moves by several percent on its own
    (``benchmarks/bench_sensitivity.py``), so a seed mean is read beside its range."""
    out = frame.replace([np.inf], np.nan).groupby(keys)[cols].agg(["min", "max"])
    out.columns = [f"{c}_seed_{stat}" for c, stat in out.columns]
    return out.reset_index()


def claims_vs_measured(dally: pd.DataFrame | None = None, regimes=None) -> pd.DataFrame:
    """Each Dally claim next to the best gain netlab measured for it (over setups), once per transport regime
    (``regimes``, default the table's, in the registry's order; the ``regime`` column names it).

    Each row carries the setup's ``baseline_ideal_ratio`` (the room the network leaves: no placement gain exceeds
    1 - 1/ratio), the seeds averaged, and the smallest and largest gain of one of them (``seed_min``,
    ``seed_max``): the best setup is the largest of many noisy means, so its seeds' spread says how far to trust
    it; ``network`` is the model spec the regime ran on. The CASSINI claims are
    :func:`netlab.repro.cassini.cassini_claims`'.
    """
    from .regimes import ordered

    rows = []
    if dally is None:
        return pd.DataFrame()
    for regime in ordered(regimes, dally.regime):
        d = dally[dally.label.str.startswith("dally") & (dally.regime == regime)].reset_index(drop=True)
        for c in CLAIMS[CLAIMS.system == "Dally"].itertuples():
            measured, where, ratio, seeds, net = np.nan, "", np.nan, None, None
            seed_min = seed_max = np.nan
            col = {"makespan": "makespan_gain", "avg_jct": "avg_jct_gain", "comm_overhead": "comm_overhead_gain"}[
                c.metric]
            if len(d) and d[col].notna().any():
                r = d.loc[d[col].idxmax()]
                where = f"{r['label']} on {r['trace']} {r['oversub']}:1"
                if r.get("background", 0):
                    where += f" + {r['background']:.0%} background"
                if r.get("batch", False):
                    where += ", batch submission"
                measured, ratio, net = r[col], r.get("baseline_ideal_ratio", np.nan), r.get("network")
                seeds = r.get("seeds")
                seed_min, seed_max = r.get(f"{col}_seed_min", np.nan), r.get(f"{col}_seed_max", np.nan)
            rows.append(dict(system=c.system, regime=regime, claim=c.claim, claim_gain=c.claim_gain,
                             measured_gain=measured, best_setup=where,
                             holds=bool(measured >= c.claim_gain) if np.isfinite(measured) else None,
                             network=net, baseline_ideal_ratio=ratio, seeds=seeds, seed_min=seed_min,
                             seed_max=seed_max))
    return pd.DataFrame(rows)


def claims_table(dally_claims: pd.DataFrame | None, cassini_claims: pd.DataFrame | None) -> pd.DataFrame:
    """Every paper claim in every regime, one table: ``system``, ``regime``, the claim, the paper's figure and what
    netlab measured, as a factor (``paper_factor``, ``measured_factor``: 1.6 = 1.6x better; a Dally gain g is
    1 / (1 - g)), whether it holds, where, and which regime the paper's setup corresponds to
    (``paper_regime``, ``is_paper_regime``; the why is in the per-system tables)."""
    parts = []
    if dally_claims is not None and len(dally_claims):
        d = dally_claims
        factor = lambda g: 1 / (1 - g) if pd.notna(g) and g < 1 else np.nan  # noqa: E731
        parts.append(pd.DataFrame(dict(system="Dally", regime=d.regime, claim=d.claim,
                                       paper_factor=d.claim_gain.map(factor),
                                       measured_factor=d.measured_gain.map(factor),
                                       holds=d.holds, setup=d.best_setup, paper_regime=d.paper_regime,
                                       is_paper_regime=d.is_paper_regime)))
    if cassini_claims is not None and len(cassini_claims):
        c = cassini_claims
        parts.append(pd.DataFrame(dict(system="CASSINI", regime=c.regime, claim=c.paper, paper_factor=c.paper_factor,
                                       measured_factor=c.measured_factor, holds=c.holds, setup=c.best_setup,
                                       paper_regime=c.paper_regime, is_paper_regime=c.is_paper_regime)))
    return pd.concat(parts, ignore_index=True) if parts else pd.DataFrame()


# ------------------------------------------------------------ the testbed beside each claim
TESTBED_FILES = {"interleave": "interleave.json", "testbed_cassini": "testbed_cassini.json"}
NOT_ON_TESTBED = "not measured on the testbed"


def testbed_results(results_dir) -> dict:
    """The testbed's recorded results in ``results_dir`` (``benchmarks/results``): ``interleave`` (the
    interleaving experiment, ``bench_interleave.py``) and ``testbed_cassini`` (CASSINI vs its host through
    TestbedCluster, ``bench_testbed_cassini.py``), each only if its file exists."""
    import json

    out = {}
    for key, name in TESTBED_FILES.items():
        path = Path(results_dir) / name
        if path.exists():
            out[key] = json.loads(path.read_text())
    return out


def _scenario_mean(rows: list[dict], scenario: str, col: str) -> float:
    vals = [r[col] for r in rows if r.get("scenario") == scenario and r.get(col) is not None]
    return float(np.mean(vals)) if vals else np.nan


def _testbed_cassini(metric: str, tb: dict) -> list[str]:
    """What the testbed measured for a CASSINI claim (a few sentences; empty if nothing applies)."""
    out = []
    tc = tb.get("testbed_cassini")
    if tc and metric in ("avg_jct", "p99_jct", "never_worse"):
        rows = {(r["where"], r["seed"]): r for r in tc.get("summary", [])}
        col = "cassini_over_host_p99_jct_s" if metric == "p99_jct" else "cassini_over_host_avg_jct_s"
        tb_r = [r[col] for (w, _), r in sorted(rows.items()) if w == "testbed"]
        sim_r = [r[col] for (w, _), r in sorted(rows.items()) if w == "sim"]
        setup = tc.get("setup", {})
        if tb_r:
            name = "p99" if metric == "p99_jct" else "avg"
            out.append(f"trace through TestbedCluster ({setup.get('jobs')} {setup.get('model')} "
                       f"{setup.get('gpus_per_job')}-GPU jobs, {setup.get('ordering')}): CASSINI / host {name} JCT "
                       f"{', '.join(f'{x:.3f}' for x in tb_r)} on the testbed vs "
                       f"{', '.join(f'{x:.3f}' for x in sim_r)} simulated (tcp), per seed (< 1: CASSINI better)")
            jobs = [r for r in tc.get("per_job", []) if r.get("where") == "testbed"]
            col = "measured_iter_p99_s" if metric == "p99_jct" else "measured_iter_s"
            per = {p: np.mean([r[col] for r in jobs if r["policy"] == p and r.get(col) is not None])
                   for p in ("host", "cassini")} if jobs else {}
            if per and per["host"] > 0:
                out.append(f"jobs' {'p99' if metric == 'p99_jct' else 'median'} iteration there, CASSINI / host "
                           f"{per['cassini'] / per['host']:.3f}")
    il = tb.get("interleave")
    if il and metric in ("avg_jct", "p99_jct"):
        key = "cassini_over_aligned_measured" if metric == "avg_jct" else "cassini_over_aligned_p99_measured"
        sim_key = "cassini_over_aligned_tcp_mean" if metric == "avg_jct" else "cassini_over_aligned_p99_tcp_sim"
        head = [h for h in il.get("headline", []) if key in h]
        if head:
            m = np.mean([h[key] for h in head])
            p = np.mean([h[sim_key] for h in head if sim_key in h]) if any(sim_key in h for h in head) else np.nan
            out.append(f"interleaving, 2 jobs on one uplink: CASSINI's shift / aligned {'mean' if metric == 'avg_jct' else 'p99'} "
                       f"iteration {m:.3f} measured vs {p:.3f} tcp model ({len(head)} repeats)")
        four = il.get("parts", {}).get("four_rank", {}).get("headline", [])
        four = [h for h in four if key in h]
        if four:
            out.append(f"4-rank jobs: {np.mean([h[key] for h in four]):.3f} measured vs "
                       f"{np.mean([h[sim_key] for h in four if sim_key in h]):.3f} tcp model")
    if il and metric == "ecn_marks":
        part = il.get("parts", {}).get("byte_queue") or il
        rows = part.get("per_scenario", [])
        a, c = "2 jobs aligned", "2 jobs at CASSINI's shift"
        queue = part.get("setup", {}).get("queue", "")
        o_a, o_c = _scenario_mean(rows, a, "uplink_overlimits_per_s"), _scenario_mean(rows, c, "uplink_overlimits_per_s")
        d_a, d_c = _scenario_mean(rows, a, "uplink_drops_per_s"), _scenario_mean(rows, c, "uplink_drops_per_s")
        r_a, r_c = _scenario_mean(rows, a, "retransmits_per_s"), _scenario_mean(rows, c, "retransmits_per_s")
        if np.isfinite(o_a):
            out.append(f"no ECN on the testbed; uplink HTB overlimits/s aligned {o_a:.0f} vs CASSINI's shift {o_c:.0f} "
                       f"({o_a / o_c if o_c > 0 else np.inf:.2f}x fewer), drops/s {d_a:.1f} vs {d_c:.1f}, TCP "
                       f"retransmits/s {r_a:.1f} vs {r_c:.1f} ({queue})")
    return out


def with_testbed(claims: pd.DataFrame, system: str, results: dict, key: str = "claim") -> pd.DataFrame:
    """``claims`` with a ``testbed`` column: what the testbed measured for each claim (from
    :func:`testbed_results`), or :data:`NOT_ON_TESTBED`. CASSINI claims are keyed by ``key`` (avg_jct,
    p99_jct, ecn_marks, never_worse, as :func:`netlab.repro.cassini.cassini_claims` names them); Dally
    was never run on the testbed."""
    texts = []
    for metric in claims[key]:
        found = _testbed_cassini(str(metric), results) if system == "CASSINI" else []
        texts.append("; ".join(found) if found else NOT_ON_TESTBED)
    return claims.assign(testbed=texts)


def write_results(path, **frames_and_dicts) -> Path:
    """Write a results JSON (tables as records) atomically, for notebooks to read back."""
    from ..sim.metrics import write_json

    doc = {k: (v.to_dict(orient="records") if isinstance(v, pd.DataFrame) else v) for k, v in frames_and_dicts.items()}
    return write_json(path, doc)


def run(grid: dict, out=None, backend="processes", progress=True, **options):
    """Run a reproduction grid (a thin alias of :func:`netlab.sweep.run_sweep`)."""
    return run_sweep(grid, out=out, backend=backend, progress=progress, **options)
