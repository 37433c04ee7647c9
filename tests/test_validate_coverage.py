"""How thick the referee's evidence is (netlab.validate.coverage), checked by hand, and a stored referee run scored
without ns-3: the committed record of a small family scenario, through the benchmark's own comparison."""

import json
from pathlib import Path

import numpy as np
import pytest

from netlab.topology import load_topology
from netlab.validate.compare import compare_jobs, contended_jobs, error_summary
from netlab.validate.coverage import components, coverage_table, scenario_coverage, stored_family_runs
from netlab.validate.families import generate
from netlab.validate.predict import alone_iter_s, predict_all
from netlab.validate.runs import RunStore, record_times
from netlab.validate.scenario import REGIMES, RefereeJob, RefereeScenario

RUNS = Path(__file__).resolve().parents[1] / "benchmarks" / "results" / "referee_runs"


@pytest.fixture
def chain():
    """Four racks on one spine: job 1 inside rack 0; jobs 2-4 each cross from rack i to rack i+1, so 2 and 3 share
    leaf 1's uplink and downlink, 3 and 4 leaf 2's, 2 and 4 nothing; job 5 inside rack 3."""
    topo = load_topology("leafspine,racks=4,hosts_per_rack=3,gpus_per_host=1,spines=1,ecmp=hash")
    jobs = (RefereeJob(1, ("r0h0", "r0h1"), (1, 1), 1e5, 0.01), RefereeJob(2, ("r0h2", "r1h0"), (1, 1), 1e5, 0.01),
            RefereeJob(3, ("r1h1", "r2h0"), (1, 1), 1e5, 0.01), RefereeJob(4, ("r2h1", "r3h0"), (1, 1), 1e5, 0.01),
            RefereeJob(5, ("r3h1", "r3h2"), (1, 1), 1e5, 0.01))
    return RefereeScenario("chain", topo, jobs, meta=dict(family="chain", seed=3, half="scoring"))


def test_components_join_jobs_through_shared_links_transitively(chain):
    assert components(chain) == [[2, 3, 4], [1], [5]]  # 2 and 4 share no link, but both share one with 3
    assert contended_jobs(chain) == {1: False, 2: True, 3: True, 4: True, 5: False}


def test_coverage_counts_contended_and_heavy_jobs_by_hand(chain):
    # slowdowns: job 1 3x but alone (not contended: not heavy), 2 2.5x, 3 1.5x, 4 exactly 2x (heavy), 5 1x
    rec = dict(ref_iter_s={"1": 0.3, "2": 0.25, "3": 0.15, "4": 0.2, "5": 0.1},
               ref_alone_s={"1": 0.1, "2": 0.1, "3": 0.1, "4": 0.1, "5": 0.1})
    one = scenario_coverage(chain, rec)
    assert one == dict(family="chain", seed=3, half="scoring", n_jobs=5, n_contended=3, n_heavy=2,
                       component_sizes=[3])
    other = dict(one, seed=5, n_jobs=40, n_contended=30, n_heavy=0, component_sizes=[20, 6, 4])
    calib = dict(one, seed=4, half="calibration")
    table = coverage_table([dict(one, regime="dctcp"), dict(other, regime="dctcp"), dict(calib, regime="dctcp")])
    row = table[(table.family == "chain") & (table.half == "scoring")].iloc[0]
    assert (row.scenarios, row.jobs, row.contended, row.heavy, row.components) == (2, 45, 33, 2, 4)
    assert (row.component_min, row.component_median, row.component_max, row.seeds) == (3, 5.0, 20, "3 5")
    assert table[(table.family == "all") & (table.half == "calibration")].iloc[0].scenarios == 1
    assert set(table.half) == {"scoring", "calibration"} and len(table) == 4  # chain and all, per half


def test_a_stored_run_is_scored_without_ns3():
    sc = generate("2tier", 5, REGIMES["reno-deep"])  # 10 jobs, scoring half, committed with the benchmark
    rec = RunStore(RUNS).get(sc)
    if rec is None:
        pytest.skip(f"no current record of {sc.name} (reno-deep) in {RUNS}")
    ref_iter, ref_alone = record_times(rec)
    assert set(ref_iter) == set(ref_alone) == {j.job_id for j in sc.jobs}
    preds = predict_all(sc, {"tcp": ("tcp", {}, "solve")})
    rows = compare_jobs(sc, ref_iter, ref_alone, preds).set_index("job_id")
    # the error is the model's slowdown applied to the referee's own time alone, by hand for every job
    model_alone = alone_iter_s(sc)
    for jid, r in rows.iterrows():
        pred = ref_alone[jid] * r.iter_s / model_alone[jid]
        assert r.ape == pytest.approx(abs(pred / ref_iter[jid] - 1), rel=1e-12)
    assert np.isfinite(rows.ape).all()
    cov = scenario_coverage(sc, rec)
    summary = error_summary(rows.reset_index())["tcp"]
    assert summary["n_contended"] == cov["n_contended"] == sum(contended_jobs(sc).values())
    assert summary["n_heavy"] == cov["n_heavy"]
    assert sum(cov["component_sizes"]) == cov["n_contended"]
    # the store finds the same record by family and seed, under its regime only
    found = [(r, s.name) for r, s, _ in stored_family_runs(RunStore(RUNS), {"reno-deep": REGIMES["reno-deep"]},
                                                            ["2tier"], "scoring")]
    assert ("reno-deep", "2tier-5") in found and all(r == "reno-deep" for r, _ in found)


def test_a_replicate_of_a_family_scenario_is_not_counted_again(tmp_path):
    sc = generate("2tier", 5, REGIMES["reno-deep"])
    rec = RunStore(RUNS).get(sc)
    if rec is None:
        pytest.skip(f"no current record of {sc.name} (reno-deep) in {RUNS}")
    store = RunStore(tmp_path)
    store.put(sc, rec)
    # the noise check's replicate: same family, seed and meta, other jitter draws, so another key and file
    (tmp_path / "0123456789abcdef.json").write_text(json.dumps(dict(rec, key="0123456789abcdef")))
    found = list(stored_family_runs(store, {"reno-deep": REGIMES["reno-deep"]}))
    assert [(r, s.key()) for r, s, _ in found] == [("reno-deep", sc.key())]
