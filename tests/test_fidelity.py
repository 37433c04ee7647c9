"""Scenario predictions and the fidelity report's arithmetic, checked by hand (no root needed:
a NetnsTestbed that is never brought up still knows its topology and shaped rates)."""

import numpy as np
import pandas as pd
import pytest

from netlab.congestion.fidelity import (HEADER_OVERHEAD, alone_period_ms, ape_summary, circular_mean, compute_jitter,
                                        contended_jobs, crosses_uplink, fidelity_scenarios, fidelity_summary,
                                        fit_wire_overhead, iteration_series, link_bound, phase_locking, phase_series,
                                        phase_comparison, phase_summary, relative_phase, ring_link_bytes, runs_frame,
                                        scenario_contention, scenario_key, scenarios_from_runs, score_runs,
                                        simulated_runs,
                                        steady_iterations, write_runs)
from netlab.testbed.netns import NetnsTestbed
from netlab.testbed.scenarios import Scenario, ScenarioJob, predict_scenario, ring_busbw_mbit, scenario_rates

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


def test_wire_overhead_can_be_fitted_on_some_single_job_scenarios():
    measured = pd.DataFrame(dict(scenario=["a", "c", "b", "b"], job_id=[1, 1, 1, 2],
                                 iter_s=[0.1 + 0.0838, 0.1 + 0.088, 0.5, 0.5], compute_ms=[100.0] * 4))
    raw = pd.DataFrame(dict(predicted_iter_s=[0.18, 0.18, 0.26, 0.26]))
    assert fit_wire_overhead(measured, raw) == pytest.approx((1.0475 + 1.1) / 2)
    assert fit_wire_overhead(measured, raw, among=[False, True, True, True]) == pytest.approx(1.1)
    # nothing qualifies among those: every one-job scenario
    assert fit_wire_overhead(measured, raw, among=[False, False, True, True]) == pytest.approx((1.0475 + 1.1) / 2)


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


# ---------------------------------------------------------------- raw logs, phases, jitter, scoring
LEAFSPINE = "testbed/topologies/leafspine-2rack.yaml"


@pytest.fixture(scope="module")
def tb2():
    import os

    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    return NetnsTestbed(os.path.join(here, LEAFSPINE))


def synthetic_log(job_id, starts, compute_s, ranks=2, **cols):
    """A raw log whose rank r starts every iteration at ``starts[i] + r * 1e-4`` and all-reduces until the next."""
    rows = []
    starts = np.asarray(starts, dtype=float)
    for r in range(ranks):
        for i in range(len(starts) - 1):
            s = starts[i] + r * 1e-4
            rows.append(dict(job_id=job_id, rank=r, iter=i, compute_start=s, allreduce_start=s + compute_s[i],
                             allreduce_end=starts[i + 1] + r * 1e-4, **cols))
    return pd.DataFrame(rows)


def test_relative_phase_by_hand():
    ref = [0.0, 0.1, 0.2, 0.4]  # periods 0.1, 0.1, 0.2
    got = relative_phase(ref, [0.02, 0.13, 0.25, 0.3, 0.45, -0.01])
    assert got.ref_iter.tolist() == [0, 1, 2, 2, -1, -1]
    assert got.phase.iloc[:4].tolist() == pytest.approx([0.2, 0.3, 0.25, 0.5])
    assert got.offset_s.iloc[:4].tolist() == pytest.approx([0.02, 0.03, 0.05, 0.1])
    assert got.ref_period_s.iloc[:4].tolist() == pytest.approx([0.1, 0.1, 0.2, 0.2])
    assert got.phase.iloc[4:].isna().all()  # after the reference's last complete iteration, before its first


def test_phase_series_of_two_synthetic_jobs():
    # job 1: period 100 ms from t=0; job 2: period 110 ms from t=20 ms, so it slips 0.1 of job 1's period per
    # iteration: phases 0.2, 0.3, 0.4, ... (and job 1 seen from job 2: 1 - 0.02/0.11 etc.)
    s1 = np.arange(0, 12) * 0.1
    s2 = 0.02 + np.arange(0, 8) * 0.11
    raw = pd.concat([synthetic_log(1, s1, [0.05] * 11), synthetic_log(2, s2, [0.05] * 7)], ignore_index=True)
    raw["start_at"] = 0.0
    ph = phase_series(raw)
    p21 = ph[(ph.ref_job == 1) & (ph.job_id == 2)].sort_values("iter")
    assert p21.phase.tolist() == pytest.approx([0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8])
    assert p21.ref_iter.tolist() == [0, 1, 2, 3, 4, 5, 6]
    assert p21.dist.tolist() == pytest.approx([0.2, 0.3, 0.4, 0.5, 0.4, 0.3, 0.2])
    assert p21.t_s.tolist() == pytest.approx(list(s2[:-1]))
    p12 = ph[(ph.ref_job == 2) & (ph.job_id == 1)].sort_values("iter")
    # job 1's iteration 1 starts at 0.1, inside job 2's iteration 0 (0.02..0.13): (0.1 - 0.02) / 0.11
    assert p12.set_index("iter").phase[1] == pytest.approx(0.08 / 0.11)
    assert np.isnan(p12.set_index("iter").phase[0])  # before job 2's first start
    s = phase_summary(ph, window=3, skip=0).set_index(["ref_job", "job_id"]).loc[(1, 2)]
    assert s.drift == pytest.approx(0.1)
    assert s.phase_start == pytest.approx(0.3) and s.phase_end == pytest.approx(0.7)
    assert s.offset_ms_start == pytest.approx(30.0) and s.first_iter_near_half == 3  # phase 0.5 at iteration 3


def test_phase_is_circular():
    assert circular_mean([0.95, 0.05]) == pytest.approx(0.0, abs=1e-9) or circular_mean([0.95, 0.05]) == \
        pytest.approx(1.0)
    assert circular_mean([0.4, 0.6]) == pytest.approx(0.5)
    assert phase_locking([0.3, 0.3, 0.3]) == pytest.approx(1.0)
    assert phase_locking([0.0, 0.25, 0.5, 0.75]) == pytest.approx(0.0, abs=1e-9)
    # locked at half a period (samples straddling 0.5) and in step (straddling 0/1) summarise as such
    ph = pd.DataFrame(dict(ref_job=1, job_id=2, iter=range(6), ref_period_s=0.1,
                           phase=[0.98, 0.02, 0.99, 0.01, 0.0, 0.97]))
    s = phase_summary(ph, window=6, skip=0).iloc[0]
    assert min(s.phase_end, 1 - s.phase_end) < 0.02 and s.offset_ms_end < 2.0 and s.lock_end > 0.98
    assert abs(s.drift) < 0.01
    assert s.frac_in_step == 1.0 and s.left_step_iter == -1


def test_when_a_pair_leaves_step():
    # in step for iterations 0-4 (a blip to 0.15 at 2), then half a period apart from iteration 5 on
    phase = [0.01, 0.99, 0.15, 0.02, 0.0, 0.3, 0.45, 0.5, 0.5, 0.49]
    ph = pd.DataFrame(dict(ref_job=1, job_id=2, iter=range(10), ref_period_s=0.1, phase=phase))
    ph["dist"] = np.minimum(ph.phase, 1 - ph.phase)
    s = phase_summary(ph, window=3, skip=0, hold=3).iloc[0]
    assert s.left_step_iter == 5 and s.frac_in_step == pytest.approx(0.4) and s.first_iter_near_half == 6


def test_iteration_series_and_steady_window():
    s1 = np.arange(0, 21) * 0.1  # 20 iterations of 100 ms
    s2 = 0.05 + np.arange(0, 11) * 0.12  # 10 of 120 ms, ends at 1.25 s
    raw = pd.concat([synthetic_log(1, s1, [0.04] * 20), synthetic_log(2, s2, [0.07] * 10)], ignore_index=True)
    raw["warmup"] = 2
    it = iteration_series(raw)
    j1 = it[it.job_id == 1]
    assert len(j1) == 20 and j1.iter_s.iloc[:-1].tolist() == pytest.approx([0.1] * 19) and np.isnan(j1.iter_s.iloc[-1])
    assert j1.compute_s.tolist() == pytest.approx([0.04] * 20)
    # the common window: from job 2's iteration 2 (0.29 s) to job 2's last end (1.25 s)
    st = steady_iterations(raw).set_index("job_id")
    assert st.loc[1, "window"] == "common" and st.loc[1, "iter_s"] == pytest.approx(0.1)
    assert st.loc[1, "n_iters"] == 9  # starts 0.3 .. 1.1 (iteration 11 ends at 1.2; 12 ends at 1.3 > 1.25)
    assert st.loc[2, "iter_s"] == pytest.approx(0.12) and st.loc[2, "n_iters"] == 8
    # mean period, not the median: alternating 80/120 ms periods average 100 ms
    s3 = np.concatenate([[0.0], np.cumsum([0.08, 0.12] * 10 + [0.08])])  # 21 iterations: 20 periods between starts
    st3 = steady_iterations(synthetic_log(3, s3, [0.03] * 21), warmup=0)
    assert st3.iter_s.iloc[0] == pytest.approx(0.1)


def test_compute_jitter_by_hand():
    compute = [0.02, 0.021, 0.019, 0.022, 0.018] * 4
    starts = np.concatenate([[0.0], np.cumsum([0.05] * 20)])
    j = compute_jitter(synthetic_log(1, starts, compute, ranks=1, compute_ms=20.0), warmup=0).iloc[0]
    assert j.compute_mean_ms == pytest.approx(20.0)
    assert j.compute_std_ms == pytest.approx(np.std(np.array(compute) * 1000, ddof=1))
    assert j.compute_cv == pytest.approx(j.compute_std_ms / 20.0)
    assert j.iter_cv == pytest.approx(0.0, abs=1e-9) and j.compute_overshoot_ms == pytest.approx(0.0, abs=1e-9)
    # robust: deviations from the median 20 ms are 0, 1, 1, 2, 2 ms (x4): MAD 1 ms
    assert j.compute_rcv == pytest.approx(1.4826 * 1.0 / 20.0)
    # all-reduce = 50 ms - compute
    assert j.allreduce_mean_ms == pytest.approx(30.0) and j.allreduce_std_ms == pytest.approx(j.compute_std_ms)


def test_contended_and_alone_jobs():
    assert contended_jobs({1: {("a", "b")}, 2: {("a", "b"), ("c", "d")}, 3: {("x", "y")}}) == \
        {1: True, 2: True, 3: False}


def test_contention_follows_the_topology(tb2):
    topo = tb2.topology
    four = ring_link_bytes(topo, ("r0h0", "r0h1", "r1h0", "r1h1"), 1000.0)
    # the 4-rank ring crosses the uplink once each way with 2(n-1)/n = 1.5 x the gradient
    assert four[("tor0", "spine0")] == pytest.approx(1500.0) and four[("spine0", "tor0")] == pytest.approx(1500.0)
    assert ring_link_bytes(topo, ("r0h0", "r1h0"), 1000.0)[("tor0", "spine0")] == pytest.approx(1000.0)
    assert crosses_uplink(topo, ("r0h0", "r1h0")) and not crosses_uplink(topo, ("r0h0", "r0h1"))
    sc = {s.name: s for s in fidelity_scenarios(tb2)}
    assert scenario_contention(topo, sc["4-rank job beside a 2-rank job"]) == {1: True, 2: True}
    assert scenario_contention(topo, sc["in-rack pair beside a cross-rack job"]) == {1: False, 2: False}
    assert scenario_contention(topo, sc["consolidated next to a cross-rack job"]) == {1: False, 2: False}
    assert scenario_contention(topo, sc["spread next to a cross-rack job"]) == {1: True, 2: True}


def test_the_scenarios_of_part_two(tb2):
    scs = {s.name: s for s in fidelity_scenarios(tb2)}
    assert len(scs) == 14
    for s in scs.values():
        assert all(j.iterations >= 300 for j in s.jobs), s.name
        assert s.rates_mbit == {("tor0", "spine0"): 100.0, ("tor1", "spine0"): 100.0}
    rates = scenario_rates(tb2, scs["2 jobs in step (no shift)"])
    c = 375_000 * 8 * HEADER_OVERHEAD / 100e6 * 1000  # one job's all-reduce alone on the uplink, ms
    j1, j2 = scs["2 jobs in step (no shift)"].jobs
    assert j1.compute_ms == pytest.approx(c, abs=1e-3) and j2.offset_ms == 0.0
    assert alone_period_ms(tb2.topology, j1, rates) == pytest.approx(2 * c, abs=1e-3)
    assert scs["2 jobs shifted half an iteration"].jobs[1].offset_ms == pytest.approx(c, abs=1e-3)
    assert len(scs["3 jobs in step (no shift)"].jobs) == 3
    for name, ratio in (("unequal iterations 1.07", 1.07), ("unequal iterations 1:2", 2.0)):
        a, b = scs[name].jobs
        pa, pb = (alone_period_ms(tb2.topology, j, rates) for j in (a, b))
        assert pb / pa == pytest.approx(ratio, rel=1e-4)
        # equal duration: the faster job runs proportionally more iterations
        assert a.iterations * pa == pytest.approx(b.iterations * pb, rel=0.01)
    assert scs["4-rank job beside a 2-rank job"].jobs[0].hosts == ("r0h0", "r0h1", "r1h0", "r1h1")
    # cross-rack vs in-rack: the same jobs as "2 jobs in step", job 2 inside rack 0
    inrack = scs["in-rack pair beside a cross-rack job"].jobs
    assert inrack[0] == j1 and inrack[1].hosts == ("r0h1", "r0h2") and inrack[1].compute_ms == j2.compute_ms
    assert len({scenario_key(s) for s in scs.values()}) == 14


def test_ape_summary_splits_contended_from_alone():
    rows = pd.DataFrame(dict(contended=[True, True, True, True, False, False],
                             fair_ape=[0.1, 0.2, 0.3, 0.4, 0.01, 0.03], phase_ape=[0.0, 0.0, 0.0, 1.0, 0.5, 0.5]))
    s = ape_summary(rows, ["fair", "phase", "tcp"])
    assert set(s) == {"fair", "phase"}  # no tcp column: not scored
    assert s["fair"]["contended_median_ape"] == pytest.approx(0.25)
    assert s["fair"]["contended_p90_ape"] == pytest.approx(0.37)  # linear interpolation between 0.3 and 0.4
    assert s["fair"]["alone_median_ape"] == pytest.approx(0.02) and s["fair"]["n_alone"] == 2
    assert s["phase"]["contended_median_ape"] == pytest.approx(0.0) and s["phase"]["n_contended"] == 4


def test_runs_round_trip_and_score_offline(tb2, tmp_path):
    # A run "measured" exactly as the fair model predicts it scores zero error once calibrated, and the stored
    # parameters rebuild the scenario (no testbed needed).
    sc = Scenario("alone (cross-rack)", (ScenarioJob(1, ("r0h0", "r1h0"), 375_000, 20.0, 30),),
                  {("tor0", "spine0"): 100.0, ("tor1", "spine0"): 100.0}, warmup=3)
    period = float(predict_scenario(tb2, sc, "fair", 1.05).predicted_iter_s.iloc[0])
    raw = synthetic_log(1, 1000.0 + np.arange(31) * period, [0.02] * 30)
    raw["start_at"] = 1000.0
    runs = pd.concat([runs_frame(tb2, sc, r, raw) for r in (0, 1)], ignore_index=True)
    write_runs(runs, tmp_path / "runs.parquet")
    back = pd.read_parquet(tmp_path / "runs.parquet")
    assert scenarios_from_runs(back)[(sc.name, 0)] == sc
    rows = score_runs(back, tb2, models=("fair", "link_bound", "no-such-model"))
    assert rows.attrs["wire_overhead"][0] == pytest.approx(1.05)
    assert rows.fair_ape.max() == pytest.approx(0.0, abs=1e-9)
    assert rows.link_bound_ape.max() == pytest.approx(0.0, abs=1e-9)
    assert not rows.contended.any() and "no-such-model" in rows.attrs["notes"]
    assert rows.iter_s.tolist() == pytest.approx([period, period])


def test_phase_comparison_by_hand():
    # Testbed: job 2 a quarter of job 1's 100 ms period behind; model: three quarters. The phases end half a
    # period apart, but both pairs sit a quarter period from being in step: spacing error 0.
    s1 = np.arange(0, 12) * 0.1

    def run(offset, scenario="pair"):
        raw = pd.concat([synthetic_log(1, s1, [0.05] * 11), synthetic_log(2, offset + s1, [0.05] * 11)],
                        ignore_index=True)
        return raw.assign(scenario=scenario, repeat=0, start_at=0.0)

    got = phase_comparison(run(0.025), run(0.075), window=5).set_index(["ref_job", "job_id"]).loc[(1, 2)]
    assert got.phase_end_measured == pytest.approx(0.25) and got.phase_end_model == pytest.approx(0.75)
    assert got.phase_end_error == pytest.approx(0.5)
    assert got.spacing_end_error == pytest.approx(0.0, abs=1e-9)
    got = phase_comparison(run(0.025), run(0.04), window=5).set_index(["ref_job", "job_id"]).loc[(1, 2)]
    assert got.phase_end_error == pytest.approx(0.15) and got.spacing_end_error == pytest.approx(0.15)


def test_the_tcp_models_runs_separate_jobs_in_step_into_turns(tb2):
    # The model's own run of "2 jobs in step" (stored as the testbed would log it): with its leader
    # advantage and jitter the pair leaves being in step and ends half a period apart, where the testbed's
    # pairs end (fidelity.json: 0.50 in all three repeats).
    scs = {s.name: s for s in fidelity_scenarios(tb2, iterations=120)}
    sc = scs["2 jobs in step (no shift)"]
    logs = pd.concat([synthetic_log(j, [0.0, 1.0], [0.5]) for j in (1, 2)], ignore_index=True)  # parameters only
    runs = runs_frame(tb2, sc, 0, logs)
    sim = simulated_runs(runs, tb2, "tcp")
    assert set(sim.job_id) == {1, 2} and (sim["rank"] == 0).all()
    s = phase_summary(phase_series(sim), window=20).set_index(["ref_job", "job_id"]).loc[(1, 2)]
    assert abs(s.phase_end - 0.5) < 0.02 and s.lock_end > 0.99
    assert s.left_step_iter >= 0
