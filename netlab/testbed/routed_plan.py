"""The routed variant of the namespace testbed, as a plan: every topology switch a router namespace.

Why a second layout: Linux bridges forward by MAC learning over a loop-free graph, so a bridged testbed has
one path between two hosts and nothing to choose. Routers forward by route, so a leaf-spine with two spines
has two equal-cost paths, spread per flow by a multipath route and ``net.ipv4.fib_multipath_hash_policy=1``
(an L4 hash of addresses and ports, as a switch's ECMP), and a job's path choice becomes a policy rule
(:mod:`.jobplan`) that sends its flow to one next hop.

Rules (on top of :mod:`.plan`'s; the data subnet must be /16 or larger):

* Router of switch ``j`` (topology order): namespace ``nl{tid}-r{j+1}``, address ``<subnet> + 255 * 256 +
  j + 1`` on its ``lo``; interfaces as the bridged plan names them (``h{i+1}`` to host ``i``, ``x{k}a`` and
  ``x{k}b`` at the two ends of cable ``k``), shaped the same way.
* Host ``i`` has ``<subnet> + i + 1``/32 on ``eth0`` and a default route via its router (on-link: point-to-
  point veths carry no subnet). Its job addresses (``<subnet> + (i+1) * 256 + s``) live in its /24 block.
* Each router routes every host's address and block: on-link out of ``h{i+1}`` when the host hangs off it,
  else through every neighbouring router on a hop-shortest path to the host's router (one next hop each,
  a multipath route when there are several).
* Each router keeps one path table per neighbouring router, ``PATH_TABLE_BASE + k`` for cable ``k``,
  holding a default route through that neighbour.
* Routers forward (``ip_forward=1``), hash per flow on L4 (``fib_multipath_hash_policy=1``) and do not
  filter by reverse path (``rp_filter=0``: a flow's two directions may take different spines).
"""

from __future__ import annotations

import networkx as nx

from ..topology import Topology
from .base import TestbedError
from .plan import (DATA_IFNAME, MGMT_BRIDGE, MGMT_IFNAME, Address, Addressing, Bridge, HtbLayout, LeafQueue,
                   Namespaces, NetnsPlan, NextHop, RoutedLayout, Sysctl, UnicastRoute, VethPair, blackhole_routes,
                   check_gso, check_layout, host_sysctls, shaped_links)

PATH_TABLE_BASE = 1000
ROUTER_SYSCTLS = {"net.ipv4.ip_forward": "1", "net.ipv4.fib_multipath_hash_policy": "1",
                  "net.ipv4.conf.all.rp_filter": "0", "net.ipv4.conf.default.rp_filter": "0"}
MAX_ROUTERS = 254


def cable_of(topo: Topology) -> dict[tuple[str, str], int]:
    """Cable index of every switch pair (both orders), as :func:`~netlab.testbed.plan.shaped_links` numbers
    cables (directed links ``2k`` and ``2k + 1``)."""
    out = {}
    for link in range(0, topo.n_links, 2):
        u, v = topo.link_src[link], topo.link_dst[link]
        out[(u, v)] = out[(v, u)] = link // 2
    return out


def next_hops(topo: Topology, switch: str, dst_switch: str) -> tuple[str, ...]:
    """The neighbouring switches of ``switch`` on hop-shortest paths to ``dst_switch`` (sorted; empty when
    they are the same switch)."""
    if switch == dst_switch:
        return ()
    try:
        paths = nx.all_shortest_paths(topo.graph.subgraph(topo.switches), switch, dst_switch)
        return tuple(sorted({p[1] for p in paths}))
    except nx.NetworkXNoPath:
        raise TestbedError(f"topology {topo.name}: no path from switch {switch} to {dst_switch}") from None


def host_switch(topo: Topology, i: int) -> str:
    return next(iter(topo.graph.neighbors(topo.hosts[i].name)))


def plan_routed(topo: Topology, tid: str, addressing: Addressing, rate_scale: float,
                queue: LeafQueue | None = None, sysctls: dict | None = None,
                gso_max_bytes: int | None = None) -> NetnsPlan:
    """The routed namespace testbed for ``topo`` (see the module doc for the rules)."""
    check_layout(topo, loops_ok=True)
    addressing.require_blocks("the routed testbed")
    switches = list(topo.switches)
    if len(switches) > MAX_ROUTERS:
        raise TestbedError(f"topology {topo.name}: {len(switches)} switches; the routed testbed has room for "
                           f"{MAX_ROUTERS} routers")
    ns = Namespaces.named(tid, topo.n_hosts, switch=False, n_routers=len(switches))
    router = {s: ns.routers[j] for j, s in enumerate(switches)}
    raddr = {s: addressing.router_addr(j) for j, s in enumerate(switches)}
    host_index = topo.host_index
    cable = cable_of(topo)

    def place(l: int, u: str, v: str) -> tuple[str, str]:
        if u in host_index:
            return ns.hosts[host_index[u]], DATA_IFNAME
        if v in host_index:
            return router[u], f"h{host_index[v] + 1}"
        return router[u], f"x{l // 2}{'a' if l % 2 == 0 else 'b'}"  # cable k: links 2k (a->b) and 2k+1 (b->a)

    links = shaped_links(topo, rate_scale, place)
    port = {(l.src, l.dst): l.ifname for l in links}  # the interface a router sends to a neighbour on
    veths, addresses = [], [Address(ns.mgmt, MGMT_BRIDGE, addressing.controller_addr, addressing.mgmt_subnet.prefixlen)]
    addresses += [Address(router[s], "lo", raddr[s], 32) for s in switches]
    routes, gateways = [], []
    for i in range(topo.n_hosts):
        sw = host_switch(topo, i)
        veths += [VethPair(router[sw], f"h{i + 1}", None, ns.hosts[i], DATA_IFNAME),
                  VethPair(ns.mgmt, f"m{i + 1}", MGMT_BRIDGE, ns.hosts[i], MGMT_IFNAME)]
        addresses += [Address(ns.hosts[i], DATA_IFNAME, addressing.data_addr(i), 32),
                      Address(ns.hosts[i], MGMT_IFNAME, addressing.mgmt_addr(i), addressing.mgmt_subnet.prefixlen)]
        routes.append(UnicastRoute(ns.hosts[i], "0.0.0.0/0", (NextHop(DATA_IFNAME, raddr[sw]),)))
        gateways.append(raddr[sw])
    for l in links:
        if l.src in router and l.dst in router and l.link % 2 == 0:
            veths.append(VethPair(router[l.src], l.ifname, None, router[l.dst], f"x{l.link // 2}b"))
    for s in switches:
        for i in range(topo.n_hosts):
            sw = host_switch(topo, i)
            if sw == s:
                hops = (NextHop(f"h{i + 1}"),)
            else:
                hops = tuple(NextHop(port[(s, n)], raddr[n]) for n in next_hops(topo, s, sw))
            routes += [UnicastRoute(router[s], f"{addressing.data_addr(i)}/32", hops),
                       UnicastRoute(router[s], addressing.host_block(i), hops)]
    tables = []
    for s in switches:
        for n in sorted(n for n in topo.graph.neighbors(s) if n in router):
            table = PATH_TABLE_BASE + cable[(s, n)]
            tables.append((s, n, table))
            routes.append(UnicastRoute(router[s], "0.0.0.0/0", (NextHop(port[(s, n)], raddr[n]),), table=table))
    layout = RoutedLayout(tuple((s, router[s], raddr[s]) for s in switches), tuple(gateways), tuple(tables))
    router_sysctls = tuple(Sysctl(r, k, v) for r in ns.routers for k, v in ROUTER_SYSCTLS.items())
    return NetnsPlan(tid, ns, addressing, blackhole_routes(addressing, tid), links, HtbLayout(), queue,
                     router_sysctls + host_sysctls(ns, sysctls or {}), bridges=(Bridge(ns.mgmt, MGMT_BRIDGE),),
                     veths=tuple(veths), addresses=tuple(addresses), routes=tuple(routes), routed=layout,
                     gso_max_bytes=check_gso(gso_max_bytes))
