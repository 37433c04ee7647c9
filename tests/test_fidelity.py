"""Scenario predictions and the fidelity report's arithmetic, checked by hand (no root needed:
a NetnsTestbed that is never brought up still knows its topology and shaped rates)."""

import pandas as pd
import pytest

from netlab.congestion.fidelity import fidelity_scenarios, fidelity_summary, fit_wire_overhead, link_bound
from netlab.testbed.netns import NetnsTestbed
from netlab.testbed.scenarios import Scenario, ScenarioJob, predict_scenario, ring_busbw_mbit

DUMBBELL = "testbed/topologies/dumbbell.yaml"  # host links 200 Mbit, swL-swR 100 Mbit at rate_scale 0.002


@pytest.fixture(scope="module")
def tb():
    import os

    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    return NetnsTestbed(os.path.join(here, DUMBBELL))


def test_one_job_alone_across_the_bottleneck(tb):
    # 2-rank ring: each rank sends the whole 1 MB per iteration, over the 100 Mbit bottleneck: 80 ms.
    sc = Scenario("alone", (ScenarioJob(1, ("l0", "r0"), 1_000_000, 100.0),))
    p = predict_scenario(tb, sc, "fair", 1.0)
    assert p.predicted_iter_s.iloc[0] == pytest.approx(0.100 + 0.080)
    # with headers: 4.7% more bits
    p = predict_scenario(tb, sc, "fair", 1.047)
    assert p.predicted_iter_s.iloc[0] == pytest.approx(0.100 + 0.080 * 1.047)


def test_two_jobs_share_the_bottleneck_fairly(tb):
    jobs = (ScenarioJob(1, ("l0", "r0"), 1_000_000, 100.0), ScenarioJob(2, ("l1", "r1"), 1_000_000, 100.0))
    p = predict_scenario(tb, Scenario("share", jobs), "fair", 1.0)
    assert p.predicted_iter_s.tolist() == pytest.approx([0.26, 0.26])  # 50 Mbit each: 160 ms
    # The work-conserving bound: 2 x 80 ms of link time per iteration < 180 ms alone, so alone wins.
    lb = link_bound(tb, Scenario("share", jobs), 1.0)
    assert lb.tolist() == pytest.approx([0.18, 0.18])


def test_link_rates_of_a_scenario_override_the_topology(tb):
    sc = Scenario("slow", (ScenarioJob(1, ("l0", "r0"), 1_000_000, 0.0),), rates_mbit={("swL", "swR"): 50.0})
    assert predict_scenario(tb, sc, "fair", 1.0).predicted_iter_s.iloc[0] == pytest.approx(0.160)


def test_a_half_period_shift_interleaves_in_the_phase_model(tb):
    # compute = comm alone = 80 ms; in step they share (80 + 160 ms), shifted by 80 ms they interleave (160 ms).
    j1 = ScenarioJob(1, ("l0", "r0"), 1_000_000, 80.0)
    in_step = predict_scenario(tb, Scenario("a", (j1, ScenarioJob(2, ("l1", "r1"), 1_000_000, 80.0))), "phase", 1.0)
    shifted = predict_scenario(tb, Scenario("b", (j1, ScenarioJob(2, ("l1", "r1"), 1_000_000, 80.0, offset_ms=80.0))),
                               "phase", 1.0)
    assert in_step.predicted_iter_s.tolist() == pytest.approx([0.24, 0.24], rel=0.02)
    assert shifted.predicted_iter_s.tolist() == pytest.approx([0.16, 0.16], rel=0.02)


def test_busbw_formula():
    # nccl-tests: busbw = algbw x 2(n-1)/n; 8 MB in 1 s on 4 ranks: 64 Mbit/s algbw, 96 busbw.
    assert ring_busbw_mbit(8_000_000, 1.0, 4) == pytest.approx(96.0)
    assert ring_busbw_mbit(8_000_000, 1.0, 2) == pytest.approx(64.0)


def test_wire_overhead_is_fitted_on_single_job_scenarios():
    measured = pd.DataFrame(dict(scenario=["a", "b", "b"], job_id=[1, 1, 2], iter_s=[0.1 + 0.0838, 0.5, 0.5],
                                 compute_ms=[100.0, 100.0, 100.0]))
    raw = pd.DataFrame(dict(predicted_iter_s=[0.18, 0.26, 0.26]))
    # only scenario "a" has one job: (0.1838 - 0.1) / (0.18 - 0.1) = 1.0475
    assert fit_wire_overhead(measured, raw) == pytest.approx(1.0475)


def test_summary_names_each_models_worst_scenario():
    df = pd.DataFrame(dict(scenario=["a", "b"], fair_raw_ape=[0.1, 0.3], fair_ape=[0.05, 0.2], phase_ape=[0.01, 0.02],
                           link_bound_ape=[0.5, 0.0]))
    s = fidelity_summary(df).set_index("model")
    assert s.loc["fair", "median_ape"] == pytest.approx(0.125) and s.loc["fair", "worst_scenario"] == "b"
    assert s.loc["link_bound", "worst_scenario"] == "a"


def test_scenarios_cover_the_issue(tb):
    names = [sc.name for sc in fidelity_scenarios(tb)]
    assert any("alone" in n for n in names) and any("share" in n for n in names)
    assert any("consolidated" in n for n in names) and any("spread" in n for n in names)
    assert any("shift" in n for n in names) and any("no shift" in n for n in names)
