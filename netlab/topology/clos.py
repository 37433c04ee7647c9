"""Fabrics of today's training clusters: a 3-tier Clos and a rail-optimised Clos, sized by GPU count.

Both follow the capacity rule of :mod:`netlab.topology.builders` (a switch's
uplinks carry its downlink capacity divided by that tier's oversubscription,
split evenly over its uplink cables; Gbit/s) and the same wiring above the
leaves, so the two differ only in how hosts attach:

* ``clos3``: each host has one (aggregated) cable to its leaf (ToR):
  ``nics x host_gbps``. Leaves are racks.
* ``rail``: each of a host's ``gpus_per_host`` NICs has its own cable to its
  own rail leaf: GPU ``k`` of every host in a scalable unit (SU) shares rail
  leaf ``k`` of that SU (NVIDIA DGX SuperPOD, Meta's and Alibaba HPN's
  rail-optimised designs). Traffic between same-index GPUs of one SU crosses
  one switch; SUs are the racks.

Above the leaves, pods of ``leaves_per_pod`` leaves (clos3) or ``sus_per_pod``
SUs (rail) share ``spines_per_pod`` spines, every leaf cabled to every spine of
its pod (for rail: the rails are joined at the spines). With more than one pod,
spine ``s`` of every pod is cabled to the ``cores_per_plane`` cores of core
plane ``s`` (fat-tree planes), so equal-cost paths between pods are
``spines x cores_per_plane`` and routing stays cheap at 131,072 GPUs.
Oversubscription is per tier: ``oversub`` at the leaves, ``spine_oversub`` at
the spines. A partial last leaf, SU or pod is allowed (``gpus`` need only be a
multiple of ``gpus_per_host``).

>>> load_topology("clos3,gpus=16384").n_hosts
2048
"""

from __future__ import annotations

import math
from typing import Optional

from ..errors import Int, Label, checked
from .builders import BUILDERS, Ecmp, Gbps, Gpus, Ratio
from .model import MAX_HOSTS, Host, Topology, TopologyError, check_size

TotalGpus = Int(ge=1, le=MAX_HOSTS * 64)
Fanout = Int(ge=1, le=4096)


def _hosts(what: str, gpus: int, gpus_per_host: int) -> int:
    if gpus_per_host < 1 or gpus % gpus_per_host:
        raise TopologyError(f"{what}: field 'gpus' ({gpus}) must be a multiple of gpus_per_host ({gpus_per_host})")
    return gpus // gpus_per_host


def _upper_tiers(switches: dict, cables: list, pods: list[list[tuple[str, float]]], spines: int,
                 cores_per_plane: int, spine_oversub: float) -> None:
    """Spines per pod (every leaf of the pod to each) and, with several pods, core planes; in place.

    ``pods`` lists each pod's leaves as (name, uplink capacity in total).
    """
    multi = len(pods) > 1
    for p, leaves in enumerate(pods):
        spine_down = 0.0
        for s in range(spines):
            switches[f"p{p}s{s}"] = "spine"
        for leaf, up_total in leaves:
            for s in range(spines):
                cables.append((leaf, f"p{p}s{s}", up_total / spines, "leaf-spine"))
            spine_down += up_total / spines
        if multi:
            for s in range(spines):
                for c in range(cores_per_plane):
                    cables.append((f"p{p}s{s}", f"core{s}-{c}", spine_down / spine_oversub / cores_per_plane,
                                   "spine-core"))
    if multi:
        for s in range(spines):
            for c in range(cores_per_plane):
                switches[f"core{s}-{c}"] = "core"


@BUILDERS.register("clos3")
@checked(TopologyError, "clos3")
def clos3(gpus: TotalGpus = 16384, gpus_per_host: Gpus = 8, hosts_per_leaf: Fanout = 16, leaves_per_pod: Fanout = 16,
          spines_per_pod: Fanout = 8, cores_per_plane: Fanout = 4, host_gbps: Gbps = 400.0,
          nics: Int(ge=1, le=64) = 8, oversub: Ratio = 1.0, spine_oversub: Ratio = 1.0, intra_gbps: Gbps = 1200.0,
          ecmp: Ecmp = "split", name: Optional[Label] = None) -> Topology:
    """Three-tier Clos: hosts on leaves, pods of leaves on spines, spine planes on cores (module docstring)."""
    n_hosts = _hosts("clos3", gpus, gpus_per_host)
    n_leaves = math.ceil(n_hosts / hosts_per_leaf)
    n_pods = math.ceil(n_leaves / leaves_per_pod)
    check_size("clos3", n_hosts, n_hosts + n_leaves * spines_per_pod + n_pods * spines_per_pod * cores_per_plane)
    nic = host_gbps * nics
    hosts, switches, cables, pods = [], {}, [], []
    for leaf_i in range(n_leaves):
        p, leaf = leaf_i // leaves_per_pod, f"p{leaf_i // leaves_per_pod}l{leaf_i % leaves_per_pod}"
        if p == len(pods):
            pods.append([])
        switches[leaf] = "tor"
        here = min(hosts_per_leaf, n_hosts - leaf_i * hosts_per_leaf)
        for i in range(here):
            h = f"{leaf}h{i}"
            hosts.append(Host(h, gpus_per_host, rack=leaf, pod=f"pod{p}", intra_gbps=intra_gbps))
            cables.append((h, leaf, nic, "host"))
        pods[p].append((leaf, here * nic / oversub))
    _upper_tiers(switches, cables, pods, spines_per_pod, cores_per_plane, spine_oversub)
    params = dict(gpus=gpus, gpus_per_host=gpus_per_host, hosts_per_leaf=hosts_per_leaf, leaves_per_pod=leaves_per_pod,
                  spines_per_pod=spines_per_pod, cores_per_plane=cores_per_plane, host_gbps=host_gbps, nics=nics,
                  oversub=oversub, spine_oversub=spine_oversub, intra_gbps=intra_gbps, ecmp=ecmp)
    return Topology(name or "clos3", hosts, switches, cables, ecmp=ecmp, params={"builder": "clos3", **params})


@BUILDERS.register("rail")
@checked(TopologyError, "rail")
def rail(gpus: TotalGpus = 16384, gpus_per_host: Int(ge=1, le=64) = 8, hosts_per_su: Fanout = 32,
         sus_per_pod: Fanout = 8, spines_per_pod: Fanout = 16, cores_per_plane: Fanout = 4, host_gbps: Gbps = 400.0,
         oversub: Ratio = 1.0, spine_oversub: Ratio = 1.0, intra_gbps: Gbps = 1200.0, ecmp: Ecmp = "split",
         name: Optional[Label] = None) -> Topology:
    """Rail-optimised Clos: GPU k's NIC of every host in an SU on rail leaf k; rails joined at the spines."""
    n_hosts = _hosts("rail", gpus, gpus_per_host)
    n_sus = math.ceil(n_hosts / hosts_per_su)
    n_pods = math.ceil(n_sus / sus_per_pod)
    rails = gpus_per_host
    check_size("rail", n_hosts, n_hosts * rails + n_sus * rails * spines_per_pod
               + n_pods * spines_per_pod * cores_per_plane)
    hosts, switches, cables, pods = [], {}, [], []
    for u in range(n_sus):
        p, su = u // sus_per_pod, f"p{u // sus_per_pod}su{u % sus_per_pod}"
        if p == len(pods):
            pods.append([])
        here = min(hosts_per_su, n_hosts - u * hosts_per_su)
        leaves = [f"{su}r{k}" for k in range(rails)]
        for leaf in leaves:
            switches[leaf] = "rail"
        for i in range(here):
            h = f"{su}h{i}"
            hosts.append(Host(h, gpus_per_host, rack=su, pod=f"pod{p}", intra_gbps=intra_gbps))
            for leaf in leaves:
                cables.append((h, leaf, host_gbps, "host"))
        pods[p].extend((leaf, here * host_gbps / oversub) for leaf in leaves)
    _upper_tiers(switches, cables, pods, spines_per_pod, cores_per_plane, spine_oversub)
    params = dict(gpus=gpus, gpus_per_host=gpus_per_host, hosts_per_su=hosts_per_su, sus_per_pod=sus_per_pod,
                  spines_per_pod=spines_per_pod, cores_per_plane=cores_per_plane, host_gbps=host_gbps,
                  oversub=oversub, spine_oversub=spine_oversub, intra_gbps=intra_gbps, ecmp=ecmp)
    return Topology(name or "rail", hosts, switches, cables, ecmp=ecmp, params={"builder": "rail", **params})
