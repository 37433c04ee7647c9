"""Each transport regime's model on two jobs sharing one link, against expectations computed by hand.

One 10 Gbit/s link, two jobs with one flow each across it (alone, each gets the whole link), the regime's own
model and parameters (``netlab regimes``) with compute jitter off, so the fluid is deterministic. ``a`` is the
communication time of the small job alone. With ``stretch`` k a job's delay beyond its time alone, d, becomes
(1 + k) d (:meth:`netlab.network.tcp.model.TcpNetwork._stretched`); every expectation below is for d first.
"""

import numpy as np
import pytest

from netlab.network import NETWORKS, CommDemand
from netlab.network.regimes import regimes

CAP_GBPS = 10.0
CAP = np.array([CAP_GBPS])
BYTES = 1.25e8  # one gigabit: 0.1 s alone at 10 Gbit/s
A_S = BYTES * 8 / (CAP_GBPS * 1e9)


def job(job_id: int, compute_s: float, flow_bytes: float = BYTES, phase: float = 0.0) -> CommDemand:
    alone = compute_s + flow_bytes * 8 / (CAP_GBPS * 1e9)
    return CommDemand(job_id, np.array([0]), np.array([1.0]), flow_bytes, compute_s, iso_rate_gbps=CAP_GBPS,
                      iso_iter_s=alone, phase=phase)


def model(name: str):
    return NETWORKS.create(name, jitter=0.0)


def stretched(alone_s: float, shared_s: float, stretch: float) -> float:
    return alone_s + (1.0 + stretch) * (shared_s - alone_s)


@pytest.fixture(params=[r.network for r in regimes()], ids=[r.name for r in regimes()])
def net(request):
    return model(request.param)


def test_in_step_equal_jobs_halve_the_link_while_both_communicate(net):
    # Both compute 3a, then send together: equal bytes, equal weights whatever alpha, and (same fraction sent at
    # every instant) whatever lead: each gets half the link, both finish at 2a. Without jitter nothing breaks the
    # symmetry, so they stay in step: every period is 3a + 2a.
    sol = net.solve([job(1, 3 * A_S), job(2, 3 * A_S)], CAP)
    want = stretched(4 * A_S, 5 * A_S, net.params.stretch)
    assert sol.iter_s[1] == pytest.approx(want, rel=1e-3)
    assert sol.iter_s[2] == pytest.approx(want, rel=1e-3)


def test_jobs_shifted_half_a_period_never_meet(net):
    # Period alone 4a, communication a (its last quarter). Job 2 starts half a period (2a) later: job 1 sends in
    # [3a, 4a] + 4a k, job 2 in [5a, 6a] + 4a k. The windows never overlap: both run as alone, nothing to stretch.
    sol = net.solve([job(1, 3 * A_S, phase=0.0), job(2, 3 * A_S, phase=0.5)], CAP)
    assert sol.iter_s[1] == pytest.approx(4 * A_S, rel=1e-3)
    assert sol.iter_s[2] == pytest.approx(4 * A_S, rel=1e-3)


def test_unequal_sizes_share_by_weight_and_keep_the_link_full(net):
    # No compute: both always send, so the link is always shared and always full (work-conserving): per second,
    # bytes/iter of job 1 plus 10 x bytes/iter of job 2 fill it: a / t1 + 10a / t2 = 1 (t before the stretch).
    # With lead 0 the weights are bytes ** alpha, constant: job 1 gets 1 / (1 + 10 ** alpha) of the link, so
    # t1 = a (1 + 10 ** alpha), t2 = 10a (1 + 10 ** alpha) / 10 ** alpha: alpha 1 gives both 11a, alpha 0 gives
    # 2a and 20a. With lead > 0 each weight is between phi and (1 + lead) phi, which bounds job 1's share.
    p = net.params
    sol = net.solve([job(1, 0.0), job(2, 0.0, 10 * BYTES)], CAP)
    t1 = A_S + (sol.iter_s[1] - A_S) / (1.0 + p.stretch)
    t2 = 10 * A_S + (sol.iter_s[2] - 10 * A_S) / (1.0 + p.stretch)
    assert A_S / t1 + 10 * A_S / t2 == pytest.approx(1.0, rel=2e-3)
    w = 10.0 ** p.alpha
    if p.lead == 0.0:
        assert t1 == pytest.approx(A_S * (1 + w), rel=2e-3)
        assert t2 == pytest.approx(10 * A_S * (1 + w) / w, rel=2e-3)
    else:
        share_1 = A_S / t1
        assert 1 / (1 + (1 + p.lead) * w) - 1e-3 <= share_1 <= (1 + p.lead) / (1 + p.lead + w) + 1e-3


def test_stretch_multiplies_the_delay_beyond_alone_in_solve_and_in_the_fluid_run():
    # In step (above): alone 4a, shared 5a, so the delay is a; stretch 0.5 makes it 1.5a. A job on no shared link
    # has no delay to stretch. The scenario run (simulate_starts) adds the same per iteration.
    plain, net = NETWORKS.create("tcp", jitter=0.0), NETWORKS.create("tcp", jitter=0.0, stretch=0.5)
    jobs = [job(1, 3 * A_S), job(2, 3 * A_S)]
    sol = net.solve(jobs, CAP)
    assert sol.iter_s[1] == pytest.approx(5.5 * A_S, rel=1e-3)
    assert sol.comm_s[1] == pytest.approx(plain.solve(jobs, CAP).comm_s[1] + 0.5 * A_S, rel=1e-3)
    lone = CommDemand(3, np.array([1]), np.array([1.0]), BYTES, 3 * A_S, iso_rate_gbps=CAP_GBPS, iso_iter_s=4 * A_S)
    assert net.solve([lone], np.array([CAP_GBPS, CAP_GBPS])).iter_s[3] == pytest.approx(4 * A_S, rel=1e-9)
    starts = net.simulate_starts(jobs, CAP, {1: 0.0, 2: 0.0}, {1: 6, 2: 6})
    assert np.diff(starts[1]).mean() == pytest.approx(5.5 * A_S, rel=1e-3)
