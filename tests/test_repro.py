"""Reproduction tables: gains, acceptance and claims computed as the docstrings say (hand-built frames)."""

from types import SimpleNamespace

import pandas as pd
import pytest

from netlab import repro


def fake_result():
    rows = []
    for seed in (0, 1):
        for label, makespan, avg, p99 in (("tiresias+consolidated", 100.0, 50.0, 90.0),
                                          ("dally+default", 80.0, 25.0, 60.0)):
            for network in ("fair", "ideal"):
                scale = 1.0 if network == "fair" else 0.5
                rows.append(dict(trace="t", oversub=4, label=label, network=network, seed=seed,
                                 makespan_s=makespan * scale, avg_jct_s=avg * scale, p99_jct_s=p99 * scale,
                                 avg_queue_s=1.0, jct_vs_ideal=2.0))
    summary = pd.DataFrame(rows)
    jobs = pd.DataFrame([dict(trace="t", oversub=4, label=l, network="fair", seed=s, comm_fraction=0.5,
                              slowdown=2.0, isolated_s=10.0 if l.startswith("tiresias") else 2.0)
                         for l in ("tiresias+consolidated", "dally+default") for s in (0, 1)])
    return SimpleNamespace(summary=summary, jobs=jobs)


def test_dally_table_gains_are_relative_to_consolidated_tiresias():
    table = repro.dally_table(fake_result()).set_index("label")
    assert table.loc["dally+default", "avg_jct_gain"] == pytest.approx(0.5)  # 1 - 25/50
    assert table.loc["dally+default", "makespan_gain"] == pytest.approx(0.2)
    # Communication seconds = comm_fraction x slowdown x isolated: 10 vs 2 -> 80% less.
    assert table.loc["dally+default", "comm_overhead_s"] == pytest.approx(2.0)
    assert table.loc["dally+default", "comm_overhead_gain"] == pytest.approx(0.8)
    assert table.loc["tiresias+consolidated", "avg_jct_gain"] == pytest.approx(0.0)


def test_acceptance_and_claims():
    dally = repro.dally_table(fake_result())
    acc = repro.acceptance(dally, pd.DataFrame(columns=["oversub", "load", "label", "avg_jct_s", "p99_jct_s"]))
    entry = acc["dally-setup/t/oversub=4"]
    assert entry["best"] == "dally+default" and entry["beats_on_both"]
    assert entry["avg_jct_ratio"] == pytest.approx(2.0) and entry["p99_jct_ratio"] == pytest.approx(1.5)
    claims = repro.claims_vs_measured(dally=dally).set_index("claim")
    row = claims.loc["up to 83% better average JCT"]
    assert row.measured_gain == pytest.approx(0.5) and row.holds is False


def test_grids_expand_to_the_documented_cells():
    from netlab.sweep.grid import expand

    cells = expand(repro.dally_grid(traces=("philly-sample",), oversub=(4, 8), seeds=2, max_jobs=50))
    assert len(cells) == 2 * len(repro.DALLY_POLICIES) * 2 * 2  # oversub x policies x networks x seeds
    cells = expand(repro.cassini_grid(oversub=(4,), loads=(0.6, 0.9), jobs=20, seeds=1, ideal=False))
    assert len(cells) == 2 * len(repro.CASSINI_POLICIES)
    assert all("models=vgg11+vgg16" in c.params["trace"] for c in cells)
