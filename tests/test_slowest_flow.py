"""The slowest-flow term (netlab/network/tcp/slowest.py) on one link, worked out by hand.

One 10 Gbit/s link; a job has ``f`` flows across it (weight ``f`` on the link), each moving 1.5 MB per iteration
in 10 ring steps of 100 packets of 1,500 bytes; alone it gets the link, 10 / f Gbit/s per flow. Two such jobs
offer twice the link at their isolated rates: it binds, and each job's ``k`` (its flow crossings of binding links)
is ``f``. E[max of k standard normals]: 0 for k <= 1, 1 / sqrt(pi) = 0.5641896 for 2, 3 / (2 sqrt(pi)) =
0.8462844 for 3. With ``slow_k`` 1:

    slowest_s = E[max of k] / sqrt(packets per step) x the job's network seconds as solved

* in step, two jobs of 2 flows: 4 flows at 2.5 Gbit/s, 4.8 ms each iteration: 0.5641896 x 0.1 x 4.8 ms =
  0.2708110 ms;
* shifted by half a period (compute 7.2 ms, 2.4 ms alone: they take turns, 2.4 ms each): 0.1354055 ms;
* unequal: 2 flows in 10 steps (100 packets) beside 3 flows in 100 steps (10 packets): 5 flows at 2 Gbit/s,
  6 ms each: 0.5641896 x 0.1 x 6 ms = 0.3385138 ms and 0.8462844 / sqrt(10) x 6 ms = 1.6057117 ms.
"""

import math

import numpy as np
import pytest

from incremental_helpers import resolved_iter_s, run_added_s
from netlab.network import NETWORKS, CommDemand
from netlab.network.tcp.slowest import MAX_TABLED, expected_max_normal

CAP_GBPS = 10.0
CAP = np.array([CAP_GBPS])
BYTES = 1.5e6  # per flow per iteration
KW = dict(jitter=0.0, alpha=0.0, lead=0.0, max_exact_jobs=16, segment_bytes=1500.0, slow_k=1.0)
E2, E3 = 1 / math.sqrt(math.pi), 3 / (2 * math.sqrt(math.pi))


def job(job_id: int, flows: float = 2.0, steps: int = 10, compute_s: float = 1.2e-3, phase: float = 0.0,
        overlap: float = 0.0) -> CommDemand:
    iso = CAP_GBPS / flows
    alone = compute_s + BYTES * 8 / (iso * 1e9) - overlap * min(compute_s, BYTES * 8 / (iso * 1e9))
    return CommDemand(job_id, np.array([0]), np.array([flows]), BYTES, compute_s, overlap=overlap, iso_rate_gbps=iso,
                      iso_iter_s=alone, phase=phase, steps=steps)


def plain(**kw):
    return NETWORKS.create("tcp", **{**KW, "slow_k": 0.0, **kw})


def test_expected_maximum_of_normals():
    assert expected_max_normal(0.0) == expected_max_normal(1.0) == 0.0
    assert expected_max_normal(2.0) == pytest.approx(E2, abs=1e-6)
    assert expected_max_normal(3.0) == pytest.approx(E3, abs=1e-6)
    assert expected_max_normal(1.5) == pytest.approx(E2 / 2, abs=1e-6)  # split ECMP: between whole counts
    assert expected_max_normal(5.0) == pytest.approx(1.1629644, abs=1e-6)  # tables of normal order statistics
    big = expected_max_normal(4 * MAX_TABLED)  # beyond the table: grows as sqrt(2 ln k)
    assert expected_max_normal(MAX_TABLED) < big < 4.0


def test_two_jobs_in_step():
    jobs = [job(1), job(2)]
    base = plain().solve(jobs, CAP)
    sol = NETWORKS.create("tcp", **KW).solve(jobs, CAP)
    extra = E2 * 0.1 * 4.8e-3
    assert extra == pytest.approx(0.2708110e-3, rel=1e-6)
    for i in (1, 2):
        assert base.iter_s[i] == pytest.approx(1.2e-3 + 4.8e-3, rel=1e-9)
        assert sol.iter_s[i] == pytest.approx(base.iter_s[i] + extra, rel=1e-5)
        assert sol.comm_s[i] == pytest.approx(base.comm_s[i] + extra, rel=1e-5)


def test_two_jobs_shifted_take_turns_and_pay_on_their_own_time():
    jobs = [job(1, compute_s=7.2e-3), job(2, compute_s=7.2e-3, phase=0.5)]
    base = plain().solve(jobs, CAP)
    sol = NETWORKS.create("tcp", **KW).solve(jobs, CAP)
    for i in (1, 2):
        assert base.iter_s[i] == pytest.approx(9.6e-3, rel=1e-6)  # turns: each alone on the link
        assert sol.iter_s[i] == pytest.approx(base.iter_s[i] + E2 * 0.1 * 2.4e-3, rel=1e-5)


def test_two_jobs_of_unequal_flows_and_steps():
    jobs = [job(1, flows=2.0, steps=10), job(2, flows=3.0, steps=100)]
    base = plain().solve(jobs, CAP)
    sol = NETWORKS.create("tcp", **KW).solve(jobs, CAP)
    want = {1: E2 * 0.1 * 6e-3, 2: E3 / math.sqrt(10) * 6e-3}
    assert want[1] == pytest.approx(0.33851375e-3, rel=1e-6) and want[2] == pytest.approx(1.6057117e-3, rel=1e-6)
    for i in (1, 2):
        assert base.iter_s[i] == pytest.approx(1.2e-3 + 6e-3, rel=1e-9)
        assert sol.iter_s[i] == pytest.approx(base.iter_s[i] + want[i], rel=1e-5)


def test_the_incremental_solve_and_the_scenario_run_add_the_same_term():
    jobs = [job(1), job(2)]
    without, with_term = (resolved_iter_s(NETWORKS.create("tcp", **kw), CAP, jobs) for kw in (
        {**KW, "slow_k": 0.0}, KW))
    assert sorted(with_term) == [1, 2]
    for i in with_term:
        assert with_term[i] == pytest.approx(without[i] + E2 * 0.1 * 4.8e-3, rel=1e-5)
    added = run_added_s(plain(), NETWORKS.create("tcp", **KW), CAP, jobs)
    for i in (1, 2):
        assert added[i] == pytest.approx(E2 * 0.1 * 4.8e-3, rel=1e-5)


def test_half_hidden_communication_pays_half():
    """In step as above with 20 ms of compute of which the all-reduce may overlap half: an iteration of
    20 + 4.8 - 2.4 = 22.4 ms; the term (0.2708110 ms of communication) fits under the 15.2 ms of compute left, half
    of which the overlap covers: the iteration grows by half of it."""
    jobs = [job(1, compute_s=20e-3, overlap=0.5), job(2, compute_s=20e-3, overlap=0.5)]
    base = plain().solve(jobs, CAP)
    sol = NETWORKS.create("tcp", **KW).solve(jobs, CAP)
    extra = E2 * 0.1 * 4.8e-3
    for i in (1, 2):
        assert base.iter_s[i] == pytest.approx(22.4e-3, rel=1e-9)
        assert sol.comm_s[i] == pytest.approx(base.comm_s[i] + extra, rel=1e-5)
        assert sol.iter_s[i] == pytest.approx(base.iter_s[i] + extra / 2, rel=1e-5)


def test_zero_for_one_flow_a_lone_job_a_link_that_does_not_bind_and_tcp():
    one = [job(1, flows=1.0), job(2, flows=1.0)]  # k = 1: one draw averages out
    assert NETWORKS.create("tcp", **KW).solve(one, CAP).iter_s == plain().solve(one, CAP).iter_s
    alone = NETWORKS.create("tcp", **KW).solve([job(1)], CAP)  # alone: 10 Gbit/s offered on 10, nothing binds
    assert alone.iter_s[1] == pytest.approx(1.2e-3 + 2.4e-3, rel=1e-12)
    wide = np.array([40.0])  # two jobs at 10 Gbit/s each on a 40 Gbit/s link: it never binds
    assert NETWORKS.create("tcp", **KW).solve([job(1), job(2)], wide).iter_s == plain().solve([job(1), job(2)],
                                                                                            wide).iter_s
    assert NETWORKS.create("tcp").params.slow_k == 0.0
    for name in ("tcp", "tcp-shallow", "dctcp", "dcqcn"):
        assert NETWORKS.create(name).params.slow_k >= 0.0
    with pytest.raises(ValueError, match="slow_k >= 0"):
        NETWORKS.create("tcp", slow_k=-1.0)
