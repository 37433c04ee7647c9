"""The timeout tail's bound (netlab/network/tcp/rto.py): at most one stall per ring step, worked out by hand.

A ring of ``k`` steps whose flows together expect ``lam`` timeouts per step stalls ``k (1 - exp(-lam))`` times per
iteration: each step that sees at least one timeout holds for one ``rto_min_s`` (0.2 s here), however many it sees.
Every case below is on one link of a 100-packet queue with the bandwidth-delay product left out (rtt_us 0), rto_k 1,
1,500-byte packets, and the flows sending at once given directly (``active_flows``), so the window and the Reno
analysis' timeouts per packet are fixed by hand:

* 4 flows at once: w = 100 / 4 = 25, p = 8 / (3 x 625) = 0.0042667, Q = 3 / 25 = 0.12, p Q = 8 / 25^3 = 5.12e-4;
* 3 flows at once: w = 100 / 3, p Q = 8 x 27 / 1e6 = 2.16e-4.
"""

import math

import numpy as np
import pytest

from netlab.network import CommDemand
from netlab.network.tcp.params import TcpParams
from netlab.network.tcp.rto import demands_tail_s, step_stalls

P = TcpParams.checked(rto_k=1.0, rto_min_s=0.2, buffer_packets=100.0, segment_bytes=1500.0, rtt_us=0.0)
CAP = np.array([10.0])
OFFERED = np.array([20.0])  # twice the capacity: the link binds


def flow(job_id: int, flows: float, packets_per_step: float, steps: int) -> CommDemand:
    """A job with ``flows`` flows on link 0, each sending ``packets_per_step`` 1,500-byte packets in each of its
    ``steps`` ring steps."""
    return CommDemand(job_id, np.array([0]), np.array([flows]), packets_per_step * steps * 1500.0, 0.0,
                      iso_rate_gbps=10.0, steps=steps)


def test_step_stalls_by_hand():
    assert step_stalls(0.0, 6) == 0.0
    assert step_stalls(math.log(2.0), 6) == pytest.approx(3.0, rel=1e-12)  # each step stalls with probability 1/2
    assert step_stalls(1e-6, 6) == pytest.approx(6e-6, rel=1e-6)  # a rare timeout: the count itself
    assert step_stalls(100.0, 6) == 6.0  # certain in every step: one stall per step, not 100


def test_one_flow_k_steps_n_packets_per_step():
    active = np.array([4.0])  # p Q = 5.12e-4
    # 1,000 packets per step: lam = 0.512 timeouts per step, 6 (1 - exp(-0.512)) = 2.404225 stalls per iteration,
    # 0.480845 s (the count alone: 6 x 0.512 = 3.072 timeouts, 0.6144 s)
    (got,) = demands_tail_s([flow(1, 1.0, 1000.0, 6)], CAP, OFFERED, active, P)
    assert got == pytest.approx(0.480845, rel=1e-5)
    # 100,000 packets per step: lam = 51.2, every step stalls once: 6 x 0.2 = 1.2 s (the count alone: 61.44 s)
    (got,) = demands_tail_s([flow(1, 1.0, 100_000.0, 6)], CAP, OFFERED, active, P)
    assert got == pytest.approx(1.2, rel=1e-12)
    # never more than one stall per step, and more packets per step never fewer stalls
    tails = [demands_tail_s([flow(1, 1.0, n, 6)], CAP, OFFERED, active, P)[0] for n in (1, 10, 100, 1e3, 1e4, 1e6)]
    assert all(t <= 6 * 0.2 for t in tails) and tails == sorted(tails)


def test_two_jobs_on_one_link():
    # 3 flows at once (p Q = 2.16e-4): job 1 has 2 flows of 500 packets per step over 2 steps, lam = 2 x 500 x
    # 2.16e-4 = 0.216, 2 (1 - exp(-0.216)) = 0.388529 stalls; job 2 has 1 flow of 5,000 packets per step over 4
    # steps, lam = 1.08, 4 (1 - exp(-1.08)) = 2.641618 stalls; each stall 0.2 s
    jobs = [flow(1, 2.0, 500.0, 2), flow(2, 1.0, 5000.0, 4)]
    got = demands_tail_s(jobs, CAP, OFFERED, np.array([3.0]), P)
    assert got == pytest.approx([0.388529 * 0.2, 2.641618 * 0.2], rel=1e-5)
    # the link does not bind (offered at most its capacity): no loss, no stall
    assert demands_tail_s(jobs, CAP, np.array([10.0]), np.array([3.0]), P) == [0.0, 0.0]
