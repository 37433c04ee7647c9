"""The timeout tail as idle time inside the solve (netlab/network/tcp/rto.py ``idle_demands``, the model's
``rto_idle``), on test_rto_tail.py's one 10 Gbit/s link, by hand.

Every job moves 1.5 MB per iteration (a = 1.2 ms alone) after a = 1.2 ms of compute. n equal jobs in step each get
the same tail (test_rto_tail.py's TAIL_S), so holding the tail as idle time inside the solve changes nothing there:
each still sends n a at 1 / n of the link, then waits its tail. What the idle form changes is the others' share when
the tails differ: a job stalled in a timeout leaves the link to them.
"""

import numpy as np
import pytest

from netlab.network import NETWORKS, CommDemand
from netlab.network.tcp.rto import idle_demands

CAP = np.array([10.0])
BYTES = 1.5e6
A_S = BYTES * 8 / 10e9  # 1.2 ms
KW = dict(jitter=0.0, alpha=0.0, lead=0.0, rto_k=0.5, buffer_packets=100.0, rto_min_s=0.2, segment_bytes=1500.0,
          rtt_us=0.0)
TAIL_4_S = 0.2 * (1 - np.exp(-0.5 * 1000 * 2.62144e-4))  # n = 4 in step: 24.5691 ms (test_rto_tail.py)


def job(job_id: int, nbytes: float = BYTES) -> CommDemand:
    a = nbytes * 8 / 10e9
    return CommDemand(job_id, np.array([0]), np.array([1.0]), nbytes, A_S, iso_rate_gbps=10.0, iso_iter_s=A_S + a)


def test_idle_demands_by_hand():
    d1, d2 = job(1), job(2)
    got = idle_demands([d1, d2], [0.03, 0.0])
    assert got[1] is d2  # no tail: the very demand
    assert got[0].serial_intra_s == pytest.approx(0.03)
    # no overlap: the ideal iteration is compute + network alone + serial = 1.2 + 1.2 + 30 ms
    assert got[0].iso_iter_s == pytest.approx(2 * A_S + 0.03)
    assert got[0].flow_bytes == BYTES and list(got[0].links) == [0]  # it loads the link as before


def test_in_step_jobs_get_the_tail_as_before():
    four = [job(i) for i in range(1, 5)]
    after = NETWORKS.create("tcp", max_exact_jobs=16, **KW).solve(four, CAP)
    idle = NETWORKS.create("tcp", max_exact_jobs=16, rto_idle=True, **KW).solve(four, CAP)
    for i in range(1, 5):
        assert after.iter_s[i] == pytest.approx(5 * A_S + TAIL_4_S, rel=1e-4)
        # each sends 4 a at a quarter of the link after its compute, then idles its tail: the same iteration
        assert idle.iter_s[i] == pytest.approx(5 * A_S + TAIL_4_S, rel=1e-4)
        assert idle.comm_s[i] == pytest.approx(after.comm_s[i], rel=1e-4)  # a timeout is communication


def test_a_stalled_job_leaves_the_link_to_the_others():
    # mean field, one large job (10x the bytes: ten times the packets, so ten times the tail per iteration of the
    # same loss rate) beside three small ones: its long stall is time the small ones have the link to themselves
    jobs = [job(1, 10 * BYTES)] + [job(i) for i in range(2, 5)]
    plain = NETWORKS.create("tcp", max_exact_jobs=1, **{**KW, "rto_k": 0.0}).solve(jobs, CAP)
    after = NETWORKS.create("tcp", max_exact_jobs=1, **KW).solve(jobs, CAP)
    idle = NETWORKS.create("tcp", max_exact_jobs=1, rto_idle=True, **KW).solve(jobs, CAP)
    tails = {i: after.iter_s[i] - plain.iter_s[i] for i in range(1, 5)}
    assert tails[1] > 5 * tails[2] > 0.0
    for i in range(2, 5):  # the small jobs: faster than with the tail added after the solve
        assert idle.iter_s[i] < after.iter_s[i]
    # the large job: at least its iteration alone (1.2 ms compute + 12 ms at the whole link) and its own tail, the
    # tail being its own idle time whatever the others do; at most the answer with the tail added after the solve
    assert idle.iter_s[1] >= (A_S + 10 * A_S + tails[1]) * (1 - 1e-9)
    assert idle.iter_s[1] <= after.iter_s[1] * (1 + 1e-9)


def test_without_a_tail_the_idle_form_is_the_plain_model_and_incremental():
    two = [job(1), job(2)]
    off = NETWORKS.create("tcp", **{**KW, "rto_k": 0.0})
    on = NETWORKS.create("tcp", rto_idle=True, **{**KW, "rto_k": 0.0})
    assert on.solve(two, CAP).iter_s == off.solve(two, CAP).iter_s
    assert on.capabilities.incremental and on.capabilities == off.capabilities
    # with the tail, two solves over whole components: not incremental (the simulator re-solves every running job)
    assert not NETWORKS.create("tcp", rto_idle=True, **KW).capabilities.incremental
    assert NETWORKS.create("tcp", **KW).capabilities.incremental  # the tail after the solve stays incremental
    with pytest.raises(ValueError, match="rto_idle True or False"):
        NETWORKS.create("tcp", rto_idle=2)
