"""The scenario prediction hands each job's network allocation to the model (what netalloc.json compares)."""

from __future__ import annotations

import os

import pytest

from netlab.sched import NetAllocation
from netlab.testbed.netns import NetnsTestbed
from netlab.testbed.scenarios import Scenario, ScenarioJob, predict_scenario

DUMBBELL = "testbed/topologies/dumbbell.yaml"  # host links 200 Mbit, swL-swR 100 Mbit at rate_scale 0.002


@pytest.fixture(scope="module")
def tb():
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    return NetnsTestbed(os.path.join(here, DUMBBELL))  # never brought up: topology and rates only


def two(a1: NetAllocation, a2: NetAllocation, compute1_ms: float = 0.0) -> Scenario:
    return Scenario("x", (ScenarioJob(1, ("l0", "r0"), 1_000_000, compute1_ms, allocation=a1),
                          ScenarioJob(2, ("l1", "r1"), 1_000_000, 0.0, allocation=a2)))


def test_weights_two_to_one_split_the_bottleneck(tb):
    # 1 MB (8 Mbit) per iteration each, both always sending on the 100 Mbit bottleneck: 2/3 and 1/3 of it.
    p = predict_scenario(tb, two(NetAllocation(weight=2.0), NetAllocation(weight=1.0)), "fair", 1.0)
    assert p.predicted_iter_s.tolist() == pytest.approx([8 / (100 * 2 / 3), 8 / (100 / 3)])


def test_a_cap_holds_a_job_and_gives_the_rest_to_the_other(tb):
    # 12.5 Gbit/s in topology units is 25 Mbit at rate_scale 0.002: 8 / 25 s; the other gets 75 Mbit.
    p = predict_scenario(tb, two(NetAllocation(rate_cap_gbps=12.5), NetAllocation()), "fair", 1.0)
    assert p.predicted_iter_s.tolist() == pytest.approx([8 / 25, 8 / 75])


def test_priority_serves_the_high_class_first(tb):
    # Job 1 (class 0, 100 ms compute) alone at 100 Mbit: 80 ms of traffic, 180 ms an iteration, 100 x 80 / 180
    # Mbit on average; class 1's always-sending job 2 gets the rest.
    p = predict_scenario(tb, two(NetAllocation(priority=0), NetAllocation(priority=1), 100.0), "fair", 1.0)
    rest = 100 - 100 * 0.080 / 0.180
    assert p.predicted_iter_s.tolist() == pytest.approx([0.180, 8 / rest])


def test_a_model_that_cannot_honour_an_allocation_refuses_it(tb):
    with pytest.raises(Exception, match="priority"):
        predict_scenario(tb, two(NetAllocation(priority=0), NetAllocation(priority=1)), "phase", 1.0)


def test_a_lower_class_waits_exactly_for_the_higher_ones_all_reduces(tb):
    # What HTB does on the testbed (measured: bench_crux_testbed's docstring): job 2 (class 1, 40 ms compute) sends
    # at the full 100 Mbit whenever job 1 (class 0, 80 ms compute) computes and nothing while job 1 sends. Each
    # all-reduce alone: 8 Mbit x 1.047 / 100 Mbit = 83.76 ms, so job 1 runs at 163.76 ms. By hand, from a common
    # start: job 2 sends 40-80 ms, waits for job 1's all-reduce (80-163.76), sends the other 43.76 ms: its first
    # period is 207.52 ms. Its second all-reduce starts at 247.52 inside job 1's second (243.76-327.52), sends
    # 327.52-407.52 while job 1 computes, waits again (407.52-491.28) and sends the last 3.76 ms: 287.52 ms.
    from netlab.testbed.scenarios import simulated_logs

    sc = Scenario("x", (ScenarioJob(1, ("l0", "r0"), 1_000_000, 80.0, iterations=30,
                                    allocation=NetAllocation(priority=0)),
                        ScenarioJob(2, ("l1", "r1"), 1_000_000, 40.0, iterations=20,
                                    allocation=NetAllocation(priority=1))))
    logs = simulated_logs(tb, sc, "tcp", 1.047)
    one, two = logs[1], logs[2]
    alone_s = 8 * 1.047 / 100
    periods = two.compute_start.diff().dropna().to_numpy()
    assert periods[:2] == pytest.approx([0.20752, 0.28752], rel=0.02)  # the model's compute jitter: within 2%
    blocks = list(zip(one.allreduce_start, one.allreduce_end))
    for s, e in zip(two.allreduce_start, two.allreduce_end):
        if e > one.allreduce_end.iloc[-1]:
            break  # job 1 has finished: nothing left to wait for
        waited = sum(max(0.0, min(e, b) - max(s, a)) for a, b in blocks)
        assert e - s - waited == pytest.approx(alone_s, rel=0.03)
