"""The interleaving experiment's arithmetic, checked by hand on synthetic logs (no root, nothing timed)."""

import json
import os

import numpy as np
import pandas as pd
import pytest

from netlab.congestion import interleave as il
from netlab.testbed.netns import NetnsTestbed

LEAFSPINE = "testbed/topologies/leafspine-2rack.yaml"


@pytest.fixture(scope="module")
def tb():
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    return NetnsTestbed(os.path.join(here, LEAFSPINE))  # never brought up: topology and rates only


def log(job_id, starts, compute_s, scenario="s", repeat=0, warmup=0, ranks=1):
    rows = []
    for r in range(ranks):
        for i in range(len(starts) - 1):
            rows.append(dict(scenario=scenario, repeat=repeat, job_id=job_id, rank=r, iter=i, warmup=warmup,
                             compute_start=starts[i], allreduce_start=starts[i] + compute_s,
                             allreduce_end=starts[i + 1]))
    return pd.DataFrame(rows)


def test_cassini_puts_two_identical_jobs_half_an_iteration_apart():
    # compute 50, comm 30 ms at the link's full rate: any shift in [30, 50] ms avoids overlap; CASSINI's
    # plateau centre is 40 ms, half the 80 ms iteration.
    w = il.job_wave(50.0, 30.0, 0.1)
    off = il.cassini_offsets([w, w], 0.1)
    assert off[0] == 0.0
    assert off[1] == pytest.approx(40.0, abs=80.0 / 72)  # within one step of CASSINI's 72-step circle


def test_cassini_offsets_never_overlap_when_room():
    # comm 20 of 100 ms: three jobs fit; each later job lands where its window overlaps none placed before
    from netlab.policies.cassini.score import evaluate

    w = il.job_wave(80.0, 20.0, 0.1)
    off = il.cassini_offsets([w, w, w], 0.1)
    assert evaluate([w, w, w], 0.1, [o / 100.0 for o in off]) == pytest.approx(1.0)


def test_scenarios(tb):
    scs = il.interleave_scenarios(tb, n_random=3)
    names = [s.name for s in scs]
    assert names[:4] == ["job 1 alone", "job 2 alone", "2 jobs aligned", "2 jobs at CASSINI's shift"]
    C = 375_000 * 8 / 100e6 * 1.047 * 1000  # 31.4 ms
    aligned = scs[2]
    assert [j.compute_ms for j in aligned.jobs] == pytest.approx([1.6 * C] * 2, abs=1e-3)
    period = 2.6 * C
    assert scs[3].jobs[1].offset_ms == pytest.approx(period / 2, abs=period / 72)
    assert all(j.iterations >= 320 for s in scs for j in s.jobs)
    # unequal 0.60 : 0.64 and 1:2 compute
    u = next(s for s in scs if s.name == "unequal compute 0.60:0.64 aligned")
    assert u.jobs[1].compute_ms / u.jobs[0].compute_ms == pytest.approx(0.64 / 0.60, rel=1e-4)
    h = next(s for s in scs if s.name == "compute 1:2 aligned")
    assert h.jobs[1].compute_ms / h.jobs[0].compute_ms == pytest.approx(2.0, rel=1e-4)
    rnd = [s for s in scs if s.name.startswith("2 jobs at random shift")]
    assert len(rnd) == 3 and all(0 <= s.jobs[1].offset_ms < period for s in rnd)
    assert [s.jobs[1].offset_ms for s in rnd] == [s.jobs[1].offset_ms for s in il.interleave_scenarios(tb, n_random=3)
                                                  if s.name.startswith("2 jobs at random")]  # fixed seed
    assert names[-2:] == ["3 jobs aligned", "3 jobs at CASSINI's shifts"]


def test_iteration_stats_by_hand():
    # periods: 100 ms x 99, then one 200 ms iteration: mean over the window (101 starts) = 10.1 s / 100
    starts = np.concatenate([np.arange(100) * 0.1, [9.9 + 0.2, 10.2]])
    df = log(1, starts, 0.05)
    st = il.iteration_stats(df).iloc[0]
    per = np.diff(starts[:-1]) * 1000  # the last start has no iteration logged after it
    assert st.mean_ms == pytest.approx((starts[-2] - starts[0]) / (len(starts) - 2) * 1000)
    assert st.p99_ms == pytest.approx(np.quantile(per, 0.99))
    assert st.p50_ms == pytest.approx(100.0)


def test_shift_ratios_by_hand():
    t = pd.DataFrame(dict(
        repeat=0, job_id=[1, 2, 1, 2, 1, 2, 1],
        scenario=["2 jobs aligned"] * 2 + ["2 jobs at CASSINI's shift"] * 2 + ["2 jobs at random shift 0"] * 2
        + ["job 1 alone"],
        mean_ms=[120, 110, 90, 86, 100, 104, 82], tcp_mean_ms=[118, 118, 88, 88, 95, 95, 82],
        p99_ms=[200, 180, 100, 90, 150, 140, 90], tcp_sim_p99_ms=[130, 130, 95, 95, 110, 110, 85]))
    r = il.shift_ratios(t).set_index("scenario")
    assert list(r.index) == ["2 jobs aligned", "2 jobs at CASSINI's shift", "2 jobs at random shift 0"]
    assert r.loc["2 jobs at CASSINI's shift", "measured"] == pytest.approx(88 / 115)
    assert r.loc["2 jobs at CASSINI's shift", "tcp_mean"] == pytest.approx(88 / 118)
    assert r.loc["2 jobs at random shift 0", "measured"] == pytest.approx(102 / 115)
    p = il.shift_ratios(t, "p99_ms").set_index("scenario")
    assert p.loc["2 jobs at CASSINI's shift", "measured"] == pytest.approx(95 / 190)
    assert p.loc["2 jobs at CASSINI's shift", "tcp_sim_p99"] == pytest.approx(95 / 130)


def test_link_telemetry_and_retransmits_by_hand():
    frames = [pd.DataFrame(dict(src=["a", "b"], dst=["b", "a"], bytes=[0, 5], packets=0, drops=[0, 1],
                                overlimits=[10, 0], backlog=[0, 0], qlen=[0, 0], t=100.0)),
              pd.DataFrame(dict(src=["a", "b"], dst=["b", "a"], bytes=[1000, 5], packets=0, drops=[4, 1],
                                overlimits=[30, 0], backlog=[3000, 0], qlen=[2, 0], t=102.0))]
    got = il.link_telemetry(frames)
    assert got == [["a", "b", 10.0, 2.0, 1500.0, 3000.0, 2.0]]  # b->a carried nothing
    r = il.retransmits({"h1": {"tcp": {"RetransSegs": 3}}, "h2": {"tcp": {}}},
                       {"h1": {"tcp": {"RetransSegs": 10}}, "h2": {"tcp": {"RetransSegs": 1}}})
    assert r == {"h1": 7.0, "h2": 1.0}


def test_telemetry_rows_take_the_uplinks(tb):
    from netlab.testbed.experiments import uplink_cables

    a, b = uplink_cables(tb.topology)[0]
    runs = pd.DataFrame([dict(scenario="s", repeat=0, run_wall_s=10.0,
                              tel_links=json.dumps([[a, b, 50.0, 1.0, 2000.0, 9000.0, 6.0],
                                                    [b, a, 5.0, 0.0, 100.0, 1500.0, 1.0],
                                                    ["x", "y", 999.0, 9.0, 1e6, 1e6, 100.0]]),
                              tel_retransmits=json.dumps({"h1": 4.0, "h2": 6.0}),
                              link_counters=json.dumps([[a, b, 100, 10, 2], ["x", "y", 5, 5, 5]]))])
    r = il.telemetry_rows(runs, tb.topology).iloc[0]
    assert (r.uplink_overlimits_per_s, r.uplink_drops_per_s) == (50.0, 1.0)
    assert (r.uplink_backlog_mean_bytes, r.uplink_backlog_max_bytes) == (2000.0, 9000.0)
    assert (r.uplink_drops, r.uplink_packets) == (2, 10)
    assert r.retransmits == 10.0 and r.retransmits_per_s == 1.0


def test_four_rank_scenarios_split_each_job_over_both_racks():
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    tb8 = NetnsTestbed(os.path.join(here, "testbed/topologies/leafspine-2rack-4.yaml"))  # never brought up
    scs = {s.name: s for s in il.interleave_scenarios(tb8, n_random=1, three=False, ranks=4)}
    a = scs["2 jobs aligned"]
    assert [j.hosts for j in a.jobs] == [("r0h0", "r0h1", "r1h0", "r1h1"), ("r0h2", "r0h3", "r1h2", "r1h3")]
    # A 4-rank ring sends 2 x 3/4 = 1.5 gradients each way across the uplink: C = 1.5 x 31.4 ms = 47.1 ms, and
    # compute is 1.6 C = 75.4 ms (38% of the iteration communicates alone, as for 2 ranks).
    c2 = il.uplink_ms(375_000, 100.0, 2)
    assert c2 == pytest.approx(375_000 * 8 / 100e6 * 1.047 * 1000)
    assert il.uplink_ms(375_000, 100.0, 4) == pytest.approx(1.5 * c2)
    assert a.jobs[0].compute_ms == pytest.approx(1.6 * 1.5 * c2, abs=1e-3)
    # CASSINI's shift for two identical jobs: half the iteration (1.6 C + C), within one step of its circle.
    shifted = scs["2 jobs at CASSINI's shift"].jobs[1].offset_ms
    assert shifted == pytest.approx(2.6 * 1.5 * c2 / 2, abs=2.6 * 1.5 * c2 / 72)
    with pytest.raises(ValueError, match="two 4-rank jobs need 4 hosts per rack"):
        il.interleave_scenarios(tb8.__class__(os.path.join(here, LEAFSPINE)), ranks=4)
    with pytest.raises(ValueError, match="ranks must be 2 or 4"):
        il.interleave_scenarios(tb8, ranks=3)
