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
