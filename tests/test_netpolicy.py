"""Network policies (the fourth decision): how the one pass asks them and how the simulator carries them out.

Hand-computed: a leaf-spine of two racks of two one-GPU hosts, 100 Gbit/s NICs, 2:1 oversubscribed, two
spines under hash ECMP, so each ToR-to-spine link carries 2 x 100 / 2 / 2 = 50 Gbit/s. Two 2-GPU ring jobs,
each with one host in each rack, all-reduce 6.25 GB (50 Gbit) per iteration after 1 s of compute (no
overlap): alone on a path a job's flows get 50 Gbit/s, 1 s of communication, 2 s an iteration; two jobs on
one spine share its uplinks, 25 Gbit/s each, 3 s an iteration. Ten iterations: 20 s apart, 30 s together.
"""

from __future__ import annotations

import numpy as np
import pytest

from netlab.policies import NETWORK_POLICIES, NetworkPolicy, PlacementPolicy
from netlab.sched import NetAllocation, Placement, PolicyError
from netlab.sched.routes import job_flows
from netlab.sim import SimConfig, Simulator
from netlab.topology import load_topology
from netlab.workload.job import Job
from netlab.workload.zoo import JobModel, ModelZoo

TOPO = load_topology("leafspine,racks=2,hosts_per_rack=2,gpus_per_host=1,oversub=2,spines=2,ecmp=hash")
ZOO = ModelZoo({"m": JobModel("m", 1.0, 6.25e9)})
JOBS = [Job(0, 0.0, 2, "m", 10.0), Job(1, 0.0, 2, "m", 10.0)]
HOSTS = {0: (0, 2), 1: (1, 3)}  # hosts 0, 1 in rack 0; 2, 3 in rack 1


class Fixed(PlacementPolicy):
    """Job 0 on hosts 0 and 2, job 1 on hosts 1 and 3."""

    name = "fixed"

    def place(self, job, view):
        return Placement(HOSTS[job.job_id], (1, 1))


class Paths(NetworkPolicy):
    """Each running job on the path index given for it; records when it was asked."""

    name = "paths"

    def __init__(self, choice: dict, period_s: float | None = None, **extra):
        self.choice, self.period_s, self.extra, self.calls = choice, period_s, extra, []

    def allocate(self, view):
        self.calls.append((view.now, sorted(view.running)))
        return {j: NetAllocation(paths=(self.choice[j],), **self.extra) for j in view.running}


def run(netpolicy, network="fair"):
    sim = Simulator(TOPO, JOBS, "fifo", Fixed(), None, SimConfig(network=network), zoo=ZOO, netpolicy=netpolicy)
    return sim.run()


def jct(res) -> list[float]:
    return res.jobs.sort_values("job_id").jct_s.tolist()


def test_the_two_spines_are_the_two_paths_of_each_flow():
    for s, d in [(0, 2), (2, 0), (1, 3), (3, 1)]:
        paths = TOPO.paths(s, d)
        assert len(paths) == 2
        assert {TOPO.link_dst[p[1]] for p in paths} == {"spine0", "spine1"}  # hop 2: the ToR's uplink


def test_one_path_for_both_jobs_collides_and_separate_paths_do_not():
    assert jct(run(Paths({0: 0, 1: 0}))) == pytest.approx([30.0, 30.0], rel=1e-9)
    assert jct(run(Paths({0: 1, 1: 1}))) == pytest.approx([30.0, 30.0], rel=1e-9)
    assert jct(run(Paths({0: 0, 1: 1}))) == pytest.approx([20.0, 20.0], rel=1e-9)


def test_a_path_choice_removes_a_hash_collision():
    # Under the fabric's hash, find whether these two jobs collide; a choice of separate paths never does.
    hashed = jct(run(None))
    pairs = [job_flows(ZOO["m"], "ring", HOSTS[j], (1, 1))[0] for j in (0, 1)]
    routed = [set(TOPO.route(p, key=j * 1024)[0].tolist()) for j, p in enumerate(pairs)]
    collide = bool(routed[0] & routed[1])
    assert hashed == pytest.approx([30.0, 30.0] if collide else [20.0, 20.0], rel=1e-9)
    assert jct(run(Paths({0: 0, 1: 1}))) == pytest.approx([20.0, 20.0], rel=1e-9)


def test_a_path_choice_routes_each_flow_on_its_chosen_path():
    from netlab.network.demand import build_demand

    pairs, weights = job_flows(ZOO["m"], "ring", (0, 2), (1, 1))
    assert pairs == ((0, 2), (2, 0)) and weights == (1.0, 1.0)
    demand, _ = build_demand(TOPO, ZOO["m"], "ring", 7, (0, 2), (1, 1), allocation=NetAllocation(paths=(0, 1)))
    expect = sorted(TOPO.paths(0, 2)[0] + TOPO.paths(2, 0)[1])
    assert demand.links.tolist() == expect and demand.weights.tolist() == [1.0] * len(expect)


def test_a_repeated_path_choice_reuses_the_route_and_copies_the_rest_of_the_demand():
    import dataclasses

    from netlab.network.demand import build_demand
    from netlab.network.model import CommDemand
    from netlab.sched import JobState
    from netlab.sim.netalloc import rerouted

    def running(jid: int, phase: float) -> JobState:
        js = JobState(Job(jid, 0.0, 2, "m", 10.0), 2.0)
        js.placement = Placement((0, 2), (1, 1))
        js.demand = build_demand(TOPO, ZOO["m"], "ring", jid, (0, 2), (1, 1), 2.0, phase)[0]
        return js

    # jobs 7 and 8 on hosts 0 and 2, re-routed to paths (0, 1): flow 0 -> 2 on its path 0, 2 -> 0 on its path 1,
    # one flow a link, 50 Gbit/s alone (a ToR-spine link). Job 8's route comes from job 7's memo entry (the memo
    # holds that route alone: the placement's flows and paths are the topology's layout, routes.placement_paths)
    memo, choice = {}, NetAllocation(paths=(0, 1))
    first = rerouted(TOPO, ZOO, running(7, 0.25), choice, memo)
    second = rerouted(TOPO, ZOO, running(8, 0.5), choice, memo)
    assert len(memo) == 1 and type(second) is CommDemand and second.links is first.links
    expect = sorted(TOPO.paths(0, 2)[0] + TOPO.paths(2, 0)[1])
    assert second.links.tolist() == expect and second.weights.tolist() == [1.0] * len(expect)
    assert second.iso_rate_gbps == 50.0
    built = build_demand(TOPO, ZOO["m"], "ring", 8, (0, 2), (1, 1), 2.0, 0.5, allocation=choice)[0]
    for f in dataclasses.fields(CommDemand):  # every field as build_demand gives it: job 8's, its phase
        if f.name != "flow_paths":  # (ragged: compared below)
            assert np.array_equal(getattr(second, f.name), getattr(built, f.name)), f.name
    # each flow's path, for the beat-down's weights: flow 0 -> 2 on its path 0, 2 -> 0 on its path 1, all of it
    expect = [(list(TOPO.paths(0, 2)[0]), [1.0] * 4), (list(TOPO.paths(2, 0)[1]), [1.0] * 4)]
    assert [(p.tolist(), s.tolist()) for p, s in second.flow_paths] == expect
    assert [(p.tolist(), s.tolist()) for p, s in built.flow_paths] == expect
    assert (second.job_id, second.phase, second.allocation) == (8, 0.5, choice)
    # another choice is another route (one more entry)
    other = rerouted(TOPO, ZOO, running(8, 0.5), NetAllocation(paths=(1, 0)), memo)
    assert len(memo) == 2 and other.links.tolist() == sorted(TOPO.paths(0, 2)[1] + TOPO.paths(2, 0)[0])


def test_a_new_path_choice_is_routed_as_the_topology_routes_it():
    """``netalloc``'s compiled route of a choice gives ``Topology.route``'s links and sums (the same floats), with
    uneven flow weights, a pick past a flow's paths (modulo) and one pick for every flow; and the rate alone."""
    from netlab.sched.routes import lay_out
    from netlab.sim.netalloc import _chosen_route

    pairs = ((0, 2), (2, 0), (1, 3), (0, 1), (3, 1))  # (0, 1): inside a rack, one path
    weights = (0.5, 2.0, 1.0, 0.3, 0.7)
    c = lay_out(TOPO, pairs, weights)
    for picks in ((0, 1, 1, 0, 0), (1, 0, 3, 5, 1), (1,), (2,)):
        links, sums, iso = _chosen_route(c.flow_first, c.path_start, c.links, c.flow_w,
                                         np.array(picks, dtype=np.int64), TOPO.router.scratch,
                                         TOPO.link_capacity_gbps)
        want_links, want_sums = TOPO.route(pairs, 0, picks, weights)
        assert links.tolist() == want_links.tolist() and sums.tobytes() == want_sums.tobytes()
        assert iso == float(np.min(TOPO.link_capacity_gbps[want_links] / want_sums))
    assert not TOPO.router.scratch.any()  # left all 0 for the next route


def test_a_placements_flows_and_paths_are_laid_out_once_per_topology_flow_by_flow_path_by_path():
    """``routes.placement_paths``: what crux chooses among and the simulator routes a choice with (one layout)."""
    import gc

    from netlab.sched.routes import _LAYOUTS, lay_out, placement_paths

    topo = load_topology("leafspine,racks=2,hosts_per_rack=2,gpus_per_host=1,oversub=2,spines=2,ecmp=hash")
    lay = placement_paths(topo, ZOO["m"], "ring", (0, 2), (1, 1))
    # a ring of two hosts in two racks: flows 0 -> 2 and 2 -> 0, each over either spine, 4 links a path (NIC up,
    # ToR up, spine down, NIC down)
    assert lay.n_paths.tolist() == [2, 2] and lay.hops.tolist() == [4, 4] and lay.multi
    assert lay.flow_first.tolist() == [0, 2, 4] and lay.path_start.tolist() == [0, 4, 8, 12, 16]
    assert lay.links.tolist() == [g for pair in ((0, 2), (2, 0)) for q in topo.paths(*pair) for g in q]
    assert lay.flow_w.tolist() == [1.0, 1.0]
    assert placement_paths(topo, ZOO["m"], "ring", (0, 2), (1, 1)) is lay  # memoised with the topology
    one_rack = placement_paths(topo, ZOO["m"], "ring", (0, 1), (1, 1))  # through one ToR: one path a flow
    assert one_rack.n_paths.tolist() == [1, 1] and one_rack.hops.tolist() == [2, 2] and not one_rack.multi
    pairs = [(a, b) for a in range(4) for b in range(4) if a != b]  # every host pair, walked at once
    every = lay_out(topo, pairs, [1.0] * len(pairs))
    assert every.links.tolist() == [g for pair in pairs for q in topo.paths(*pair) for g in q]
    assert every.n_paths.tolist() == [len(topo.paths(*pair)) for pair in pairs]
    key = id(topo)
    assert key in _LAYOUTS
    del topo, lay, one_rack
    gc.collect()
    assert key not in _LAYOUTS  # dropped with the topology


def test_a_sources_paths_to_every_host_are_walked_with_its_first_pair_on_a_small_topology(monkeypatch):
    """``routes.lay_out``: the first pair met from a host walks that host's whole row (each pair's paths as
    ``Topology.paths`` gives them); above ``WHOLE_ROW_HOSTS`` hosts only the pairs asked for."""
    from netlab.sched import routes

    topo = load_topology("leafspine,racks=2,hosts_per_rack=2,gpus_per_host=1,oversub=2,spines=2,ecmp=hash")
    memo = {}
    lay = routes.lay_out(topo, [(0, 2)], [1.0], memo)
    assert lay.links.tolist() == [g for q in topo.paths(0, 2) for g in q]
    assert sorted(memo) == [(0, 1), (0, 2), (0, 3)]  # host 0's row, asked for one pair of it
    for pair, (n, lengths, links) in memo.items():
        paths = topo.paths(*pair)
        assert n == len(paths) and lengths.tolist() == [len(q) for q in paths]
        assert links.tolist() == [g for q in paths for g in q]
    monkeypatch.setattr(routes, "WHOLE_ROW_HOSTS", 3)  # the topology has 4 hosts: above it
    memo = {}
    routes.lay_out(topo, [(1, 3), (3, 1)], [1.0, 1.0], memo)
    assert sorted(memo) == [(1, 3), (3, 1)]


def test_a_model_that_cannot_honour_a_priority_refuses_it_naming_model_job_and_kind():
    # phase honours weights, caps and paths but not classes (its fixed windows would starve a lower class)
    with pytest.raises(PolicyError, match=r"network model 'phase' cannot honour a per-job priority allocation "
                                          r"\(job 0\)"):
        run(Paths({0: 0, 1: 1}, priority=3), network="phase")


def test_ideal_ignores_allocations():
    # non-blocking: each job at its NIC's 100 Gbit/s, 0.5 s of communication, 1.5 s an iteration
    res = run(Paths({0: 0, 1: 0}, priority=3, weight=2.0, rate_cap_gbps=1.0), network="ideal")
    assert jct(res) == pytest.approx([15.0, 15.0], rel=1e-9)


def test_asked_after_starts_and_stops_and_on_its_period_while_jobs_run():
    policy = Paths({0: 0, 1: 1}, period_s=5.0)
    res = run(policy)
    assert jct(res) == pytest.approx([20.0, 20.0], rel=1e-9)
    times = [t for t, _ in policy.calls]
    assert times[:4] == [0.0, 5.0, 10.0, 15.0]
    assert all(r == [0, 1] for t, r in policy.calls if t < 20.0 - 1e-6)
    # both end at 20 s: asked once more (nothing runs) and never again
    assert times[-1] == pytest.approx(20.0) and policy.calls[-1][1] == []
    assert len(times) in (5, 6)  # the 20 s tick and the completions fall at one instant or two (rounding)


def test_an_allocation_for_a_job_not_running_is_refused():
    class Stray(NetworkPolicy):
        name = "stray"

        def allocate(self, view):
            return {99: NetAllocation()}

    with pytest.raises(PolicyError, match="stray: allocation for job 99, which is not running"):
        run(Stray())


def test_the_family_is_registered_and_none_allocates_nothing():
    assert "none" in NETWORK_POLICIES.names()
    none = NETWORK_POLICIES.create("none")
    assert none.allocates is False and none.allocate(None) == {}
    res = run("none")
    assert res.summary["netpolicy"] == "none" and res.config["netpolicy"]["name"] == "none"


def test_the_command_line_lists_the_family_and_simulates_with_one(tmp_path):
    import json

    from typer.testing import CliRunner

    from netlab.cli import app

    runner = CliRunner()
    listed = runner.invoke(app, ["policies"])
    assert listed.exit_code == 0 and "network policy (--netpolicy):" in listed.output
    lines = {line.split()[0] for line in listed.output.splitlines() if line.startswith("  ")}
    assert {"none", "crux", "crux-paths"} <= lines
    out = tmp_path / "run"
    ran = runner.invoke(app, ["simulate", "--max-jobs", "20", "--topology",
                              "leafspine,racks=2,hosts_per_rack=2,gpus_per_host=8,oversub=2,ecmp=hash",
                              "--netpolicy", "crux-paths", "--network", "fair", "--out", str(out), "--quiet"])
    assert ran.exit_code == 0, ran.output
    assert json.loads((out / "config.json").read_text())["netpolicy"]["name"] == "crux-paths"
    bad = runner.invoke(app, ["simulate", "--max-jobs", "5", "--netpolicy", "nope", "--out", str(tmp_path / "b")])
    assert bad.exit_code != 0 and "unknown network policy 'nope'" in bad.output


def test_a_sweep_grid_takes_netpolicy_as_an_optional_key():
    from netlab.errors import UnknownNameError
    from netlab.sweep.grid import expand

    plain = expand(dict(grid=dict(policy=["fifo"])))
    assert "netpolicy" not in plain[0].params  # grids without it keep their cell ids
    cells = expand(dict(grid=dict(policy=["fifo"], netpolicy=["none", "crux-paths"])))
    assert sorted(c.label for c in cells) == ["fifo+default", "fifo+default+crux-paths"]
    with pytest.raises(UnknownNameError, match="field 'netpolicy': unknown network policy 'nope'; allowed: .*crux"):
        expand(dict(grid=dict(netpolicy=["nope"])))


def test_a_mechanism_that_cannot_enforce_allocations_refuses_them_naming_itself_the_job_and_the_kind():
    from netlab.integrations.slurm_advisor import SbatchMechanism
    from netlab.sched import DEFAULT_ALLOCATION, JobState

    mech = SbatchMechanism.__new__(SbatchMechanism)  # the refusal reads nothing else of it
    js = JobState(JOBS[0], 1.0)
    mech.running = {0: js}
    mech.allocate({0: DEFAULT_ALLOCATION}, 0.0)  # the default changes nothing: accepted
    assert js.allocation is DEFAULT_ALLOCATION
    with pytest.raises(PolicyError, match=r"SbatchMechanism cannot enforce a per-job network allocation: job 0 "
                                          r"asks for priority, rate_cap"):
        mech.allocate({0: NetAllocation(priority=2, rate_cap_gbps=5.0)}, 0.0)
