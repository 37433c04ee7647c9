"""The DCTCP rate-cut term (netlab/network/tcp/ratecut.py) on one ECN-marking link, worked out by hand.

One 10 Gbit/s link, ``n`` equal jobs with one flow each across it, every job moving 1.5 MB per iteration (1,000
packets of 1,500 bytes, a = 1.2 ms alone) in 10 ring steps of 100 packets, after a = 1.2 ms of compute. Started
together with jitter off and no leader advantage they stay in step: each sends n a at 1 / n of the link, an
iteration of (n + 1) a, n / (n + 1) of it sending (the share the term counts flows with) for n a of network time.
Marking threshold K = 20 packets, bandwidth-delay product left out (rtt_us 0):

* flows sending at once s = n x n / (n + 1), each flow's window at its share w = K / s;
* DCTCP's marked fraction at that window alpha_m = min(1, sqrt(2 / w)); on average alpha_m / 4 below its share;
* a 100-packet step spends 1 - w / 100 of itself cut: cut_s = cut_k x alpha_m / 4 x (1 - w / 100) x n a.

n = 4: s = 3.2, w = 6.25, alpha_m = sqrt(0.32) = 0.5656854, 1 - w / 100 = 0.9375, n a = 4.8 ms:
cut_s = 2 x 0.1414214 x 0.9375 x 4.8e-3 = 1.2727922 ms at cut_k 2. n = 12: s = 144 / 13, w = 1.8055556,
sqrt(2 / w) > 1 so alpha_m = 1, 1 - w / 100 = 0.9819444, n a = 14.4 ms: cut_s = 2 x 0.25 x 0.9819444 x 14.4e-3 =
7.07 ms.
"""

import pickle
from pathlib import Path

import numpy as np
import pytest

from incremental_helpers import joined, run_added_s
from netlab.network import NETWORKS, CommDemand
from netlab.network.demand import build_demand
from netlab.topology import load_topology
from netlab.workload.patterns import PATTERNS
from netlab.workload.zoo import JobModel

CAP_GBPS = 10.0
CAP = np.array([CAP_GBPS])
BYTES = 1.5e6
A_S = BYTES * 8 / (CAP_GBPS * 1e9)  # 1.2 ms
KW = dict(jitter=0.0, alpha=0.0, lead=0.0, max_exact_jobs=16, buffer_packets=20.0, segment_bytes=1500.0,
          rtt_us=0.0, cut_k=2.0)
CUT_S = {4: 2 * 0.1414214 * 0.9375 * 4.8e-3, 12: 2 * 0.25 * 0.9819444 * 14.4e-3}


def job(job_id: int, steps: int = 10) -> CommDemand:
    return CommDemand(job_id, np.array([0]), np.array([1.0]), BYTES, A_S, iso_rate_gbps=CAP_GBPS,
                      iso_iter_s=2 * A_S, steps=steps)


def cut_by_hand(n: int, buffer_packets: float = 20.0, step_packets: float = 100.0) -> float:
    w = buffer_packets / (n * n / (n + 1))
    return 2.0 * min(1.0, np.sqrt(2 / w)) / 4 * max(0.0, 1 - w / step_packets) * n * A_S


def plain(**kw):
    return NETWORKS.create("tcp", **{**KW, "cut_k": 0.0, **kw})


def test_hand_computed_cuts():
    assert CUT_S[4] == pytest.approx(1.2727922e-3, rel=1e-6) and CUT_S[12] == pytest.approx(7.07e-3, rel=1e-6)
    for n in (4, 12):
        assert cut_by_hand(n) == pytest.approx(CUT_S[n], rel=1e-6)


@pytest.mark.parametrize("n", [4, 12])
def test_the_cut_is_added_to_every_job_of_a_marking_link(n):
    jobs = [job(i) for i in range(1, n + 1)]
    base = plain().solve(jobs, CAP)
    sol = NETWORKS.create("tcp", **KW).solve(jobs, CAP)
    for i in range(1, n + 1):
        assert base.iter_s[i] == pytest.approx((n + 1) * A_S, rel=1e-9)
        assert sol.iter_s[i] == pytest.approx(base.iter_s[i] + CUT_S[n], rel=1e-6)
        assert sol.comm_s[i] == pytest.approx(base.comm_s[i] + CUT_S[n], rel=1e-6)  # a cut slows communication


def test_the_incremental_solve_and_the_scenario_run_add_the_same_cut():
    four = [job(i) for i in range(1, 5)]
    got = []
    for kw in ({**KW, "cut_k": 0.0}, KW):
        net = NETWORKS.create("tcp", **kw)
        joined(net, CAP, four)
        moved = net.resolve(0.0)
        got.append(dict(zip(moved.job_id, moved.iter_s)))
    assert sorted(got[1]) == [1, 2, 3, 4]
    for i in got[1]:
        assert got[1][i] == pytest.approx(got[0][i] + CUT_S[4], rel=1e-6)
    added = run_added_s(plain(), NETWORKS.create("tcp", **KW), CAP, four)
    assert sorted(added) == [1, 2, 3, 4]
    for i in added:
        assert added[i] == pytest.approx(CUT_S[4], rel=1e-6)


def test_no_cut_on_a_deep_buffer_a_short_step_a_lone_job_or_tcp():
    four = [job(i) for i in range(1, 5)]
    base = plain().solve(four, CAP).iter_s
    # a 2,000-packet queue: w = 625 packets, more than a step: every step finishes within its first window
    assert NETWORKS.create("tcp", **{**KW, "buffer_packets": 2000.0}).solve(four, CAP).iter_s == base
    # 1,000 steps of one packet: shorter than the window (6.25), never cut
    short = [job(i, steps=1000) for i in range(1, 5)]
    assert NETWORKS.create("tcp", **KW).solve(short, CAP).iter_s == plain().solve(short, CAP).iter_s
    # alone the link does not bind (10 Gbit/s offered on 10): no marking, no cut
    assert NETWORKS.create("tcp", **KW).solve([job(1)], CAP).iter_s[1] == pytest.approx(2 * A_S, rel=1e-12)
    assert NETWORKS.create("tcp").params.cut_k == 0.0
    with pytest.raises(ValueError, match="cut_k >= 0"):
        NETWORKS.create("tcp", cut_k=-1.0)


def test_a_ring_plan_counts_its_steps_and_the_demand_keeps_them():
    assert PATTERNS.get("ring")().plan((2, 2, 1), 1e6).steps == 2 * (5 - 1)  # 2(n - 1) over n = 5 ranks
    assert PATTERNS.get("hierarchical")().plan((2, 2, 1), 1e6).steps == 2 * (3 - 1)  # over k = 3 hosts
    assert PATTERNS.get("ps")().plan((2, 2, 1), 1e6).steps == 1
    topo = load_topology(Path(__file__).resolve().parents[1] / "testbed" / "topologies" / "leafspine-2rack.yaml")
    d, _ = build_demand(topo, JobModel("m", 0.1, 1e6), "ring", 7, [0, topo.n_hosts - 1], [2, 2])
    assert d.steps == 6 and pickle.loads(pickle.dumps(d)).steps == 6


def test_a_job_whose_communication_is_half_hidden_pays_half_the_cut():
    """Four jobs in step as above, each with 20 ms of compute of which its all-reduce may overlap half (overlap
    0.5). Alone a job iterates in 20 + 1.2 - 0.6 = 20.6 ms; in step each sends 4 a = 4.8 ms at a quarter of the
    link, an iteration of 20 + 4.8 - 0.5 x 4.8 = 22.4 ms, 4.8 / 22.4 = 3 / 14 of it sending. Flows at once
    4 x 3 / 14 = 6 / 7, counted as at least one: w = 20 packets, alpha_m = sqrt(2 / 20) = 0.31623, 1 - w / 100 =
    0.8: cut_s = 2 x 0.31623 / 4 x 0.8 x 4.8 ms = 0.60716 ms of communication. 15.2 ms of the compute is left to
    hide it under, half of which the overlap covers: the iteration grows by half the cut, 0.30358 ms."""
    cut = 2 * np.sqrt(0.1) / 4 * 0.8 * 4 * A_S
    assert cut == pytest.approx(0.6071573e-3, rel=1e-6)
    hidden = [CommDemand(i, np.array([0]), np.array([1.0]), BYTES, 20e-3, overlap=0.5, iso_rate_gbps=CAP_GBPS,
                         iso_iter_s=20.6e-3, steps=10) for i in range(1, 5)]
    base = plain().solve(hidden, CAP)
    sol = NETWORKS.create("tcp", **KW).solve(hidden, CAP)
    for i in range(1, 5):
        assert base.iter_s[i] == pytest.approx(22.4e-3, rel=1e-9)
        assert sol.comm_s[i] == pytest.approx(base.comm_s[i] + cut, rel=1e-6)  # the communication pays it all ...
        assert sol.iter_s[i] == pytest.approx(base.iter_s[i] + cut / 2, rel=1e-6)  # ... the iteration half
    added = run_added_s(plain(), NETWORKS.create("tcp", **KW), CAP, hidden)  # the scenario run alike
    for i in added:
        assert added[i] == pytest.approx(cut / 2, rel=1e-6)
