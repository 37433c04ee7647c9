"""What a namespace testbed is made of, computed from a topology before anything is created.

A plan is plain data: the namespaces, bridges, veth pairs, addresses, routes,
sysctls and the HTB shaping of every directed link, each named. Why apart from
the code that creates them (:mod:`.netns`): every naming and addressing rule
can be checked by hand without root, a bad topology is refused before anything
exists, and bring-up is a walk over records in a fixed order (bridges, veths,
addresses, shaping), so a richer testbed adds records (more HTB classes under
the same root, router namespaces, routes with next hops) instead of new steps
woven through the bring-up code. The Mininet backend wires bridges and veths
itself, and takes its namespaces, addresses, routes, sysctls and shaped links
from here.

Rules (docs/testbed-design.md, "Addressing and naming"):

* Testbed id ``tid`` (4 hex chars) in every name: namespaces ``nl{tid}-h{i}``
  (hosts, from 1), ``nl{tid}-sw`` (one Linux bridge ``br{j}`` per topology
  switch, in topology order) and ``nl{tid}-mg`` (the management bridge ``mgbr``).
* Host ``i`` (0-based) has ``<subnet> + i + 1`` on ``eth0`` and
  ``<mgmt_subnet> + i + 1`` on ``mgmt0``; the controller ``<mgmt_subnet> + 254``
  on ``mgbr``. Interface names are short: IFNAMSIZ is 16 with the NUL.
* Switch side of host ``i``: ``h{i+1}``; management side: ``m{i+1}``; cable
  ``k`` between two switches (its directed links ``2k``, ``2k+1``):
  ``x{k}a`` on the first switch's bridge, ``x{k}b`` on the second's.
* Every directed link is shaped on the egress of the veth end that sends in its
  direction, at ``rate_gbps * 1000 * rate_scale`` Mbit, in HTB class ``1:10``
  (the default class of root ``1:``) with a bounded leaf queue ``10:``.
* The root namespace gets a blackhole route per subnet, metric
  ``1000 + int(tid, 16)``, so testbed traffic can never leave the machine.
"""

from __future__ import annotations

import functools
import ipaddress
from dataclasses import dataclass
from typing import Callable

import networkx as nx

from ..topology import Topology
from .base import TestbedError

MAX_HOSTS = 253      # host i gets <subnet>.i; .254 is the controller on the management bridge
CONTROLLER_HOST = 254
# The smallest byte limit a shaped link's queue may have: one full-size Ethernet frame (1500 + 14 header
# bytes). A bfifo below that refuses every full-size packet, which is a broken link, not a small buffer.
MIN_QUEUE_BYTES = 1514
DATA_IFNAME, MGMT_IFNAME, MGMT_BRIDGE = "eth0", "mgmt0", "mgbr"
BLACKHOLE_METRIC_BASE = 1000


# -- records ------------------------------------------------------------------------------
@dataclass(frozen=True)
class Namespaces:
    """The namespaces of one testbed: ``switch`` (None when a backend keeps its bridges in the root
    namespace), ``mgmt`` and one per host, in topology order."""

    switch: str | None
    mgmt: str
    hosts: tuple[str, ...]

    @classmethod
    def named(cls, tid: str, n_hosts: int, switch: bool = True) -> "Namespaces":
        return cls(f"nl{tid}-sw" if switch else None, f"nl{tid}-mg", tuple(f"nl{tid}-h{i + 1}" for i in range(n_hosts)))

    @property
    def all(self) -> tuple[str, ...]:
        """Every namespace to create, switch and management first."""
        return tuple(n for n in (self.switch, self.mgmt, *self.hosts) if n is not None)


@dataclass(frozen=True)
class Addressing:
    """The data and management subnets, and which address each host and the controller has in them."""

    subnet: ipaddress.IPv4Network
    mgmt_subnet: ipaddress.IPv4Network

    @classmethod
    def parse(cls, subnet: str, mgmt_subnet: str, n_hosts: int, where: str) -> "Addressing":
        """Checked subnets for ``n_hosts`` hosts; TestbedError naming ``where`` otherwise."""
        try:
            data, mgmt = ipaddress.IPv4Network(subnet), ipaddress.IPv4Network(mgmt_subnet)
        except ValueError as exc:
            raise TestbedError(f"bad subnet: {exc}") from None
        if data.overlaps(mgmt):
            raise TestbedError(f"subnet {subnet} and mgmt_subnet {mgmt_subnet} overlap")
        if n_hosts > MAX_HOSTS or n_hosts + 1 >= data.num_addresses or CONTROLLER_HOST + 1 >= mgmt.num_addresses:
            raise TestbedError(f"{where}: {n_hosts} hosts do not fit ({MAX_HOSTS} max, "
                               f"subnets {data} / {mgmt} need room for .1-.254)")
        return cls(data, mgmt)

    def data_addr(self, i: int) -> str:
        """Host ``i``'s (0-based) data-plane address."""
        return str(self.subnet.network_address + i + 1)

    def mgmt_addr(self, i: int) -> str:
        """Host ``i``'s (0-based) management address (its sshd)."""
        return str(self.mgmt_subnet.network_address + i + 1)

    @property
    def controller_addr(self) -> str:
        return str(self.mgmt_subnet.network_address + CONTROLLER_HOST)


@dataclass(frozen=True)
class Bridge:
    netns: str | None
    name: str


@dataclass(frozen=True)
class VethPair:
    """A veth pair created in ``netns`` whose peer lives in ``peer_netns``; each end joins its bridge
    (``master``, ``peer_master``; None: none) and is set up."""

    netns: str
    ifname: str
    master: str | None
    peer_netns: str
    peer_ifname: str
    peer_master: str | None = None


@dataclass(frozen=True)
class Address:
    netns: str
    ifname: str
    address: str
    prefixlen: int


@dataclass(frozen=True)
class Route:
    """A route in ``netns`` (None: the root namespace), e.g. a blackhole with the testbed's own metric."""

    netns: str | None
    dst: str
    type: str
    priority: int


@dataclass(frozen=True)
class Sysctl:
    """One ``key=value`` inside a namespace (it vanishes with the namespace: nothing to undo)."""

    netns: str
    key: str
    value: str


@dataclass(frozen=True)
class HtbLayout:
    """Where a shaped link's rate lives: the HTB root qdisc, the class every packet goes to (rate = ceil)
    and the handle of the bounded queue under that class."""

    root: str = "1:"
    default_class: str = "1:10"
    leaf: str = "10:"

    @property
    def root_id(self) -> int:
        return tc_handle(self.root)

    @property
    def class_id(self) -> int:
        """The default class as the kernel's 32-bit handle (``1:10`` -> 0x10010)."""
        return tc_handle(self.default_class)

    @property
    def default_minor(self) -> int:
        """The root's ``default`` option: the default class's minor number."""
        return self.class_id & 0xFFFF


@dataclass(frozen=True)
class LeafQueue:
    """The bounded queue under an HTB class: ``pfifo`` (``limit`` packets) or ``bfifo`` (``limit`` bytes)."""

    kind: str
    limit: int


@dataclass(frozen=True)
class ShapedLink:
    """One directed topology link and the interface whose egress shapes it."""

    link: int
    src: str
    dst: str
    tier: str
    rate_gbps: float
    rate_mbit: float
    netns: str | None
    ifname: str


@dataclass(frozen=True)
class NetnsPlan:
    """Everything one testbed creates, in the order bring-up creates it: root-namespace blackholes,
    namespaces, bridges, veths, addresses, shaping, sysctls. A backend that wires its own bridges and
    veths (Mininet) leaves ``bridges``, ``veths`` and ``addresses`` empty."""

    tid: str
    namespaces: Namespaces
    addressing: Addressing
    blackholes: tuple[Route, ...]
    links: tuple[ShapedLink, ...]
    htb: HtbLayout
    leaf_queue: LeafQueue | None
    sysctls: tuple[Sysctl, ...]
    bridges: tuple[Bridge, ...] = ()
    veths: tuple[VethPair, ...] = ()
    addresses: tuple[Address, ...] = ()

    def link(self, src: str, dst: str) -> ShapedLink | None:
        """The shaped link ``src -> dst``, or None."""
        return self._by_pair.get((src, dst))

    @functools.cached_property
    def _by_pair(self) -> dict[tuple[str, str], ShapedLink]:
        return {(l.src, l.dst): l for l in self.links}


def tc_handle(text: str) -> int:
    """A tc handle ``"major:minor"`` (hex, minor may be empty) as the kernel's 32-bit number."""
    major, _, minor = text.partition(":")
    return int(major, 16) << 16 | int(minor or "0", 16)


# -- rules ----------------------------------------------------------------------------------
def check_layout(topo: Topology) -> None:
    """Refuse what Linux bridges cannot emulate, before anything is created.

    Hosts must hang off exactly one switch (one data interface) and the switch
    graph must be loop free: bridges run no spanning tree, so a cycle would
    loop broadcast frames forever.
    """
    for h in topo.hosts:
        nbrs = list(topo.graph.neighbors(h.name))
        if len(nbrs) != 1 or nbrs[0] not in topo.switches:
            raise TestbedError(f"topology {topo.name}: host {h.name} must have exactly one cable, to a switch "
                               f"(has {nbrs}); the netns testbed gives each host one data interface")
    sw = topo.graph.subgraph(topo.switches)
    try:
        cycle = nx.find_cycle(sw)
    except nx.NetworkXNoCycle:
        return
    path = " - ".join([u for u, _ in cycle] + [cycle[0][0]])
    raise TestbedError(f"topology {topo.name}: switch graph has a cycle ({path}); Linux bridges without "
                       "STP need a loop-free switch graph (e.g. leafspine with spines=1)")


def leaf_queue(queue_pkts: int | None, queue_bytes: int | None) -> LeafQueue | None:
    """The leaf queue of every shaped link: a bfifo of ``queue_bytes`` when given, else a pfifo of
    ``queue_pkts`` packets, else None (the kernel's default). TestbedError on a bad limit."""
    if queue_pkts is not None and (isinstance(queue_pkts, bool) or not isinstance(queue_pkts, int) or queue_pkts < 1):
        raise TestbedError(f"queue_pkts must be a positive integer or None, got {queue_pkts!r}")
    if queue_bytes is not None and (isinstance(queue_bytes, bool) or not isinstance(queue_bytes, int)
                                    or queue_bytes < MIN_QUEUE_BYTES):
        raise TestbedError(f"queue_bytes must be an integer >= {MIN_QUEUE_BYTES} (one full-size Ethernet "
                           f"frame) or None, got {queue_bytes!r}")
    if queue_bytes is not None:
        return LeafQueue("bfifo", queue_bytes)
    return LeafQueue("pfifo", queue_pkts) if queue_pkts else None


def shaped_links(topo: Topology, rate_scale: float,
                 place: Callable[[int, str, str], tuple[str | None, str]]) -> tuple[ShapedLink, ...]:
    """Every directed link of ``topo`` in link order, at ``rate_gbps * 1000 * rate_scale`` Mbit, shaped on
    the interface ``place(link, src, dst)`` names as ``(netns, ifname)`` (each backend's naming rule)."""
    out = []
    for l in range(topo.n_links):
        u, v = topo.link_src[l], topo.link_dst[l]
        gbps = float(topo.link_capacity_gbps[l])
        out.append(ShapedLink(l, u, v, str(topo.link_tier[l]), gbps, gbps * 1000 * rate_scale, *place(l, u, v)))
    return tuple(out)


def blackhole_routes(addressing: Addressing, tid: str) -> tuple[Route, ...]:
    """Root-namespace blackholes for both subnets, with this testbed's own metric (several testbeds may
    use the same subnets; each removes exactly its own)."""
    prio = BLACKHOLE_METRIC_BASE + int(tid, 16)
    return tuple(Route(None, str(net), "blackhole", prio) for net in (addressing.subnet, addressing.mgmt_subnet))


def host_sysctls(namespaces: Namespaces, sysctls: dict) -> tuple[Sysctl, ...]:
    """``sysctls`` in every host namespace."""
    return tuple(Sysctl(ns, k, str(v)) for ns in namespaces.hosts for k, v in sysctls.items())


def plan_netns(topo: Topology, tid: str, addressing: Addressing, rate_scale: float,
               queue: LeafQueue | None = None, sysctls: dict | None = None) -> NetnsPlan:
    """The bridged namespace testbed for ``topo`` (see the module doc for the rules)."""
    check_layout(topo)
    ns = Namespaces.named(tid, topo.n_hosts)
    bridge_of = {s: f"br{j}" for j, s in enumerate(topo.switches)}
    host_index = topo.host_index

    def place(l: int, u: str, v: str) -> tuple[str, str]:
        if u in host_index:
            return ns.hosts[host_index[u]], DATA_IFNAME
        if v in host_index:
            return ns.switch, f"h{host_index[v] + 1}"
        return ns.switch, f"x{l // 2}{'a' if l % 2 == 0 else 'b'}"  # cable k: links 2k (a->b) and 2k+1 (b->a)

    links = shaped_links(topo, rate_scale, place)
    veths, addresses = [], [Address(ns.mgmt, MGMT_BRIDGE, addressing.controller_addr, addressing.mgmt_subnet.prefixlen)]
    for i, h in enumerate(topo.hosts):
        sw = next(iter(topo.graph.neighbors(h.name)))
        veths += [VethPair(ns.switch, f"h{i + 1}", bridge_of[sw], ns.hosts[i], DATA_IFNAME),
                  VethPair(ns.mgmt, f"m{i + 1}", MGMT_BRIDGE, ns.hosts[i], MGMT_IFNAME)]
        addresses += [Address(ns.hosts[i], DATA_IFNAME, addressing.data_addr(i), addressing.subnet.prefixlen),
                      Address(ns.hosts[i], MGMT_IFNAME, addressing.mgmt_addr(i), addressing.mgmt_subnet.prefixlen)]
    for s in links:
        if s.src in bridge_of and s.dst in bridge_of and s.link % 2 == 0:
            veths.append(VethPair(ns.switch, s.ifname, bridge_of[s.src], ns.switch, f"x{s.link // 2}b",
                                  bridge_of[s.dst]))
    return NetnsPlan(tid, ns, addressing, blackhole_routes(addressing, tid), links, HtbLayout(), queue,
                     host_sysctls(ns, sysctls or {}),
                     bridges=(*(Bridge(ns.switch, b) for b in bridge_of.values()), Bridge(ns.mgmt, MGMT_BRIDGE)),
                     veths=tuple(veths), addresses=tuple(addresses))
