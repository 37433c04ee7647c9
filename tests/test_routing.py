"""Routing from per-destination tables gives exactly networkx's answer: every equal-cost path in node-name order,
the path the hash rule picks, the split weights (to the last bit) and the summed route of a set of flows, on
small instances of every builder, on hand-wired fabrics where hosts are transit nodes, and on random graphs."""

import dataclasses
import tempfile
import zlib
from pathlib import Path

import networkx as nx
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from netlab.network.demand import RoutedDemand, build_demand
from netlab.network.model import CommDemand
from netlab.topology import Host, Topology, TopologyError, load_topology
from netlab.topology.routing import CRC_TABLE, accumulate, flow_hashes
from netlab.workload.zoo import ModelZoo

SETTINGS = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def reference_paths(topo, a: int, b: int) -> list[tuple[int, ...]]:
    """networkx's hop-shortest paths between two hosts, sorted by node names, as link ids."""
    node_paths = sorted(nx.all_shortest_paths(topo.graph, topo.hosts[a].name, topo.hosts[b].name))
    return [tuple(topo.link_id[(u, v)] for u, v in zip(p[:-1], p[1:])) for p in node_paths]


def reference_split(paths) -> dict[int, float]:
    """Each link's share: 1/P added once per path through it, in path order."""
    weight: dict[int, float] = {}
    for p in paths:
        for link in p:
            weight[link] = weight.get(link, 0.0) + 1.0 / len(paths)
    return weight


def reference_route(topo, pairs, key, flow_weights):
    """Topology.route as np.bincount over the reference answer of each flow."""
    links, weights = [], []
    for n, (a, b) in enumerate(pairs):
        paths = reference_paths(topo, a, b)
        if topo.ecmp == "hash":
            h = zlib.crc32(f"{a}|{b}|{key + n}".encode()) % len(paths) if len(paths) > 1 else 0
            share = {link: 1.0 for link in paths[h]}
        else:
            share = reference_split(paths)
        w = 1.0 if flow_weights is None else flow_weights[n]
        links.extend(share)
        weights.extend(s * w for s in share.values())
    per_link = np.bincount(np.array(links), weights=np.array(weights), minlength=topo.n_links)
    ids = np.flatnonzero(per_link)
    return ids, per_link[ids]


def check_topology(topo, data, pairs_drawn: int = 6) -> None:
    """Every host pair (or a drawn sample on bigger instances) against networkx, then a drawn set of flows."""
    n = topo.n_hosts
    all_pairs = [(a, b) for a in range(n) for b in range(n) if a != b]
    if len(all_pairs) > 60:
        all_pairs = data.draw(st.lists(st.sampled_from(all_pairs), min_size=1, max_size=60, unique=True))
    for a, b in all_pairs:
        paths = reference_paths(topo, a, b)
        assert topo.paths(a, b) == tuple(paths), (a, b)
        key = data.draw(st.integers(0, 2**31 - 1))
        links, weights = topo.flow_links(a, b, key=key)
        if topo.ecmp == "hash":
            h = zlib.crc32(f"{a}|{b}|{key}".encode()) % len(paths) if len(paths) > 1 else 0
            assert links.tolist() == list(paths[h]) and weights.tolist() == [1.0] * len(paths[h])
        else:
            assert dict(zip(links.tolist(), weights.tolist())) == reference_split(paths)
    flows = data.draw(st.lists(st.sampled_from(all_pairs), min_size=1, max_size=pairs_drawn))
    key = data.draw(st.integers(0, 2**20))
    flow_weights = data.draw(st.none() | st.lists(st.floats(0.01, 100.0), min_size=len(flows),
                                                     max_size=len(flows)))
    ids, per_link = topo.route(tuple(flows), key=key, flow_weights=flow_weights)
    want_ids, want = reference_route(topo, flows, key, flow_weights)
    assert ids.tolist() == want_ids.tolist() and per_link.tolist() == want.tolist()


ECMP = st.sampled_from(["split", "hash"])


@SETTINGS
@given(data=st.data(), racks=st.integers(1, 4), hosts_per_rack=st.integers(1, 3), spines=st.integers(1, 4),
       ecmp=ECMP)
def test_leafspine_routes_as_networkx(data, racks, hosts_per_rack, spines, ecmp):
    if racks * hosts_per_rack < 2:
        return
    check_topology(load_topology(f"leafspine,racks={racks},hosts_per_rack={hosts_per_rack},spines={spines},"
                                 f"ecmp={ecmp}"), data)


@SETTINGS
@given(data=st.data(), k=st.sampled_from([2, 4, 6]), hosts_per_edge=st.integers(1, 3), ecmp=ECMP)
def test_fattree_routes_as_networkx(data, k, hosts_per_edge, ecmp):
    check_topology(load_topology(f"fattree,k={k},hosts_per_edge={hosts_per_edge},ecmp={ecmp}"), data)


@SETTINGS
@given(data=st.data(), hosts=st.integers(2, 40), per_leaf=st.integers(1, 4), leaves=st.integers(1, 3),
       spines=st.integers(1, 3), cores=st.integers(1, 3), ecmp=ECMP)
def test_clos3_routes_as_networkx(data, hosts, per_leaf, leaves, spines, cores, ecmp):
    check_topology(load_topology(f"clos3,gpus={hosts * 2},gpus_per_host=2,hosts_per_leaf={per_leaf},"
                                 f"leaves_per_pod={leaves},spines_per_pod={spines},cores_per_plane={cores},"
                                 f"ecmp={ecmp}"), data)


@SETTINGS
@given(data=st.data(), hosts=st.integers(2, 24), rails=st.integers(1, 4), per_su=st.integers(1, 4),
       sus=st.integers(1, 3), spines=st.integers(1, 3), cores=st.integers(1, 2), ecmp=ECMP)
def test_rail_routes_as_networkx(data, hosts, rails, per_su, sus, spines, cores, ecmp):
    check_topology(load_topology(f"rail,gpus={hosts * rails},gpus_per_host={rails},hosts_per_su={per_su},"
                                 f"sus_per_pod={sus},spines_per_pod={spines},cores_per_plane={cores},ecmp={ecmp}"),
                   data)


@SETTINGS
@given(data=st.data(), rows=st.lists(st.tuples(st.integers(0, 2), st.integers(0, 2)), min_size=2, max_size=16),
       ecmp=ECMP)
def test_crux_routes_as_networkx(data, rows, ecmp):
    with tempfile.TemporaryDirectory() as tmp:  # one core (DSW), PSWs (pods) of ToRs named by (PSW, ASW)
        path = Path(tmp) / "topo.csv"
        path.write_text("ip,DSW,PSW,ASW\n" + "".join(f"10.0.0.{i},D0,P{p},S{s}\n" for i, (p, s) in enumerate(rows)))
        topo = load_topology(f"crux,path={path},ecmp={ecmp}")
    check_topology(topo, data)


@SETTINGS
@given(data=st.data(), side=st.integers(1, 4), ecmp=ECMP)
def test_dumbbell_routes_as_networkx(data, side, ecmp):
    check_topology(load_topology(f"dumbbell,hosts_per_side={side},ecmp={ecmp}"), data)


@st.composite
def wired(draw):
    """A connected graph of 1-5 switches and 2-6 hosts, every host on a switch, plus random extra cables
    (switch-switch, host-switch and host-host): hosts may be transit nodes."""
    n_sw, n_hosts = draw(st.integers(1, 5)), draw(st.integers(2, 6))
    switches = [f"s{i}" for i in range(n_sw)]
    hosts = [f"h{i}" for i in range(n_hosts)]
    edges = {tuple(sorted((h, draw(st.sampled_from(switches))))) for h in hosts}
    extra = draw(st.lists(st.tuples(st.sampled_from(switches + hosts), st.sampled_from(switches + hosts)),
                          max_size=12))
    edges |= {tuple(sorted(e)) for e in extra if e[0] != e[1]}
    graph = nx.Graph(list(edges))
    graph.add_nodes_from(switches + hosts)
    if not nx.is_connected(graph):  # join the parts through switch 0
        for part in nx.connected_components(graph):
            if "s0" not in part:
                edges.add(tuple(sorted(("s0", min(part)))))
    ecmp = draw(ECMP)
    return Topology("wired", [Host(h, 1, rack="r") for h in hosts], {s: "tor" for s in switches},
                    [(a, b, 1.0, "link") for a, b in sorted(edges)], ecmp=ecmp)


@settings(max_examples=150, deadline=None)
@given(topo=wired(), data=st.data())
def test_any_wiring_routes_as_networkx(topo, data):
    check_topology(topo, data)


def test_a_host_between_two_switches_is_a_transit_node():
    # h0 is the only way between s0 and s1: h1 -> h2 must pass through it; the switch tables refuse
    # destinations where that can happen and the whole-graph tables route them
    topo = Topology("transit", [Host("h0", 1, "r0"), Host("h1", 1, "r0"), Host("h2", 1, "r1")],
                    {"s0": "tor", "s1": "tor"},
                    [("h0", "s0", 1.0, "host"), ("h0", "s1", 1.0, "host"), ("h1", "s0", 1.0, "host"),
                     ("h2", "s1", 1.0, "host")])
    link = topo.link_id
    assert topo.paths(1, 2) == ((link[("h1", "s0")], link[("s0", "h0")], link[("h0", "s1")], link[("s1", "h2")]),)


def test_unreachable_host_is_a_clear_error():
    topo = Topology("apart", [Host("h0", 1, "r0"), Host("h1", 1, "r1")], {"s0": "tor", "s1": "tor"},
                    [("h0", "s0", 1.0, "host"), ("h1", "s1", 1.0, "host")])
    with pytest.raises(TopologyError, match="no path from h0 to h1"):
        topo.flow_links(0, 1)


def test_rail_tables_are_one_per_scalable_unit():
    # every host of a scalable unit has the same rail leaves: one table serves them all
    topo = load_topology("rail,gpus=256,gpus_per_host=4,hosts_per_su=4,sus_per_pod=2,spines_per_pod=2,ecmp=hash")
    topo.route(tuple((a, b) for a in range(topo.n_hosts) for b in range(topo.n_hosts) if a != b))
    assert len(topo.router._switches.rows) == topo.n_racks


def test_a_demand_is_routed_only_when_its_links_are_read():
    topo = load_topology("leafspine,racks=2,hosts_per_rack=2,spines=2,ecmp=hash")
    demand, _ = build_demand(topo, ModelZoo.default()["vgg16"], "ring", 3, (0, 2), (8, 8))
    assert isinstance(demand, RoutedDemand) and topo._router is None  # nothing routed yet
    assert len(demand.links) == 8 and topo._router is not None  # two flows, host-tor-spine-tor-host each
    assert demand.iso_rate_gbps == pytest.approx(100.0)
    moved = dataclasses.replace(demand, phase=0.25)  # a plain CommDemand, routed, with the change
    assert type(moved) is CommDemand and moved.phase == 0.25 and demand.phase == 0.0
    assert moved.links.tolist() == demand.links.tolist() and moved.iso_rate_gbps == demand.iso_rate_gbps


def test_a_demand_routes_once_whichever_field_is_read_first(monkeypatch):
    # after the first read the route is the demand's own: links, weights and rate never route again
    topo = load_topology("leafspine,racks=2,hosts_per_rack=2,spines=2,ecmp=hash")
    calls, route = [], topo.route
    monkeypatch.setattr(topo, "route", lambda *a, **k: calls.append(a) or route(*a, **k))
    demand, _ = build_demand(topo, ModelZoo.default()["vgg16"], "ring", 3, (0, 2), (8, 8))
    assert calls == []
    assert demand.iso_rate_gbps == pytest.approx(100.0) and len(calls) == 1
    links, weights = demand.links, demand.weights
    assert len(links) == 8 and weights.tolist() == [1.0] * 8 and len(calls) == 1
    assert demand.links is links and demand.iso_rate_gbps == pytest.approx(100.0) and len(calls) == 1


@given(st.integers(0, 2**40), st.integers(0, 2**40), st.integers(-2**40, 2**40), st.integers(1, 4))
def test_flow_hashes_are_zlib_crc32(src, dst, key, n):
    got = flow_hashes(np.full(n, src), np.full(n, dst), key, CRC_TABLE)
    assert got.tolist() == [zlib.crc32(f"{src}|{dst}|{key + f}".encode()) for f in range(n)]


def test_accumulate_sums_each_link_once_sorted_and_drops_zero_sums():
    """Links met in any order and repeated come back sorted, once each, with their weights summed; a link whose
    weights sum to 0 is left out; the scratch array is all 0 again."""
    scratch = np.zeros(10)
    ids, sums = accumulate(np.array([9, 3, 9, 1, 5, 5]), np.array([1.0, 2.0, 3.0, 4.0, 0.5, -0.5]), scratch)
    assert ids.tolist() == [1, 3, 9]
    assert sums.tolist() == [4.0, 2.0, 4.0]
    assert not scratch.any()
    ids, sums = accumulate(np.zeros(0, dtype=np.int64), np.zeros(0), scratch)
    assert len(ids) == len(sums) == 0


def test_a_simulation_on_the_ideal_network_never_routes():
    from netlab.sim import SimConfig, Simulator
    from netlab.traces import poisson_trace
    from netlab.workload.job import jobs_from_frame

    topo = load_topology("clos3,gpus=512,oversub=4,ecmp=hash")
    trace = poisson_trace(jobs=60, load=0.9, cluster_gpus=topo.total_gpus, llm=0.3, seed=1)
    jobs = jobs_from_frame(trace, topo)
    result = Simulator(topo, jobs, "tiresias", "consolidated", None, SimConfig(network="ideal")).run()
    assert result.summary["finished"] == 60 and (result.jobs.gpus > 8).any()  # multi-host jobs ran
    assert topo._router is None  # no route was ever computed


def _fresh_fabrics():
    """A clos3 (switch tables), a fabric with a host-to-host cable (whole-graph tables only) and one where a host
    between two switches sends some destinations to the whole-graph tables (both kinds), all hash ECMP."""
    clos = load_topology("clos3,gpus=24,gpus_per_host=2,hosts_per_leaf=2,leaves_per_pod=2,spines_per_pod=2,"
                         "cores_per_plane=2,ecmp=hash")
    cabled = Topology("cabled", [Host(f"h{i}", 1, f"r{i // 2}") for i in range(4)], {"s0": "tor", "s1": "tor"},
                      [("h0", "s0", 1.0, "host"), ("h1", "s0", 1.0, "host"), ("h2", "s1", 1.0, "host"),
                       ("h3", "s1", 1.0, "host"), ("s0", "s1", 1.0, "tor"), ("h1", "h2", 1.0, "host")], ecmp="hash")
    transit = Topology("transit", [Host("h0", 1, "r0"), Host("h1", 1, "r0"), Host("h2", 1, "r1")],
                       {"s0": "tor", "s1": "tor"},
                       [("h0", "s0", 1.0, "host"), ("h0", "s1", 1.0, "host"), ("h1", "s0", 1.0, "host"),
                        ("h2", "s1", 1.0, "host")], ecmp="hash")
    return clos, cabled, transit


@pytest.mark.parametrize("which", [0, 1, 2])
def test_a_route_before_and_after_its_tables_are_built(which):
    # Router.hash_route first tries its compiled walk on the tables it has; a destination without a table (or on
    # the other kind of tables) sends it back to build them: the answer is networkx's whether a route comes before
    # any table, with some tables built, or with all of them (each flow set routed on a fresh fabric and again)
    topo = _fresh_fabrics()[which]
    n = topo.n_hosts
    first = [(0, 1)]  # one destination's table only
    every = [(a, b) for a in range(n) for b in range(n) if a != b]
    for flows, key in ((first, 5), (every, 11), (every, 12), (first, 13)):
        ids, per_link = topo.route(tuple(flows), key=key)
        want_ids, want = reference_route(topo, flows, key, None)
        assert ids.tolist() == want_ids.tolist() and per_link.tolist() == want.tolist()
    fresh = _fresh_fabrics()[which]  # all destinations at once on a fabric with no table
    ids, per_link = fresh.route(tuple(every), key=11, flow_weights=tuple(range(1, len(every) + 1)))
    want_ids, want = reference_route(fresh, every, 11, tuple(range(1, len(every) + 1)))
    assert ids.tolist() == want_ids.tolist() and per_link.tolist() == want.tolist()


def test_transit_fabric_uses_both_kinds_of_tables():
    # (what the test above relies on for its third fabric: destinations on both kinds)
    topo = _fresh_fabrics()[2]
    topo.route(tuple((a, b) for a in range(3) for b in range(3) if a != b))
    assert set(topo.router._mode.tolist()) == {1, 2}
