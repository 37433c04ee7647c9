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
  direction, at ``rate_gbps * 1000 * rate_scale`` Mbit, in HTB class ``1:1`` (the
  link class) under root ``1:``; the default class ``1:10`` (bounded leaf queue
  ``10:``) and each allocated job's class (:mod:`.jobplan`) are leaves under it.
* Per-job and router addresses use /24 blocks of the data subnet: host ``i``'s
  address for job slot ``s`` is ``<subnet> + (i + 1) * 256 + s``, router ``j``'s
  ``<subnet> + 255 * 256 + j + 1`` (:mod:`.routed_plan`).
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
ROUTER_BLOCK = 255  # the /24 block of the data subnet that holds router addresses


# -- records ------------------------------------------------------------------------------
@dataclass(frozen=True)
class Namespaces:
    """The namespaces of one testbed: ``switch`` (None when a backend keeps its bridges in the root
    namespace, or routes), ``mgmt``, one per host in topology order and, on a routed testbed, one router per
    topology switch (``routers``, in topology order)."""

    switch: str | None
    mgmt: str
    hosts: tuple[str, ...]
    routers: tuple[str, ...] = ()

    @classmethod
    def named(cls, tid: str, n_hosts: int, switch: bool = True, n_routers: int = 0) -> "Namespaces":
        return cls(f"nl{tid}-sw" if switch else None, f"nl{tid}-mg", tuple(f"nl{tid}-h{i + 1}" for i in range(n_hosts)),
                   tuple(f"nl{tid}-r{j + 1}" for j in range(n_routers)))

    @property
    def all(self) -> tuple[str, ...]:
        """Every namespace to create, switch (or routers) and management first."""
        return tuple(n for n in (self.switch, *self.routers, self.mgmt, *self.hosts) if n is not None)


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

    # Per-job addresses and router addresses live in /24 blocks of a /16 (or larger) data subnet: host i owns
    # block i + 1 (its address for job slot s is <subnet> + (i + 1) * 256 + s), routers the last block, 255.
    def require_blocks(self, what: str) -> None:
        """TestbedError unless the data subnet has room for the blocks (a prefix of /16 or shorter)."""
        if self.subnet.prefixlen > 16:
            raise TestbedError(f"{what} needs a data subnet of /16 or larger (per-host /24 blocks), "
                               f"got {self.subnet}")

    def job_addr(self, i: int, slot: int) -> str:
        """Host ``i``'s (0-based) address for job slot ``slot`` (1..254)."""
        return str(self.subnet.network_address + (i + 1) * 256 + slot)

    def host_block(self, i: int) -> str:
        """The /24 of host ``i``'s job addresses."""
        return f"{self.subnet.network_address + (i + 1) * 256}/24"

    def router_addr(self, j: int) -> str:
        """Router ``j``'s (0-based, topology switch order) address, on its loopback."""
        return str(self.subnet.network_address + ROUTER_BLOCK * 256 + j + 1)


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
class NextHop:
    """Where a route sends a packet: out of ``ifname``, to ``gateway`` (always on-link: point-to-point veths
    carry no subnet) or, without one, straight to the destination (it answers ARP itself)."""

    ifname: str
    gateway: str | None = None


MAIN_TABLE = 254


@dataclass(frozen=True)
class UnicastRoute:
    """A route in ``netns``; several ``nexthops`` make it a multipath route, spread per flow by the
    namespace's ``fib_multipath_hash_policy``. ``prefsrc``: the source address a socket that did not bind
    gets."""

    netns: str
    dst: str
    nexthops: tuple[NextHop, ...]
    table: int = MAIN_TABLE
    prefsrc: str | None = None


@dataclass(frozen=True)
class RoutedLayout:
    """What per-job routes on a routed testbed need to know: each topology switch's router (namespace and
    address), each host's gateway, and the path table each router keeps per neighbouring router (one
    default route through that neighbour: a policy rule that looks it up pins a flow to that hop)."""

    routers: tuple[tuple[str, str, str], ...]  # (switch, namespace, address), topology switch order
    gateways: tuple[str, ...]  # per host index: its router's address
    tables: tuple[tuple[str, str, int], ...]  # (switch, neighbouring switch, table id)

    def router_ns(self, switch: str) -> str:
        return next(ns for s, ns, _ in self.routers if s == switch)

    def table(self, switch: str, neighbour: str) -> int:
        return next(t for s, n, t in self.tables if (s, n) == (switch, neighbour))


@dataclass(frozen=True)
class Sysctl:
    """One ``key=value`` inside a namespace (it vanishes with the namespace: nothing to undo)."""

    netns: str
    key: str
    value: str


@dataclass(frozen=True)
class HtbLayout:
    """Where a shaped link's rate lives: the HTB root qdisc, the class that holds the link's rate
    (``link_class``), the default class every unclassified packet goes to and the handle of the bounded
    queue under it.

    With a ``link_class`` (the netns layout) the default class and every per-job class (:mod:`.jobplan`)
    are leaves under it, each with a near-zero guarantee (:data:`LEAF_RATE_MBIT`) and the link's rate as
    ceiling, so they share the link by HTB's borrowing rules: strict ``prio`` first, ``quantum`` (bytes per
    round) inside a prio. Alone, the default class borrows the whole link (measured here: 95.4 against 95.6
    Mbit of TCP goodput at 100 Mbit with the class holding the rate itself). Without one (Mininet's
    TCIntf: ``5:1`` straight under the root) the default class holds the rate and nothing can be added
    beside it."""

    root: str = "1:"
    default_class: str = "1:10"
    leaf: str = "10:"
    link_class: str | None = "1:1"

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

    @property
    def rate_class(self) -> str:
        """The class whose rate is the link's rate."""
        return self.link_class or self.default_class

    @property
    def rate_class_id(self) -> int:
        return tc_handle(self.rate_class)


@dataclass(frozen=True)
class LeafQueue:
    """The bounded queue under an HTB class: ``pfifo`` (``limit`` packets) or ``bfifo`` (``limit`` bytes)."""

    kind: str
    limit: int


# Every leaf under a link class is guaranteed almost nothing (HTB needs a rate), so what a leaf gets is decided
# by HTB's borrowing alone: strict prio first, then quantum.
LEAF_RATE_MBIT = 0.008
# Bytes the leaf of the smallest weight on a link sends per round (a leaf of weight w sends w / w_min times
# that): one packet of the largest size a shaped interface sends, its GSO limit (the kernel's 64 KiB unless
# the testbed sets ``gso_max_bytes``; :attr:`NetnsPlan.quantum_bytes`). Deficit round robin shares bytes by
# weight as long as a turn holds a whole packet: HTB sends at least one packet per turn, and on veths a packet
# is a GSO super-packet, so quanta of 3028 and 1514 bytes split two iperf3 flows 50:50 here. A larger turn
# costs a class that empties between bursts (an all-reduce's phases, a capped flow) a whole turn of the others
# each time it comes back (HTB keeps its unused deficit and moves on): with 2^18 bytes and 16 KiB packets at
# 100 Mbit, 2:1 weights split two all-reducing jobs 1.45:1 and a 25 Mbit cap gave 21.8.
QUANTUM_BYTES = 1 << 16
MAX_QUANTUM_BYTES = 1 << 31  # HTB's quantum is a u32


@dataclass(frozen=True)
class LeafClass:
    """An HTB leaf under a link's rate class (the default class or one job's) and the handle of its queue.
    ``rate_mbit`` is its guarantee, ``ceil_mbit`` what it may borrow up to, ``prio`` 0-7 (0 first) and
    ``quantum`` its bytes per round inside its prio."""

    classid: str
    prio: int
    quantum: int
    rate_mbit: float
    ceil_mbit: float
    queue_handle: str

    @property
    def class_id(self) -> int:
        return tc_handle(self.classid)


def default_leaf(htb: HtbLayout, link_mbit: float, quantum: int = QUANTUM_BYTES) -> LeafClass:
    """The default class of a link with a link class: prio 0, weight 1 (``quantum``), the link as ceiling."""
    return LeafClass(htb.default_class, 0, quantum, LEAF_RATE_MBIT, link_mbit, htb.leaf)


U32_SRC_OFFSET, U32_DST_OFFSET = 12, 16  # the IPv4 source and destination address in the IP header


@dataclass(frozen=True)
class U32Filter:
    """A u32 classifier node on a link's HTB root: packets whose IPv4 header has ``address`` at ``offset``
    (:data:`U32_SRC_OFFSET` or :data:`U32_DST_OFFSET`) go to class ``classid``."""

    classid: str
    offset: int
    address: str


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
    namespaces, bridges, veths, addresses, routes, shaping, sysctls. A backend that wires its own bridges
    and veths (Mininet) leaves ``bridges``, ``veths`` and ``addresses`` empty; a routed testbed has no
    bridges but routes and its :class:`RoutedLayout`."""

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
    routes: tuple[UnicastRoute, ...] = ()
    routed: RoutedLayout | None = None
    gso_max_bytes: int | None = None  # the largest GSO packet each shaped interface sends (None: the kernel's)

    @property
    def quantum_bytes(self) -> int:
        """The DRR quantum of weight 1 on this testbed's links: its largest packet (see :data:`QUANTUM_BYTES`)."""
        return self.gso_max_bytes or QUANTUM_BYTES

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
def check_layout(topo: Topology, loops_ok: bool = False) -> None:
    """Refuse what the testbed cannot emulate, before anything is created.

    Hosts must hang off exactly one switch (one data interface) and, for Linux
    bridges (``loops_ok`` False), the switch graph must be loop free: bridges run
    no spanning tree, so a cycle would loop broadcast frames forever. Routers
    (``loops_ok``) forward by route, so equal-cost cycles are what they are for.
    """
    for h in topo.hosts:
        nbrs = list(topo.graph.neighbors(h.name))
        if len(nbrs) != 1 or nbrs[0] not in topo.switches:
            raise TestbedError(f"topology {topo.name}: host {h.name} must have exactly one cable, to a switch "
                               f"(has {nbrs}); the netns testbed gives each host one data interface")
    if loops_ok:
        return
    sw = topo.graph.subgraph(topo.switches)
    try:
        cycle = nx.find_cycle(sw)
    except nx.NetworkXNoCycle:
        return
    path = " - ".join([u for u, _ in cycle] + [cycle[0][0]])
    raise TestbedError(f"topology {topo.name}: switch graph has a cycle ({path}); Linux bridges without "
                       "STP need a loop-free switch graph (e.g. leafspine with spines=1, or the routed backend)")


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


def check_gso(gso_max_bytes: int | None) -> int | None:
    """TestbedError unless ``gso_max_bytes`` is None or a whole number of bytes in [MIN_QUEUE_BYTES, 65536]."""
    if gso_max_bytes is not None and (isinstance(gso_max_bytes, bool) or not isinstance(gso_max_bytes, int)
                                      or not MIN_QUEUE_BYTES <= gso_max_bytes <= 65536):
        raise TestbedError(f"gso_max_bytes must be None (the kernel's 65536) or an integer in "
                           f"[{MIN_QUEUE_BYTES}, 65536], got {gso_max_bytes!r}")
    return gso_max_bytes


def plan_netns(topo: Topology, tid: str, addressing: Addressing, rate_scale: float,
               queue: LeafQueue | None = None, sysctls: dict | None = None,
               gso_max_bytes: int | None = None) -> NetnsPlan:
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
                     veths=tuple(veths), addresses=tuple(addresses), gso_max_bytes=check_gso(gso_max_bytes))
