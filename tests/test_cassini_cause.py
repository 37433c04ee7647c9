"""The CASSINI-below-host cause: the per-job comparison against hand-computed figures, CASSINI's decision record
on a small run (the recording policy decides as ``cassini`` does) and the capacity nudge."""

import numpy as np
import pandas as pd
import pytest

from netlab.repro.cassini_cause import alternative_jobs, decision_summary, diff_summary, job_diff


def _jobs(rows):
    cols = ["job_id", "model", "gpus", "submit_s", "start_s", "wait_s", "run_s", "jct_s", "slowdown", "isolated_s",
            "racks", "preemptions", "placement"]
    return pd.DataFrame([dict(zip(cols, r)) for r in rows])


HOST = _jobs([(0, "a", 2, 0.0, 0.0, 0.0, 100.0, 100.0, 1.0, 100.0, 1, 0, "r0h0:1,r0h1:1"),
              (1, "b", 4, 10.0, 10.0, 0.0, 240.0, 240.0, 1.2, 200.0, 2, 0, "r1h0:1,r1h1:1,r2h0:1,r2h1:1"),
              (2, "c", 8, 20.0, 50.0, 30.0, 500.0, 530.0, 1.25, 400.0, 3, 1, "x")])
CAS = _jobs([(2, "c", 8, 20.0, 70.0, 350.0, 480.0, 830.0, 1.2, 400.0, 4, 2, "y"),  # other order: joined by id
             (0, "a", 2, 0.0, 0.0, 0.0, 100.0, 100.0, 1.0, 100.0, 1, 0, "r0h0:1,r0h1:1"),
             (1, "b", 4, 10.0, 10.0, 0.0, 220.0, 220.0, 1.1, 200.0, 2, 0, "r1h0:1,r1h1:1,r2h0:1,r2h1:1")])


def test_job_diff_by_hand():
    d = job_diff(HOST, CAS).set_index("job_id")
    assert d.d_jct_s.tolist() == [0.0, -20.0, 300.0]
    assert d.d_wait_s.tolist() == [0.0, 0.0, 320.0]
    assert d.d_run_s.tolist() == [0.0, -20.0, -20.0]
    # network-added: (slowdown - 1) x isolated: job 1 40 -> 20 s, job 2 100 -> 80 s
    assert d.d_net_s.tolist() == pytest.approx([0.0, -20.0, -20.0])
    # untouched: same start, same placement, never preempted in either run
    assert d.untouched.tolist() == [True, True, False]


def test_diff_summary_by_hand():
    s = diff_summary(job_diff(HOST, CAS), worst=1)
    assert s["avg_d_jct_s"] == pytest.approx(280 / 3)
    assert s["avg_d_wait_s"] == pytest.approx(320 / 3) and s["avg_d_run_s"] == pytest.approx(-40 / 3)
    assert (s["jobs_worse"], s["jobs_better"]) == (1, 1)
    assert s["worst_share_of_increase"] == 1.0  # job 2 is the only increase
    assert s["worst_share_of_abs_change"] == pytest.approx(300 / 320)
    assert s["worst_jobs"][0]["job_id"] == 2 and s["worst_median_isolated_s"] == 400.0
    assert s["rest_median_isolated_s"] == 150.0
    assert (s["preemptions_host"], s["preemptions_cassini"]) == (1, 2)
    assert s["jobs_more_racks_under_cassini"] == 1 and s["d_run_s_of_jobs_on_more_racks"] == pytest.approx(-20 / 3)
    assert s["untouched_jobs"] == 2 and s["untouched_avg_d_jct_s"] == pytest.approx(-10.0)
    assert s["first_changed_job"]["job_id"] == 1  # by submission: job 0 unchanged, job 1 first


def test_decision_summary_by_hand():
    rows = [dict(job_id=0, index=0, candidates=1, racks=1, own_racks=1, score=1.0, own_score=1.0, phase=False,
                 shifts=0),
            dict(job_id=1, index=2, candidates=4, racks=2, own_racks=3, score=0.9, own_score=0.5, phase=True,
                 shifts=2),
            dict(job_id=2, index=0, candidates=3, racks=2, own_racks=2, score=0.7, own_score=0.7, phase=True,
                 shifts=0)]
    s = decision_summary(rows)
    assert (s["decisions"], s["with_choice"], s["took_alternative"], s["alternative_fewer_racks"]) == (3, 2, 1, 1)
    assert s["alternative_score_gain"] == pytest.approx(0.4)
    assert (s["phase_set"], s["rephased_running_jobs"]) == (2, 2)
    assert decision_summary([]) == dict(decisions=0)
    # job 1 took an alternative: its rows of job_diff (running -20 s, network -20 s, slowdown 1.2 -> 1.1)
    alt = alternative_jobs(job_diff(HOST, CAS), rows)
    assert alt["alternative"]["jobs"] == 1 and alt["alternative"]["avg_d_run_s"] == -20.0
    assert alt["alternative"]["slowdown_host"] == 1.2 and alt["alternative"]["slowdown_cassini"] == 1.1
    assert alt["host_pick"]["jobs"] == 2 and alt["host_pick"]["avg_d_run_s"] == pytest.approx(-10.0)


def test_recording_cassini_decides_as_cassini():
    """The recording policy leaves every job where ``cassini`` puts it, and records one decision per placement."""
    from netlab.repro.cassini import simulate
    from netlab.repro.cassini_cause import recording_cassini

    cell = dict(setup="snapshot", oversub=4, host="tiresias", placement="cassini", network="tcp", seed=0, jobs=12,
                load=0.9)
    plain = simulate(cell)[1].jobs
    rec = recording_cassini()
    recorded = simulate(cell, placement=rec)[1].jobs
    assert plain.placement.tolist() == recorded.placement.tolist()
    assert np.allclose(plain.jct_s, recorded.jct_s)
    starts = int(len(plain) + plain.preemptions.sum())
    assert len(rec.decisions) >= len(plain) and len(rec.decisions) <= starts + len(plain)
    assert all(d["racks"] <= d["own_racks"] for d in rec.decisions)  # the host's locality is kept


def test_capacity_nudge_scales_every_link():
    from netlab.repro.cassini import simulate

    cell = dict(setup="snapshot", oversub=4, host="tiresias", placement="consolidated", network="tcp", seed=0,
                jobs=4, load=0.9)
    a, b = simulate(cell)[0], simulate(cell, capacity_scale=1.5)[0]
    assert np.allclose(b.topology.link_capacity_gbps, 1.5 * a.topology.link_capacity_gbps)
