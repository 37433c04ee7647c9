"""Kubernetes exports for the scheduler-plugins network-aware scheduler (NetworkOverhead, TopologicalSort).

Why: a Kubernetes cluster gets network-aware placement from
kubernetes-sigs/scheduler-plugins' NetworkOverhead plugin, which reads three
things: node labels (zone and region), a ``NetworkTopology`` object (the cost
between zones and between regions) and an ``AppGroup`` object (which pods
talk to which). This module writes all three from a netlab topology and trace,
so the same cluster netlab simulates can be scheduled that way; netlab's
``k8s-netoverhead`` placement policy is the simulator's model of that plugin.

Sources (read from kubernetes-sigs/scheduler-plugins, master of 2026-08):
``manifests/networktopology/crd.yaml`` and ``manifests/appgroup/crd.yaml``
(the CRDs' ``openAPIV3Schema``; ``tests/test_k8s.py`` restates the parts
netlab writes, required fields, types and bounds, as JSON schemas and
validates every export against them), ``pkg/networkaware/util/util.go`` (labels
read), ``pkg/networkaware/networkoverhead/networkoverhead.go`` (``SameZone = 1``,
``MaxCost = 100``) and the manifests' examples. Field by field:

Node labels (:func:`node_labels`), one partial ``v1/Node`` per host, to merge
with ``kubectl apply --server-side --field-manager=netlab -f node-labels.yaml``:

* ``topology.kubernetes.io/zone`` (well-known label; the plugin's
  ``GetNodeZone``) = the host's **rack** (netlab ``Host.rack``, its ToR);
* ``topology.kubernetes.io/region`` (``GetNodeRegion``) = the host's **pod**
  (``Host.pod``: aggregation block; one region on a two-tier leaf-spine);
* ``RACK_LABEL`` (``netlab/rack``) = the rack again, for selectors that must
  not depend on how a provider fills the zone label.

``NetworkTopology`` (``networktopology.diktyo.x-k8s.io/v1alpha1``; :func:`network_topology`):

* ``spec.configmapName`` (required string): the netperf ConfigMap the
  plugin reads only with ``weightsName: NetperfCosts``; netlab writes
  user-defined costs, so this names a map that need not exist;
* ``spec.weights[]``: one entry, ``name: UserDefined`` (what the plugin's
  ``weightsName`` argument selects in the manifests), whose
  ``topologyList[]`` has one entry per ``topologyKey`` (the region label,
  then the zone label), each with ``originList[]`` (``origin``: a region or
  zone name) and ``costList[]`` per origin: ``destination``, ``networkCost``
  (int64 >= 0) and ``bandwidthCapacity`` (a Kubernetes quantity);
* ``networkCost`` between two zones = ``hop_cost`` x the switch-to-switch
  hops between the zones' ToRs on the netlab graph (a leaf-spine's two racks:
  ToR-spine-ToR, 2 hops, cost 20 at the default ``hop_cost=10``; the plugin
  counts 1 inside a zone and 100 for pairs it has no cost for). Between two
  regions, the fewest hops between any of their ToRs, the same way;
* ``bandwidthCapacity`` = the origin's uplink capacity in bits per second
  (all cables from the zone's ToR, or the region's switches, up the tree),
  written as a decimal quantity (``400G`` = 400 Gbit/s).

``AppGroup`` (``appgroup.diktyo.x-k8s.io/v1alpha1``; :func:`app_group`), one
per training job:

* ``spec.numMembers`` (int32 >= 1) = pods of the job (one per
  ``gpus_per_pod`` GPUs);
* ``spec.topologySortingAlgorithm`` = ``KahnSort`` (the manifests' value);
* ``spec.workloads[]``: one per pod, ``workload`` = {``kind: Pod``,
  ``apiVersion: v1``, ``namespace``, ``name`` ``<job>-w<i>``, ``selector``
  ``<job>-w<i>``: the value of the pod label
  ``appgroup.diktyo.x-k8s.io.workload``}; pods also carry
  ``appgroup.diktyo.x-k8s.io: <job>`` (the AppGroup's name);
* ``dependencies[]`` follow the job's all-reduce ring: worker i depends on
  worker i+1, the ring *less its closing edge*, because TopologicalSort
  orders the workload graph and a cycle has no topological order;
  ``maxNetworkCost`` (0..10000) = the cost of crossing zones inside a region
  (so the filter keeps a job inside one region when it can), and
  ``minBandwidth`` = the ring's bytes per iteration per worker
  (2 (n-1)/n x gradient bytes) x 8 / the model's compute time per iteration:
  the rate at which communication hides behind compute, as a quantity in bits/s.
"""

from __future__ import annotations

import re
from pathlib import Path

import networkx as nx
import pandas as pd
import yaml

from ..errors import InputError, short
from ..topology import Topology
from ..workload.zoo import ModelZoo

ZONE = "topology.kubernetes.io/zone"
REGION = "topology.kubernetes.io/region"
RACK_LABEL = "netlab/rack"
APPGROUP_LABEL = "appgroup.diktyo.x-k8s.io"
WORKLOAD_LABEL = "appgroup.diktyo.x-k8s.io.workload"
NT_API = "networktopology.diktyo.x-k8s.io/v1alpha1"
AG_API = "appgroup.diktyo.x-k8s.io/v1alpha1"
WEIGHTS = "UserDefined"
MAX_NETWORK_COST = 10_000  # the AppGroup CRD's maximum for maxNetworkCost
#: Kubernetes object names and label values: DNS-1123 subdomain (names) / label value rules
_DNS = re.compile(r"[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?")


def quantity_bps(gbps: float) -> str:
    """A rate in Gbit/s as a Kubernetes quantity of bits/s, whole Mbit/s above 1 Mbit/s: 100 -> '100G',
    0.5 -> '500M', 2.5 -> '2500M', 1.3948 -> '1395M'."""
    bps = int(round(gbps * 1e9))
    if bps >= 10**6:
        bps = int(round(bps / 1e6)) * 10**6
    for unit, size in (("T", 10**12), ("G", 10**9), ("M", 10**6), ("k", 10**3)):
        if bps >= size and bps % size == 0:
            return f"{bps // size}{unit}"
    return str(bps)


def k8s_name(text: str, what: str) -> str:
    """``text`` lower-cased as a Kubernetes object name (DNS-1123: a-z, 0-9, '-', '.'); '_' becomes '-'."""
    name = str(text).lower().replace("_", "-")
    if not _DNS.fullmatch(name):
        raise InputError(f"{what} {short(text)} cannot be a Kubernetes name (DNS-1123: lower-case letters, digits, "
                         "'-' and '.', starting and ending with a letter or digit)")
    return name


def _zone_switch(topo: Topology) -> dict[str, str]:
    """zone (rack) -> the switch standing for it: the rack's own name when it is a switch, else the switch its
    first host is cabled to."""
    out = {}
    for h in topo.hosts:
        if h.rack not in out:
            out[h.rack] = h.rack if h.rack in topo.switches else next(
                n for n in topo.graph.neighbors(h.name) if n in topo.switches)
    return out


def _uplink_gbps(topo: Topology, switches: set[str]) -> float:
    """Capacity of the cables leaving a set of switches towards other switches (one direction)."""
    total = 0.0
    for a, b, gbps, _ in topo.cables:
        if (a in switches) != (b in switches) and a in topo.switches and b in topo.switches:
            total += gbps
    return total


def zone_costs(topo: Topology, hop_cost: int = 10) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(zone pairs, region pairs): origin, destination, hops, network_cost, bandwidth_gbps (see the module)."""
    sw = _zone_switch(topo)
    switch_graph = topo.graph.subgraph(topo.switches)
    hops = dict(nx.all_pairs_shortest_path_length(switch_graph))
    zone_region = {h.rack: h.pod for h in topo.hosts}
    zones = list(sw)
    rows = []
    for a in zones:
        for b in zones:
            if a != b and sw[b] in hops.get(sw[a], {}):
                n = hops[sw[a]][sw[b]]
                rows.append(dict(origin=a, destination=b, hops=n, network_cost=n * hop_cost,
                                 bandwidth_gbps=_uplink_gbps(topo, {sw[a]})))
    zone_df = pd.DataFrame(rows, columns=["origin", "destination", "hops", "network_cost", "bandwidth_gbps"])
    regions = list(dict.fromkeys(zone_region.values()))
    rows = []
    for a in regions:
        for b in regions:
            if a == b:
                continue
            pairs = zone_df[zone_df.origin.map(zone_region).eq(a) & zone_df.destination.map(zone_region).eq(b)]
            if len(pairs):
                mine = {sw[z] for z, r in zone_region.items() if r == a}
                n = int(pairs.hops.min())
                rows.append(dict(origin=a, destination=b, hops=n, network_cost=n * hop_cost,
                                 bandwidth_gbps=_region_uplink(topo, mine)))
    return zone_df, pd.DataFrame(rows, columns=zone_df.columns)


def _region_uplink(topo: Topology, tors: set[str]) -> float:
    """A region's way out: its ToRs and every switch cabled only to switches of the region below (its
    aggregation), taken together; the capacity from that set to the rest."""
    members = set(tors)
    for s in topo.switches:
        below = [n for n in topo.graph.neighbors(s) if n in topo.switches]
        if s not in members and below and any(n in tors for n in below) and \
                all(n in tors or not any(m in tors for m in topo.graph.neighbors(n)) for n in below):
            members.add(s)
    return _uplink_gbps(topo, members)


def node_labels(topo: Topology) -> list[dict]:
    """One partial Node per host carrying the zone, region and rack labels (see the module docstring)."""
    docs = []
    for h in topo.hosts:
        labels = {ZONE: _label(h.rack), REGION: _label(h.pod), RACK_LABEL: _label(h.rack)}
        docs.append({"apiVersion": "v1", "kind": "Node", "metadata": {"name": k8s_name(h.name, "host"),
                                                                      "labels": labels}})
    return docs


def _label(value: str) -> str:
    text = str(value)
    if not re.fullmatch(r"([A-Za-z0-9][-A-Za-z0-9_.]{0,61})?[A-Za-z0-9]", text):
        raise InputError(f"{short(text)} cannot be a Kubernetes label value "
                         "(at most 63 letters, digits, '-', '_', '.')")
    return text


def network_topology(topo: Topology, name: str = "netlab", namespace: str = "default", hop_cost: int = 10,
                     configmap: str = "netlab-netperf-metrics") -> dict:
    """The ``NetworkTopology`` object for ``topo`` (see the module docstring for every field)."""
    zone_df, region_df = zone_costs(topo, hop_cost)

    def origins(df: pd.DataFrame, keys: list[str]) -> list[dict]:
        out = []
        for o in keys:
            costs = [{"destination": r.destination, "networkCost": int(r.network_cost),
                      "bandwidthCapacity": quantity_bps(r.bandwidth_gbps)}
                     for r in df[df.origin == o].itertuples()]
            out.append({"origin": _label(o), "costList": costs})
        return out

    zones = list(dict.fromkeys(h.rack for h in topo.hosts))
    regions = list(dict.fromkeys(h.pod for h in topo.hosts))
    return {
        "apiVersion": NT_API, "kind": "NetworkTopology",
        "metadata": {"name": k8s_name(name, "NetworkTopology name"), "namespace": k8s_name(namespace, "namespace")},
        "spec": {"configmapName": k8s_name(configmap, "configmap name"), "weights": [{
            "name": WEIGHTS,
            "topologyList": [{"topologyKey": REGION, "originList": origins(region_df, regions)},
                             {"topologyKey": ZONE, "originList": origins(zone_df, zones)}],
        }]},
    }


def app_group(job_name: str, gpus: int, model: str, pattern: str = "ring", namespace: str = "default",
              gpus_per_pod: int = 1, max_network_cost: int = 20, zoo: ModelZoo | None = None) -> dict:
    """The ``AppGroup`` for one training job (see the module docstring for every field)."""
    zoo = zoo or ModelZoo.default()
    m = zoo[model]
    name = k8s_name(job_name, "job name")
    pods = max(1, -(-int(gpus) // int(gpus_per_pod)))
    if not 0 <= max_network_cost <= MAX_NETWORK_COST:
        raise InputError(f"max_network_cost must be in 0..{MAX_NETWORK_COST}, got {short(max_network_cost)}")
    ring_bytes = 2 * (pods - 1) / pods * m.grad_bytes
    min_gbps = ring_bytes * 8 / m.compute_s / 1e9

    def ref(i: int) -> dict:
        w = f"{name}-w{i}"
        return {"kind": "Pod", "apiVersion": "v1", "namespace": namespace, "name": w, "selector": w}

    workloads = []
    for i in range(pods):
        entry = {"workload": ref(i)}
        if i + 1 < pods:
            entry["dependencies"] = [{"workload": ref(i + 1), "maxNetworkCost": int(max_network_cost),
                                      "minBandwidth": quantity_bps(max(min_gbps, 1e-6))}]
        workloads.append(entry)
    return {"apiVersion": AG_API, "kind": "AppGroup",
            "metadata": {"name": name, "namespace": namespace,
                         "annotations": {"netlab/model": model, "netlab/gpus": str(int(gpus)),
                                         "netlab/pattern": pattern}},
            "spec": {"numMembers": pods, "topologySortingAlgorithm": "KahnSort", "workloads": workloads}}


def app_groups(trace: pd.DataFrame, namespace: str = "default", gpus_per_pod: int = 1,
               max_network_cost: int = 20) -> list[dict]:
    """One AppGroup per job of a trace (name ``job-<job_id>``)."""
    return [app_group(f"job-{r.job_id}", int(r.gpus), r.model, getattr(r, "pattern", "ring"), namespace,
                      gpus_per_pod, max_network_cost) for r in trace.itertuples()]


def write_k8s(topo: Topology, out_dir, trace: pd.DataFrame | None = None, hop_cost: int = 10,
              namespace: str = "default", gpus_per_pod: int = 1) -> list[Path]:
    """Write ``node-labels.yaml``, ``network-topology.yaml`` and (with a trace) ``app-groups.yaml`` in
    ``out_dir``; every object is built (and checked) before the first file is written."""
    zone_df, _ = zone_costs(topo, hop_cost)
    cross_zone = int(zone_df.network_cost.min()) if len(zone_df) else hop_cost
    docs = {"node-labels.yaml": node_labels(topo),
            "network-topology.yaml": [network_topology(topo, topo.name, namespace, hop_cost)]}
    if trace is not None:
        docs["app-groups.yaml"] = app_groups(trace, namespace, gpus_per_pod, max_network_cost=cross_zone)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths = []
    for fname, objs in docs.items():
        path = out / fname
        path.write_text(yaml.safe_dump_all(objs, sort_keys=False))
        paths.append(path)
    return paths
