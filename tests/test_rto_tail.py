"""The expected retransmission-timeout tail (netlab/network/tcp/rto.py) on one shallow link, worked out by hand.

One 10 Gbit/s link, ``n`` equal jobs with one flow each across it (alone, each gets the whole link, so the link
binds as soon as two share it), every job moving 1.5 MB per iteration: 1,000 packets of 1,500 bytes, a = 1.2 ms
alone, after a = 1.2 ms of compute. Started together with jitter off and no leader advantage, they stay in step:
each sends n a at 1 / n of the link, an iteration of (n + 1) a, so each flow sends n / (n + 1) of its iteration
*as solved* (the share the tail counts flows with; alone it would be 0.5). The Reno analysis:

* flows sending at once: s = n x n / (n + 1), so a window of w = B / s packets of the B = 100-packet queue (the
  bandwidth-delay product left out: rtt_us 0; a test below puts it in);
* loss probability p = 8 / (3 w^2), timeout probability of a loss Q = 3 / w (both below 1 here), p Q = 8 / w^3;
* expected timeouts in the job's one ring step (these demands have ``steps`` 1): lam = rto_k x 1000 x p x Q;
* stalls per iteration = 1 - exp(-lam) (at most one per ring step), each 0.2 s (rto_min_s), added to the job's
  iteration.

n = 4: s = 3.2, w = 31.25, p Q = 8 / 30517.578125 = 2.62144e-4; with rto_k 0.5, lam = 0.131072, 1 - exp(-lam) =
0.1228454, x 0.2 s = 24.5691 ms (the unbounded count, lam x 0.2 s, was 26.2144 ms). n = 12: s = 144 / 13,
w = 1300 / 144, p Q = 8 x 144^3 / 1300^3 = 0.0108731, lam = 5.43648: 0.995645 x 0.2 s = 0.199129 s, one stall
for the step (unbounded: 1.08731 s). n = 2: s = 4 / 3, w = 75, p Q = 8 / 421875 = 1.8963e-5, lam = 0.00948148:
0.00943667 x 0.2 s = 1.88733 ms.
The mean field does not keep jobs in step; its answer's share is read from its own solve without the tail.
"""

import numpy as np
import pytest

from netlab.network import NETWORKS, CommDemand
from incremental_helpers import joined, run_added_s

CAP_GBPS = 10.0
CAP = np.array([CAP_GBPS])
BYTES = 1.5e6  # 1,000 packets of 1,500 bytes
A_S = BYTES * 8 / (CAP_GBPS * 1e9)  # 1.2 ms
KW = dict(jitter=0.0, alpha=0.0, lead=0.0, rto_k=0.5, buffer_packets=100.0, rto_min_s=0.2, segment_bytes=1500.0,
          rtt_us=0.0)
TAIL_S = {2: 1.88733e-3, 4: 24.5691e-3, 12: 0.199129}


def tail_at(share_flows: float, buffer_packets: float = 100.0, bdp_packets: float = 0.0) -> float:
    """(1 - exp(-rto_k x packets x p Q)) x rto_min_s for flows sending at once ``share_flows``, one ring step
    (module doc)."""
    w = (bdp_packets + buffer_packets) / max(share_flows, 1.0)
    return (1.0 - np.exp(-0.5 * 1000 * min(1.0, 8 / (3 * w * w)) * min(1.0, 3 / w))) * 0.2


def job(job_id: int) -> CommDemand:
    return CommDemand(job_id, np.array([0]), np.array([1.0]), BYTES, A_S, iso_rate_gbps=CAP_GBPS, iso_iter_s=2 * A_S)


def plain(**kw):
    return NETWORKS.create("tcp", **{**KW, "rto_k": 0.0, **kw})


def test_hand_computed_tails():
    for n in (2, 4, 12):
        assert TAIL_S[n] == pytest.approx(tail_at(n * n / (n + 1)), rel=1e-4)
    assert TAIL_S[4] == pytest.approx(0.2 * (1 - np.exp(-0.131072)), rel=1e-5)
    assert TAIL_S[12] == pytest.approx(0.2 * (1 - np.exp(-0.5 * 1000 * 8 * 144**3 / 1300**3)), rel=1e-5)


@pytest.mark.parametrize("n", [4, 12])
def test_the_fluid_adds_the_tail_of_jobs_in_step(n):
    jobs = [job(i) for i in range(1, n + 1)]
    base = plain(max_exact_jobs=16).solve(jobs, CAP)
    sol = NETWORKS.create("tcp", max_exact_jobs=16, **KW).solve(jobs, CAP)
    for i in range(1, n + 1):
        assert base.iter_s[i] == pytest.approx((n + 1) * A_S, rel=1e-9)  # in step: each sends n / (n + 1)
        assert sol.iter_s[i] == pytest.approx(base.iter_s[i] + TAIL_S[n], rel=1e-4)
        assert sol.comm_s[i] == pytest.approx(base.comm_s[i] + TAIL_S[n], rel=1e-4)  # a timeout is communication


@pytest.mark.parametrize("n", [4, 12])
def test_the_mean_field_adds_the_tail_of_its_own_share(n):
    jobs = [job(i) for i in range(1, n + 1)]
    base = plain(max_exact_jobs=1).solve(jobs, CAP)
    sol = NETWORKS.create("tcp", max_exact_jobs=1, **KW).solve(jobs, CAP)
    share = base.comm_s[1] / base.iter_s[1]
    assert 0.5 < share < n / (n + 1)  # contended, so above its share alone; out of step, below the in-step share
    for i in range(1, n + 1):
        assert sol.iter_s[i] == pytest.approx(base.iter_s[i] + tail_at(n * share), rel=1e-9)


def test_the_incremental_solve_and_the_scenario_run_add_the_same_tail():
    four = [job(i) for i in range(1, 5)]
    moved = []
    for kw in ({**KW, "rto_k": 0.0}, KW):
        net = NETWORKS.create("tcp", **kw)
        links = joined(net, CAP, four)
        first = net.resolve(0.0)
        links.jobs[[0]] -= 2  # two leave: n = 2 in step, each sending 2 / 3 (the link binds: 20 Gbit/s offered)
        net.leave(3, 1.0)
        net.leave(4, 1.0)
        second = net.resolve(1.0)
        moved.append((dict(zip(first.job_id, first.iter_s)), dict(zip(second.job_id, second.iter_s))))
    (base4, base2), (got4, got2) = moved
    assert sorted(got4) == [1, 2, 3, 4] and sorted(got2) == [1, 2]
    for i in got4:
        assert got4[i] == pytest.approx(base4[i] + TAIL_S[4], rel=1e-4)
    for i in got2:
        assert got2[i] == pytest.approx(base2[i] + TAIL_S[2], rel=1e-4)
    added = run_added_s(plain(), NETWORKS.create("tcp", **KW), CAP, four)
    assert sorted(added) == [1, 2, 3, 4]
    for i in added:
        assert added[i] == pytest.approx(TAIL_S[4], rel=1e-4)


def test_no_tail_without_loss():
    # deep-buffer tcp (rto_k 0): no term, the very same answer
    two = [job(1), job(2)]
    assert NETWORKS.create("tcp").params.rto_k == 0.0
    assert NETWORKS.create("tcp", jitter=0.0).solve(two, CAP).iter_s == plain(alpha=1.0, lead=2.0).solve(
        two, CAP).iter_s
    # a job alone: the link does not bind (10 Gbit/s offered on 10), no loss, no tail
    alone = NETWORKS.create("tcp", **KW).solve([job(1)], CAP)
    assert alone.iter_s[1] == pytest.approx(2 * A_S, rel=1e-12)
    # a ten times deeper buffer: w ten times larger, p Q = 8 / (3 w^2) x 3 / w = 8 / w^3 a thousand times smaller:
    # lam = 1.31072e-4, (1 - exp(-lam)) x 0.2 s = 2.62127e-5 s (the bound barely bites where lam is small)
    deep = NETWORKS.create("tcp", **{**KW, "buffer_packets": 1000.0}).solve([job(i) for i in range(1, 5)], CAP)
    base = plain().solve([job(i) for i in range(1, 5)], CAP)
    assert deep.iter_s[1] - base.iter_s[1] == pytest.approx(2.62127e-5, rel=1e-4)


def test_the_bandwidth_delay_product_widens_the_window():
    # rtt 60 us at 10 Gbit/s: 10e9 x 60e-6 / (8 x 1500) = 50 packets in flight beside the 100 queued, so with n = 4
    # in step (s = 3.2) w = 150 / 3.2 = 46.875, p Q = 8 / 46.875^3 = 7.7672e-5: lam = 0.5 x 1000 x 7.7672e-5 =
    # 0.038836, (1 - exp(-lam)) x 0.2 s = 7.6183 ms
    four = [job(i) for i in range(1, 5)]
    got = (NETWORKS.create("tcp", **{**KW, "rtt_us": 60.0}).solve(four, CAP).iter_s[1]
           - plain().solve(four, CAP).iter_s[1])
    assert got == pytest.approx(tail_at(3.2, bdp_packets=50.0), rel=1e-4)
    assert got == pytest.approx(7.6183e-3, rel=1e-4)


def test_bad_parameters_are_refused():
    with pytest.raises(ValueError, match="rto_k >= 0"):
        NETWORKS.create("tcp", rto_k=-0.1)
    with pytest.raises(ValueError, match="segment_bytes > 0"):
        NETWORKS.create("tcp", segment_bytes=0.0)
