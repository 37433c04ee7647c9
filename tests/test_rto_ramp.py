"""The timeout count's ramp and bandwidth-delay share (netlab/network/tcp/rto.py), worked out by hand.

A ring step of n packets per flow counts n x n / (n + rto_ramp_packets) of them, and a flow's window is
(rto_bdp_share x BDP + buffer) / flows. One link, a 100-packet queue, 1,500-byte packets, rto_k 1, 0.2 s per stall,
the flows sending at once given directly (4: w = 100 / 4 = 25 without the product, p Q = 8 / 25^3 = 5.12e-4).
"""

import math

import numpy as np
import pytest

from netlab.network import CommDemand
from netlab.network.tcp.params import TcpParams
from netlab.network.tcp.rto import counted_packets, demands_tail_s, link_timeouts_per_packet

CAP = np.array([10.0])
OFFERED = np.array([20.0])  # the link binds
ACTIVE = np.array([4.0])


def params(**kw) -> TcpParams:
    return TcpParams.checked(**{**dict(rto_k=1.0, rto_min_s=0.2, buffer_packets=100.0, segment_bytes=1500.0,
                                       rtt_us=0.0), **kw})


def flow(packets_per_step: float, steps: int = 6) -> CommDemand:
    return CommDemand(1, np.array([0]), np.array([1.0]), packets_per_step * steps * 1500.0, 0.0, iso_rate_gbps=10.0,
                      steps=steps)


def test_counted_packets_by_hand():
    assert counted_packets(100.0, 0.0) == 100.0  # no ramp: every packet
    assert counted_packets(100.0, 85.0) == pytest.approx(10_000 / 185, rel=1e-12)  # 54.054
    assert counted_packets(85.0, 85.0) == pytest.approx(42.5, rel=1e-12)  # half of a step of ramp packets
    assert counted_packets(0.0, 85.0) == 0.0


def test_one_flow_n_packets_per_step_with_ramp():
    # 1,000 packets per step, ramp 85: 1e6 / 1085 = 921.659 counted, lam = 921.659 x 5.12e-4 = 0.471889,
    # 6 (1 - exp(-0.471889)) = 2.257065 stalls, 0.451413 s (without the ramp: 0.480845 s)
    (got,) = demands_tail_s([flow(1000.0)], CAP, OFFERED, ACTIVE, params(rto_ramp_packets=85.0))
    assert got == pytest.approx(0.451413, rel=1e-5)
    # 10 packets per step: 100 / 95 = 1.0526 counted, lam = 5.389e-4, 6 x 0.2 x (1 - exp(-lam)) = 6.4656e-4 s:
    # about a tenth of the count without the ramp (10 x 5.12e-4 x 1.2 ~ 6.14e-3 s)
    (got,) = demands_tail_s([flow(10.0)], CAP, OFFERED, ACTIVE, params(rto_ramp_packets=85.0))
    assert got == pytest.approx(6.465626e-4, rel=1e-5)
    (old,) = demands_tail_s([flow(10.0)], CAP, OFFERED, ACTIVE, params())
    assert old == pytest.approx(1.2 * -math.expm1(-10 * 5.12e-4), rel=1e-12)  # 6.1343e-3 s
    assert got < old / 9


def test_bdp_share_in_the_window():
    # 10 Gbit/s, 120 us: BDP = 10e9 x 120e-6 / (8 x 1500) = 100 packets. Share 1: w = (100 + 100) / 4 = 50,
    # p Q = 8 / 50^3 = 6.4e-5; share 0.5: w = 150 / 4 = 37.5, p Q = 8 / 37.5^3 = 1.517037e-4; share 0: 5.12e-4
    binding = np.array([True])
    for share, want in ((1.0, 6.4e-5), (0.5, 1.517037e-4), (0.0, 5.12e-4)):
        got = link_timeouts_per_packet(CAP, ACTIVE, binding, params(rtt_us=120.0, rto_bdp_share=share))
        assert got[0] == pytest.approx(want, rel=1e-6)
    # both: 1,000 packets per step, ramp 85, share 0.5: lam = 921.659 x 1.517037e-4 = 0.139819,
    # 6 (1 - exp(-0.139819)) x 0.2 = 0.156581 s
    (got,) = demands_tail_s([flow(1000.0)], CAP, OFFERED, ACTIVE,
                            params(rtt_us=120.0, rto_bdp_share=0.5, rto_ramp_packets=85.0))
    assert got == pytest.approx(0.156581, rel=1e-5)


def test_defaults_are_the_old_count():
    p = TcpParams()
    assert p.rto_ramp_packets == 0.0 and p.rto_bdp_share == 1.0
    with pytest.raises(ValueError):
        TcpParams.checked(rto_ramp_packets=-1.0)
    with pytest.raises(ValueError):
        TcpParams.checked(rto_bdp_share=-0.1)
