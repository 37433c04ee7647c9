"""The testbed plan by hand (no root: nothing is created): names, addresses, which interface shapes which
directed link at which rate, for the dumbbell and the 2-rack leaf-spine the root tests bring up."""

from __future__ import annotations

import ipaddress

import pytest

from netlab.testbed import TestbedError
from netlab.testbed.plan import (Address, Addressing, Bridge, HtbLayout, LeafQueue, Namespaces, Route, ShapedLink,
                                 Sysctl, VethPair, check_layout, leaf_queue, plan_netns, tc_handle)
from netlab.testbed.shaping import rate
from netlab.topology import Host, Topology, load_topology

from .backend_helpers import DUMBBELL, REPO

LEAFSPINE = REPO / "testbed" / "topologies" / "leafspine-2rack.yaml"
ADDR = Addressing(ipaddress.IPv4Network("10.77.0.0/16"), ipaddress.IPv4Network("10.78.0.0/16"))
TCP = {"net.ipv4.tcp_congestion_control": "reno", "net.ipv4.tcp_slow_start_after_idle": "0"}


def test_dumbbell_plan():
    # l0 l1 on swL, r0 r1 on swR, swL-swR the only cable between switches (cable 4: links 8 and 9).
    p = plan_netns(load_topology(DUMBBELL), "ab12", ADDR, 0.002, LeafQueue("pfifo", 100), TCP)
    sw, mg = "nlab12-sw", "nlab12-mg"
    h = ("nlab12-h1", "nlab12-h2", "nlab12-h3", "nlab12-h4")
    assert p.namespaces == Namespaces(sw, mg, h)
    assert p.namespaces.all == (sw, mg, *h)
    assert p.bridges == (Bridge(sw, "br0"), Bridge(sw, "br1"), Bridge(mg, "mgbr"))
    assert p.veths == (
        VethPair(sw, "h1", "br0", h[0], "eth0"), VethPair(mg, "m1", "mgbr", h[0], "mgmt0"),
        VethPair(sw, "h2", "br0", h[1], "eth0"), VethPair(mg, "m2", "mgbr", h[1], "mgmt0"),
        VethPair(sw, "h3", "br1", h[2], "eth0"), VethPair(mg, "m3", "mgbr", h[2], "mgmt0"),
        VethPair(sw, "h4", "br1", h[3], "eth0"), VethPair(mg, "m4", "mgbr", h[3], "mgmt0"),
        VethPair(sw, "x4a", "br0", sw, "x4b", "br1"),
    )
    assert p.addresses == (
        Address(mg, "mgbr", "10.78.0.254", 16),
        Address(h[0], "eth0", "10.77.0.1", 16), Address(h[0], "mgmt0", "10.78.0.1", 16),
        Address(h[1], "eth0", "10.77.0.2", 16), Address(h[1], "mgmt0", "10.78.0.2", 16),
        Address(h[2], "eth0", "10.77.0.3", 16), Address(h[2], "mgmt0", "10.78.0.3", 16),
        Address(h[3], "eth0", "10.77.0.4", 16), Address(h[3], "mgmt0", "10.78.0.4", 16),
    )
    # 0xab12 = 43794: the testbed's own metric
    assert p.blackholes == (Route(None, "10.77.0.0/16", "blackhole", 44794),
                            Route(None, "10.78.0.0/16", "blackhole", 44794))
    # 100 Gbit host links and the 50 Gbit bottleneck at rate_scale 0.002: 200 and 100 Mbit; each direction is
    # shaped where it leaves (host -> switch on the host's eth0, the rest on switch-namespace veth ends).
    assert p.links == (
        ShapedLink(0, "l0", "swL", "host", 100.0, 200.0, h[0], "eth0"),
        ShapedLink(1, "swL", "l0", "host", 100.0, 200.0, sw, "h1"),
        ShapedLink(2, "l1", "swL", "host", 100.0, 200.0, h[1], "eth0"),
        ShapedLink(3, "swL", "l1", "host", 100.0, 200.0, sw, "h2"),
        ShapedLink(4, "r0", "swR", "host", 100.0, 200.0, h[2], "eth0"),
        ShapedLink(5, "swR", "r0", "host", 100.0, 200.0, sw, "h3"),
        ShapedLink(6, "r1", "swR", "host", 100.0, 200.0, h[3], "eth0"),
        ShapedLink(7, "swR", "r1", "host", 100.0, 200.0, sw, "h4"),
        ShapedLink(8, "swL", "swR", "tor-tor", 50.0, 100.0, sw, "x4a"),
        ShapedLink(9, "swR", "swL", "tor-tor", 50.0, 100.0, sw, "x4b"),
    )
    assert p.link("swR", "swL").ifname == "x4b" and p.link("l0", "r0") is None
    assert (p.htb.root, p.htb.default_class, p.htb.leaf, p.htb.class_id, p.htb.default_minor) == \
        ("1:", "1:10", "10:", 0x10010, 0x10)
    assert p.leaf_queue == LeafQueue("pfifo", 100)
    assert p.sysctls == tuple(Sysctl(ns, k, v) for ns in h for k, v in TCP.items())


def test_two_rack_leaf_spine_plan():
    # r0h0-r0h2 on tor0 (br0), r1h0-r1h2 on tor1 (br1), spine0 (br2); cables 6 (tor0-spine0) and 7 (tor1-spine0)
    # are links 12/13 and 14/15. Uplinks 50 Gbit, host links 100 Gbit; rate_scale 0.001 halves the default.
    p = plan_netns(load_topology(LEAFSPINE), "0001", ADDR, 0.001)
    sw, mg = "nl0001-sw", "nl0001-mg"
    assert p.namespaces.hosts == tuple(f"nl0001-h{i}" for i in range(1, 7))
    assert p.bridges == (Bridge(sw, "br0"), Bridge(sw, "br1"), Bridge(sw, "br2"), Bridge(mg, "mgbr"))
    assert p.veths[8:10] == (VethPair(sw, "h5", "br1", "nl0001-h5", "eth0"),
                             VethPair(mg, "m5", "mgbr", "nl0001-h5", "mgmt0"))
    assert p.veths[12:] == (VethPair(sw, "x6a", "br0", sw, "x6b", "br2"), VethPair(sw, "x7a", "br1", sw, "x7b", "br2"))
    assert p.link("tor0", "spine0") == ShapedLink(12, "tor0", "spine0", "tor-spine", 50.0, 50.0, sw, "x6a")
    assert p.link("spine0", "tor0") == ShapedLink(13, "spine0", "tor0", "tor-spine", 50.0, 50.0, sw, "x6b")
    assert p.link("tor1", "spine0") == ShapedLink(14, "tor1", "spine0", "tor-spine", 50.0, 50.0, sw, "x7a")
    assert p.link("spine0", "tor1") == ShapedLink(15, "spine0", "tor1", "tor-spine", 50.0, 50.0, sw, "x7b")
    assert p.link("r1h2", "tor1") == ShapedLink(10, "r1h2", "tor1", "host", 100.0, 100.0, "nl0001-h6", "eth0")
    assert p.link("tor1", "r1h2") == ShapedLink(11, "tor1", "r1h2", "host", 100.0, 100.0, sw, "h6")
    assert len(p.links) == 16
    assert p.addresses[-2:] == (Address("nl0001-h6", "eth0", "10.77.0.6", 16),
                                Address("nl0001-h6", "mgmt0", "10.78.0.6", 16))
    assert p.blackholes[0] == Route(None, "10.77.0.0/16", "blackhole", 1001)
    assert p.leaf_queue is None and p.sysctls == ()


def test_addressing_rules_and_refusals():
    a = Addressing.parse("192.168.10.0/24", "192.168.20.0/24", 4, "topology t")
    assert (a.data_addr(0), a.data_addr(3), a.mgmt_addr(3), a.controller_addr) == \
        ("192.168.10.1", "192.168.10.4", "192.168.20.4", "192.168.20.254")
    with pytest.raises(TestbedError, match="overlap"):
        Addressing.parse("10.77.0.0/16", "10.77.5.0/24", 4, "topology t")
    with pytest.raises(TestbedError, match="bad subnet"):
        Addressing.parse("10.77.0.1/16", "10.78.0.0/16", 4, "topology t")  # host bits set
    with pytest.raises(TestbedError, match=r"topology t: 254 hosts do not fit \(253 max"):
        Addressing.parse("10.77.0.0/16", "10.78.0.0/16", 254, "topology t")
    with pytest.raises(TestbedError, match="need room for .1-.254"):
        Addressing.parse("10.77.0.0/29", "10.78.0.0/16", 7, "topology t")  # 8 addresses: .1-.7 and no broadcast
    with pytest.raises(TestbedError, match="need room for .1-.254"):
        Addressing.parse("10.77.0.0/16", "10.78.0.0/25", 4, "topology t")  # no .254 for the controller


def test_leaf_queue_choice_and_refusals():
    assert leaf_queue(100, None) == LeafQueue("pfifo", 100)
    assert leaf_queue(100, 15140) == LeafQueue("bfifo", 15140)  # a byte limit wins
    assert leaf_queue(None, None) is None
    for bad in (0, -1, 1.5, True):
        with pytest.raises(TestbedError, match="queue_pkts must be a positive integer"):
            leaf_queue(bad, None)
    for bad in (1513, 0, 1.5e4, "15000", True):
        with pytest.raises(TestbedError, match=r"queue_bytes must be an integer >= 1514"):
            leaf_queue(100, bad)


def test_layouts_linux_bridges_cannot_emulate_are_refused():
    hosts = [Host("a", 1, rack="s0"), Host("b", 1, rack="s1")]
    two_cables = Topology("two", hosts, {"s0": "tor", "s1": "tor"},
                          [("a", "s0", 100.0, "host"), ("a", "s1", 100.0, "host"), ("b", "s1", 100.0, "host"),
                           ("s0", "s1", 100.0, "x")])
    with pytest.raises(TestbedError, match=r"host a must have exactly one cable, to a switch"):
        check_layout(two_cables)
    tri = Topology("tri", [Host(f"h{i}", 1, rack=f"s{i}") for i in range(3)], {f"s{i}": "tor" for i in range(3)},
                   [(f"h{i}", f"s{i}", 100.0, "host") for i in range(3)]
                   + [("s0", "s1", 100.0, "x"), ("s1", "s2", 100.0, "x"), ("s2", "s0", 100.0, "x")])
    with pytest.raises(TestbedError, match=r"switch graph has a cycle \(s\d - s\d - s\d - s\d\)"):
        plan_netns(tri, "ab12", ADDR, 0.002)


def test_tc_units():
    assert (tc_handle("1:10"), tc_handle("5:1"), tc_handle("1:")) == (0x10010, 0x50001, 0x10000)
    assert HtbLayout("5:", "5:1").class_id == 0x50001 and HtbLayout("5:", "5:1").default_minor == 1
    assert (rate(100.0), rate(0.3333), rate(1e-6)) == ("100000kbit", "333kbit", "1kbit")  # whole kbit, at least 1


def test_mininet_shares_names_addresses_and_rates(monkeypatch):
    """Mininet keeps its own interface names (root namespace) but takes namespaces, addresses, blackholes,
    sysctls and rates from the plan rules (built, not brought up: Mininet itself is not needed)."""
    import types

    import netlab.testbed.mininet as mn
    import netlab.testbed.netns as netns

    monkeypatch.setattr(mn, "load_mininet", lambda: types.SimpleNamespace(version="x", path="x"))
    monkeypatch.setattr(mn, "_root_links", lambda: set())
    monkeypatch.setattr(netns, "_new_tid", lambda: "ab12")
    m, n = mn.MininetTestbed(DUMBBELL), netns.NetnsTestbed(DUMBBELL)
    assert m.plan.namespaces == Namespaces(None, "nlab12-mg", n.plan.namespaces.hosts)
    assert m.plan.blackholes == n.plan.blackholes and m.plan.sysctls == n.plan.sysctls
    assert m.plan.addressing == n.plan.addressing and m.controller_addr == "10.78.0.254"
    assert (m.plan.htb.root, m.htb_class) == ("5:", "5:1")
    assert m.plan.bridges == m.plan.veths == m.plan.addresses == ()  # Mininet wires them
    assert m._bridges == {"swL": "nlab12s0", "swR": "nlab12s1"} and m._mg_bridge == "nlab12m"
    assert m.plan.link("swL", "l1") == ShapedLink(3, "swL", "l1", "host", 100.0, 200.0, None, "nlab12s0h2")
    assert m.plan.link("l1", "swL") == ShapedLink(2, "l1", "swL", "host", 100.0, 200.0, "nlab12-h2", "eth0")
    assert m.plan.link("swR", "swL") == ShapedLink(9, "swR", "swL", "tor-tor", 50.0, 100.0, None, "nlab12s1x4b")
    assert m._isl == [("swL", "swR", "nlab12s0x4a", "nlab12s1x4b")]
    assert m.link_rates().rate_mbit.tolist() == n.link_rates().rate_mbit.tolist() == [200.0] * 8 + [100.0] * 2
