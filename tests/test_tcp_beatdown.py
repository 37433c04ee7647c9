"""DCTCP's multi-bottleneck beat-down (netlab.network.tcp.beatdown): its weights and the model's two solves, by hand."""

import dataclasses

import numpy as np
import pytest

from netlab.network.model import NETWORKS, CommDemand
from netlab.network.tcp.beatdown import beatdown_weights, flow_beatdown


def test_a_flow_marked_at_two_queues_is_weighted_down_by_their_ratio():
    marked = np.array([0.3, 0.1, 0.0, 0.3])  # links 0 and 3 mark 30% of arrivals, link 1 10%, link 2 nothing
    assert flow_beatdown(np.array([0, 2]), marked) == (pytest.approx(0.3), pytest.approx(1.0))  # one marking link
    assert flow_beatdown(np.array([0, 3]), marked) == (pytest.approx(0.6), pytest.approx(2.0))  # two equal ones
    assert flow_beatdown(np.array([0, 1]), marked) == (pytest.approx(0.4), pytest.approx(4 / 3))
    assert flow_beatdown(np.array([2]), marked) == (0.0, 1.0)  # nothing marks: no beat-down
    flows = {
        1: [np.array([0, 3]), np.array([2])],  # its costlier flow crosses two 30% queues: 2 ** -2
        2: [np.array([0, 2]), np.array([0, 1])],  # its costlier flow (0.4) is 30% + 10%: (4/3) ** -2 = 0.5625
        3: [np.array([2])],  # nothing marks: 1
    }
    assert beatdown_weights(flows, marked, 2.0) == pytest.approx({1: 0.25, 2: 0.5625, 3: 1.0})
    assert beatdown_weights(flows, marked, 0.0) == pytest.approx({1: 1.0, 2: 1.0, 3: 1.0})
    # the costlier flow decides, not the larger ratio: job 4's flow over 0.3 + 0.3 (price 0.6, ratio 2) is costlier
    # than its flow over three 5% links (price 0.15, ratio 3), so 2 ** -1 at beta 1
    marked2 = np.array([0.3, 0.3, 0.05, 0.05, 0.05])
    assert beatdown_weights({4: [np.array([2, 3, 4]), np.array([0, 1])]}, marked2, 1.0) == pytest.approx({4: 0.5})
    # ... and a cheaper flow with the larger ratio (0.15 / 0.05 = 3) does not
    assert beatdown_weights({5: [np.array([2, 3, 4]), np.array([0])]}, marked2, 1.0) == pytest.approx({5: 1.0})


def test_the_registered_dctcp_is_the_term_at_beta_4_and_beta_0_is_one_solve():
    from netlab.validate.families import generate
    from netlab.validate.predict import predict, predict_beatdown
    from netlab.validate.scenario import REGIMES

    sc = generate("2tier", 4, REGIMES["dctcp"])  # 8:1: links mark
    plain = predict(sc, "dctcp", {"beatdown_beta": 0.0})
    assert predict_beatdown(sc, "dctcp", 0.0) == plain  # no term: the one solve
    assert predict(sc, "dctcp") == predict_beatdown(sc, "dctcp", 4.0)  # the registered exponent (params.py)
    beaten = predict_beatdown(sc, "dctcp", 3.0)
    assert any(beaten[j] > plain[j] * 1.01 for j in plain) and any(beaten[j] < plain[j] * 0.99 for j in plain)


# ----------------------------------------------------------------------------- in the model's own solve
GBIT_BYTES = 1.25e8  # 1 Gbit per flow per iteration: 1 s at 1 Gbit/s


def _demand(job_id, links, compute_s=0.0, paths=True):
    links = np.array(links)
    return CommDemand(job_id, links, np.ones(len(links)), GBIT_BYTES, compute_s,
                      iso_rate_gbps=1.0, flow_paths=((links, np.ones(len(links))),) if paths else None)


def _three():
    # links 0 and 1 at 1 Gbit/s, link 2 at 10: job 1 crosses 0 and 1, job 2 link 0, job 3 link 1, job 4 link 2
    # alone (never marked); every job always communicating (no compute), 1 Gbit an iteration
    return [_demand(1, [0, 1]), _demand(2, [0]), _demand(3, [1]), _demand(4, [2])], np.array([1.0, 1.0, 10.0])


def test_the_model_weights_a_job_crossing_two_equally_marked_links_by_2_to_the_minus_beta():
    from netlab.network.tcp.beatdown import solved_weights

    demands, cap = _three()
    net = NETWORKS.create("dctcp", beatdown_beta=3.0, cut_k=0.0)
    # links 0 and 1 are loaded alike (two jobs each, one shared), so marked alike: job 1's ratio is 2, weight
    # 2 ** -3; jobs 2 and 3 cross one marked link each (ratio 1), job 4 none: weight 1
    assert solved_weights(net, demands, cap) == {1: 0.125, 2: 1.0, 3: 1.0, 4: 1.0}
    # without the term each of links 0 and 1 is shared half and half: 2 s an iteration (job 4 alone at 10 Gbit/s
    # on its link, capped at its isolated 1 Gbit/s: 1 s)
    plain = NETWORKS.create("dctcp", cut_k=0.0, beatdown_beta=0.0).solve(demands, cap).iter_s
    assert plain == pytest.approx({1: 2.0, 2: 2.0, 3: 2.0, 4: 1.0}, rel=1e-9)
    # with it job 1 holds 1/8 against 1 on each link: 1/9 of a Gbit/s (9 s), jobs 2 and 3 8/9 (1.125 s)
    beaten = net.solve(demands, cap).iter_s
    assert beaten == pytest.approx({1: 9.0, 2: 1.125, 3: 1.125, 4: 1.0}, rel=1e-9)
    assert net.fresh().params.beatdown_beta == 3.0  # what a policy predicts with keeps the term


def test_two_jobs_one_crossing_a_marked_and_an_idle_link_are_not_weighted():
    # job 2's flow crosses the shared link 0 and link 2, which nothing else loads (never marked): its price is
    # link 0's, its ratio 1, so both keep weight 1 and the solve is the plain one, 2 s each
    demands, cap = [_demand(1, [0]), _demand(2, [0, 2])], np.array([1.0, 1.0, 10.0])
    net = NETWORKS.create("dctcp", beatdown_beta=3.0, cut_k=0.0)
    assert net.solve(demands, cap).iter_s == pytest.approx({1: 2.0, 2: 2.0}, rel=1e-9)


def test_a_demand_without_its_flows_paths_keeps_weight_1():
    from netlab.network.tcp.beatdown import solved_weights

    demands, cap = _three()
    demands[0] = _demand(1, [0, 1], paths=False)
    net = NETWORKS.create("dctcp", beatdown_beta=3.0, cut_k=0.0)
    assert solved_weights(net, demands, cap) == {1: 1.0, 2: 1.0, 3: 1.0, 4: 1.0}
    assert net.solve(demands, cap).iter_s == pytest.approx({1: 2.0, 2: 2.0, 3: 2.0, 4: 1.0}, rel=1e-9)


def test_beta_0_is_the_incremental_model_and_above_it_is_not():
    plain, beaten = NETWORKS.create("dctcp", beatdown_beta=0.0), NETWORKS.create("dctcp", beatdown_incremental=False)
    assert plain.capabilities == type(plain).capabilities and plain.capabilities.incremental
    assert beaten.params.beatdown_beta == 4.0  # the registered dctcp has the term
    caps = beaten.capabilities  # re-solved the batch way (opt-in): not incremental
    assert not caps.incremental and not caps.relinks and not caps.moves_phase and caps.uses_phase
    assert type(beaten).capabilities.incremental  # the class is untouched: only this instance
    registered = NETWORKS.create("dctcp")  # the two solves per component (beatdown_resolve.py), by default
    assert registered.params.beatdown_incremental and registered.capabilities == type(registered).capabilities
    assert NETWORKS.create("tcp").capabilities.incremental and NETWORKS.create("dcqcn").capabilities.incremental
    with pytest.raises(ValueError, match="beatdown_beta >= 0"):
        NETWORKS.create("dctcp", beatdown_beta=-1.0)
    with pytest.raises(ValueError, match="beatdown_incremental True or False"):
        NETWORKS.create("dctcp", beatdown_incremental=2)


def test_a_simulation_re_solves_every_job_with_the_term():
    """The fabric drives a model with the term re-solved the batch way (``beatdown_incremental`` False) through the
    generic interface: each re-solve is the batch solve of every running job (here the hand-computed 9 s / 1.125 s),
    a leave re-solves the rest."""
    from netlab.network.links import LinkState
    from netlab.network.model import GenericIncremental

    demands, cap = _three()
    model = NETWORKS.create("dctcp", beatdown_beta=3.0, cut_k=0.0, beatdown_incremental=False)
    net = GenericIncremental(model)  # what the fabric drives a model that is not incremental through
    links = LinkState(cap)
    net.attach(links)
    for d in demands:
        links.jobs[d.links] += 1
        assert net.join(d.job_id, d, 0.0) is None
    moved = net.resolve(0.0)
    assert dict(zip(moved.job_id, moved.iter_s)) == pytest.approx({1: 9.0, 2: 1.125, 3: 1.125, 4: 1.0}, rel=1e-9)
    assert links.queue_frac[:2].min() > 0.0 and links.queue_frac[2] == 0.0
    links.jobs[demands[1].links] -= 1
    net.leave(2, 1.0)
    moved = net.resolve(1.0)
    # job 2 gone: link 0 has job 1 alone, link 1 still job 1 and 3; job 1 crosses one marked link (ratio 1):
    # weight 1, half of link 1 each (2 s); job 4 did not move
    assert dict(zip(moved.job_id, moved.iter_s)) == pytest.approx({1: 2.0, 3: 2.0}, rel=1e-9)


def test_a_routed_demand_carries_each_flow_s_path():
    """``build_demand``'s flow_paths: one (links, shares) per ring flow, keyed as the route keys it, summing to
    the demand's links and weights."""
    from netlab.network.demand import build_demand
    from netlab.topology.builders import leafspine
    from netlab.workload.zoo import JobModel

    topo = leafspine(racks=3, hosts_per_rack=2, gpus_per_host=1, host_gbps=10.0, oversub=2.0, spines=2, ecmp="hash")
    d, _ = build_demand(topo, JobModel("m", 0.1, 1e8), "ring", 5, [0, 2, 4], [1, 1, 1])
    paths = d.flow_paths
    assert len(paths) == 3
    for n, ((links, shares), (a, b)) in enumerate(zip(paths, [(0, 2), (2, 4), (4, 0)])):
        assert links.tolist() == topo.flow_links(a, b, key=5 * 1024 + n)[0].tolist()
        assert len(links) == 4 and shares.tolist() == [1.0] * 4  # host -> ToR -> spine -> ToR -> host, all of it
    summed = np.bincount(np.concatenate([p[0] for p in paths]), minlength=len(topo.link_capacity_gbps))
    assert summed[d.links].tolist() == d.weights.tolist() and summed.sum() == d.weights.sum()
    copy = dataclasses.replace(d, phase=0.5)  # a plain record made from it keeps them
    assert [p[0].tolist() for p in copy.flow_paths] == [p[0].tolist() for p in paths]


def test_reweighted_reads_as_the_netallocation_it_stands_for():
    """The network layer scales a job's weight without the scheduler's NetAllocation (layers test): what the
    model reads of it is what NetAllocation gives for the same priority, weight, cap, paths and queue."""
    from dataclasses import replace

    from netlab.network.tcp.beatdown import Reweighted
    from netlab.sched import NetAllocation

    for base in (None, NetAllocation(), NetAllocation(priority=2, rate_cap_gbps=5.0), NetAllocation(weight=2.0),
                 NetAllocation(paths=(1,), own_queue=True)):
        for factor in (1.0, 0.125, 0.5):
            got = Reweighted(base, factor)
            want = replace(base or NetAllocation(), weight=(1.0 if base is None else base.weight) * factor)
            assert (got.priority, got.weight, got.rate_cap_gbps, got.paths, got.queue_of_its_own, got.kinds()) == \
                (want.priority, want.weight, want.rate_cap_gbps, want.paths, want.queue_of_its_own, want.kinds())
    assert Reweighted(NetAllocation(weight=2.0), 0.5).kinds() == frozenset()  # back to weight 1: not asked
    assert Reweighted(None, 0.125).kinds() == {"weight"} and Reweighted(None, 0.125).queue_of_its_own
