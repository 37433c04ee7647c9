"""The compiled ``tcp`` model against its plain-numpy referee (:mod:`netlab.network.tcp.reference`).

Hand-made two- and three-job cases: in step, shifted, unequal sizes, a job held
back by a link of its own, three jobs on two links. Each is checked against
hand arithmetic where the arithmetic is short, and against the referee (an
independent restatement of the model's rules) always: the testbed-scenario path
(``simulate_starts``, jobs started at given times) and the simulator's path
(``solve``: each job at the point of its iteration its phase puts it, the mean
period over the common window after the warm-up). These tests also run with
``NUMBA_DISABLE_JIT=1`` (``tests/test_no_jit.py``).
"""

import numpy as np
import pytest

from netlab.network import NETWORKS, CommDemand
from netlab.network.tcp import reference

GBIT = 10.0  # per flow per iteration: 0.1 s alone at 100 Gbit/s
BYTES = GBIT * 1e9 / 8


def demand(job_id, compute_s, links=(0,), flow_bytes=BYTES, iso_gbps=100.0, phase=0.0, overlap=0.0):
    return CommDemand(job_id, np.array(links), np.ones(len(links)), flow_bytes, compute_s, overlap=overlap,
                      iso_rate_gbps=iso_gbps, phase=phase)


def referee_starts(demands, capacity, start_s, until, lead=2.0, alpha=1.0, elapsed_s=None):
    links = sorted({int(g) for d in demands for g in d.links})
    flows = np.array([[float(g in d.links) for g in links] for d in demands])
    return reference.run(flows, np.asarray(capacity, dtype=float)[links],
                         [min(d.iso_rate_gbps, d.rate_cap_gbps) for d in demands],
                         [d.flow_bytes * 8 / 1e9 for d in demands], [d.compute_s for d in demands],
                         [d.serial_intra_s for d in demands], [d.overlap for d in demands], start_s=start_s,
                         elapsed_s=elapsed_s, until_starts=until, alpha=alpha, lead=lead)


def model_starts(demands, capacity, start_s, iterations, **kw):
    model = NETWORKS.create("tcp", jitter=0.0, **kw)
    got = model.simulate_starts(demands, np.asarray(capacity, dtype=float),
                                {d.job_id: s for d, s in zip(demands, start_s)},
                                {d.job_id: iterations for d in demands})
    return [got[d.job_id] for d in demands]


def assert_same_starts(demands, capacity, start_s, iterations=12, **kw):
    """The model's iteration starts equal the referee's (to rounding); returns them."""
    got = model_starts(demands, capacity, start_s, iterations, **kw)
    want = referee_starts(demands, capacity, start_s, iterations + 1, **kw)
    for g, w in zip(got, want):
        n = min(len(g), len(w))
        assert n >= iterations + 1
        np.testing.assert_allclose(g[:n], w[:n], rtol=1e-9, atol=1e-12)
    return got


# ------------------------------------------------------------------ scenarios (jobs started at given times)
def test_two_jobs_in_step_share_the_link_half_and_half():
    # Equal bytes, started together: equal weights all along (same fraction sent), 50 Gbit/s each, so every
    # iteration is 0.1 s of compute and 0.2 s of all-reduce.
    got = assert_same_starts([demand(1, 0.1), demand(2, 0.1)], [100.0], [0.0, 0.0])
    for s in got:
        np.testing.assert_allclose(np.diff(s[:10]), 0.3, rtol=1e-9)


def test_two_jobs_shifted_by_half_a_period_never_meet():
    # Communication is half of the 0.2 s iteration; job 2 starts 0.1 s later: each runs at its alone pace.
    got = assert_same_starts([demand(1, 0.1), demand(2, 0.1)], [100.0], [0.0, 0.1])
    np.testing.assert_allclose(got[0][:10], 0.2 * np.arange(10), rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(got[1][:10], 0.1 + 0.2 * np.arange(10), rtol=1e-9)


def test_unequal_sizes_share_by_bytes_in_flight():
    # Without the leader advantage, weights 1 : 0.5 by bytes: 10 and 5 Gbit finish together at 0.15 s, so
    # both iterate at 1.15 s. With it (lead 2), the referee says where they go.
    pair = [demand(1, 1.0), demand(2, 1.0, flow_bytes=BYTES / 2)]
    got = assert_same_starts(pair, [100.0], [0.0, 0.0], lead=0.0)
    for s in got:
        np.testing.assert_allclose(np.diff(s[:10]), 1.15, rtol=1e-9)
    assert_same_starts(pair, [100.0], [0.0, 0.0])


def test_a_job_held_back_elsewhere_leaves_the_rest_of_the_shared_link():
    # Job 1 crosses its own 10 Gbit/s link (its isolated rate) and the shared 100 Gbit/s one; job 2 only the
    # shared one. In step, job 1 sends at 10 (1 s), job 2 takes the other 90 Gbit/s: 10/90 s.
    jobs = [demand(1, 1.0, links=(0, 1), iso_gbps=10.0), demand(2, 1.0, links=(1,))]
    got = assert_same_starts(jobs, [10.0, 100.0], [0.0, 0.0])
    assert got[0][1] == pytest.approx(2.0, rel=1e-9)
    assert got[1][1] == pytest.approx(1.0 + 10 / 90, rel=1e-9)


def test_three_jobs_on_two_links_with_unequal_computes_and_offsets():
    jobs = [demand(1, 0.10, links=(0,)), demand(2, 0.13, links=(0, 1), flow_bytes=BYTES * 0.6),
            demand(3, 0.07, links=(1,), flow_bytes=BYTES * 1.4, overlap=0.5)]
    assert_same_starts(jobs, [100.0, 80.0], [0.0, 0.03, 0.05], iterations=30)


# ------------------------------------------------------------------ the simulator's solve (phase state)
def _alone_period(d):
    net = d.flow_bytes * 8 / 1e9 / min(d.iso_rate_gbps, d.rate_cap_gbps)
    comm = net + d.serial_intra_s
    return d.compute_s + comm - d.overlap * min(d.compute_s, comm)


# Contention can spread the jobs' paces further than their alone periods do. The model sizes each job's buffer
# of iteration starts from the alone periods' ratio (``simulate_component``), so in "three_spread" the fastest
# job's last starts are not kept and the periods are taken over a shorter window than the rule says (job 1 is
# 0.14% off the referee, job 3 0.85%). Found by this referee; left as it is because fixing it moves results
# (full Philly under tcp) that this change had to keep bit-identical.
SPREAD = pytest.mark.xfail(strict=True, reason="start buffer sized from alone periods drops a fast job's starts")


@pytest.mark.parametrize("case", ["in_step", "shifted", "unequal", "held", "three",
                                  pytest.param("three_spread", marks=SPREAD)])
def test_solve_gives_the_referee_s_mean_period_from_each_job_s_phase(case):
    jobs, capacity = {
        "in_step": ([demand(1, 0.1), demand(2, 0.1)], [100.0]),
        "shifted": ([demand(1, 0.1), demand(2, 0.1, phase=0.25)], [100.0]),
        "unequal": ([demand(1, 0.5), demand(2, 0.3, flow_bytes=BYTES / 3, phase=0.4)], [100.0]),
        "held": ([demand(1, 1.0, links=(0, 1), iso_gbps=10.0), demand(2, 1.0, links=(1,), phase=0.7)],
                 [10.0, 100.0]),
        "three": ([demand(1, 0.10), demand(2, 0.10, links=(0, 1), flow_bytes=BYTES * 0.8, phase=0.3),
                   demand(3, 0.12, links=(1,), flow_bytes=BYTES * 0.9, overlap=0.5, phase=0.6)], [100.0, 80.0]),
        "three_spread": ([demand(1, 0.10), demand(2, 0.13, links=(0, 1), flow_bytes=BYTES * 0.6, phase=0.3),
                          demand(3, 0.07, links=(1,), flow_bytes=BYTES * 1.4, overlap=0.5, phase=0.6)],
                         [100.0, 80.0]),
    }[case]
    horizon, warmup = 24, 12
    model = NETWORKS.create("tcp", jitter=0.0, horizon=horizon, warmup=warmup)
    got = model.solve(jobs, np.array(capacity), now_s=0.0).iter_s
    assert model.exact_solves == 1
    # a new job's iterations start at phase x its alone period: at time 0 it is that far into one
    elapsed = [(-d.phase * _alone_period(d)) % _alone_period(d) for d in jobs]
    starts = referee_starts(jobs, capacity, None, horizon + 1, elapsed_s=elapsed)
    want = reference.mean_periods(starts, warmup)
    np.testing.assert_allclose([got[d.job_id] for d in jobs], want, rtol=1e-9)
    if case == "in_step":
        assert want == pytest.approx([0.3, 0.3], rel=1e-9)  # half the link each, all along
    if case == "shifted":  # a quarter period apart, they overlap and settle into a common pace above alone
        assert all(w > 0.2 for w in want)


def test_the_referee_fills_a_link_by_weight_up_to_each_cap():
    # Hand example of the sharing rule itself: weights 2 : 1 : 1 on one 100 Gbit/s link, job 3 capped at 10:
    # job 3 freezes at 10, the others split 90 as 2 : 1.
    rate = reference.water_fill(np.ones((3, 1)), np.array([100.0]), np.array([100.0, 100.0, 10.0]),
                                np.array([2.0, 1.0, 1.0]), np.ones(3, bool))
    np.testing.assert_allclose(rate, [60.0, 30.0, 10.0])
