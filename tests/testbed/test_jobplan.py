"""The allocation plan and the routed plan by hand (no root: nothing is created): which addresses, routes,
HTB leaves, u32 filters and path rules two jobs' NetAllocations become, on the bridged dumbbell and on a
routed leaf-spine with two spines; and what is refused before anything changes."""

from __future__ import annotations

import ipaddress

import pytest

from netlab.sched import NetAllocation
from netlab.testbed import TestbedError
from netlab.testbed.jobplan import (JobAddress, JobNet, LinkFilters, PathRule, SourceRoute, assign_slots,
                                    plan_jobs)
from netlab.testbed.plan import (Addressing, HtbLayout, LeafClass, LeafQueue, NetnsPlan, NextHop, U32Filter,
                                 UnicastRoute, VethPair, check_gso, plan_netns)
from netlab.testbed.routed_plan import next_hops, plan_routed
from netlab.topology import load_topology

from .backend_helpers import DUMBBELL

ADDR = Addressing(ipaddress.IPv4Network("10.77.0.0/16"), ipaddress.IPv4Network("10.78.0.0/16"))
LEAFSPINE2 = "leafspine,racks=2,hosts_per_rack=2,spines=2,gpus_per_host=1,oversub=2"
Q = 1 << 16  # QUANTUM_BYTES (no gso_max_bytes): the smallest weight on a link


def _dumbbell():
    topo = load_topology(DUMBBELL)
    return topo, plan_netns(topo, "ab12", ADDR, 0.002, LeafQueue("pfifo", 100))


def _mbit(plan):
    return {l.link: l.rate_mbit for l in plan.links}


def test_two_jobs_on_the_dumbbell_by_hand():
    # l0 (h1) and r0 (h3) run job 7, l1 (h2) and r1 (h4) job 9; both cross swL-swR (links 8 and 9, 100 Mbit).
    topo, p = _dumbbell()
    jobs = {7: JobNet(7, ("l0", "r0"), NetAllocation(priority=1, weight=2.0)),
            9: JobNet(9, ("l1", "r1"), NetAllocation(weight=0.5, rate_cap_gbps=12.5))}
    slots = assign_slots({}, jobs)
    assert slots == {7: 1, 9: 2}
    jp = plan_jobs(p, topo, _mbit(p), 0.002, jobs, slots)
    h = p.namespaces.hosts
    # host i's address for slot s: 10.77.(i+1).s, labelled eth0:j<s>
    assert jp.addresses == (JobAddress(7, "l0", h[0], "eth0", "10.77.1.1", "eth0:j1"),
                            JobAddress(7, "r0", h[2], "eth0", "10.77.3.1", "eth0:j1"),
                            JobAddress(9, "l1", h[1], "eth0", "10.77.2.2", "eth0:j2"),
                            JobAddress(9, "r1", h[3], "eth0", "10.77.4.2", "eth0:j2"))
    # every host reaches its peers' job addresses from its own (on-link: the bridged testbed is one L2 domain)
    assert jp.routes == (SourceRoute(7, h[0], "10.77.3.1", "10.77.1.1", "eth0", None),
                         SourceRoute(7, h[2], "10.77.1.1", "10.77.3.1", "eth0", None),
                         SourceRoute(9, h[1], "10.77.4.2", "10.77.2.2", "eth0", None),
                         SourceRoute(9, h[3], "10.77.2.2", "10.77.4.2", "eth0", None))
    by = {(l.job, l.link): l.leaf for l in jp.leaves}
    # job 7 crosses l0<->swL (0, 1), r0<->swR (4, 5) and the bottleneck both ways (8, 9); job 9 links 2, 3, 6, 7, 8, 9
    assert sorted(l for j, l in by if j == 7) == [0, 1, 4, 5, 8, 9]
    assert sorted(l for j, l in by if j == 9) == [2, 3, 6, 7, 8, 9]
    assert sorted(l for j, l in by if j is None) == list(range(10))  # every link's default leaf
    # On the bottleneck the weights are 2, 0.5 and the default class's 1: quanta Q * w / 0.5
    assert by[(None, 8)] == LeafClass("1:10", 0, 2 * Q, 0.008, 100.0, "10:")
    assert by[(7, 8)] == LeafClass("1:101", 1, 4 * Q, 0.008, 100.0, "101:")
    assert by[(9, 8)] == LeafClass("1:102", 0, Q, 0.008, 100.0, "102:")  # the cap is not here ...
    assert by[(9, 2)] == LeafClass("1:102", 0, Q, 0.008, 25.0, "102:")  # ... but where its flows enter: l1 -> swL
    assert by[(9, 6)].ceil_mbit == 25.0 and by[(9, 3)].ceil_mbit == 200.0 and by[(9, 7)].ceil_mbit == 200.0
    # job 7 alone with the default class on its host links: weights 2 and 1
    assert by[(None, 0)].quantum == Q and by[(7, 0)].quantum == 2 * Q
    assert by[(None, 2)].quantum == 2 * Q and by[(9, 2)].quantum == Q
    f = {(x.job, x.link): x for x in jp.filters}
    assert f[(7, 8)] == LinkFilters(7, 8, p.namespaces.switch, "x4a", 0x101, frozenset(
        U32Filter("1:101", off, a) for off in (12, 16) for a in ("10.77.1.1", "10.77.3.1")))
    assert f[(9, 0x2)].pref == 0x102 and f[(9, 2)].netns == h[1] and f[(9, 2)].ifname == "eth0"
    assert set(f) == {(j, l) for j, l in by if j is not None}
    assert jp.rules == ()  # no path choice asked (and none possible here)
    assert jp.of_job(9).slots == ((9, 2),) and {a.job for a in jp.of_job(9).addresses} == {9}


def test_slots_are_kept_and_reused():
    assert assign_slots({7: 1, 9: 2}, [9, 11]) == {9: 2, 11: 1}
    assert assign_slots({}, []) == {}
    full = {j: j for j in range(1, 255)}
    with pytest.raises(TestbedError, match="all 254 network allocation slots"):
        assign_slots(full, [*full, 999])


def test_ring_flows_and_bad_jobs_are_refused():
    assert JobNet(1, ("a", "b", "c"), NetAllocation()).flows == (("a", "b"), ("b", "c"), ("c", "a"))
    assert JobNet(1, ("a",), NetAllocation()).flows == ()
    with pytest.raises(TestbedError, match="hosts must be distinct"):
        JobNet(1, ("a", "a"), NetAllocation())
    with pytest.raises(TestbedError, match="allocation must be a NetAllocation"):
        JobNet(1, ("a", "b"), {"priority": 1})
    with pytest.raises(TestbedError, match=r"flows must be pairs of two of its hosts"):
        JobNet(1, ("a", "b"), NetAllocation(), flows=(("a", "c"),))
    topo, p = _dumbbell()
    with pytest.raises(TestbedError, match=r"job 3: unknown hosts \['zz'\]"):
        plan_jobs(p, topo, _mbit(p), 0.002, {3: JobNet(3, ("l0", "zz"), NetAllocation())}, {3: 1})
    with pytest.raises(TestbedError, match=r"flow l0->r0 has 1 equal-cost path\(s\) \(indices 0..0\)"):
        plan_jobs(p, topo, _mbit(p), 0.002, {3: JobNet(3, ("l0", "r0"), NetAllocation(paths=(1,)))}, {3: 1})
    with pytest.raises(TestbedError, match="one per flow"):
        plan_jobs(p, topo, _mbit(p), 0.002, {3: JobNet(3, ("l0", "r0"), NetAllocation(paths=(0, 0, 0)))}, {3: 1})
    # path 0 on a bridged testbed is the one path there is: accepted, no rule needed
    assert plan_jobs(p, topo, _mbit(p), 0.002, {3: JobNet(3, ("l0", "r0"), NetAllocation(paths=(0,)))},
                     {3: 1}).rules == ()
    with pytest.raises(TestbedError, match=r"weights \{3: 1e-05\} .* differ more than 32768-fold"):
        plan_jobs(p, topo, _mbit(p), 0.002, {3: JobNet(3, ("l0", "r0"), NetAllocation(weight=1e-5))}, {3: 1})


def test_allocations_need_room_and_a_link_class():
    topo = load_topology(DUMBBELL)
    small = Addressing.parse("192.168.10.0/24", "192.168.20.0/24", 4, "t")
    p = plan_netns(topo, "ab12", small, 0.002)
    job = {1: JobNet(1, ("l0", "r0"), NetAllocation())}
    with pytest.raises(TestbedError, match=r"per-job network allocations needs a data subnet of /16 or larger.*/24"):
        plan_jobs(p, topo, _mbit(p), 0.002, job, {1: 1})
    assert plan_jobs(p, topo, _mbit(p), 0.002, {}, {}).addresses == ()  # no job: no blocks needed
    mininet_like = NetnsPlan(p.tid, p.namespaces, ADDR, (), p.links, HtbLayout("5:", "5:1", link_class=None), None, ())
    with pytest.raises(TestbedError, match="no link class"):
        plan_jobs(mininet_like, topo, _mbit(p), 0.002, job, {1: 1})


def test_routed_leaf_spine_plan_by_hand():
    # spine0, spine1, tor0, tor1 are routers r1..r4 (topology switch order), at 10.77.255.1-4. Cables:
    # 0 r0h0-tor0, 1 r0h1-tor0, 2 tor0-spine0, 3 tor0-spine1, 4 r1h0-tor1, 5 r1h1-tor1, 6 tor1-spine0, 7 tor1-spine1.
    topo = load_topology(LEAFSPINE2)
    p = plan_routed(topo, "ab12", ADDR, 0.002, gso_max_bytes=16384)
    r = ("nlab12-r1", "nlab12-r2", "nlab12-r3", "nlab12-r4")
    h = p.namespaces.hosts
    assert p.namespaces.routers == r and p.namespaces.switch is None and p.gso_max_bytes == 16384
    assert p.namespaces.all == (*r, "nlab12-mg", *h)
    assert p.veths[0] == VethPair(r[2], "h1", None, h[0], "eth0")
    assert p.veths[-4:] == (VethPair(r[2], "x2a", None, r[0], "x2b"), VethPair(r[2], "x3a", None, r[1], "x3b"),
                            VethPair(r[3], "x6a", None, r[0], "x6b"), VethPair(r[3], "x7a", None, r[1], "x7b"))
    assert p.link("tor0", "spine1").netns == r[2] and p.link("tor0", "spine1").ifname == "x3a"
    assert p.link("spine1", "tor0").netns == r[1] and p.link("spine1", "tor0").ifname == "x3b"
    routes = {(x.netns, x.dst, x.table): x.nexthops for x in p.routes}
    assert routes[(h[0], "0.0.0.0/0", 254)] == (NextHop("eth0", "10.77.255.3"),)
    # tor0 reaches r1h0 (host 2: 10.77.0.3 and its job block 10.77.3.0/24) over both spines, r0h0 on-link
    both = (NextHop("x2a", "10.77.255.1"), NextHop("x3a", "10.77.255.2"))
    assert routes[(r[2], "10.77.0.3/32", 254)] == routes[(r[2], "10.77.3.0/24", 254)] == both
    assert routes[(r[2], "10.77.0.1/32", 254)] == (NextHop("h1"),)
    assert routes[(r[0], "10.77.0.1/32", 254)] == (NextHop("x2b", "10.77.255.3"),)  # spine0 down to tor0
    # one path table per neighbouring router: cable k's table is 1000 + k
    assert routes[(r[2], "0.0.0.0/0", 1003)] == (NextHop("x3a", "10.77.255.2"),)
    assert routes[(r[1], "0.0.0.0/0", 1007)] == (NextHop("x7b", "10.77.255.4"),)
    assert len(p.routes) == 4 + 4 * 8 + 8
    assert next_hops(topo, "tor0", "tor1") == ("spine0", "spine1") and next_hops(topo, "spine0", "tor1") == ("tor1",)
    assert {(s.netns, s.key, s.value) for s in p.sysctls if s.netns == r[0]} == {
        (r[0], "net.ipv4.ip_forward", "1"), (r[0], "net.ipv4.fib_multipath_hash_policy", "1"),
        (r[0], "net.ipv4.conf.all.rp_filter", "0"), (r[0], "net.ipv4.conf.default.rp_filter", "0")}


def test_path_choice_becomes_rules_at_the_routers_that_choose():
    topo = load_topology(LEAFSPINE2)
    p = plan_routed(topo, "ab12", ADDR, 0.002)
    jobs = {1: JobNet(1, ("r0h0", "r1h0"), NetAllocation(paths=(0,))),
            2: JobNet(2, ("r0h1", "r1h1"), NetAllocation(paths=(1, 0)))}
    jp = plan_jobs(p, topo, _mbit(p), 0.002, jobs, {1: 1, 2: 2})
    # Flow r0h0 -> r1h0 takes path 0 (spine0): tor0 (r3) picks spine0's table; the way back, tor1 (r4) too.
    # Job 2's first flow takes spine1 (tables 1003 up from tor0), its second (r1h1 -> r0h1) spine0 (1006).
    assert jp.rules == (PathRule(1, "nlab12-r3", "10.77.1.1", "10.77.3.1", 1002, 10001),
                        PathRule(1, "nlab12-r4", "10.77.3.1", "10.77.1.1", 1006, 10001),
                        PathRule(2, "nlab12-r3", "10.77.2.2", "10.77.4.2", 1003, 10002),
                        PathRule(2, "nlab12-r4", "10.77.4.2", "10.77.2.2", 1006, 10002))
    # source routes go through the host's gateway; classes sit on every link of every equal-cost path
    assert jp.routes[0] == SourceRoute(1, "nlab12-h1", "10.77.3.1", "10.77.1.1", "eth0", "10.77.255.3")
    assert sorted({l.link for l in jp.leaves if l.job == 1}) == [0, 1, 4, 5, 6, 7, 8, 9, 12, 13, 14, 15]


def test_routed_refusals_and_gso():
    topo = load_topology(LEAFSPINE2)
    with pytest.raises(TestbedError, match="the routed testbed needs a data subnet of /16 or larger"):
        plan_routed(topo, "ab12", Addressing.parse("192.168.10.0/24", "192.168.20.0/24", 4, "t"), 0.002)
    assert check_gso(None) is None and check_gso(16384) == 16384
    for bad in (1000, 70000, 1.5e4, True):
        with pytest.raises(TestbedError, match=r"gso_max_bytes must be None .* \[1514, 65536\]"):
            check_gso(bad)
    # the bridged plan refuses the two-spine leaf-spine and names the way out
    with pytest.raises(TestbedError, match="or the routed backend"):
        plan_netns(topo, "ab12", ADDR, 0.002)
    assert UnicastRoute("n", "0.0.0.0/0", (NextHop("eth0", "10.77.255.1"),)).table == 254


def test_quanta_follow_the_testbeds_largest_packet():
    """The quantum of weight 1 is one packet of the largest size the links send (their GSO limit): 16 KiB with
    gso_max_bytes=16384, so 2:1 weights are 32 and 16 KiB per turn and the default class 16 KiB."""
    topo = load_topology(DUMBBELL)
    p = plan_netns(topo, "ab12", ADDR, 0.002, gso_max_bytes=16384)
    assert p.quantum_bytes == 16384 and _dumbbell()[1].quantum_bytes == Q
    jobs = {1: JobNet(1, ("l0", "r0"), NetAllocation(weight=2.0)), 2: JobNet(2, ("l1", "r1"), NetAllocation())}
    by = {(l.job, l.link): l.leaf.quantum for l in plan_jobs(p, topo, _mbit(p), 0.002, jobs, {1: 1, 2: 2}).leaves}
    assert (by[(1, 8)], by[(2, 8)], by[(None, 8)]) == (32768, 16384, 16384)
