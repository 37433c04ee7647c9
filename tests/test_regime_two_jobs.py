"""Each transport regime's model on two jobs sharing one link, against expectations computed by hand.

One 10 Gbit/s link, two jobs with one flow each across it (alone, each gets the whole link), the regime's own
model and parameters (``netlab regimes``) with compute jitter off, so the fluid is deterministic. ``a`` is the
communication time of the small job alone. With ``stretch`` k a job's delay beyond its time alone, d, becomes
(1 + k) d (:meth:`netlab.network.tcp.model.TcpNetwork._stretched`); every expectation below is for d first. With
the goodput term (``goodput_k`` g, ``buffer_packets`` B, :mod:`netlab.network.tcp.goodput`) the link, which binds
(both jobs at 10 Gbit/s would offer 20), carries 10 / f Gbit/s, f = 1 + 2g / B, whenever a job sends on it: the
term is per binding link, not per moment, so jobs that take turns pay it too. With the timeout tail (``rto_k``,
:mod:`netlab.network.tcp.rto`) every job on the binding link adds, per iteration, rto_min_s x (1 - exp(-lam)), its
one ring step's chance of a timeout, lam = rto_k x its packets (flow bytes / segment_bytes) x p(w) x Q(w),
w = (10 Gbit/s x rtt_us / segment_bytes + buffer_packets) / (flows sending at once, at least 1), p = 8 / (3 w^2),
Q = 3 / w (:func:`tail_s`), after the stretch, or, with ``rto_idle``,
as time the job leaves the link inside the solve (:func:`~netlab.network.tcp.rto.idle_demands`). With the rate-cut
term (``cut_k``, :mod:`netlab.network.tcp.ratecut`) its network time as solved, t, grows by g t, g = cut_k x
min(1, sqrt(2 / w)) / 4 x max(0, 1 - w / c) (:func:`cut_frac`; w as for the tail, here with the marking threshold
as ``buffer_packets``; c its packets per ring step: one step of all its bytes here).
"""

import numpy as np
import pytest

from incremental_helpers import joined
from netlab.network import NETWORKS, CommDemand
from netlab.network.regimes import regimes
from netlab.network.tcp.rto import idle_demands

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


def tail_s(net, flow_bytes: float, active: float) -> float:
    """The timeout tail per iteration of a job moving ``flow_bytes`` on the binding link with ``active`` flows
    sending at once (each flow counted with its job's share of its iteration as solved spent sending; module doc)."""
    p = net.params
    w = (CAP_GBPS * 1e9 * p.rtt_us * 1e-6 / (8 * p.segment_bytes) + p.buffer_packets) / max(active, 1.0)
    lam = p.rto_k * flow_bytes / p.segment_bytes * min(1.0, 8 / (3 * w * w)) * min(1.0, 3 / w)
    return p.rto_min_s * (1.0 - np.exp(-lam))  # one ring step: at most one stall (rto.py)


def cut_frac(net, flow_bytes: float, active: float) -> float:
    """g: the share of its network time a job's rate cut adds on the binding link with ``active`` flows sending at
    once (module doc; 0 without the term)."""
    p = net.params
    w = (CAP_GBPS * 1e9 * p.rtt_us * 1e-6 / (8 * p.segment_bytes) + p.buffer_packets) / max(active, 1.0)
    return p.cut_k * min(1.0, np.sqrt(2 / w)) / 4 * max(0.0, 1 - w / (flow_bytes / p.segment_bytes))


def slower(net) -> float:
    """f: how much longer every gigabit takes on the shared link (module doc)."""
    return 1.0 + 2.0 * net.params.goodput_k / net.params.buffer_packets


@pytest.fixture(params=[r.network for r in regimes()], ids=[r.name for r in regimes()])
def net(request):
    return model(request.param)


def test_in_step_equal_jobs_halve_the_link_while_both_communicate(net):
    # Both compute 3a, then send together: equal bytes, equal weights whatever alpha, and (same fraction sent at
    # every instant) whatever lead: each gets half the link, both finish at 2a. Without jitter nothing breaks the
    # symmetry, so they stay in step: every period is 3a + 2a f. Each sends 2a f of it: 2 x 2f / (3 + 2f) flows
    # sending at once, under one (f < 1.5), counted as one, for the tail.
    sol = net.solve([job(1, 3 * A_S), job(2, 3 * A_S)], CAP)
    f = slower(net)
    want = (stretched(4 * A_S, 3 * A_S + 2 * A_S * f, net.params.stretch) + tail_s(net, BYTES, 4 * f / (3 + 2 * f))
            + cut_frac(net, BYTES, 4 * f / (3 + 2 * f)) * 2 * A_S * f)
    assert sol.iter_s[1] == pytest.approx(want, rel=1e-3)
    assert sol.iter_s[2] == pytest.approx(want, rel=1e-3)


def test_jobs_shifted_half_a_period_never_meet(net):
    # Period alone 4a, communication a (its last quarter). Job 2 starts half a period (2a) later: job 1 sends in
    # [3a, 4a] + 4a k, job 2 in [5a, 6a] + 4a k. The windows never overlap: both run as alone but for the
    # goodput term, a f instead of a (a margin of a(f - 1) < a / 2 keeps them apart), and that delay is stretched.
    # The tail is per binding link too, as for the in-step pair (each sends a f of 3a + a f: under one flow at once).
    sol = net.solve([job(1, 3 * A_S, phase=0.0), job(2, 3 * A_S, phase=0.5)], CAP)
    f = slower(net)
    want = (stretched(4 * A_S, 3 * A_S + A_S * f, net.params.stretch) + tail_s(net, BYTES, 2 * f / (3 + f))
            + cut_frac(net, BYTES, 2 * f / (3 + f)) * A_S * f)
    assert sol.iter_s[1] == pytest.approx(want, rel=1e-3)
    assert sol.iter_s[2] == pytest.approx(want, rel=1e-3)


def test_unequal_sizes_share_by_weight_and_keep_the_link_full(net):
    # No compute: both always send, so the link is always shared and always full (work-conserving): per second,
    # bytes/iter of job 1 plus 10 x bytes/iter of job 2 fill it: a / t1 + 10a / t2 = 1 (t before the stretch, and
    # in units of a f: the goodput term makes every a longer by f).
    # With lead 0 the weights are bytes ** alpha, constant: job 1 gets 1 / (1 + 10 ** alpha) of the link, so
    # t1 = a (1 + 10 ** alpha), t2 = 10a (1 + 10 ** alpha) / 10 ** alpha: alpha 1 gives both 11a, alpha 0 gives
    # 2a and 20a. With lead > 0 each weight is between phi and (1 + lead) phi, which bounds job 1's share.
    # Both always send alone: two flows at once for the tail, job 2's ten times job 1's (ten times the packets).
    p = net.params
    sol = net.solve([job(1, 0.0), job(2, 0.0, 10 * BYTES)], CAP)
    if p.rto_idle and p.rto_k > 0.0:
        # the tail as idle time inside the solve (rto.idle_demands): the model without the tail, given each job's
        # tail (two flows at once) as time it leaves the link, answers the same. The link is then not always full:
        # each job has it alone while the other stalls, so each job's network time lies between its time alone
        # (a f, 10a f) and its time always sharing it (the lead-0 figures below)
        tails = [tail_s(net, BYTES, 2.0), tail_s(net, 10 * BYTES, 2.0)]
        plain = type(net)(**p._replace(rto_k=0.0)._asdict())
        ref = plain.solve(idle_demands([job(1, 0.0), job(2, 0.0, 10 * BYTES)], tails), CAP)
        assert sol.iter_s[1] == pytest.approx(ref.iter_s[1], rel=1e-9)
        assert sol.iter_s[2] == pytest.approx(ref.iter_s[2], rel=1e-9)
        w, f = 10.0 ** p.alpha, slower(net)
        assert A_S * f < sol.iter_s[1] - tails[0] < A_S * (1 + w) * f
        assert 10 * A_S * f < sol.iter_s[2] - tails[1] < 10 * A_S * (1 + w) / w * f
        return
    # iter = a + (1 + k)(t - a) + tail + g t (module doc), so t = (iter - tail + k a) / (1 + k + g)
    g1, g2 = cut_frac(net, BYTES, 2.0), cut_frac(net, 10 * BYTES, 2.0)
    t1 = (sol.iter_s[1] - tail_s(net, BYTES, 2.0) + p.stretch * A_S) / (1.0 + p.stretch + g1) / slower(net)
    t2 = (sol.iter_s[2] - tail_s(net, 10 * BYTES, 2.0) + p.stretch * 10 * A_S) / (1.0 + p.stretch + g2) / slower(net)
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


@pytest.mark.parametrize("max_exact_jobs", [8, 1], ids=["fluid", "mean-field"])
def test_negative_alpha_favours_the_short_transfer_in_both_solvers(max_exact_jobs):
    # alpha -1 (rate-cut transports: a transfer is cut the longer it lasts), lead 0, no compute: both always send.
    # Weights (bytes / largest) ** -1: 1 Gbit -> 10, 10 Gbit -> 1, so job 1 holds 10/11 of the link: a / t1 = 10/11,
    # t1 = 1.1a, and the link stays full: a / t1 + 10a / t2 = 1, 10a / t2 = 1/11, t2 = 110a (alpha 1 gives both
    # 11a). The mean field (forced: max_exact_jobs 1) sees each job meet the other all the time: the same shares.
    net = NETWORKS.create("tcp", jitter=0.0, alpha=-1.0, lead=0.0, max_exact_jobs=max_exact_jobs)
    sol = net.solve([job(1, 0.0), job(2, 0.0, 10 * BYTES)], CAP)
    assert sol.iter_s[1] == pytest.approx(1.1 * A_S, rel=1e-6)
    assert sol.iter_s[2] == pytest.approx(110 * A_S, rel=1e-6)
    with pytest.raises(ValueError, match="alpha >= -1"):
        NETWORKS.create("tcp", alpha=-1.5)


def test_a_shallow_binding_link_delivers_less_in_the_batch_the_incremental_and_the_scenario_solves():
    # Four equal jobs, one flow each on the 10 Gbit/s link, no compute: all always send (40 Gbit/s offered: the
    # link binds). goodput_k 2, buffer 100 packets: the link delivers 10 / (1 + 2 x 4 / 100) = 10 / 1.08 Gbit/s,
    # a quarter each, so each gigabit takes 4 x 1.08 a = 4.32a (4a without the term). The mean field (forced by
    # max_exact_jobs 1), the incremental solve and the scenario run read the same capacity.
    kw = dict(jitter=0.0, alpha=0.0, lead=0.0, goodput_k=2.0, buffer_packets=100.0)
    four = [job(i, 0.0) for i in range(1, 5)]
    for exact in (8, 1):
        sol = NETWORKS.create("tcp", max_exact_jobs=exact, **kw).solve(four, CAP)
        assert [sol.iter_s[i] for i in range(1, 5)] == pytest.approx([4.32 * A_S] * 4, rel=1e-6)
    net = NETWORKS.create("tcp", **kw)
    links = joined(net, CAP, four)
    moved = net.resolve(0.0)
    assert sorted(moved.job_id) == [1, 2, 3, 4] and moved.iter_s == pytest.approx([4.32 * A_S] * 4, rel=1e-6)
    links.jobs[[0]] -= 2  # two leave: 2 flows, 10 / 1.04 Gbit/s in halves, 2 x 1.04 a
    net.leave(3, 1.0)
    net.leave(4, 1.0)
    moved = net.resolve(1.0)
    assert sorted(moved.job_id) == [1, 2] and moved.iter_s == pytest.approx([2.08 * A_S] * 2, rel=1e-6)
    starts = NETWORKS.create("tcp", **kw).simulate_starts(four, CAP, {i: 0.0 for i in range(1, 5)},
                                                         {i: 6 for i in range(1, 5)})
    assert np.diff(starts[1]).mean() == pytest.approx(4.32 * A_S, rel=1e-6)
    # alone (one flow, 10 Gbit/s offered: the link does not bind) nothing is lost
    assert NETWORKS.create("tcp", **kw).solve([job(1, 0.0)], CAP).iter_s[1] == pytest.approx(A_S, rel=1e-9)
