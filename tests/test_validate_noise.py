"""The referee's noise told from a model's error (netlab.validate.noise), checked by hand on three contended jobs
and two draws: a job the draws disagree on (A), one they agree on (B) and one whose first draw alone misses (D)."""

import math

import numpy as np
import pandas as pd
import pytest

from netlab.validate.noise import log_errors, noise_split

# log(1 + signed error) per draw: A 0.1 / 0.3, B -0.2 / -0.2, D 0.2 / -0.05; job 9 is not contended (left out)
Y = {"A": (0.1, 0.3), "B": (-0.2, -0.2), "D": (0.2, -0.05), 9: (2.0, 2.0)}


def _draw(k: int) -> pd.DataFrame:
    return pd.DataFrame(dict(scenario="s", job_id=[str(j) for j in Y], contended=[j != 9 for j in Y],
                             signed=[math.expm1(y[k]) for y in Y.values()]))


@pytest.fixture
def split():
    return noise_split([_draw(0), _draw(1)])


def test_log_errors_by_hand():
    e = log_errors([_draw(0), _draw(1)]).set_index("job_id")
    assert list(e.index) == ["A", "B", "D"]  # the uncontended job is not scored
    assert e.ybar.to_dict() == pytest.approx({"A": 0.2, "B": -0.2, "D": 0.075})
    # sample variance (ddof 1) of two values a, b: (a - b) ** 2 / 2
    assert e.s2.to_dict() == pytest.approx({"A": 0.02, "B": 0.0, "D": 0.03125})
    with pytest.raises(ValueError):
        log_errors([_draw(0)])


def test_the_referee_floor_is_each_draw_about_its_centre(split):
    # deviations x sqrt(2 / 1): A +-0.1414, B 0, D +-0.1768 -> |exp(dev) - 1|
    a, d = 0.1 * math.sqrt(2), 0.125 * math.sqrt(2)
    vals = sorted([math.expm1(a), -math.expm1(-a), 0.0, 0.0, math.expm1(d), -math.expm1(-d)])
    f = split["referee_floor"]
    assert f["n"] == 6
    assert f["median_ape"] == pytest.approx((vals[2] + vals[3]) / 2)
    assert f["p90_ape"] == pytest.approx(vals[4] + 0.5 * (vals[5] - vals[4]))  # position 0.9 x 5 = 4.5
    assert f["max_ape"] == pytest.approx(math.expm1(d))


def test_the_models_part_takes_the_noise_left_in_the_mean_out(split):
    m = split["model_part"]
    # A: 0.2 ** 2 - 0.02 / 2 = 0.03 -> exp(sqrt 0.03) - 1; B: no noise, 0.2 -> 1 - exp(-0.2); D: 0.075 ** 2 <
    # 0.03125 / 2 -> 0 (its error is all noise)
    own = sorted([math.expm1(math.sqrt(0.03)), -math.expm1(-0.2), 0.0])
    assert m["median_ape"] == pytest.approx(own[1])
    assert m["p90_ape"] == pytest.approx(own[1] + 0.8 * (own[2] - own[1]))  # position 0.9 x 2 = 1.8
    assert m["max_ape"] == pytest.approx(math.expm1(math.sqrt(0.03)))
    raw = sorted([math.expm1(0.2), -math.expm1(-0.2), math.expm1(0.075)])
    assert m["raw"]["p90_ape"] == pytest.approx(raw[1] + 0.8 * (raw[2] - raw[1]))
    assert m["p90_ape"] < m["raw"]["p90_ape"]


def test_against_one_draw_is_the_mean_over_draws_and_against_both_their_centre(split):
    def p90(v):
        v = sorted(v)
        return v[1] + 0.8 * (v[2] - v[1])

    one = [p90([abs(math.expm1(Y[j][k])) for j in "ABD"]) for k in (0, 1)]
    k = split["against_k_draws"]
    assert k[1]["subsets"] == 2 and k[2]["subsets"] == 1
    assert k[1]["p90_ape"] == pytest.approx(np.mean(one))
    assert k[2]["p90_ape"] == pytest.approx(p90([abs(math.expm1(sum(Y[j]) / 2)) for j in "ABD"]))


def test_persistent_misses_are_off_the_same_way_in_every_draw(split):
    p = split["persistent"]
    # first draw beyond 15% (log 1.15 = 0.1398, log 0.85 = -0.1625): B (-0.2) and D (0.2); every draw: B only
    assert p == dict(miss=0.15, jobs=3, missed_on_first_draw=2, of_them_missed_on_every_draw=1,
                     of_them_missed_on_the_centre=1, missed_on_every_draw=1)
    assert split["draws"] == 2 and split["contended_jobs"] == 3


def test_the_benchmark_reads_every_stored_draw_up_to_the_first_missing_one(tmp_path):
    import importlib.util
    from pathlib import Path

    from netlab.validate.families import generate
    from netlab.validate.runs import RECORD_VERSION, RunStore, referee_source_hash
    from netlab.validate.sanity import replicate
    from netlab.validate.scenario import REGIMES

    spec = importlib.util.spec_from_file_location(
        "bench_referee", Path(__file__).parent.parent / "benchmarks" / "bench_referee.py")
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    sc = generate("2tier", 1, REGIMES["reno-shallow"])
    store = RunStore(tmp_path)

    def put(s, it):
        store.put(s, dict(version=RECORD_VERSION, key=s.key(), referee_source=referee_source_hash(),
                          ref_iter_s={"1": it}, ref_alone_s={"1": 0.1}))

    put(sc, 0.2)
    put(replicate(sc, 1), 0.3)
    put(replicate(sc, 3), 0.5)  # draw 3 without draw 2: not read
    draws = bench.stored_draws(store, sc, store.get(sc), 4)
    assert [d[0][1] for d in draws] == [0.2, 0.3]
    assert len(bench.stored_draws(store, sc, store.get(sc), 1)) == 1
