"""Slurm's ``topology.conf`` (topology/tree plugin) to and from netlab's topology model.

``topology.conf`` (https://slurm.schedmd.com/topology.conf.html) describes a
tree of switches, one line each::

    SwitchName=tor0 Nodes=r0h[0-3] LinkSpeed=100
    SwitchName=spine0 Switches=tor[0-3] LinkSpeed=200

``Nodes`` are the compute nodes cabled to a leaf switch, ``Switches`` the child
switches (hostlists, :mod:`netlab.hostlist`); ``LinkSpeed`` is "arbitrary units, not
used by Slurm". Slurm schedules by this tree only: it prefers the lowest switch
whose subtree holds a job.

**Export** (:func:`to_tree`, :func:`write_topology_conf`). netlab topologies are
graphs (a leaf-spine ToR has a cable to every spine), Slurm's is a tree, so
the graph is folded level by level, from the hosts up:

1. level 0: the switch each host hangs off (its rack switch);
2. the next level: every switch not yet placed that is cabled to the level
   below; switches with exactly the same children are one ECMP group and
   become one Slurm switch, named after the first of them (``spine0`` stands
   for ``spine0`` and ``spine1``: the group's members are written in a comment
   above the line); a child cabled to several groups goes under the first
   (name order);
3. repeat until no switch is left above; if more than one top remains (two
   ToRs joined by one cable, a dumbbell), a switch named ``root`` is added
   above them, so that every job can span the cluster as in netlab.

``LinkSpeed`` carries each switch's downlink rate in whole Gbit/s (the fastest
node cable of a leaf; for an upper switch, the most its group carries to one
child group, all ECMP cables added), so the file also says what the network
is; import reads it back (one cable of that rate per child).

**Import** (:func:`read_topology_conf`, :func:`to_topology`). Every line is
checked before anything is built; bad input is one :class:`SlurmTopologyError`
naming the file, the line and the field: a line that is not ``Key=value``
pairs, a key Slurm does not know, no ``SwitchName``, a switch given twice, a
``Switches`` reference to a switch not in the file, a node listed under two
switches, a node not among the known nodes (when they are given), and a
cycle. Link rates come from, in order: the caller (options), the YAML file
beside it (:data:`LINKS_SUFFIX`, see :class:`LinkSpec`), ``LinkSpeed`` in the
file, the defaults of :class:`LinkSpec`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ..errors import Float, Int, describe_errors, read_text
from ..topology import Host, Topology, TopologyError, check_name
from ..hostlist import HostlistError, compress, expand
from ..yaml_input import load_yaml

#: topology.conf files are hand-written or generated; anything larger is refused before it is read
MAX_CONF_BYTES = 16 * 2**20
#: ``topology.conf`` beside ``topology.links.yaml``: the link rates the file itself cannot say
LINKS_SUFFIX = ".links.yaml"
#: the switch added above several tops (see the module docstring)
ROOT = "root"
KEYS = ("SwitchName", "Nodes", "Switches", "LinkSpeed")


class SlurmTopologyError(TopologyError):
    """A topology.conf (or the links YAML beside it) is invalid; the message names the file, line and field."""


@dataclass
class Switch:
    """One Slurm switch: its nodes, its child switches, its LinkSpeed, the line it came from."""

    name: str
    nodes: list[str] = field(default_factory=list)
    switches: list[str] = field(default_factory=list)
    link_speed: Optional[int] = None
    line: int = 0
    members: list[str] = field(default_factory=list)  # export only: the netlab switches this one stands for


@dataclass
class SlurmTree:
    """Switches in file order; checked to be a forest (every switch and node has at most one parent)."""

    switches: dict[str, Switch]
    source: str = "topology.conf"

    def parent(self) -> dict[str, str]:
        """child switch or node -> its parent switch."""
        up = {}
        for s in self.switches.values():
            for c in s.switches + s.nodes:
                up[c] = s.name
        return up

    def roots(self) -> list[str]:
        up = self.parent()
        return [s for s in self.switches if s not in up]

    def nodes_under(self, name: str) -> list[str]:
        """Every node in a switch's subtree, depth first in file order."""
        s = self.switches[name]
        out = list(s.nodes)
        for c in s.switches:
            out += self.nodes_under(c)
        return out

    def levels(self) -> dict[str, int]:
        """Switch -> level as Slurm counts it: 0 for a switch with no child switches, else 1 + the highest child."""
        memo: dict[str, int] = {}

        def level(n: str) -> int:
            if n not in memo:
                kids = self.switches[n].switches
                memo[n] = 0 if not kids else 1 + max(level(k) for k in kids)
            return memo[n]

        return {n: level(n) for n in self.switches}

    def shape(self) -> dict[str, tuple[frozenset, frozenset]]:
        """switch -> (its nodes, its child switches): what two trees must share to be the same tree."""
        return {n: (frozenset(s.nodes), frozenset(s.switches)) for n, s in self.switches.items()}


# -- export ----------------------------------------------------------------------------------------------------------

def to_tree(topo: Topology) -> SlurmTree:
    """Fold a netlab topology into a Slurm switch tree (see the module docstring)."""
    g = topo.graph
    switches = set(topo.switches)
    placed: dict[str, str] = {}  # netlab switch -> the Slurm switch standing for it
    tree: dict[str, Switch] = {}

    def gbps(a: str, b: str) -> float:
        return float(topo.link_capacity_gbps[topo.link_id[(a, b)]])

    leaves: dict[str, Switch] = {}
    for h in topo.hosts:
        ups = sorted(n for n in g.neighbors(h.name) if n in switches)
        if not ups:
            raise SlurmTopologyError(f"topology {topo.name}: host {h.name} is not cabled to a switch; "
                                     "Slurm's tree needs every node under a switch")
        leaf = h.rack if h.rack in ups else ups[0]
        sw = leaves.setdefault(leaf, Switch(leaf, members=[leaf]))
        sw.nodes.append(h.name)
        sw.link_speed = max(sw.link_speed or 0, round(gbps(leaf, h.name)))
        placed[leaf] = leaf
    tree.update(sorted(leaves.items(), key=lambda kv: _natural(kv[0])))
    level = list(tree)
    while True:
        above: dict[str, list[str]] = {}  # candidate -> the Slurm switches of this level it is cabled to
        for name in level:
            for member in tree[name].members:
                for n in g.neighbors(member):
                    if n in switches and n not in placed:
                        kids = above.setdefault(n, [])
                        if name not in kids:
                            kids.append(name)
        if not above:
            break
        groups: dict[tuple, list[str]] = {}
        for cand in sorted(above, key=_natural):
            groups.setdefault(tuple(sorted(above[cand], key=_natural)), []).append(cand)
        taken: set[str] = set()
        new = []
        for kids, members in sorted(groups.items(), key=lambda kv: _natural(kv[1][0])):
            sw = Switch(members[0], members=members)
            for k in kids:
                if k in taken:
                    continue
                taken.add(k)
                sw.switches.append(k)
                rate = sum(gbps(m, c) for m in members for c in tree[k].members if g.has_edge(m, c))
                sw.link_speed = max(sw.link_speed or 0, round(rate))
            for m in members:
                placed[m] = sw.name
            if sw.switches:
                tree[sw.name] = sw
                new.append(sw.name)
        level = new
    out = SlurmTree(tree, source=f"topology {topo.name}")
    roots = out.roots()
    if len(roots) > 1:
        if ROOT in tree or ROOT in topo.host_index:
            raise SlurmTopologyError(f"topology {topo.name}: several tops need a switch {ROOT!r} above them, "
                                     "but that name is taken")
        links = [gbps(a, b) for a, b in g.edges if a in switches and b in switches] or [1.0]
        tree[ROOT] = Switch(ROOT, switches=roots, link_speed=round(max(links)), members=[])
    return out


def _natural(name: str):
    """Sort key: 'tor2' before 'tor10'."""
    return [int(p) if p.isdigit() else p for p in re.split(r"(\d+)", name)]


def format_topology_conf(tree: SlurmTree, header: str = "") -> str:
    """``topology.conf`` text for a tree: leaves first, then each level up (Slurm needs children defined first
    only for readability; it resolves names after reading the whole file)."""
    levels = tree.levels()
    lines = [f"# {line}" for line in header.splitlines()] if header else []
    for name in sorted(tree.switches, key=lambda n: (levels[n], list(tree.switches).index(n))):
        s = tree.switches[name]
        if len(s.members) > 1:
            lines.append(f"# {name} stands for the ECMP group {' '.join(s.members)}")
        parts = [f"SwitchName={name}"]
        if s.nodes:
            parts.append(f"Nodes={compress(s.nodes)}")
        if s.switches:
            parts.append(f"Switches={compress(s.switches)}")
        if s.link_speed:
            parts.append(f"LinkSpeed={int(s.link_speed)}")
        lines.append(" ".join(parts))
    return "\n".join(lines) + "\n"


def write_topology_conf(topo: Topology, path) -> SlurmTree:
    """Write ``topology.conf`` for ``topo`` (nothing is written if the topology cannot be folded)."""
    tree = to_tree(topo)
    text = format_topology_conf(tree, header=f"topology.conf written by netlab from topology {topo.name!r}\n"
                                             "LinkSpeed: the switch's downlink rate in Gbit/s")
    Path(path).write_text(text)
    return tree


# -- import ----------------------------------------------------------------------------------------------------------

def parse_topology_conf(text: str, source: str = "topology.conf", known_nodes=None) -> SlurmTree:
    """Parse and check ``topology.conf`` text; every problem is one error naming ``source``, line and field."""
    switches: dict[str, Switch] = {}
    owner: dict[str, tuple[str, int]] = {}  # node -> (switch, line)
    known = set(known_nodes) if known_nodes is not None else None
    for lineno, raw in enumerate(text.splitlines(), start=1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        where = f"{source}, line {lineno}"
        values: dict[str, str] = {}
        for token in line.split():
            key, sep, value = token.partition("=")
            if not sep or not key:
                raise SlurmTopologyError(f"{where}: {token!r} is not Key=value (allowed keys: {', '.join(KEYS)})")
            canon = next((k for k in KEYS if k.lower() == key.lower()), None)
            if canon is None:
                raise SlurmTopologyError(f"{where}, field {key!r}: not a topology.conf key "
                                         f"(allowed: {', '.join(KEYS)})")
            if canon in values:
                raise SlurmTopologyError(f"{where}, field {canon!r}: given twice")
            values[canon] = value
        if "SwitchName" not in values:
            raise SlurmTopologyError(f"{where}, field 'SwitchName': missing (every line names a switch)")
        name = _name(values["SwitchName"], f"{where}, field 'SwitchName'")
        if name in switches:
            raise SlurmTopologyError(f"{where}, field 'SwitchName': switch {name!r} given twice "
                                     f"(first at line {switches[name].line})")
        sw = Switch(name, line=lineno)
        for key, target in (("Nodes", sw.nodes), ("Switches", sw.switches)):
            if key in values:
                try:
                    names = expand(values[key])
                except HostlistError as exc:
                    raise SlurmTopologyError(f"{where}, field {key!r}: {exc}") from None
                target.extend(_name(n, f"{where}, field {key!r}") for n in names)
        if "LinkSpeed" in values:
            try:
                sw.link_speed = int(values["LinkSpeed"])
                if sw.link_speed < 0:
                    raise ValueError
            except ValueError:
                raise SlurmTopologyError(f"{where}, field 'LinkSpeed': {values['LinkSpeed']!r} is not a whole "
                                         "number >= 0") from None
        for n in sw.nodes:
            if known is not None and n not in known:
                raise SlurmTopologyError(f"{where}, field 'Nodes': unknown node {n!r} (not among the "
                                         f"{len(known)} known nodes {compress(sorted(known, key=_natural))})")
            if n in owner:
                raise SlurmTopologyError(f"{where}, field 'Nodes': node {n!r} is already under switch "
                                         f"{owner[n][0]!r} (line {owner[n][1]}); a node hangs off one leaf switch")
            owner[n] = (name, lineno)
        switches[name] = sw
    if not switches:
        raise SlurmTopologyError(f"{source}: no SwitchName lines")
    parent: dict[str, str] = {}
    for sw in switches.values():
        for c in sw.switches:
            where = f"{source}, line {sw.line}, field 'Switches'"
            if c not in switches:
                raise SlurmTopologyError(f"{where}: unknown switch {c!r} (no SwitchName={c} line)")
            if c == sw.name:
                raise SlurmTopologyError(f"{where}: switch {c!r} lists itself (a cycle)")
            if c in parent:
                raise SlurmTopologyError(f"{where}: switch {c!r} already has parent {parent[c]!r} (line "
                                         f"{switches[parent[c]].line}); Slurm's topology is a tree")
            parent[c] = sw.name
    for start in switches:  # every switch has at most one parent, so a cycle is a loop of parents
        seen = [start]
        node = start
        while node in parent:
            node = parent[node]
            if node in seen:
                loop = seen[seen.index(node):] + [node]
                first = switches[loop[1]]
                raise SlurmTopologyError(f"{source}, line {first.line}, field 'Switches': the switches form a "
                                         f"cycle: {' -> '.join(reversed(loop))}")
            seen.append(node)
    if not owner:
        raise SlurmTopologyError(f"{source}: no switch lists Nodes")
    return SlurmTree(switches, source=source)


def _name(value: str, where: str) -> str:
    try:
        return check_name(value, where)
    except TopologyError as exc:
        raise SlurmTopologyError(str(exc)) from None


def parse_scontrol_topology(text: str) -> SlurmTree:
    """The tree ``scontrol show topology`` prints (one ``SwitchName=... Level=... Nodes=... Switches=...`` line per
    switch). An upper switch lists every node of its subtree there; only leaf switches keep their Nodes."""
    switches: dict[str, Switch] = {}
    for lineno, raw in enumerate(text.splitlines(), start=1):
        fields = dict(t.partition("=")[::2] for t in raw.split() if "=" in t)
        if "SwitchName" not in fields:
            continue
        sw = Switch(fields["SwitchName"], line=lineno)
        sw.switches = expand(fields.get("Switches", "")) if fields.get("Switches", "(null)") != "(null)" else []
        nodes = fields.get("Nodes", "")
        sw.nodes = expand(nodes) if nodes and nodes != "(null)" and not sw.switches else []
        sw.link_speed = int(fields["LinkSpeed"]) if fields.get("LinkSpeed", "").isdigit() else None
        switches[sw.name] = sw
    return SlurmTree(switches, source="scontrol show topology")


class LinkSpec(BaseModel):
    """Link rates and GPUs the tree cannot say (the YAML beside ``topology.conf``, or options).

    ``host_gbps``: every node's cable to its leaf switch; ``gpus_per_host``;
    ``oversub``: a switch's uplink carries its downlink capacity / oversub (1 =
    non-blocking, netlab's builders' rule); ``switch_gbps``: a switch name ->
    the rate of its uplink (wins over ``oversub``); ``nodes``: a hostlist of
    the cluster's nodes (then any other node in the file is an error).
    """

    model_config = ConfigDict(extra="forbid")

    host_gbps: Optional[Float(gt=0, le=1e9)] = Field(default=None, description="a rate in Gbit/s > 0")
    gpus_per_host: Int(ge=0, le=1024) = 8
    oversub: Float(gt=0, le=1e6) = 1.0
    switch_gbps: dict[str, Float(gt=0, le=1e9)] = Field(default_factory=dict,
                                                        description="a mapping switch name -> Gbit/s > 0")
    nodes: Optional[str] = Field(default=None, description="a Slurm hostlist such as n[01-16]")


def read_links(path) -> LinkSpec:
    """The :class:`LinkSpec` in a YAML file; errors name the file, the field and its line."""
    text = read_text(path, SlurmTopologyError, MAX_CONF_BYTES, what="links YAML file")
    doc, _ = load_yaml(text, str(path), SlurmTopologyError)  # bounded: aliases, duplicate keys
    if doc is None:
        return LinkSpec()
    if not isinstance(doc, dict):
        raise SlurmTopologyError(f"{path}: top level must be a mapping of {', '.join(LinkSpec.model_fields)}")
    try:
        return LinkSpec.model_validate(doc)
    except ValidationError as exc:
        raise SlurmTopologyError(f"{path}: " + describe_errors(exc, LinkSpec, lambda loc: _yaml_line(text, loc)))


def _yaml_line(text: str, loc: tuple) -> Optional[str]:
    key = next((p for p in loc if isinstance(p, str)), None)
    for i, line in enumerate(text.splitlines(), start=1):
        if key and re.match(rf"\s*{re.escape(key)}\s*:", line):
            return f"line {i}"
    return None


def to_topology(tree: SlurmTree, links: LinkSpec | None = None, name: str | None = None) -> Topology:
    """A netlab topology for a Slurm tree: leaf switches are racks, level-1 switches pods.

    Rates: a node's cable is ``host_gbps`` (else its leaf's LinkSpeed, else
    100); a switch's uplink is ``switch_gbps[switch]``, else its parent's
    LinkSpeed when the file gives one, else the switch's downlink capacity /
    ``oversub``.
    """
    links = links or LinkSpec()
    parent = tree.parent()
    for sw in links.switch_gbps:
        if sw not in tree.switches:
            raise SlurmTopologyError(f"{tree.source}: links: field 'switch_gbps': unknown switch {sw!r} "
                                     f"(switches: {compress(sorted(tree.switches, key=_natural))})")
    hosts, cables, tiers = [], [], {}
    down: dict[str, float] = {}
    levels = tree.levels()
    for s in tree.switches.values():
        tiers[s.name] = "tor" if levels[s.name] == 0 else f"level{levels[s.name]}"
        pod = parent.get(s.name, s.name)
        for n in s.nodes:
            rate = links.host_gbps or (float(s.link_speed) if s.link_speed else 100.0)
            hosts.append(Host(n, links.gpus_per_host, rack=s.name, pod=pod))
            cables.append((n, s.name, rate, "host"))
            down[s.name] = down.get(s.name, 0.0) + rate
    for sw in sorted(tree.switches, key=lambda n: levels[n]):  # children's downlinks are summed before parents'
        up = parent.get(sw)
        if up is None:
            continue
        if sw in links.switch_gbps:
            rate = links.switch_gbps[sw]
        elif tree.switches[up].link_speed:
            rate = float(tree.switches[up].link_speed)
        else:
            rate = down.get(sw, 0.0) / links.oversub
        if rate <= 0:
            raise SlurmTopologyError(f"{tree.source}, line {tree.switches[sw].line}: switch {sw!r} has no nodes "
                                     "below it, so its uplink rate is unknown (give it in switch_gbps)")
        cables.append((sw, up, rate, f"{tiers[sw]}-{tiers[up]}"))
        down[up] = down.get(up, 0.0) + rate
    try:
        return Topology(name or Path(tree.source).stem, hosts, tiers, cables,
                        params={"builder": "slurm", "path": tree.source})
    except TopologyError as exc:
        raise SlurmTopologyError(f"{tree.source}: {exc}") from None


def read_topology_conf(path, links: LinkSpec | None = None, **options) -> Topology:
    """A netlab topology from ``topology.conf``: rates from ``options`` (fields of :class:`LinkSpec`), else the
    YAML beside it (``topology.links.yaml`` for ``topology.conf``), else the file's LinkSpeed, else defaults."""
    path = Path(path)
    beside = path.with_name(path.stem + LINKS_SUFFIX)
    if links is None:
        links = read_links(beside) if beside.exists() else LinkSpec()
    if options:
        try:
            links = LinkSpec.model_validate({**links.model_dump(exclude_unset=True), **options})
        except ValidationError as exc:
            raise SlurmTopologyError(f"{path}: options: " + describe_errors(exc, LinkSpec)) from None
    known = None
    if links.nodes:
        try:
            known = expand(links.nodes)
        except HostlistError as exc:
            raise SlurmTopologyError(f"{beside}: field 'nodes': {exc}") from None
    text = read_text(path, SlurmTopologyError, MAX_CONF_BYTES, what="topology.conf")
    return to_topology(parse_topology_conf(text, str(path), known), links)
