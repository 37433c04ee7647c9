"""Topology builders, registered by name so a spec string picks one.

Capacities follow one rule everywhere: a switch's uplinks carry its downlink
capacity divided by ``oversub`` (1 = non-blocking), split evenly over the
uplink cables. All rates are Gbit/s.

Each builder's annotated signature is its parameter schema (:func:`netlab.errors.checked`):
counts are whole numbers, rates finite and positive, a misspelt key names the
valid ones, and the size is bounded (:data:`MAX_HOSTS`, :data:`MAX_CABLES`)
before anything is built, whether the call comes from a spec string, a YAML
file or Python.
"""

from __future__ import annotations

import csv
import io
from pathlib import Path
from typing import Literal, Optional

from ..errors import Float, Int, Label, checked, read_text
from ..registry import Registry
from .model import MAX_HOSTS, Host, Topology, TopologyError, check_name, check_size

BUILDERS: Registry[Topology] = Registry("topology builder")

Count = Int(ge=1, le=MAX_HOSTS)
Gpus = Int(ge=0, le=1024)
Gbps = Float(gt=0, le=1e9)
Ratio = Float(gt=0, le=1e6)
Ecmp = Literal["split", "hash"]
#: Crux host lists are a few hundred KB; the reader refuses files over this before reading them
MAX_CSV_BYTES = 64 * 2**20

HOST_DEFAULTS = dict(gpus_per_host=8, host_gbps=100.0, intra_gbps=1200.0, nics=1, ecmp="split")


@BUILDERS.register("leafspine")
@checked(TopologyError, "leafspine")
def leafspine(racks: Count = 4, hosts_per_rack: Count = 4, gpus_per_host: Gpus = 8, host_gbps: Gbps = 100.0,
              oversub: Ratio = 1.0, spines: Count = 2, intra_gbps: Gbps = 1200.0, nics: Int(ge=1, le=64) = 1,
              ecmp: Ecmp = "split", name: Optional[Label] = None) -> Topology:
    """Two-tier leaf-spine: racks of hosts behind ToRs, every ToR cabled to every spine."""
    check_size("leafspine", racks * hosts_per_rack, racks * hosts_per_rack + racks * spines)
    nic = host_gbps * nics
    up = hosts_per_rack * nic / oversub / spines
    hosts, switches, cables = [], {}, []
    for s in range(spines):
        switches[f"spine{s}"] = "spine"
    for r in range(racks):
        tor = f"tor{r}"
        switches[tor] = "tor"
        for i in range(hosts_per_rack):
            h = f"r{r}h{i}"
            hosts.append(Host(h, gpus_per_host, rack=tor, pod="pod0", intra_gbps=intra_gbps))
            cables.append((h, tor, nic, "host"))
        for s in range(spines):
            cables.append((tor, f"spine{s}", up, "tor-spine"))
    params = dict(racks=racks, hosts_per_rack=hosts_per_rack, gpus_per_host=gpus_per_host, host_gbps=host_gbps,
                  oversub=oversub, spines=spines, intra_gbps=intra_gbps, nics=nics, ecmp=ecmp)
    return Topology(name or "leafspine", hosts, switches, cables, ecmp=ecmp, params={"builder": "leafspine", **params})


@BUILDERS.register("fattree")
@checked(TopologyError, "fattree")
def fattree(k: Int(ge=2, le=1024, what="an even number >= 2") = 4, hosts_per_edge: Optional[Count] = None,
            gpus_per_host: Gpus = 8, host_gbps: Gbps = 100.0, oversub: Ratio = 1.0, intra_gbps: Gbps = 1200.0,
            nics: Int(ge=1, le=64) = 1, ecmp: Ecmp = "split", name: Optional[Label] = None) -> Topology:
    """k-ary fat-tree (k pods of k/2 edge and k/2 aggregation switches, (k/2)^2 cores)."""
    if k % 2:
        raise TopologyError(f"fattree: field 'k' is not even, got {k} (allowed: an even number >= 2)")
    half = k // 2
    hosts_per_edge = hosts_per_edge or half
    hosts = k * half * hosts_per_edge
    check_size("fattree", hosts, hosts + k * half * half * 2)
    nic = host_gbps * nics
    edge_up = hosts_per_edge * nic / oversub / half
    hosts, switches, cables = [], {}, []
    for c in range(half * half):
        switches[f"core{c}"] = "core"
    for p in range(k):
        pod = f"pod{p}"
        for a in range(half):
            agg = f"p{p}agg{a}"
            switches[agg] = "agg"
            for j in range(half):
                cables.append((agg, f"core{a * half + j}", edge_up, "agg-core"))
        for e in range(half):
            edge = f"p{p}edge{e}"
            switches[edge] = "tor"
            for i in range(hosts_per_edge):
                h = f"p{p}e{e}h{i}"
                hosts.append(Host(h, gpus_per_host, rack=edge, pod=pod, intra_gbps=intra_gbps))
                cables.append((h, edge, nic, "host"))
            for a in range(half):
                cables.append((edge, f"p{p}agg{a}", edge_up, "edge-agg"))
    params = dict(k=k, hosts_per_edge=hosts_per_edge, gpus_per_host=gpus_per_host, host_gbps=host_gbps,
                  oversub=oversub, intra_gbps=intra_gbps, nics=nics, ecmp=ecmp)
    return Topology(name or "fattree", hosts, switches, cables, ecmp=ecmp, params={"builder": "fattree", **params})


@BUILDERS.register("crux")
@checked(TopologyError, "crux")
def crux(path: Path, gpus_per_host: Gpus = 8, host_gbps: Gbps = 200.0, oversub: Ratio = 1.0,
         core_oversub: Ratio = 1.0, intra_gbps: Gbps = 1200.0, nics: Int(ge=1, le=64) = 1, ecmp: Ecmp = "split",
         max_hosts: Optional[Count] = None, aggs: Int(ge=1, le=64) = 1, name: Optional[Label] = None) -> Topology:
    """The Alibaba Lingjun 3-tier Clos host list used by Crux (``topo.csv``: ip,DSW,PSW,ASW).

    A ToR is the pair (PSW, ASW): ASW names repeat across PSWs. Each ToR has one
    aggregated uplink to its PSW, each PSW one aggregated uplink to the core
    (DSW). The file gives no bandwidths or GPU counts; they are parameters.
    ``aggs`` > 1 splits each PSW group into that many aggregation switches
    (``psw-P-a0`` ...), every ToR cabled to each with an equal share of its
    uplink and each cabled to the core with an equal share of the group's:
    the same capacities, now ``aggs`` equal-cost paths inside a group and
    ``aggs`` squared across groups, which path choice (Crux) needs.
    """
    path = Path(path)
    text = read_text(path, TopologyError, MAX_CSV_BYTES, what="Crux topo.csv")
    rows = []
    reader = csv.DictReader(io.StringIO(text, newline=""))
    need = ["ip", "DSW", "PSW", "ASW"]
    try:
        missing = [c for c in need if c not in (reader.fieldnames or [])]
        if missing:
            raise TopologyError(f"{path}: line 1: missing column(s) {missing}; expected header ip,DSW,PSW,ASW")
        for row in reader:
            line = reader.line_num
            for col in need:
                if not isinstance(row.get(col), str) or not row[col].strip():
                    raise TopologyError(f"{path}: line {line}: field {col!r} is empty")
            for col in ("DSW", "PSW", "ASW"):  # they become switch names
                check_name(row[col], f"{path}: line {line}: field {col!r}")
            rows.append(row)
            if len(rows) > MAX_HOSTS:
                check_size(str(path), len(rows), len(rows))
            if max_hosts and len(rows) >= max_hosts:
                break
    except csv.Error as exc:
        raise TopologyError(f"{path}: line {reader.reader.line_num}: not valid CSV: {exc}") from None
    if not rows:
        raise TopologyError(f"{path}: no host rows")
    nic = host_gbps * nics
    hosts, switches, cables = [], {}, []
    tor_hosts: dict[str, int] = {}
    tor_psw: dict[str, str] = {}
    psw_dsw: dict[str, str] = {}
    for i, row in enumerate(rows):
        psw, dsw = f"psw-{row['PSW']}", f"dsw-{row['DSW']}"
        tor = f"tor-{row['PSW']}-{row['ASW']}"
        h = f"h{i:04d}"
        hosts.append(Host(h, gpus_per_host, rack=tor, pod=psw, intra_gbps=intra_gbps))
        switches.setdefault(tor, "tor")
        switches.setdefault(psw, "agg")
        switches.setdefault(dsw, "core")
        cables.append((h, tor, nic, "host"))
        tor_hosts[tor] = tor_hosts.get(tor, 0) + 1
        tor_psw[tor] = psw
        psw_dsw[psw] = dsw
    def planes(psw: str) -> list[str]:
        return [psw] if aggs == 1 else [f"{psw}-a{k}" for k in range(aggs)]

    if aggs > 1:
        for psw in psw_dsw:
            del switches[psw]
            switches.update((agg, "agg") for agg in planes(psw))
    psw_up: dict[str, float] = {}
    for tor, n in tor_hosts.items():
        up = n * nic / oversub
        cables.extend((tor, agg, up / aggs, "tor-agg") for agg in planes(tor_psw[tor]))
        psw_up[tor_psw[tor]] = psw_up.get(tor_psw[tor], 0.0) + up
    for psw, cap in psw_up.items():
        cables.extend((agg, psw_dsw[psw], cap / core_oversub / aggs, "agg-core") for agg in planes(psw))
    params = dict(path=str(path), gpus_per_host=gpus_per_host, host_gbps=host_gbps, oversub=oversub,
                  core_oversub=core_oversub, intra_gbps=intra_gbps, nics=nics, ecmp=ecmp, max_hosts=max_hosts)
    if aggs > 1:  # said only when chosen, so a default topology's params stay as they were
        params["aggs"] = aggs
    return Topology(name or "crux", hosts, switches, cables, ecmp=ecmp, params={"builder": "crux", **params})


@BUILDERS.register("dumbbell")
@checked(TopologyError, "dumbbell")
def dumbbell(hosts_per_side: Int(ge=1, le=MAX_HOSTS // 2) = 2, gpus_per_host: Gpus = 1, host_gbps: Gbps = 100.0,
             bottleneck_gbps: Optional[Gbps] = None, intra_gbps: Gbps = 1200.0, ecmp: Ecmp = "split",
             name: Optional[Label] = None) -> Topology:
    """Two switches joined by one bottleneck cable, hosts on each side (a rack per side)."""
    bottleneck = bottleneck_gbps or host_gbps
    hosts, switches, cables = [], {"swL": "tor", "swR": "tor"}, []
    for side, sw in (("L", "swL"), ("R", "swR")):
        for i in range(hosts_per_side):
            h = f"{side.lower()}{i}"
            hosts.append(Host(h, gpus_per_host, rack=sw, intra_gbps=intra_gbps))
            cables.append((h, sw, host_gbps, "host"))
    cables.append(("swL", "swR", bottleneck, "tor-tor"))
    params = dict(hosts_per_side=hosts_per_side, gpus_per_host=gpus_per_host, host_gbps=host_gbps,
                  bottleneck_gbps=bottleneck, intra_gbps=intra_gbps, ecmp=ecmp)
    return Topology(name or "dumbbell", hosts, switches, cables, ecmp=ecmp, params={"builder": "dumbbell", **params})
