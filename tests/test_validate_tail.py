"""Taking a regime model's error tail apart (netlab.validate.tail): hand-computed splits, slopes, the timeout oracle,
the centre of draws, and one job table on two jobs across one bottleneck (no ns-3: a made-up referee record)."""

import math

import numpy as np
import pandas as pd
import pytest

from netlab.validate import tail
from netlab.validate.sanity import dumbbell
from netlab.validate.scenario import RefereeJob, RefereeScenario, Transport


def frame(scenarios, signed, ref_sd=None, model_sd=None, contended=None) -> pd.DataFrame:
    n = len(signed)
    return pd.DataFrame(dict(scenario=scenarios, signed=signed, contended=contended or [True] * n,
                             ref_slowdown=ref_sd or [1.0] * n, model_slowdown=model_sd or [1.0] * n))


def test_variance_split_between_and_within_scenarios():
    # log(1 + signed): scenario A 0.1 and -0.1 (mean 0), B 0.3 and 0.3 (mean 0.3); overall mean 0.15
    e = math.exp
    rows = frame(["A", "A", "B", "B", "B"], [e(0.1) - 1, e(-0.1) - 1, e(0.3) - 1, e(0.3) - 1, 5.0],
                 contended=[True, True, True, True, False])  # the uncontended job is left out
    v = tail.variance_split(rows)
    assert v["jobs"] == 4
    # total: (0.05^2 + 0.25^2 + 0.15^2 + 0.15^2) / 4 = 0.0275; between: every job 0.15 off the mean: 0.0225;
    # within: (0.1^2 + 0.1^2 + 0 + 0) / 4 = 0.005
    assert v["total"] == pytest.approx(0.0275)
    assert v["between"] == pytest.approx(0.0225)
    assert v["within"] == pytest.approx(0.005)
    assert v["within_share"] == pytest.approx(0.005 / 0.0275)


def test_within_slope_reads_each_scenario_about_its_own_mean():
    e = math.exp
    # A: model log slowdowns 0.2, 0.0 (centred +-0.1), referee 0.15, 0.05 (centred +-0.05): slope 0.5;
    # B: model 1.0, 0.6 (+-0.2), referee 0.9, 0.5 (+-0.2): slope 1. Pooled: (2 x 0.1 x 0.05 + 2 x 0.2 x 0.2) /
    # (2 x 0.01 + 2 x 0.04) = 0.09 / 0.1 = 0.9. B's level (far above A's) does not enter.
    rows = frame(["A", "A", "B", "B"], [0.0] * 4, ref_sd=[e(0.15), e(0.05), e(0.9), e(0.5)],
                 model_sd=[e(0.2), e(0.0), e(1.0), e(0.6)])
    s = tail.within_slope(rows)
    assert s["slope"] == pytest.approx(0.9)
    # the centred pairs (0.1, 0.05), (-0.1, -0.05), (0.2, 0.2), (-0.2, -0.2): not on one line (A's referee spreads
    # half as far as the model, B's as far), so the correlation is 0.09 / sqrt(0.1 x 0.085), below 1
    assert s["correlation"] == pytest.approx(0.09 / math.sqrt(0.1 * 0.085))
    assert s["correlation"] < 1.0


def test_timeout_oracle_adds_measured_timeouts():
    rows = pd.DataFrame(dict(pred_s=[0.10, 0.10], ref_iter_s=[0.12, 0.10], rtos_per_iter=[0.05, 0.0]))
    # job 1: 0.10 s + 1 x 0.05 timeouts per iteration x 0.2 s = 0.11 s against 0.12 s: -1/12; job 2: no timeout
    assert tail.timeout_oracle(rows, 1.0).tolist() == pytest.approx([0.11 / 0.12 - 1, 0.0])
    assert tail.timeout_oracle(rows, 0.5).tolist() == pytest.approx([0.105 / 0.12 - 1, 0.0])
    assert tail.timeout_oracle(rows, 0.0).tolist() == pytest.approx([0.10 / 0.12 - 1, 0.0])


def test_centre_of_draws_is_geometric():
    # +10% against one draw, -10% against the other: sqrt(1.1 x 0.9) - 1
    got = tail.centre_signed([np.array([0.1, 0.0]), np.array([-0.1, 0.0])])
    assert got.tolist() == pytest.approx([math.sqrt(0.99) - 1, 0.0])


def two_jobs() -> RefereeScenario:
    """Two 2-rank jobs across one 100 Mbit/s cable (hosts at 200 Mbit/s), job 1 with 10x job 2's gradient."""
    jobs = (RefereeJob(1, ("a0", "b0"), (1, 1), 2 * 40 * 1448, 0.004, iterations=10),
            RefereeJob(2, ("a1", "b1"), (1, 1), 2 * 4 * 1448, 0.004, iterations=10))
    return RefereeScenario("two", dumbbell(2), jobs, Transport("reno", 100), warmup=2, meta=dict(oversub=2.0))


def test_job_rows_on_two_jobs_across_one_bottleneck():
    sc = two_jobs()
    loss = {"1": dict(drops=8, retransmits=10, fast_recoveries=2, rtos=1),
            "2": dict(drops=0, retransmits=0, fast_recoveries=0, rtos=0)}
    rec = dict(ref_iter_s={"1": 0.02, "2": 0.01}, ref_alone_s={"1": 0.015, "2": 0.008},
               iterations_run={"1": 10, "2": 20}, job_loss=loss)
    rows = tail.job_rows(sc, rec, "tcp-shallow").set_index("job_id")
    # a 2-rank ring: 2 steps of grad / 2 on the wire (x 1502 / 1448 framing): 40 and 4 segments per step
    assert rows.steps.tolist() == [2, 2]
    assert rows.loc[1, "packets_per_step"] == pytest.approx(40 * 1502 / 1448)
    assert rows.loc[2, "packets_per_step"] == pytest.approx(4 * 1502 / 1448)
    # each job's two flows (a->b, b->a) cross the bottleneck, one per direction: one flow of each job per
    # directed bottleneck link, 2 flows there; each job alone runs at its path's slowest link, the 100 Mbit/s cable
    # (its hosts have 200): the two offer 200 Mbit/s there, 2x it
    assert rows.bottleneck_flows.tolist() == [2.0, 2.0]
    assert rows.bottleneck_load.tolist() == pytest.approx([2.0, 2.0])
    assert rows.binding_links.tolist() == [2, 2]  # both directions of the cable
    assert rows.flows_multi_binding.tolist() == [0, 0]  # each flow crosses one direction of it only
    assert rows.contended.all() and rows.oversub.tolist() == [2.0, 2.0] and rows.queue_packets.tolist() == [100, 100]
    # the referee's counters per iteration run
    assert rows.loc[1, "rtos_per_iter"] == pytest.approx(0.1) and rows.loc[1, "drops_per_iter"] == pytest.approx(0.8)
    assert rows.loc[2, "rtos_per_iter"] == 0.0
    # the error as compare_jobs scores it: the model's slowdown applied to the referee's time alone
    assert rows.loc[1, "signed"] == pytest.approx(0.015 * rows.loc[1, "model_slowdown"] / 0.02 - 1)
    assert rows.draws.tolist() == [1, 1] and np.allclose(rows.signed_centre, rows.signed)
    # a second draw 10% slower for job 1 moves its centre by the geometric mean
    other = dict(rec, ref_iter_s={"1": 0.022, "2": 0.01})
    with_draw = tail.job_rows(sc, rec, "tcp-shallow", draws=(other,)).set_index("job_id")
    s1 = rows.loc[1, "signed"]
    s2 = 0.015 * rows.loc[1, "model_slowdown"] / 0.022 - 1
    assert with_draw.loc[1, "signed_centre"] == pytest.approx(math.sqrt((1 + s1) * (1 + s2)) - 1)
    # the spread over the two draws: the sample variance of log(1 + signed), (a - b)^2 / 2
    assert with_draw.loc[1, "draw_var"] == pytest.approx((math.log1p(s1) - math.log1p(s2)) ** 2 / 2)
    assert with_draw.loc[2, "draw_var"] == pytest.approx(0.0) and np.isnan(rows.loc[1, "draw_var"])


def test_summary_counts_misses_by_sign_and_oversubscription():
    rows = pd.DataFrame(dict(scenario=["A", "A", "B", "B"], job_id=[1, 2, 1, 2], contended=[True] * 4,
                             oversub=[4.0, 4.0, 8.0, 8.0], signed=[-0.3, 0.05, 0.2, 0.01],
                             signed_centre=[-0.2, 0.05, 0.2, 0.0], ref_slowdown=[2.5, 1.2, 1.5, 1.1],
                             model_slowdown=[1.5, 1.3, 1.9, 1.1], pred_s=[0.07, 0.105, 0.12, 0.101],
                             ref_iter_s=[0.1, 0.1, 0.1, 0.1], rtos_per_iter=[0.1, 0.0, 0.0, 0.0],
                             drops_per_iter=[1.0, 0.0, 0.5, 0.1], packets_per_step=[5.0, 10.0, 30.0, 20.0],
                             comm_share=[0.3, 0.2, 0.5, 0.4]))
    rows["ape"] = rows.signed.abs()
    rows["heavy"] = rows.ref_slowdown >= 2.0
    s = tail.summary(rows)
    assert (s["all"]["over"], s["all"]["under"]) == (1, 1)  # +20% over, -30% under; +5% and +1% inside 15%
    assert (s["per_oversub"]["4:1"]["under"], s["per_oversub"]["8:1"]["over"]) == (1, 1)
    assert s["per_oversub"]["4:1"]["heavy_median_signed"] == pytest.approx(-0.3)  # the one job slowed 2x or more
    # the oracle at k 1: job A1 0.07 + 0.1 x 0.2 = 0.09 against 0.1 (-10%); the others keep their errors
    assert s["timeout_oracle"]["1"]["median_ape"] == pytest.approx(np.median([0.1, 0.05, 0.2, 0.01]))


def test_within_noise_against_the_centre_of_draws():
    e = math.exp
    # two scenarios of two jobs, each measured by two draws. Model log slowdowns: A 0.4, 0.2 (centred +-0.1),
    # B 0.9, 0.5 (+-0.2). The draws' centre (geometric) of the referee's log slowdowns: A 0.35, 0.25 (+-0.05),
    # B 0.9, 0.5 (+-0.2): log(1 + signed_centre) = model - centre = 0.05, -0.05, 0, 0.
    rows = pd.DataFrame(dict(scenario=["A", "A", "B", "B"], contended=[True] * 4, draws=[2] * 4,
                             model_slowdown=[e(0.4), e(0.2), e(0.9), e(0.5)],
                             signed_centre=[e(0.05) - 1, e(-0.05) - 1, 0.0, 0.0],
                             draw_var=[0.002, 0.002, 0.0, 0.0]))
    w = tail.within_noise(rows)
    assert w["jobs"] == 4
    # slope: (2 x 0.1 x 0.05 + 2 x 0.2 x 0.2) / (2 x 0.01 + 2 x 0.04) = 0.09 / 0.1; referee variance 0.085 / 4
    assert w["slope"] == pytest.approx(0.9)
    assert w["correlation"] == pytest.approx(0.09 / math.sqrt(0.1 * 0.085))
    # noise in a centre: A's jobs 0.002 / 2 draws x (1 - 1/2) (the scenario's mean takes half out), B's 0: 0.00025
    assert w["noise"] == pytest.approx(0.00025)
    assert w["ceiling"] == pytest.approx(math.sqrt(1 - 0.00025 / (0.085 / 4)))
    # within variance of log(1 + signed_centre): (0.05^2 x 2) / 4 = 0.00125, of which the model's 0.001
    assert w["within"] == pytest.approx(0.00125)
    assert w["model_part"] == pytest.approx(0.001)
    # jobs measured by one draw have no noise estimate: left out
    assert tail.within_noise(rows.assign(draws=1))["jobs"] == 0


def test_counter_oracle_adds_seconds_per_counted_event():
    rows = pd.DataFrame(dict(pred_s=[0.10, 0.10], ref_iter_s=[0.12, 0.10], drops_per_iter=[4.0, 0.0],
                             rtos_per_iter=[0.05, 0.0]))
    # job 1: 0.10 s + 4 drops x 2 ms = 0.108 s against 0.12 s; job 2 dropped nothing
    assert tail.counter_oracle(rows, "drops_per_iter", 2e-3).tolist() == pytest.approx([0.108 / 0.12 - 1, 0.0])
    # the timeout oracle is the counter oracle on timeouts at k x rto_min_s each
    assert tail.timeout_oracle(rows, 0.5).tolist() == pytest.approx(
        tail.counter_oracle(rows, "rtos_per_iter", 0.1).tolist())


def test_flows_crossing_two_binding_links_are_counted_per_flow():
    from types import SimpleNamespace

    binding = np.array([True, True, False, True])
    # three ring flows: links 0 and 1 (both binding), 1 and 2 (one), 2 and 3 with a split share (one binding link)
    d = SimpleNamespace(flow_paths=(np.array([0, 1]), np.array([1, 2]), (np.array([2, 3]), np.array([0.5, 0.5]))))
    assert tail._multi_binding(d, binding) == 1
    assert tail._multi_binding(d, np.ones(4, dtype=bool)) == 3  # every flow crosses two binding links
    assert tail._multi_binding(SimpleNamespace(flow_paths=None), binding) == 0  # paths unknown: none counted
