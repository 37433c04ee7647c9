"""The running jobs' network allocations on a namespace testbed, as plan records computed before anything is
touched: per-job addresses, source routes, HTB leaf classes, u32 classifiers and path rules.

Why plain records: the whole tc and routing state the allocations ask for can be checked by hand without
root, bad input is refused before anything changes, and the lifecycle (:mod:`.jobnet`) only compares the
records with what the kernel has and writes the difference, so applying the same allocations twice writes
nothing, and a changed allocation changes its classes in place.

**Classification: per-job addresses.** A job with an allocation gets a slot ``s`` (1..254) and, on each of
its hosts, an address of its own (host ``i``: ``<subnet> + (i + 1) * 256 + s``) labelled ``eth0:j{s}``. Its
ranks are told that label as their socket interface (``GLOO_SOCKET_IFNAME``): gloo binds its listener to the
label's address, and each host gets a /32 route to every other host's job address with that job address as
preferred source, so the connecting side of every pair (and the TCPStore client, and the agent's traffic
source) sends from it too. Every packet of the job then carries job addresses at both ends, whatever ports
gloo picks, and two jobs between the same two hosts stay apart. On every shaped link the job may cross (all
equal-cost paths between any two of its hosts) a u32 filter per job address, as source and as destination,
sends its packets to the job's leaf. Limits: a socket that binds the host's own address (not the label's)
bypasses it, and lands in the default class; a job's flows that cross one link share one class, so a cap
bounds their sum on that link (one flow per link per direction for a 2-rank ring: the cap is per flow).

**Classes.** Under a link's rate class (``1:1``) every leaf has a near-zero guarantee and the link as ceiling,
so HTB's borrowing decides: ``prio`` = the allocation's priority (strict), ``quantum`` = its weight relative to
the smallest weight on that link times the testbed's largest packet (:data:`~netlab.testbed.plan.QUANTUM_BYTES`,
:attr:`~netlab.testbed.plan.NetnsPlan.quantum_bytes`; the default class counts
as weight 1), ceiling = the cap (topology Gbit/s scaled like the links) or the link's rate. Job slot ``s``:
class ``1:{0x100+s:x}``, its queue ``{0x100+s:x}:``, its filters at preference ``0x100 + s``.

**Paths.** ``paths`` picks, per flow, an index into :meth:`Topology.paths` for that flow's hosts. On a routed
testbed each router where that flow's destination has several next hops gets a policy rule (from the
source's to the destination's job address, priority ``RULE_PRIORITY_BASE + s``) that looks up the path table
of the chosen next hop. A bridged testbed has one path: index 0 is accepted, any other refused.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..sched.allocation import NetAllocation
from ..topology import Topology
from .base import TestbedError
from .plan import (DATA_IFNAME, LEAF_RATE_MBIT, MAX_QUANTUM_BYTES, U32_DST_OFFSET, U32_SRC_OFFSET, LeafClass,
                   NetnsPlan, U32Filter, default_leaf)
from .routed_plan import host_switch, next_hops

JOB_SLOTS = 254
SLOT_BASE = 0x100  # slot s: class minor, queue major and filter preference 0x100 + s
RULE_PRIORITY_BASE = 10000


@dataclass(frozen=True)
class JobNet:
    """What the testbed must know of one job: its hosts (distinct, rank order), its allocation and its flows
    (directed host pairs, in the order its demand lists them: what ``allocation.paths`` indexes)."""

    job: int
    hosts: tuple[str, ...]
    allocation: NetAllocation
    flows: tuple[tuple[str, str], ...] = field(default=None)

    def __post_init__(self):
        if not isinstance(self.allocation, NetAllocation):
            raise TestbedError(f"job {self.job}: allocation must be a NetAllocation, got {self.allocation!r}")
        hosts = tuple(self.hosts)
        if not hosts or len(set(hosts)) != len(hosts):
            raise TestbedError(f"job {self.job}: hosts must be distinct host names, got {list(hosts)}")
        object.__setattr__(self, "hosts", hosts)
        if self.flows is None:  # the ring the testbed's ranks run (netlab.workload.patterns.Ring's flows)
            k = len(hosts)
            object.__setattr__(self, "flows", tuple((hosts[i], hosts[(i + 1) % k]) for i in range(k)) if k > 1 else ())
        flows = tuple(tuple(f) for f in self.flows)
        bad = [f for f in flows if len(f) != 2 or f[0] == f[1] or not set(f) <= set(hosts)]
        if bad:
            raise TestbedError(f"job {self.job}: flows must be pairs of two of its hosts {list(hosts)}, got {bad}")
        object.__setattr__(self, "flows", flows)


@dataclass(frozen=True)
class JobAddress:
    job: int
    host: str
    netns: str
    ifname: str
    address: str
    label: str


@dataclass(frozen=True)
class SourceRoute:
    """A /32 route to a peer's job address that makes the job's own address the source (``gateway`` None:
    on-link, a bridged testbed)."""

    job: int
    netns: str
    dst: str
    prefsrc: str
    ifname: str
    gateway: str | None


@dataclass(frozen=True)
class LinkLeaf:
    """One leaf on one shaped link: the default class (``job`` None) or a job's."""

    job: int | None
    link: int
    netns: str
    ifname: str
    leaf: LeafClass


@dataclass(frozen=True)
class LinkFilters:
    """A job's u32 filters on one shaped link (one preference)."""

    job: int
    link: int
    netns: str
    ifname: str
    pref: int
    filters: frozenset[U32Filter]


@dataclass(frozen=True)
class PathRule:
    """A policy rule in a router: the job's packets ``src -> dst`` look up path table ``table``."""

    job: int
    netns: str
    src: str
    dst: str
    table: int
    priority: int


@dataclass(frozen=True)
class JobNetPlan:
    """The allocations of every job at once (every record sorted by job, then where it lives). ``leaves``
    has every shaped link's default leaf too (its quantum depends on the jobs' weights there)."""

    slots: tuple[tuple[int, int], ...]
    addresses: tuple[JobAddress, ...] = ()
    routes: tuple[SourceRoute, ...] = ()
    leaves: tuple[LinkLeaf, ...] = ()
    filters: tuple[LinkFilters, ...] = ()
    rules: tuple[PathRule, ...] = ()

    def slot(self, job: int) -> int:
        return dict(self.slots)[job]

    def of_job(self, job: int) -> "JobNetPlan":
        """Only ``job``'s records (its slot, addresses, routes, leaves, filters, rules)."""
        return JobNetPlan(tuple((j, s) for j, s in self.slots if j == job),
                          *(tuple(r for r in recs if r.job == job)
                            for recs in (self.addresses, self.routes, self.leaves, self.filters, self.rules)))


def assign_slots(current: dict[int, int], jobs) -> dict[int, int]:
    """Slots for ``jobs``: a job keeps the slot it has in ``current``; a new one gets the lowest free."""
    jobs = list(jobs)
    out = {j: current[j] for j in jobs if j in current}
    free = (s for s in range(1, JOB_SLOTS + 1) if s not in set(out.values()))
    for j in jobs:
        if j not in out:
            slot = next(free, None)
            if slot is None:
                raise TestbedError(f"job {j}: all {JOB_SLOTS} network allocation slots of this testbed are in use")
            out[j] = slot
    return out


def job_label(slot: int) -> str:
    """The address label a job's ranks use as their socket interface (at most 15 characters)."""
    return f"{DATA_IFNAME}:j{slot}"


def plan_jobs(plan: NetnsPlan, topo: Topology, link_mbit: dict[int, float], rate_scale: float,
              jobs: dict[int, JobNet], slots: dict[int, int]) -> JobNetPlan:
    """The records for ``jobs`` (job id -> :class:`JobNet`) with their ``slots`` (:func:`assign_slots`),
    each shaped link ``l`` at ``link_mbit[l]`` (see the module doc for the rules)."""
    htb = plan.htb
    if htb.link_class is None:
        raise TestbedError(f"testbed {plan.tid}: its links keep their rate in the default class "
                           f"{htb.default_class} (no link class), so no per-job class can share them")
    if jobs:
        plan.addressing.require_blocks("per-job network allocations")
    index, routed = topo.host_index, plan.routed
    major = htb.root.partition(":")[0]
    links_of, addr = {}, {}
    for j, net in sorted(jobs.items()):
        unknown = [h for h in net.hosts if h not in index]
        if unknown:
            raise TestbedError(f"job {j}: unknown hosts {unknown}; hosts: {sorted(index)}")
        slot = slots[j]
        addr[j] = {h: plan.addressing.job_addr(index[h], slot) for h in net.hosts}
        links_of[j] = sorted({l for a in net.hosts for b in net.hosts if a != b
                              for p in topo.paths(index[a], index[b]) for l in p})
    addresses, routes, rules = [], [], []
    for j, net in sorted(jobs.items()):
        slot = slots[j]
        for h in net.hosts:
            i = index[h]
            addresses.append(JobAddress(j, h, plan.namespaces.hosts[i], DATA_IFNAME, addr[j][h], job_label(slot)))
            gw = routed.gateways[i] if routed is not None else None
            routes += [SourceRoute(j, plan.namespaces.hosts[i], addr[j][b], addr[j][h], DATA_IFNAME, gw)
                       for b in net.hosts if b != h]
        rules += _path_rules(plan, topo, net, addr[j], RULE_PRIORITY_BASE + slot)
    leaves, filters = [], []
    for sl in plan.links:
        on_link = [j for j in sorted(jobs) if sl.link in links_of[j]]
        mbit = link_mbit[sl.link]
        w_min = min([1.0, *(jobs[j].allocation.weight for j in on_link)])
        leaves.append(LinkLeaf(None, sl.link, sl.netns, sl.ifname,
                               default_leaf(htb, mbit, _quantum(1.0, w_min, plan.quantum_bytes, sl, jobs, on_link))))
        for j in on_link:
            a = jobs[j].allocation
            n = SLOT_BASE + slots[j]
            capped = a.rate_cap_gbps is not None and sl.src in jobs[j].hosts  # where its flows enter the network
            ceil = min(mbit, a.rate_cap_gbps * 1000 * rate_scale) if capped else mbit
            classid = f"{major}:{n:x}"
            leaf = LeafClass(classid, a.priority, _quantum(a.weight, w_min, plan.quantum_bytes, sl, jobs, on_link),
                             min(LEAF_RATE_MBIT, ceil), ceil, f"{n:x}:")
            leaves.append(LinkLeaf(j, sl.link, sl.netns, sl.ifname, leaf))
            matches = frozenset(U32Filter(classid, off, x) for x in addr[j].values()
                                for off in (U32_SRC_OFFSET, U32_DST_OFFSET))
            filters.append(LinkFilters(j, sl.link, sl.netns, sl.ifname, n, matches))
    return JobNetPlan(tuple(sorted(slots.items())), tuple(addresses), tuple(routes), tuple(leaves),
                      tuple(filters), tuple(rules))


def _quantum(weight: float, w_min: float, base: int, link, jobs: dict[int, JobNet], on_link: list[int]) -> int:
    q = round(base * weight / w_min)
    if q > MAX_QUANTUM_BYTES:
        weights = {j: jobs[j].allocation.weight for j in on_link}
        raise TestbedError(f"link {link.src}->{link.dst}: weights {weights} (and the default class's 1) differ more "
                           f"than {MAX_QUANTUM_BYTES // base}-fold, beyond what HTB's quantum can express")
    return q


def _path_rules(plan: NetnsPlan, topo: Topology, net: JobNet, addr: dict[str, str], priority: int) -> list[PathRule]:
    """The policy rules that pin each of the job's flows to the path its allocation chose (none for ECMP)."""
    paths = net.allocation.paths
    if paths is None or not net.flows:
        return []
    if len(paths) not in (1, len(net.flows)):
        raise TestbedError(f"job {net.job}: allocation.paths has {len(paths)} entries; it needs one per flow "
                           f"({len(net.flows)}: {list(net.flows)}) or a single one for every flow")
    index, rules = topo.host_index, []
    for n, (a, b) in enumerate(net.flows):
        choice = paths[n] if len(paths) > 1 else paths[0]
        cands = topo.paths(index[a], index[b])
        if choice >= len(cands):
            raise TestbedError(f"job {net.job}: flow {a}->{b} has {len(cands)} equal-cost path(s) "
                               f"(indices 0..{len(cands) - 1}), allocation.paths asks for {choice}")
        if plan.routed is None:
            if choice != 0:  # unreachable today: bridged topologies are loop free, so one path each
                raise TestbedError(f"job {net.job}: a bridged testbed has one path per flow; path choice needs "
                                   "the routed backend")
            continue
        dst_switch = host_switch(topo, index[b])
        for l in cands[choice]:
            u, v = topo.link_src[l], topo.link_dst[l]
            if u in topo.switches and v in topo.switches and len(next_hops(topo, u, dst_switch)) > 1:
                rules.append(PathRule(net.job, plan.routed.router_ns(u), addr[a], addr[b],
                                      plan.routed.table(u, v), priority))
    return rules
