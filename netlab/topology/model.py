"""The one topology model that the simulator, the testbed and the exporters read.

Naming rules (written once, here):

* A topology is a graph of named nodes: hosts and switches. Every cable is an
  undirected edge with a capacity; the model turns it into two directed links
  (one per direction, full duplex) with integer ids ``0..n_links-1``.
* Hosts carry GPUs and an intra-host interconnect bandwidth (NVLink/PCIe,
  ``intra_gbps``); the host's NICs are folded into its uplink capacity
  (``nics x nic_gbps``). Hosts are indexed ``0..n_hosts-1`` in creation order.
* Every host belongs to a rack (its ToR) and a pod; racks and pods are indexed.
* Link ``tier`` names the layer a cable sits in (``host``, ``tor-spine``,
  ``edge-agg``, ``agg-core``, ...); tier bytes and the oversubscribed-tier
  metrics group by it.

Routing is equal-cost multi-path over hop-shortest paths. The documented rule
(``ecmp``):

* ``split`` (default): a flow is spread evenly over all equal-cost paths, as
  NCCL's several channels/QPs spread a collective over the fabric. Each path
  carries ``1/P`` of the flow; a link on several paths carries the sum.
* ``hash``: a flow takes exactly one path, chosen by a stable hash
  (CRC32 of ``"src|dst|key"``) modulo the number of paths, as per-flow ECMP in
  switches does. Two flows can collide on one spine link.

Paths are listed in the order of their node names, and the paths themselves
come from per-destination ECMP tables (:mod:`netlab.topology.routing`), never
from a graph search per host pair.
"""

from __future__ import annotations

import math
import numbers
import re
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING

import numpy as np

from ..errors import InputError
from .routing import Router, accumulate, shares

if TYPE_CHECKING:  # networkx is imported when a graph is first asked for (routing, exporters), not at start-up
    import networkx as nx

ECMP_MODES = ("split", "hash")
_NO_WEIGHTS = np.zeros(0)

# Host and switch names become file names, sshd_config lines and command arguments on a testbed
# (netlab/testbed), so they are held to one strict pattern here, where every topology is made: a letter
# or digit first (never "." or ".."), then letters, digits, "_", "." or "-"; at most 64 characters.
# The agent (agent/netlab_agent/validate.py) holds its job and flow ids to the same pattern.
NAME_PATTERN = r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}"
NAME_RE = re.compile(NAME_PATTERN)


#: Size bounds, checked before anything is built (a typo such as hosts_per_rack=10000000 would otherwise be a
#: MemoryError after minutes). The largest topology the project uses (Crux's Lingjun list) has ~3,800 hosts.
MAX_HOSTS = 100_000
MAX_CABLES = 1_000_000


class TopologyError(InputError):
    """A topology description is invalid; the message names where and what."""


def check_size(where: str, hosts: int, cables: int) -> None:
    """A TopologyError if a topology of ``hosts`` hosts and ``cables`` cables is over the bounds above."""
    if hosts > MAX_HOSTS:
        raise TopologyError(f"{where}: {hosts:,} hosts, over the limit of {MAX_HOSTS:,} "
                            "(netlab.topology.model.MAX_HOSTS)")
    if cables > MAX_CABLES:
        raise TopologyError(f"{where}: {cables:,} cables, over the limit of {MAX_CABLES:,} "
                            "(netlab.topology.model.MAX_CABLES)")


def check_name(name, where: str) -> str:
    """``name`` if it matches :data:`NAME_PATTERN`, else a TopologyError naming ``where`` and the pattern."""
    if not isinstance(name, str) or NAME_RE.fullmatch(name) is None:
        raise TopologyError(f"{where}: {name!r} is not an allowed name: names must match {NAME_PATTERN} "
                            "(a letter or digit, then letters, digits, '_', '.' or '-'; at most 64 characters)")
    return name


def _valid_gbps(x) -> bool:
    """A rate: a real number (not a bool), finite and > 0."""
    return isinstance(x, numbers.Real) and not isinstance(x, bool) and math.isfinite(x) and x > 0


def _bad_numbers(values: list) -> bool:
    """Whether a list of rates may hold an invalid one: anything but floats and ints, or one that is not finite
    and > 0 (one pass in C over the whole list; :func:`_valid_gbps` then finds which)."""
    if not values:
        return False
    if not set(map(type, values)) <= {float, int}:
        return True
    arr = np.array(values, dtype=float)
    return not (np.isfinite(arr).all() and (arr > 0).all())


@dataclass
class Host:
    name: str
    gpus: int
    rack: str
    pod: str = "pod0"
    intra_gbps: float = 1200.0


@dataclass
class Topology:
    """Hosts, switches and directed links, with ECMP routing between hosts."""

    name: str
    hosts: list[Host]
    switches: dict[str, str]  # switch name -> tier/kind (tor, spine, agg, core, ...)
    cables: list[tuple[str, str, float, str]]  # (a, b, gbps, tier), undirected
    ecmp: str = "split"
    params: dict = field(default_factory=dict)  # what built it, for config.json

    def __post_init__(self):
        if self.ecmp not in ECMP_MODES:
            raise TopologyError(f"topology {self.name}: ecmp must be one of {ECMP_MODES}, not {self.ecmp!r}")
        names = [h.name for h in self.hosts]
        for i, h in enumerate(self.hosts):
            check_name(h.name, f"topology {self.name}: host {i}, field 'name'")
        for s in self.switches:
            check_name(s, f"topology {self.name}: switch, field 'name'")
        if len(set(names)) != len(names):
            raise TopologyError(f"topology {self.name}: duplicate host names")
        clash = set(names) & set(self.switches)
        if clash:
            raise TopologyError(f"topology {self.name}: names used for both hosts and switches: {sorted(clash)[:5]}")
        if not self.hosts:
            raise TopologyError(f"topology {self.name}: no hosts")
        check_size(f"topology {self.name}", len(self.hosts), len(self.cables))
        self._check_hosts()
        self.host_index = {h.name: i for i, h in enumerate(self.hosts)}
        # host indices as Python ints made once: a million placements share them instead of each holding its own
        self.host_ids = tuple(range(len(self.hosts)))
        self.host_gpus = np.array([h.gpus for h in self.hosts], dtype=np.int64)
        self.host_intra_gbps = np.array([h.intra_gbps for h in self.hosts], dtype=float)
        self.rack_names = list(dict.fromkeys(h.rack for h in self.hosts))
        rack_idx = {r: i for i, r in enumerate(self.rack_names)}
        self.host_rack = np.array([rack_idx[h.rack] for h in self.hosts], dtype=np.int64)
        self.pod_names = list(dict.fromkeys(h.pod for h in self.hosts))
        pod_idx = {p: i for i, p in enumerate(self.pod_names)}
        self.host_pod = np.array([pod_idx[h.pod] for h in self.hosts], dtype=np.int64)
        # Directed links.
        nodes = set(names) | set(self.switches)
        src, dst, cap, tier = [], [], [], []
        self.link_id: dict[tuple[str, str], int] = {}
        adjacency: dict[str, list[str]] = {n: [] for n in nodes}  # neighbours in cable order, as in the graph
        degree = dict.fromkeys(nodes, 0)
        link_id = self.link_id
        bad_capacity = self._bad_capacities()
        for i, (a, b, gbps, t) in enumerate(self.cables):
            if a not in nodes or b not in nodes:
                end = a if a not in nodes else b
                raise TopologyError(f"topology {self.name}: cable {i} ({a}-{b}): unknown node {end!r}")
            if bad_capacity and not _valid_gbps(gbps):
                raise TopologyError(f"topology {self.name}: cable {i} ({a}-{b}): capacity must be a finite number "
                                    f"> 0 Gbit/s, got {gbps!r}")
            if (a, b) in link_id:  # both directions are keys once cabled
                raise TopologyError(f"topology {self.name}: cable {i} ({a}-{b}) given twice")
            adjacency[a].append(b)
            if b != a:
                adjacency[b].append(a)
            degree[a] += 1
            degree[b] += 1
            n = len(src)  # cable i is links 2i and 2i + 1 (the router relies on it)
            link_id[(a, b)], link_id[(b, a)] = n, n + 1
            src += (a, b)
            dst += (b, a)
            cap += (gbps, gbps)
            tier += (t, t)
        self._adjacency = adjacency
        self.link_src = src
        self.link_dst = dst
        self.link_capacity_gbps = np.array(cap, dtype=float)  # float(gbps) of each, as checked above
        self.link_tier = np.array(tier, dtype=object)
        for h in self.hosts:
            if degree[h.name] == 0:
                raise TopologyError(f"topology {self.name}: host {h.name} has no link")
        # Host uplink (NIC) capacity: sum of the host's cables.
        self.host_nic_gbps = np.array(
            [sum(self.link_capacity_gbps[self.link_id[(h.name, n)]] for n in adjacency[h.name]) for h in self.hosts]
        )
        self._router: Router | None = None
        self._split_links: dict[tuple[int, int], tuple[np.ndarray, np.ndarray]] = {}  # flow_links memo
        self._routes: dict[tuple, tuple[np.ndarray, np.ndarray]] = {}  # route memo (split ECMP)
        self._paths: dict[tuple[int, int], tuple] = {}  # paths memo (a network policy's path choices ask often)
        self._path_arrays: dict[tuple[int, int], list] = {}  # the same paths as link-id arrays
        self._chosen: dict[tuple, tuple[np.ndarray, np.ndarray]] = {}  # route memo (chosen paths)

    def _check_hosts(self) -> None:
        """Every host's GPUs an integer >= 0 and intra-host bandwidth finite and > 0 (TopologyError naming the
        first host that is not). Checked per host only when the whole-list check finds something off: builders
        give ints and floats, and ABC isinstance checks per element cost seconds on 131,072 GPUs."""
        gpus = [h.gpus for h in self.hosts]
        intra = [h.intra_gbps for h in self.hosts]
        if set(map(type, gpus)) <= {int} and min(gpus) >= 0 and not _bad_numbers(intra):
            return
        for h in self.hosts:
            if not isinstance(h.gpus, numbers.Integral) or isinstance(h.gpus, bool) or h.gpus < 0:
                raise TopologyError(f"topology {self.name}: host {h.name}: gpus must be an integer >= 0, "
                                    f"got {h.gpus!r}")
            if not isinstance(h.intra_gbps, numbers.Real) or not math.isfinite(h.intra_gbps) or h.intra_gbps <= 0:
                raise TopologyError(f"topology {self.name}: host {h.name}: intra_gbps must be a finite number > 0, "
                                    f"got {h.intra_gbps!r}")

    def _bad_capacities(self) -> bool:
        """Whether some cable's capacity may be invalid (then each is checked as the cables are read)."""
        return _bad_numbers([c[2] for c in self.cables])

    @cached_property
    def graph(self) -> "nx.Graph":
        """The cabling as an undirected networkx graph (built at the first use)."""
        import networkx as nx

        graph = nx.Graph()
        graph.add_nodes_from({h.name for h in self.hosts} | set(self.switches))
        graph.add_edges_from((a, b) for a, b, _, _ in self.cables)
        return graph

    def neighbors(self, node: str) -> list[str]:
        """The nodes cabled to ``node``, in cable order (the graph's order); read-only."""
        return self._adjacency[node]

    # -- sizes ---------------------------------------------------------------
    @property
    def n_hosts(self) -> int:
        return len(self.hosts)

    @property
    def n_links(self) -> int:
        return len(self.link_src)

    @property
    def n_racks(self) -> int:
        return len(self.rack_names)

    @property
    def total_gpus(self) -> int:
        return int(self.host_gpus.sum())

    def __getitem__(self, name: str) -> Host:
        return self.hosts[self.host_index[name]]

    def __repr__(self) -> str:
        return (f"Topology({self.name!r}, hosts={self.n_hosts}, gpus={self.total_gpus}, "
                f"racks={self.n_racks}, links={self.n_links}, ecmp={self.ecmp!r})")

    # -- routing -------------------------------------------------------------
    @property
    def router(self) -> Router:
        """The equal-cost routing tables (:mod:`netlab.topology.routing`), built on first use."""
        if self._router is None:
            self._router = Router(self)
        return self._router

    def _no_path(self, src: int, dst: int):
        return TopologyError(f"topology {self.name}: no path from {self.hosts[src].name} to {self.hosts[dst].name}")

    def paths(self, src_host: int, dst_host: int) -> tuple[tuple[int, ...], ...]:
        """All equal-cost paths between two hosts (by index) as link-id tuples, in node-name order (the
        order the ``hash`` rule indexes). ECMP routing never needs the list; a path choice does, so it is
        memoised per host pair (bounded by the number of pairs)."""
        hit = self._paths.get((src_host, dst_host))
        if hit is not None:
            return hit
        n = int(self.router.count([src_host], [dst_host])[0])
        if n == 0:
            raise self._no_path(src_host, dst_host)
        links, ptr, _ = self.router.walk(np.full(n, src_host), np.full(n, dst_host), np.arange(n))
        out = self._paths[(src_host, dst_host)] = tuple(tuple(links[ptr[i]:ptr[i + 1]].tolist()) for i in range(n))
        return out

    def flow_links(self, src_host: int, dst_host: int, key: int = 0, path: int | None = None
                   ) -> tuple[np.ndarray, np.ndarray]:
        """Links one flow loads and the fraction of the flow on each (see ``ecmp``).

        ``path``: take equal-cost path ``path`` (an index into :meth:`paths`, modulo their number, so a
        flow with one path takes it) instead of the ECMP rule: a network allocation's path choice.
        Split-ECMP answers depend only on the host pair and are memoised (every
        multi-host start asks); treat the returned arrays as read-only.
        """
        if path is not None:
            chosen = self.paths(src_host, dst_host)
            p = chosen[path % len(chosen)]
            return np.array(p, dtype=np.int64), np.ones(len(p))
        memo = self._split_links.get((src_host, dst_host))
        if memo is not None:
            return memo
        if self.ecmp == "hash":
            links, _, bad = self.router.hash_paths([src_host], [dst_host], key)
            if bad >= 0:
                raise self._no_path(src_host, dst_host)
            return links, np.ones(len(links))
        links, paths, total = self.router.split(src_host, dst_host)
        if total == 0:
            raise self._no_path(src_host, dst_host)
        out = self._split_links[(src_host, dst_host)] = (links, shares(paths, total))
        return out

    def route(self, pairs, key: int = 0, paths: tuple[int, ...] | None = None,
              flow_weights: tuple[float, ...] | None = None) -> tuple[np.ndarray, np.ndarray]:
        """Links a set of flows loads (sorted ids) and the flows on each, summed over the flows.

        Flow ``n`` (``pairs[n]`` = (src host, dst host); ``pairs`` a tuple of pairs or an (n, 2) int array) is
        hashed with key ``key + n`` under ``hash`` ECMP and counts ``flow_weights[n]`` (default 1) on each of
        its links. Without weights, under ``split`` ECMP the answer depends only on ``pairs`` and is memoised (a
        trace-scale run starts the same host sets again and again); treat the returned arrays as read-only.
        ``paths`` (a network allocation's path choice): flow ``n`` takes path ``paths[n]`` (one entry: every
        flow), see :meth:`flow_links`.
        """
        if paths is not None:
            return self._route_chosen(pairs, key, flow_weights, paths)
        if self.ecmp == "hash":
            flows = np.ascontiguousarray(pairs, dtype=np.int64).reshape(-1, 2)
            weights = _NO_WEIGHTS if flow_weights is None else np.asarray(flow_weights, dtype=float)
            ids, sums, bad = self.router.hash_route(flows, key, weights)
            if bad >= 0:
                raise self._no_path(int(flows[bad, 0]), int(flows[bad, 1]))
            return ids, sums
        pairs = tuple(map(tuple, pairs.tolist())) if isinstance(pairs, np.ndarray) else pairs
        memo_key = pairs if flow_weights is None else None
        memo = self._routes.get(memo_key) if memo_key is not None else None
        if memo is not None:
            return memo
        parts = [self.flow_links(s, d) for s, d in pairs]
        links = np.concatenate([p[0] for p in parts])
        if flow_weights is None:
            weights = np.concatenate([p[1] for p in parts])
        else:
            weights = np.concatenate([p[1] * w for p, w in zip(parts, flow_weights)])
        # the same sorted ids and sums (added in flow order) as np.bincount, without a pass over every link
        out = accumulate(links, weights, self.router.scratch)
        if memo_key is not None:
            if len(self._routes) >= 100_000:  # bounded: a trace has far fewer distinct host sets
                self._routes.clear()
            self._routes[memo_key] = out
        return out

    def _route_chosen(self, pairs, key: int, flow_weights, paths) -> tuple[np.ndarray, np.ndarray]:
        """:meth:`route` with a path chosen for each flow (a network allocation's). Memoised by flows, weights and
        choices: a network policy moves a trace's jobs back and forth between a few path choices thousands of
        times (treat the returned arrays as read-only)."""
        pairs = tuple(map(tuple, pairs.tolist())) if isinstance(pairs, np.ndarray) else tuple(pairs)
        if len(paths) not in (1, len(pairs)):
            raise TopologyError(f"topology {self.name}: {len(paths)} path choices for {len(pairs)} flows "
                                "(give one per flow, or one for all)")
        memo_key = (pairs, paths, flow_weights) if flow_weights is None or isinstance(flow_weights, tuple) else None
        memo = self._chosen.get(memo_key) if memo_key is not None else None
        if memo is not None:
            return memo
        parts = []
        for n, (s, d) in enumerate(pairs):  # flow_links(s, d, path=...) with each path's array made once
            arrays = self._path_arrays.get((s, d))
            if arrays is None:
                arrays = self._path_arrays[(s, d)] = [np.array(p, dtype=np.int64) for p in self.paths(s, d)]
            parts.append(arrays[paths[n if len(paths) > 1 else 0] % len(arrays)])
        links = np.concatenate(parts)
        if flow_weights is None:
            weights = np.ones(len(links))
        else:
            weights = np.repeat(np.asarray(flow_weights, dtype=float), [len(p) for p in parts])
        out = accumulate(links, weights, self.router.scratch)
        if memo_key is not None:
            if len(self._chosen) >= 100_000:  # bounded, as the split-ECMP memo
                self._chosen.clear()
            self._chosen[memo_key] = out
        return out

    def host_uplink(self, host: int) -> int:
        """Id of the host's first uplink (host -> its switch)."""
        name = self.hosts[host].name
        return self.link_id[(name, self._adjacency[name][0])]

    def with_capacity(self, factor_by_tier: dict[str, float], name: str | None = None) -> "Topology":
        """A copy whose links in the given tiers keep ``factor`` of their capacity.

        Models steady background traffic that does not back off (e.g. storage or
        another tenant) occupying ``1 - factor`` of those links.
        """
        for tier, f in factor_by_tier.items():
            if not 0 < f <= 1:
                raise TopologyError(f"topology {self.name}: capacity factor for tier {tier!r} must be in (0, 1], got {f}")
        cables = [(a, b, g * factor_by_tier.get(t, 1.0), t) for a, b, g, t in self.cables]
        params = dict(self.params, capacity_factor=dict(factor_by_tier))
        return Topology(name or self.name, list(self.hosts), dict(self.switches), cables, self.ecmp, params)

    # -- exporters -----------------------------------------------------------
    def links_frame(self):
        """One row per directed link: id, src, dst, tier, capacity_gbps."""
        import pandas as pd

        return pd.DataFrame({
            "link": np.arange(self.n_links),
            "src": self.link_src,
            "dst": self.link_dst,
            "tier": self.link_tier,
            "capacity_gbps": self.link_capacity_gbps,
        })

    def hosts_frame(self):
        import pandas as pd

        return pd.DataFrame({
            "host": [h.name for h in self.hosts],
            "gpus": self.host_gpus,
            "rack": [h.rack for h in self.hosts],
            "pod": [h.pod for h in self.hosts],
            "nic_gbps": self.host_nic_gbps,
            "intra_gbps": self.host_intra_gbps,
        })

    def to_dict(self) -> dict:
        """The explicit YAML form (``netlab.topology.load_yaml`` reads it back)."""
        return {
            "name": self.name,
            "ecmp": self.ecmp,
            "hosts": [
                {"name": h.name, "gpus": int(h.gpus), "rack": h.rack, "pod": h.pod, "intra_gbps": float(h.intra_gbps)}
                for h in self.hosts
            ],
            "switches": [{"name": n, "tier": t} for n, t in self.switches.items()],
            "links": [{"a": a, "b": b, "gbps": float(g), "tier": t} for a, b, g, t in self.cables],
        }

    def to_networkx(self) -> "nx.DiGraph":
        import networkx as nx

        g = nx.DiGraph(name=self.name)
        for h in self.hosts:
            g.add_node(h.name, kind="host", gpus=h.gpus, rack=h.rack, pod=h.pod)
        for s, t in self.switches.items():
            g.add_node(s, kind=t)
        for i in range(self.n_links):
            g.add_edge(self.link_src[i], self.link_dst[i], link=i,
                       capacity_gbps=float(self.link_capacity_gbps[i]), tier=self.link_tier[i])
        return g
