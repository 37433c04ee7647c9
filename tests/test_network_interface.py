"""The boundary between the simulator and a network model: capabilities, the incremental interface, names.

A new model is one class and one registration: the base class drives it incrementally by re-solving every
running job through its ``solve``; what it is, it declares in ``capabilities``; the name the results report is
its own.
"""

import numpy as np
import pytest

from netlab.network import (ALLOCATION_KINDS, NETWORKS, Capabilities, CommDemand, LiveNetwork, NetSolution,
                            NetworkModel, UnsupportedAllocation, ideal_networks, make_network)
from netlab.network.links import LinkState
from netlab.sim import SimConfig, Simulator
from netlab.sim.fabric import Fabric
from netlab.topology import load_topology
from netlab.workload.job import Job
from netlab.workload.zoo import JobModel, ModelZoo

BYTES = 1.25e9  # 10 Gbit per flow per iteration: 0.1 s alone at 100 Gbit/s


def demand(job_id, compute_s=0.1, phase=0.0):
    return CommDemand(job_id, np.array([0]), np.array([1.0]), BYTES, compute_s, iso_rate_gbps=100.0, phase=phase)


class Halved(NetworkModel):
    """Every job at half its isolated rate: a new model written as one class (solve only)."""

    name = "halved"

    def solve(self, demands, capacity_gbps):
        iter_s = {d.job_id: d.iter_s(d.iso_rate_gbps / 2) for d in demands}
        return NetSolution(iter_s, {d.job_id: iter_s[d.job_id] - d.compute_s for d in demands})


def test_the_models_say_what_they_are():
    caps = {name: NETWORKS.get(name).capabilities for name in NETWORKS.names()}
    assert not caps["ideal"].contention and all(c.contention for n, c in caps.items() if n != "ideal")
    assert caps["tcp"].uses_phase and caps["tcp"].moves_phase and caps["phase"].uses_phase
    assert not caps["fair"].uses_phase and not caps["phase"].moves_phase
    assert caps["fair"].incremental and caps["tcp"].incremental and not caps["phase"].incremental
    assert ideal_networks() == ["ideal"]


@pytest.mark.parametrize("name", NETWORKS.names())
def test_every_model_honours_what_it_declares_and_refuses_the_rest_with_one_clear_error(name):
    model = NETWORKS.create(name)
    model.check_allocation([])  # nothing asked: nothing refused
    for kind in ALLOCATION_KINDS:
        if kind in model.capabilities.allocations or not model.capabilities.contention:  # ideal: ignored
            model.check_allocation([kind])
        else:
            with pytest.raises(UnsupportedAllocation, match=f"{name}.*cannot honour a per-job {kind}"):
                model.check_allocation([kind])
    with pytest.raises(UnsupportedAllocation, match="unknown"):
        model.check_allocation(["bandwidth"])


def test_what_the_models_honour():
    caps = {n: NETWORKS.get(n).capabilities.allocations for n in ("fair", "tcp", "phase")}
    assert caps["fair"] == caps["tcp"] == set(ALLOCATION_KINDS)
    assert caps["phase"] == {"weight", "rate_cap", "path"}  # priority refused (see PhaseNetwork's doc)


def test_a_model_that_declares_an_allocation_accepts_it():
    class Weighted(Halved):
        capabilities = Capabilities(allocations=frozenset({"weight"}))

    Weighted().check_allocation(["weight"])
    with pytest.raises(UnsupportedAllocation, match="it honours: weight"):
        Weighted().check_allocation(["weight", "priority"])


def test_a_model_object_wins_and_a_different_name_beside_it_is_an_error():
    fair = NETWORKS.create("fair")
    assert make_network(fair) is fair and make_network(fair, "fair") is fair
    assert make_network(None, "phase").name == "phase" and make_network().name == "tcp"
    with pytest.raises(ValueError, match="'fair' but the config names 'tcp'"):
        make_network(fair, "tcp")
    with pytest.raises(ValueError, match="network_kwargs"):
        make_network(fair, None, {"jitter": 0.0})
    with pytest.raises(TypeError, match="NetworkModel"):
        make_network("fair")


def _two_host_run(network=None, config=None):
    topo = load_topology("dumbbell,hosts_per_side=2,gpus_per_host=1,host_gbps=100,bottleneck_gbps=100")
    zoo = ModelZoo.default().with_model(JobModel("half", compute_s=0.1, grad_bytes=BYTES))
    jobs = [Job(1, 0.0, 2, "half", 100), Job(2, 0.0, 1, "half", 100)]
    return Simulator(topo, jobs, "fifo", "random", config=config or SimConfig(), zoo=zoo, network=network).run()


def test_a_new_model_is_one_class_the_simulator_drives_through_solve():
    # The two-host job runs at half its isolated rate: 0.1 s compute + 0.2 s all-reduce; the one-host job
    # (no network) at its own speed. The results name the model passed.
    res = _two_host_run(network=Halved())
    jobs = res.jobs.set_index("job_id")
    assert jobs.end_s[1] == pytest.approx(100 * 0.3, rel=1e-9)
    assert jobs.slowdown[1] == pytest.approx(0.3 / 0.2, rel=1e-9) and jobs.slowdown[2] == pytest.approx(1.0)
    assert res.summary["network"] == res.config["network"] == "halved"
    with pytest.raises(ValueError, match="'halved' but the config names 'fair'"):
        _two_host_run(network=Halved(), config=SimConfig(network="fair"))


def test_the_tcp_model_re_solves_a_phase_a_policy_changes():
    # Two jobs in step share the link (0.3 s each); shifting one by half a period, the jobs take turns and
    # each runs at its alone pace (0.2 s), and the model says where the shifted job now is.
    links = LinkState(np.array([100.0]))
    model = NETWORKS.create("tcp", jitter=0.0)
    model.attach(links)
    links.jobs[[0]] += 1
    assert model.join(1, demand(1), 0.0) == 100.0 and not model.pending  # alone, it binds nothing: at once
    links.jobs[[0]] += 1
    assert model.join(2, demand(2), 0.0) is None and model.pending  # now the link binds: wait for the solve
    moved = model.resolve(0.0)
    assert sorted(moved.job_id) == [1, 2] and moved.iter_s == pytest.approx([0.3, 0.3], rel=1e-9)
    model.change(2, 0.0, phase=0.5)
    moved = model.resolve(0.0)
    assert sorted(moved.job_id) == [1, 2] and moved.iter_s == pytest.approx([0.2, 0.2], rel=1e-6)
    gap = (model.phase_now(2) - model.phase_now(1)) % 1.0
    assert gap == pytest.approx(0.5, abs=1e-6)
    load_before = links.lend_load()
    snapshot = load_before.copy()
    links.jobs[[0]] -= 1
    model.leave(2, 1.0)
    assert np.array_equal(load_before, snapshot)  # the lent array did not move
    assert links.load_gbps[0] == pytest.approx(10 / 0.2, rel=1e-6)  # job 1 alone: 10 Gbit per 0.2 s


def test_the_fabric_hands_out_loads_that_never_change_afterwards():
    topo = load_topology("dumbbell,hosts_per_side=2,gpus_per_host=1,host_gbps=100,bottleneck_gbps=100")
    fabric = Fabric(topo, NETWORKS.create("fair"))
    d = CommDemand(1, np.array([0, 1]), np.array([1.0, 1.0]), BYTES, 0.1, iso_rate_gbps=100.0)
    seen = fabric.load_gbps
    assert fabric.join(1, d, 0.0) == 100.0  # alone on unsaturated links: its rate at once
    assert not seen.any() and fabric.load_gbps[0] == pytest.approx(10 / 0.2)
    seen = fabric.load_gbps
    fabric.leave(1, 5.0)
    assert seen[0] == pytest.approx(10 / 0.2) and not fabric.load_gbps.any()
    assert [s[:2] for s in fabric.segments] == [(0.0, 5.0)]


def test_the_history_gets_the_loads_each_instant_ends_with():
    topo = load_topology("dumbbell,hosts_per_side=2,gpus_per_host=1,host_gbps=100,bottleneck_gbps=100")
    fabric = Fabric(topo, NETWORKS.create("fair"))
    both = [CommDemand(j, np.array([0, 1]), np.array([1.0, 1.0]), BYTES, 0.1, iso_rate_gbps=100.0) for j in (1, 2)]
    assert fabric.join(1, both[0], 0.0) == 100.0  # alone for a moment: 10 Gbit per 0.2 s on link 0
    assert fabric.load_gbps[0] == pytest.approx(10 / 0.2)
    fabric.join(2, both[1], 0.0)
    fabric.solve(0.0)  # the instant ends with two jobs at 50 Gbit/s each: 10 Gbit per 0.3 s each
    fabric.leave(1, 2.0)
    fabric.solve(2.0)  # job 2 alone again
    fabric.close(4.0)
    segments = [(s[0], s[1], s[3][list(s[2]).index(0)]) for s in fabric.segments]
    assert segments == [(0.0, 2.0, pytest.approx(20 / 0.3)), (2.0, 4.0, pytest.approx(10 / 0.2))]


def test_a_lent_load_array_is_copied_only_while_someone_still_holds_it():
    links = LinkState(np.array([100.0, 100.0]))
    held = links.lend_load()
    links.write()
    links.load_gbps[0] = 7.0
    assert held[0] == 0.0 and links.load_gbps is not held  # the borrower's array did not move
    dropped = links.lend_load()
    before = id(dropped)
    del dropped  # the borrower let it go: writing in place is unobservable, so no copy
    links.write()
    assert id(links.load_gbps) == before and links.load_gbps[0] == 7.0


def test_a_live_backend_is_measured_not_solved_and_lends_its_stand_in_to_predictions():
    live = LiveNetwork("testbed", Capabilities(uses_phase=True))
    assert live.name == "testbed" and live.capabilities.uses_phase
    with pytest.raises(TypeError, match="measured, not solved"):
        live.solve([demand(1)], np.array([100.0]))
    assert live.fresh().name == "fair"


def test_fresh_keeps_a_model_s_parameters_and_none_of_its_jobs():
    tcp = NETWORKS.create("tcp", jitter=0.0, lead=1.0)
    tcp.solve([demand(1), demand(2)], np.array([100.0]))
    twin = tcp.fresh()
    assert twin.params == tcp.params and twin is not tcp
    assert tcp.phase_now(1) is not None and twin.phase_now(1) is None
    phase = NETWORKS.create("phase", bins=36)
    assert phase.fresh().bins == 36
