"""The expected retransmission-timeout tail (netlab/network/tcp/rto.py) on one shallow link, worked out by hand.

One 10 Gbit/s link, ``n`` equal jobs with one flow each across it (alone, each gets the whole link, so the link
binds as soon as two share it), every job moving 1.5 MB per iteration: 1,000 packets of 1,500 bytes, a = 1.2 ms
alone, after a = 1.2 ms of compute: each flow sends half of its iteration alone (duty 0.5). The Reno analysis:

* flows sending at once: a = n x 0.5, so a window of w = B / a packets of the B = 100-packet queue (the
  bandwidth-delay product left out: rtt_us 0; the last test puts it in);
* loss probability p = 8 / (3 w^2), timeout probability of a loss Q = 3 / w (both below 1 here);
* timeouts per iteration = rto_k x 1000 x p x Q, each 0.2 s (rto_min_s), added to the job's iteration.

n = 4: a = 2, w = 50, p = 8 / 7500, Q = 0.06, p Q = 6.4e-5, 0.064 timeouts per iteration at rto_k 1; with
rto_k 0.5, 0.032 x 0.2 s = 6.4 ms. n = 12: a = 6, w = 100 / 6, p = 0.0096, Q = 0.18, p Q = 1.728e-3: 0.1728 s.
n = 2: a = 1, w = 100, p Q = 8e-6: 0.8 ms.
"""

import numpy as np
import pytest

from netlab.network import NETWORKS, CommDemand
from netlab.network.links import LinkState

CAP_GBPS = 10.0
CAP = np.array([CAP_GBPS])
BYTES = 1.5e6  # 1,000 packets of 1,500 bytes
A_S = BYTES * 8 / (CAP_GBPS * 1e9)  # 1.2 ms
KW = dict(jitter=0.0, alpha=0.0, lead=0.0, rto_k=0.5, buffer_packets=100.0, rto_min_s=0.2, segment_bytes=1500.0,
          rtt_us=0.0)
TAIL_S = {2: 0.5 * 1000 * 8e-6 * 0.2, 4: 0.5 * 1000 * 6.4e-5 * 0.2, 12: 0.5 * 1000 * 1.728e-3 * 0.2}


def job(job_id: int) -> CommDemand:
    return CommDemand(job_id, np.array([0]), np.array([1.0]), BYTES, A_S, iso_rate_gbps=CAP_GBPS, iso_iter_s=2 * A_S)


def plain(**kw):
    return NETWORKS.create("tcp", **{**KW, "rto_k": 0.0, **kw})


def test_hand_computed_tails():
    assert TAIL_S[4] == pytest.approx(6.4e-3) and TAIL_S[12] == pytest.approx(0.1728) and TAIL_S[2] == 8e-4


@pytest.mark.parametrize("n", [4, 12])
@pytest.mark.parametrize("max_exact_jobs", [16, 1], ids=["fluid", "mean-field"])
def test_the_tail_is_added_to_every_job_of_a_shallow_link_by_both_solvers(n, max_exact_jobs):
    jobs = [job(i) for i in range(1, n + 1)]
    base = plain(max_exact_jobs=max_exact_jobs).solve(jobs, CAP)
    sol = NETWORKS.create("tcp", max_exact_jobs=max_exact_jobs, **KW).solve(jobs, CAP)
    for i in range(1, n + 1):
        assert sol.iter_s[i] == pytest.approx(base.iter_s[i] + TAIL_S[n], rel=1e-9)
        assert sol.comm_s[i] == pytest.approx(base.comm_s[i] + TAIL_S[n], rel=1e-9)  # a timeout is communication


def test_the_incremental_solve_and_the_scenario_run_add_the_same_tail():
    four = [job(i) for i in range(1, 5)]
    moved = []
    for kw in ({**KW, "rto_k": 0.0}, KW):
        net = NETWORKS.create("tcp", **kw)
        links = LinkState(CAP.copy())
        net.attach(links)
        for d in four:
            links.jobs[[0]] += 1
            net.join(d.job_id, d, 0.0)
        first = net.resolve(0.0)
        links.jobs[[0]] -= 2  # two leave: n = 2, the link still binds (20 Gbit/s offered)
        net.leave(3, 1.0)
        net.leave(4, 1.0)
        second = net.resolve(1.0)
        moved.append((dict(zip(first.job_id, first.iter_s)), dict(zip(second.job_id, second.iter_s))))
    (base4, base2), (got4, got2) = moved
    assert sorted(got4) == [1, 2, 3, 4] and sorted(got2) == [1, 2]
    for i in got4:
        assert got4[i] == pytest.approx(base4[i] + TAIL_S[4], rel=1e-9)
    for i in got2:
        assert got2[i] == pytest.approx(base2[i] + TAIL_S[2], rel=1e-9)
    iters = {i: 8 for i in range(1, 5)}
    s0 = plain().simulate_starts(four, CAP, {i: 0.0 for i in range(1, 5)}, iters)
    s1 = NETWORKS.create("tcp", **KW).simulate_starts(four, CAP, {i: 0.0 for i in range(1, 5)}, iters)
    for i in range(1, 5):
        assert np.diff(s1[i]).mean() == pytest.approx(np.diff(s0[i]).mean() + TAIL_S[4], rel=1e-9)


def test_no_tail_without_loss():
    # deep-buffer tcp (rto_k 0): no term, the very same answer
    two = [job(1), job(2)]
    assert NETWORKS.create("tcp").params.rto_k == 0.0
    assert NETWORKS.create("tcp", jitter=0.0).solve(two, CAP).iter_s == plain(alpha=1.0, lead=2.0).solve(
        two, CAP).iter_s
    # a job alone: the link does not bind (10 Gbit/s offered on 10), no loss, no tail
    alone = NETWORKS.create("tcp", **KW).solve([job(1)], CAP)
    assert alone.iter_s[1] == pytest.approx(2 * A_S, rel=1e-12)
    # a ten times deeper buffer: w ten times larger, p Q = 8 / (3 w^2) x 3 / w = 8 / w^3 a thousand times smaller
    deep = NETWORKS.create("tcp", **{**KW, "buffer_packets": 1000.0}).solve([job(i) for i in range(1, 5)], CAP)
    base = plain().solve([job(i) for i in range(1, 5)], CAP)
    assert deep.iter_s[1] - base.iter_s[1] == pytest.approx(TAIL_S[4] / 1000, rel=1e-6)


def test_the_bandwidth_delay_product_widens_the_window():
    # rtt 60 us at 10 Gbit/s: 10e9 x 60e-6 / (8 x 1500) = 50 packets in flight beside the 100 queued, so with n = 4
    # (a = 2) w = 150 / 2 = 75, p Q = 8 / 75^3 = 1.8963e-5: 0.5 x 1000 x 1.8963e-5 x 0.2 s = 1.8963 ms
    four = [job(i) for i in range(1, 5)]
    got = NETWORKS.create("tcp", **{**KW, "rtt_us": 60.0}).solve(four, CAP).iter_s[1] - plain().solve(four, CAP).iter_s[1]
    assert got == pytest.approx(0.5 * 1000 * 8 / 75 ** 3 * 0.2, rel=1e-9)
    assert got == pytest.approx(1.8963e-3, rel=1e-4)


def test_bad_parameters_are_refused():
    with pytest.raises(ValueError, match="rto_k >= 0"):
        NETWORKS.create("tcp", rto_k=-0.1)
    with pytest.raises(ValueError, match="segment_bytes > 0"):
        NETWORKS.create("tcp", segment_bytes=0.0)
