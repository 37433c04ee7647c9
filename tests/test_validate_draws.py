"""The referee's mean over several draws (netlab.validate.draws) and the benchmark's scoring_mean_of_draws cells,
checked by hand: the mean of two draws, a job one draw did not measure, and heavy jobs classified on the mean."""

import importlib.util
from pathlib import Path

import pandas as pd
import pytest

from netlab.topology import load_topology
from netlab.validate.compare import compare_jobs
from netlab.validate.draws import cross_heavy, draw_spread, mean_of_draws, rescore
from netlab.validate.predict import alone_iter_s
from netlab.validate.scenario import RefereeJob, RefereeScenario


@pytest.fixture
def chain():
    """Four racks on one spine: job 1 inside rack 0 (alone); jobs 2-4 each cross from rack i to rack i+1 (2 and 3
    share leaf 1's links, 3 and 4 leaf 2's); job 5 inside rack 3 (alone)."""
    topo = load_topology("leafspine,racks=4,hosts_per_rack=3,gpus_per_host=1,spines=1,ecmp=hash")
    jobs = (RefereeJob(1, ("r0h0", "r0h1"), (1, 1), 1e5, 0.01), RefereeJob(2, ("r0h2", "r1h0"), (1, 1), 1e5, 0.01),
            RefereeJob(3, ("r1h1", "r2h0"), (1, 1), 1e5, 0.01), RefereeJob(4, ("r2h1", "r3h0"), (1, 1), 1e5, 0.01),
            RefereeJob(5, ("r3h1", "r3h2"), (1, 1), 1e5, 0.01))
    return RefereeScenario("chain", topo, jobs, meta=dict(family="chain", seed=3, half="scoring"))


def test_mean_of_two_draws_by_hand():
    a = ({1: 0.10, 2: 0.30}, {1: 0.05, 2: 0.10})
    b = ({1: 0.14, 2: 0.20}, {1: 0.07, 2: 0.10})
    it, alone, n = mean_of_draws([a, b])
    assert it == pytest.approx({1: 0.12, 2: 0.25})
    assert alone == pytest.approx({1: 0.06, 2: 0.10})
    assert n == {1: 2, 2: 2}
    # spread per job: |0.14 / 0.10 - 1| = 0.4, |0.20 / 0.30 - 1| = 1/3
    assert draw_spread([a, b]) == pytest.approx({1: 0.4, 2: 1 / 3})


def test_a_job_missing_in_one_draw_is_averaged_over_the_others_not_as_zero():
    a = ({1: 0.10, 2: 0.30}, {1: 0.05, 2: 0.10})
    b = ({1: 0.14}, {1: 0.05})  # job 2 has no steady window in draw 2
    it, alone, n = mean_of_draws([a, b])
    assert it == pytest.approx({1: 0.12, 2: 0.30})
    assert alone == pytest.approx({1: 0.05, 2: 0.10})
    assert n == {1: 2, 2: 1}
    assert draw_spread([a, b]) == pytest.approx({1: 0.4})  # job 2: no second draw, no spread
    c = ({1: 0.11, 2: 0.27}, {1: 0.05, 2: 0.10})  # a third draw: job 2's largest departure from draw 1 is 10%
    assert draw_spread([a, b, c]) == pytest.approx({1: 0.4, 2: 0.1})
    with pytest.raises(ValueError):
        mean_of_draws([])


def _model_rows(sc, slowdown: float) -> pd.DataFrame:
    """A model that predicts every job ``slowdown`` x its own time alone."""
    alone = alone_iter_s(sc)
    return pd.DataFrame(dict(model="m", job_id=list(alone), iter_s=[slowdown * v for v in alone.values()],
                             cpu_s=0.001))


def test_heavy_is_the_mean_draws_slowdown_and_the_prediction_is_unchanged(chain):
    alone = {j: 0.1 for j in range(1, 6)}
    # job 2: 2.5x in draw 1 (heavy), 1.3x in draw 2 -> mean 1.9x (not heavy); job 3: 1.8x then 2.4x -> mean 2.1x
    d1 = ({1: 0.1, 2: 0.25, 3: 0.18, 4: 0.15, 5: 0.1}, alone)
    d2 = ({1: 0.1, 2: 0.13, 3: 0.24, 4: 0.15, 5: 0.1}, alone)
    single = compare_jobs(chain, *d1, _model_rows(chain, 2.0))
    it, al, _ = mean_of_draws([d1, d2])
    mean = rescore(chain, single, it, al).set_index("job_id")
    single = single.set_index("job_id")
    assert list(single.heavy[[2, 3]]) == [True, False]
    assert list(mean.heavy[[2, 3]]) == [False, True]
    assert (mean.iter_s == single.iter_s).all()  # the model is not touched
    # prediction 2.0 x 0.1 s = 0.2 s; against the mean 0.19 s and 0.21 s; against draw 1 0.25 s and 0.18 s
    assert mean.signed[2] == pytest.approx(0.2 / 0.19 - 1) and mean.signed[3] == pytest.approx(0.2 / 0.21 - 1)
    assert single.signed[2] == pytest.approx(0.2 / 0.25 - 1) and single.signed[3] == pytest.approx(0.2 / 0.18 - 1)
    assert list(mean.contended) == [False, True, True, True, False]


def _bench():
    spec = importlib.util.spec_from_file_location(
        "bench_referee", Path(__file__).parent.parent / "benchmarks" / "bench_referee.py")
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    return bench


def _two_draws_scored(chain):
    """Two draws of the chain (job 2 heavy in the first only, job 3 in the second only) and the rows of a model
    predicting 2x alone for every job, against the first, labelled as a scoring-half dctcp scenario."""
    alone = {j: 0.1 for j in range(1, 6)}
    d1 = ({1: 0.1, 2: 0.25, 3: 0.18, 4: 0.15, 5: 0.1}, alone)
    d2 = ({1: 0.1, 2: 0.13, 3: 0.24, 4: 0.15, 5: 0.1}, alone)
    single = compare_jobs(chain, *d1, _model_rows(chain, 2.0))
    single["family"], single["seed"], single["half"], single["regime"] = "chain", 3, "scoring", "dctcp"
    return d1, d2, single


def test_the_benchmark_cell_scores_both_ways_and_the_spread_by_hand(chain):
    bench = _bench()
    d1, d2, single = _two_draws_scored(chain)
    it, al, n = mean_of_draws([d1, d2])
    cont = single.drop_duplicates("job_id").set_index("job_id").contended
    spread = [v for j, v in draw_spread([d1, d2]).items() if cont[j]]
    cell = bench.draws_cell([(single, rescore(chain, single, it, al), spread, 0)], "dctcp", 2)
    one, avg = cell["models"]["m"]["single_draw"], cell["models"]["m"]["mean_of_draws"]
    # contended jobs 2-4, prediction 0.2 s each. Draw 1: 0.25 / 0.18 / 0.15 s -> APE 0.2 (the median), 0.111, 0.333;
    # heavy: job 2
    assert one["n_contended"] == 3 and one["n_heavy"] == 1
    assert one["median_ape"] == pytest.approx(1 - 0.2 / 0.25) and one["max_ape"] == pytest.approx(0.2 / 0.15 - 1)
    assert one["heavy_median_signed"] == pytest.approx(0.2 / 0.25 - 1)
    # mean: 0.19 / 0.21 / 0.15 s -> APE 0.0526, 0.0476, 0.333; heavy: job 3 only
    assert avg["n_heavy"] == 1 and avg["heavy_median_signed"] == pytest.approx(0.2 / 0.21 - 1)
    assert avg["median_ape"] == pytest.approx(0.2 / 0.19 - 1)
    # spread over contended jobs: |0.13/0.25 - 1| = 0.48, |0.24/0.18 - 1| = 1/3, 0
    assert cell["spread"]["n_contended"] == 3 and cell["spread"]["max_abs_diff"] == pytest.approx(0.48)
    assert cell["spread"]["median_abs_diff"] == pytest.approx(1 / 3)
    assert (cell["scenarios"], cell["seeds"], cell["draws_per_scenario"]) == (1, [3], 2)
    section = bench.draws_section({("dctcp", "chain"): [(single, rescore(chain, single, it, al), spread, 0)]},
                                  [dict(family="chain", seed=5, regime="dctcp")], 2)
    assert section["results"]["dctcp"]["chain"]["seeds_without_draws"] == [5]
    assert "all" not in section["results"]["dctcp"]  # chain lacks seed 5's draw: not pooled
    section = bench.draws_section({("dctcp", "chain"): [(single, rescore(chain, single, it, al), spread, 0)]}, [], 2)
    assert section["results"]["dctcp"]["all"]["models"]["m"] == cell["models"]["m"]
    assert section["results"]["dctcp"]["all"]["families"] == ["chain"]


def test_cross_heavy_chooses_on_one_draw_and_scores_on_the_other(chain):
    alone = {j: 0.1 for j in range(1, 6)}
    # job 2: 2.5x in draw 1 (heavy), 1.3x in draw 2; job 3: 1.8x then 2.4x (heavy in draw 2); job 4: 1.5x both
    d1 = ({1: 0.1, 2: 0.25, 3: 0.18, 4: 0.15, 5: 0.1}, alone)
    d2 = ({1: 0.1, 2: 0.13, 3: 0.24, 4: 0.15, 5: 0.1}, alone)
    first = compare_jobs(chain, *d1, _model_rows(chain, 2.0))
    second = rescore(chain, first, *d2)
    cross = cross_heavy([first, second])
    assert len(cross) == 2 * len(first)  # two ordered pairs, every row once in each
    h = cross[cross.heavy & cross.contended].set_index("job_id")
    # heavy by draw 1 (job 2) scored on draw 2: 0.2 / 0.13 - 1; heavy by draw 2 (job 3) scored on draw 1: 0.2 / 0.18 - 1
    assert sorted(h.index) == [2, 3]
    assert h.signed[2] == pytest.approx(0.2 / 0.13 - 1) and h.signed[3] == pytest.approx(0.2 / 0.18 - 1)
    assert (h.chosen_by[2], h.scored_on[2], h.chosen_by[3], h.scored_on[3]) == (0, 1, 1, 0)
    # against the draw that chose them, both look under-predicted: 0.2 / 0.25 - 1 = -0.2 and 0.2 / 0.24 - 1
    assert first.set_index("job_id").signed[2] == pytest.approx(-0.2)
    assert second.set_index("job_id").signed[3] == pytest.approx(0.2 / 0.24 - 1)
    assert cross_heavy([first]).empty  # one draw: no pair


def test_cross_heavy_a_job_one_draw_lacks_is_not_heavy_by_it(chain):
    alone = {j: 0.1 for j in range(1, 6)}
    d1 = ({1: 0.1, 2: 0.25, 3: 0.18, 4: 0.15, 5: 0.1}, alone)
    d2 = ({1: 0.1, 3: 0.24, 4: 0.15, 5: 0.1}, alone)  # job 2 has no steady window in draw 2
    first = compare_jobs(chain, *d1, _model_rows(chain, 2.0))
    second = rescore(chain, first, *d2)
    cross = cross_heavy([first, second])
    two = cross[cross.job_id == 2].set_index("chosen_by")
    assert bool(two.heavy[0]) and pd.isna(two.signed[0])  # heavy by draw 1, no error against draw 2
    assert not bool(two.heavy[1])  # draw 2 cannot call it heavy


def test_the_benchmark_cell_reads_the_cross_draw_heavy_bias_by_hand(chain):
    bench = _bench()
    d1, d2, single = _two_draws_scored(chain)
    part = bench.draw_parts(chain, single, [d1, d2])
    cell = bench.draws_cell([part], "dctcp", 2)
    m = cell["models"]["m"]
    # as before: single draw heavy job 2 at -0.2; mean heavy job 3 at 0.2 / 0.21 - 1
    assert m["single_draw"]["heavy_median_signed"] == pytest.approx(-0.2)
    assert m["mean_of_draws"]["heavy_median_signed"] == pytest.approx(0.2 / 0.21 - 1)
    # cross: job 2 (heavy by draw 1) on draw 2: 0.2 / 0.13 - 1 = 0.538; job 3 (heavy by draw 2) on draw 1: 0.111
    x = m["cross_draw_heavy"]
    assert x["n_heavy"] == 2
    assert x["heavy_median_signed"] == pytest.approx(((0.2 / 0.13 - 1) + (0.2 / 0.18 - 1)) / 2)
    assert x["heavy_mean_signed"] == pytest.approx(((0.2 / 0.13 - 1) + (0.2 / 0.18 - 1)) / 2)
    assert cell["spread"]["max_abs_diff"] == pytest.approx(0.48)  # the spread as the 4-part cell gives it


def test_the_fit_objective_against_the_draws_by_hand():
    spec = importlib.util.spec_from_file_location(
        "bench_regimes_fit", Path(__file__).parent.parent / "benchmarks" / "bench_regimes_fit.py")
    fit = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(fit)
    # against the mean: median 4% / 5% = 0.8, p90 12% / 15% = 0.8; heavy read across draws -7% / 5% = 1.4
    assert fit.draws_objective(dict(median_ape=0.04, p90_ape=0.12), dict(heavy_median_signed=-0.07)) == \
        pytest.approx(1.4)
    # no heavy job in any pair: the APEs decide
    assert fit.draws_objective(dict(median_ape=0.04, p90_ape=0.18), dict(heavy_median_signed=None)) == \
        pytest.approx(1.2)
