"""Reproduction tables: gains, acceptance and claims computed as the docstrings say (hand-built frames)."""

from types import SimpleNamespace

import pandas as pd
import pytest

from netlab import repro


REGIME = "reno-deep"  # a registered regime (its model here is a stand-in: the tables read only the column)


def fake_result():
    """Two seeds; in one regime (on the fair network) Tiresias takes 100/50/90 s (makespan/avg/p99) and Dally
    80/25/60 s; on the ideal network (no regime) both take half. Per job: Tiresias slowdown 2.0 on 10 s alone,
    Dally 1.5 on 2 s."""
    rows = []
    for seed in (0, 1):
        for label, makespan, avg, p99 in (("tiresias+consolidated", 100.0, 50.0, 90.0),
                                          ("dally+default", 80.0, 25.0, 60.0)):
            for network in ("fair", "ideal"):
                scale = 1.0 if network == "fair" else 0.5
                rows.append(dict(trace="t", batch=False, oversub=4, background=0.0, label=label, network=network,
                                 regime=REGIME if network == "fair" else None,
                                 seed=seed, makespan_s=makespan * scale, avg_jct_s=avg * scale,
                                 p99_jct_s=p99 * scale, avg_start_delay_s=1.0 + (label == "dally+default"),
                                 avg_wait_s=3.0))
    summary = pd.DataFrame(rows)
    jobs = pd.DataFrame([dict(trace="t", batch=False, oversub=4, background=0.0, label=l, network=n, seed=s,
                              regime=REGIME if n == "fair" else None,
                              comm_fraction=0.5, slowdown=2.0 if l.startswith("tiresias") else 1.5,
                              isolated_s=10.0 if l.startswith("tiresias") else 2.0)
                         for l in ("tiresias+consolidated", "dally+default") for s in (0, 1) for n in ("fair", "ideal")])
    return SimpleNamespace(summary=summary, jobs=jobs)


def test_dally_table_gains_are_relative_to_consolidated_tiresias():
    table = repro.dally_table(fake_result()).set_index("label")
    assert set(table.network) == {"fair"}  # the ideal network is the reference, not a row
    assert table.loc["dally+default", "avg_jct_gain"] == pytest.approx(0.5)  # 1 - 25/50
    assert table.loc["dally+default", "makespan_gain"] == pytest.approx(0.2)
    # Communication overhead = the time the network adds, (slowdown - 1) x isolated: 0.5 x 2 = 1 s for Dally
    # against 1.0 x 10 = 10 s for Tiresias: 90% less. (All communication seconds would have counted
    # 0.5 x 1.5 x 2 = 1.5 s against 10 s.)
    assert table.loc["dally+default", "comm_overhead_s"] == pytest.approx(1.0)
    assert table.loc["tiresias+consolidated", "comm_overhead_s"] == pytest.approx(10.0)
    assert table.loc["dally+default", "comm_overhead_gain"] == pytest.approx(0.9)
    assert table.loc["tiresias+consolidated", "avg_jct_gain"] == pytest.approx(0.0)
    # Room the network leaves: Tiresias 50 s here, 25 s on the ideal network, on every row of the setup.
    assert table.baseline_ideal_ratio.tolist() == pytest.approx([2.0, 2.0])
    assert table.loc["dally+default", "seeds"] == [0, 1]
    # waiting is reported as the summary's start delay and total wait (not the deprecated avg_queue_s)
    assert table.loc["dally+default", "avg_start_delay_s"] == pytest.approx(2.0)
    assert table.loc["tiresias+consolidated", "avg_wait_s"] == pytest.approx(3.0)
    assert "avg_queue_s" not in table.columns


def test_comm_overhead_is_extra_network_time():
    jobs = pd.DataFrame(dict(slowdown=[1.0, 1.25, 3.0, 1.0 - 1e-15], isolated_s=[7.0, 8.0, 0.5, 4.0]))
    assert list(repro.comm_overhead(jobs)) == pytest.approx([0.0, 2.0, 1.0, 0.0])


def test_acceptance_and_claims():
    dally = repro.dally_table(fake_result())
    acc = repro.acceptance(dally, pd.DataFrame(columns=["oversub", "load", "label", "avg_jct_s", "p99_jct_s"]))
    entry = acc[f"dally-setup/t/{REGIME}/oversub=4"]  # per trace, regime and oversubscription
    assert entry["best"] == "dally+default" and entry["beats_on_both"]
    assert entry["avg_jct_ratio"] == pytest.approx(2.0) and entry["p99_jct_ratio"] == pytest.approx(1.5)
    claims = repro.claims_vs_measured(dally=dally).set_index("claim")
    row = claims.loc["up to 83% better average JCT"]
    assert row.measured_gain == pytest.approx(0.5) and not row.holds
    # each claim names the regime it was measured in and the network that regime ran on, with the setup's room
    assert (row.regime, row.network) == (REGIME, "fair")
    assert row.baseline_ideal_ratio == pytest.approx(2.0) and row.seeds == [0, 1]
    assert claims.loc["up to 98% less communication overhead"].measured_gain == pytest.approx(0.9)


def test_a_gain_comes_with_its_seeds_range():
    # Seed 1's Dally takes 35 s instead of 25: gains 1 - 25/50 = 0.5 and 1 - 35/50 = 0.3, mean 0.4.
    result = fake_result()
    s = result.summary
    s.loc[(s.label == "dally+default") & (s.seed == 1) & (s.network == "fair"), "avg_jct_s"] = 35.0
    row = repro.dally_table(result).set_index("label").loc["dally+default"]
    assert row.avg_jct_gain == pytest.approx(0.4)
    assert (row.avg_jct_gain_seed_min, row.avg_jct_gain_seed_max) == pytest.approx((0.3, 0.5))
    assert row.makespan_gain_seed_min == row.makespan_gain_seed_max == pytest.approx(0.2)  # both seeds alike
    claim = repro.claims_vs_measured(dally=repro.dally_table(result)).set_index("claim").loc[
        "up to 83% better average JCT"]
    assert (claim.measured_gain, claim.seed_min, claim.seed_max) == pytest.approx((0.4, 0.3, 0.5))


def test_grids_expand_to_the_documented_cells():
    from netlab.sweep.grid import expand

    regimes = ("reno-deep", "dcqcn")
    cells = expand(repro.dally_grid(traces=("philly-sample",), oversub=(4, 8), background=(0.5,), seeds=2,
                                    max_jobs=50, regimes=regimes))
    # setups: (4, 0), (8, 0), (8, 0.5) in each of two regimes, plus one ideal; x 2 submission modes x 2 seeds
    assert len(cells) == (3 * 2 + 1) * len(repro.DALLY_POLICIES) * 2 * 2
    ideal = [c for c in cells if c.params["network"] == "ideal"]
    assert len(ideal) == len(repro.DALLY_POLICIES) * 2 * 2 and all(c.params["oversub"] == 4 for c in ideal)
    assert all("regime" not in c.params for c in ideal)  # the bound belongs to no regime
    # every other cell names its regime and runs on the network the registry names for it
    from netlab.network.regimes import regime

    congested = [c for c in cells if c not in ideal]
    assert {c.params["regime"] for c in congested} == set(regimes)
    assert all(c.params["network"] == regime(c.params["regime"]).network for c in congested)
    # all registered regimes by default
    from netlab.network.regimes import REGIMES

    every = expand(repro.dally_grid(traces=("philly-sample",), oversub=(4,), background=(), batch=(False,)))
    assert {c.params.get("regime") for c in every} == set(REGIMES.names()) | {None}
    assert {c.params["seed"] for c in expand(repro.dally_grid(traces=("philly-sample",), seeds=(3, 5)))} == {3, 5}


def test_batch_cells_submit_every_job_at_once_and_pair_with_their_own_ideal_run():
    grid = dict(name="b", trace="philly-sample", max_jobs=6, grid=dict(batch=[False, True], network=["fair", "ideal"]))
    r = repro.run(grid, backend="serial", progress=False)
    jobs = r.jobs.set_index(["batch", "network", "job_id"]).submit_s
    assert (jobs.loc[True] == 0).all() and jobs.loc[False].max() > 0
    assert len(r.summary) == 4 and r.summary.jct_vs_ideal.notna().all()  # one ideal match each, not two


def cassini_summary_rows():
    """One tcp setup: CASSINI 1.2x its host on avg JCT (1.1x vs aligned), 3x on p99, 40x on the queue proxy;
    the host alone 1.1x its ideal-network JCT; worst seed 0.95x."""
    return pd.DataFrame([dict(setup="snapshot", oversub=4, host="themis", regime=REGIME, network="tcp",
                              base_vs_ideal=1.1,
                              avg_jct_s_vs_random=1.2, avg_jct_s_vs_aligned=1.1, p99_jct_s_vs_random=3.0,
                              p99_jct_s_vs_aligned=2.0, ecn_s_vs_random=40.0, ecn_s_vs_aligned=50.0,
                              worst_avg_vs_random=0.95, worst_p99_vs_random=1.0, seeds="10,11")])


def test_cassini_claims_give_reasons_and_the_testbed_column():
    testbed = dict(
        testbed_cassini=dict(setup=dict(jobs=5, model="bert-base", gpus_per_job=3, ordering="themis"),
                             summary=[dict(where="testbed", seed=0, cassini_over_host_avg_jct_s=0.9,
                                           cassini_over_host_p99_jct_s=0.8),
                                      dict(where="sim", seed=0, cassini_over_host_avg_jct_s=0.99,
                                           cassini_over_host_p99_jct_s=0.98)]),
        interleave=dict(headline=[dict(cassini_over_aligned_measured=0.96, cassini_over_aligned_tcp_mean=1.0)],
                        parts=dict(byte_queue=dict(setup=dict(queue="a bfifo of 15140 bytes"), per_scenario=[
                            dict(scenario="2 jobs aligned", uplink_overlimits_per_s=300.0, uplink_drops_per_s=4.0,
                                 retransmits_per_s=2.0),
                            dict(scenario="2 jobs at CASSINI's shift", uplink_overlimits_per_s=100.0,
                                 uplink_drops_per_s=1.0, retransmits_per_s=0.5)]))))
    c = repro.cassini_claims(cassini_summary_rows(), testbed=testbed).set_index("claim")
    assert c.loc["avg_jct", "measured_factor"] == pytest.approx(1.2) and not c.loc["avg_jct", "holds"]
    assert c.loc["p99_jct", "holds"] and c.loc["p99_jct", "reason"] == "holds"  # 3.0 >= 2.5
    # 1.1x room only: no placement can reach 1.6x there, and the reason says so
    assert "only 1.10x slower than on the ideal network" in c.loc["avg_jct", "reason"]
    assert "1.053x its host's average JCT in the worst seed" in c.loc["never_worse", "reason"]  # 1 / 0.95
    assert "0.900 on the testbed vs 0.990 simulated" in c.loc["avg_jct", "testbed"]
    assert "0.960 measured vs 1.000 tcp model" in c.loc["avg_jct", "testbed"]
    assert "0.800 on the testbed" in c.loc["p99_jct", "testbed"]
    assert "overlimits/s aligned 300 vs CASSINI's shift 100 (3.00x fewer), drops/s 4.0 vs 1.0" in c.loc["ecn_marks",
                                                                                                        "testbed"]
    # nothing recorded: every row says so
    bare = repro.cassini_claims(cassini_summary_rows())
    assert (bare.testbed == repro.NOT_ON_TESTBED).all()


def test_dally_claims_say_they_were_not_measured_on_the_testbed():
    c = repro.dally_claims(repro.dally_table(fake_result()))
    assert len(c) == 3 and (c.testbed == repro.NOT_ON_TESTBED).all()
    assert (c.regime == REGIME).all()


def test_testbed_results_reads_only_the_files_that_exist(tmp_path):
    assert repro.testbed_results(tmp_path) == {}
    (tmp_path / "testbed_cassini.json").write_text('{"summary": []}')
    assert repro.testbed_results(tmp_path) == {"testbed_cassini": {"summary": []}}
