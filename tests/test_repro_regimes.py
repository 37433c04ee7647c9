"""Reproductions and the demo per transport regime: the grid's regime axis, every claim row naming a registered
regime, CASSINI against its host with the measured cause where it loses (hand-computed small cases)."""

import pandas as pd
import pytest

from netlab import repro
from netlab.errors import UnknownNameError
from netlab.network.regimes import REGIMES, regime
from netlab.sweep.grid import GridError, expand


def test_a_regime_cell_runs_on_the_model_the_registry_names_and_pairs_with_the_ideal_network():
    grid = dict(name="r", trace="philly-sample", max_jobs=8, topology="leafspine,racks=2,hosts_per_rack=2,"
                "gpus_per_host=8,host_gbps=100,spines=2",
                grid=dict(setting=[dict(regime="reno-deep", oversub=4), dict(regime="dcqcn", oversub=4),
                                   dict(network="ideal")]))
    cells = expand(grid)
    assert {c.params.get("regime"): c.params["network"] for c in cells} == {
        "reno-deep": regime("reno-deep").network, "dcqcn": regime("dcqcn").network, None: "ideal"}
    r = repro.run(grid, backend="serial", progress=False)
    s = r.summary.set_index("regime", drop=False)
    assert r.errors.empty and len(s) == 3
    # the ideal cell (no regime) is the reference of every regime: jct_vs_ideal pairs across the regime column
    ideal = float(r.summary[r.summary.network == "ideal"].avg_jct_s.iloc[0])
    for name in ("reno-deep", "dcqcn"):
        assert s.loc[name, "jct_vs_ideal"] == pytest.approx(s.loc[name, "avg_jct_s"] / ideal)
        assert s.loc[name, "network"] == regime(name).network


def test_a_regime_beside_another_network_or_an_unknown_regime_is_refused_before_anything_runs():
    with pytest.raises(GridError, match="a regime sets the network"):
        expand(dict(grid=dict(regime="dcqcn", network="fair")))
    with pytest.raises(UnknownNameError) as err:
        expand(dict(grid=dict(regime="infiniband")))
    assert all(name in str(err.value) for name in REGIMES.names())


def test_verdicts_name_the_regime_they_were_computed_for():
    from netlab.compare import compare_policies, verdicts

    rows = [dict(label=label, regime=reg, network=regime(reg).network, oversub=8, seed=seed,
                 avg_jct_s=base * (0.8 if label == "dally+default" and reg == "dcqcn" else 1.0),
                 p99_jct_s=10.0, makespan_s=10.0, avg_wait_s=1.0)
            for reg in ("reno-deep", "dcqcn") for label in ("tiresias+consolidated", "dally+default")
            for seed, base in ((0, 100.0), (1, 110.0), (2, 90.0))]
    lines = verdicts(compare_policies(pd.DataFrame(rows), "tiresias+consolidated", n_resamples=200))
    assert len(lines) == 2
    deep, fair = sorted(lines, key=lambda l: "dcqcn" in l)
    assert "in the reno-deep regime" in deep and "avg JCT 0.0%" in deep
    assert "in the dcqcn regime" in fair and "avg JCT -20.0%" in fair and "-> better" in fair
    assert " on " not in deep + fair  # the regime names its network: not said twice


def losing_run(seed, regime_name, cassini_wait, cassini_run):
    """One setup and seed: the host alone waits 10 s and runs 90 s per job (JCT 100 s); CASSINI's jobs wait
    ``cassini_wait`` and run ``cassini_run`` s."""
    base = dict(setup="paper", oversub=8, host="tiresias", seed=seed, regime=regime_name,
                network=regime(regime_name).network, p99_jct_s=300.0, ecn_s=1.0, overload_gbit=1.0)
    host = dict(avg_wait_s=10.0, avg_run_s=90.0, avg_net_s=20.0, contended_share=0.4, cross_rack_share=0.5)
    cas = dict(avg_wait_s=cassini_wait, avg_run_s=cassini_run, avg_net_s=20.0 + cassini_run - 90.0,
               contended_share=0.6, cross_rack_share=0.75)
    return [dict(base, placement="consolidated", avg_jct_s=100.0, **host),
            dict(base, placement="aligned", avg_jct_s=110.0, **host),
            dict(base, placement="cassini", avg_jct_s=cassini_wait + cassini_run, **cas),
            dict(base, placement="consolidated", regime=None, network="ideal", avg_jct_s=50.0, **host)]


def test_cassini_against_its_host_gives_the_measured_cause_where_it_loses():
    # dcqcn: CASSINI's jobs wait 12 s and run 113 s (JCT 125 s against 100 s: ratio 0.8); the 25 s are +2 s
    # waiting and +23 s running, all of it network-added, with 60% of its jobs contended against 40%.
    # reno-deep: CASSINI waits 5 s and runs 75 s (JCT 80 s: ratio 1.25), no cause.
    runs = pd.DataFrame(losing_run(10, "dcqcn", 12.0, 113.0) + losing_run(10, "reno-deep", 5.0, 75.0)[:3])
    table = repro.cassini_table(runs)
    vs = repro.cassini_vs_host(table).set_index("regime")
    assert vs.loc["dcqcn", "ratio"] == pytest.approx(0.8) and vs.loc["dcqcn", "seeds_below_1"] == 1
    assert vs.loc["reno-deep", "ratio"] == pytest.approx(1.25) and vs.loc["reno-deep", "cause"] == ""
    cause = vs.loc["dcqcn", "cause"]
    assert cause.startswith("running: average JCT +25 s per job = +23 s running (network-added +23 s), +2 s waiting")
    assert "host 40% vs CASSINI 60%" in cause and "on more than one rack 50% vs 75%" in cause
    assert vs.loc["dcqcn", "base_vs_ideal"] == pytest.approx(2.0)  # 100 s against 50 s on the ideal network
    # waiting dominating is named first
    wait = repro.cassini_vs_host(repro.cassini_table(pd.DataFrame(losing_run(10, "dcqcn", 40.0, 92.0))))
    assert wait.cause.iloc[0].startswith("waiting: average JCT +32 s per job = +30 s waiting, +2 s running")


def test_a_setup_that_wins_on_average_names_its_losing_seed():
    runs = pd.DataFrame(losing_run(10, "dcqcn", 12.0, 113.0) + losing_run(11, "dcqcn", 5.0, 45.0))
    vs = repro.cassini_vs_host(repro.cassini_table(runs)).iloc[0]
    assert vs.ratio == pytest.approx((0.8 + 2.0) / 2) and vs.seeds_below_1 == 1
    assert vs.cause.startswith("seed 10 only (0.800x): running:")


def test_one_losing_seed_that_pulls_the_mean_of_ratios_below_1_is_named_not_the_means_gain():
    # seed 10: host 100 s, CASSINI 125 s (0.8x); seed 11 ten times longer: host 1000 s, CASSINI 50 + 850 = 900 s
    # (1.111x). Mean of ratios (0.8 + 1.111) / 2 = 0.956 < 1, but mean JCTs 550 s host vs 512.5 s CASSINI: the
    # means' cause would read -38 s per job, a gain; the losing seed's own cause (+25 s) is given instead.
    scaled = [{k: v * 10 if k in ("avg_jct_s", "avg_wait_s", "avg_run_s", "avg_net_s", "p99_jct_s") else v
               for k, v in r.items()} for r in losing_run(11, "dcqcn", 5.0, 85.0)]
    runs = pd.DataFrame(losing_run(10, "dcqcn", 12.0, 113.0) + scaled)
    vs = repro.cassini_vs_host(repro.cassini_table(runs)).iloc[0]
    assert vs.ratio == pytest.approx((0.8 + 1000 / 900) / 2) and vs.seeds_below_1 == 1
    assert vs.cause.startswith("seed 10 only (0.800x; the seed mean of ratios is below 1, the seeds' mean average "
                               "JCT is not: -38 s per job): running: average JCT +25 s per job")


def test_every_claim_row_names_a_registered_regime_and_the_papers_regime():
    runs = pd.DataFrame(losing_run(10, "dcqcn", 12.0, 113.0) + losing_run(10, "reno-deep", 5.0, 75.0)[:3])
    claims = repro.cassini_claims(repro.cassini_summary(repro.cassini_table(runs)))
    assert set(claims.regime) == {"dcqcn", "reno-deep"} and set(claims.regime) <= set(REGIMES.names())
    assert len(claims) == 2 * 4  # avg, p99, ECN, never worse: once per regime
    paper = repro.PAPER_REGIMES["CASSINI"][0]
    assert paper in REGIMES.names() and (claims.paper_regime == paper).all()
    assert (claims.is_paper_regime == (claims.regime == paper)).all()
    assert "RDMA" in claims.paper_regime_why.iloc[0]
    never = claims[claims.claim == "never_worse"].set_index("regime")
    assert never.loc["dcqcn", "measured_factor"] == pytest.approx(0.8) and not never.loc["dcqcn", "holds"]
    assert never.loc["reno-deep", "holds"]
    # one table of both papers' claims: Dally's gains as factors (a 50% gain is 2x)
    dally = pd.DataFrame([dict(regime="dcqcn", claim="c", claim_gain=0.5, measured_gain=0.2, holds=False,
                               best_setup="s", paper_regime="dcqcn", is_paper_regime=True)])
    both = repro.claims_table(dally, claims)
    assert set(both.system) == {"Dally", "CASSINI"} and set(both.regime) <= set(REGIMES.names())
    row = both[both.system == "Dally"].iloc[0]
    assert (row.paper_factor, row.measured_factor) == pytest.approx((2.0, 1.25))


def test_the_demo_runs_each_of_its_regimes_and_keeps_links_in_each():
    from netlab.sweep import demo_grid
    from netlab.sweep.grid import DEMO_REGIMES, DEMO_SCHEDULERS

    assert set(DEMO_REGIMES) <= set(REGIMES.names()) and len(DEMO_REGIMES) >= 2
    cells = expand(demo_grid(seeds=2))
    for name in DEMO_REGIMES:
        mine = [c for c in cells if c.params.get("regime") == name]
        assert len(mine) == len(DEMO_SCHEDULERS) * 2 * 2  # schedulers x oversub x seeds
        assert {c.params["network"] for c in mine} == {regime(name).network}
    assert {(c.params.get("regime"), c.params["oversub"], c.params["seed"]) for c in cells if c.keep_links} == {
        (name, 8, 0) for name in DEMO_REGIMES}
