"""A physical lab from an Ansible-style YAML inventory.

Lab operators already describe their machines for Ansible, so netlab reads
that shape instead of inventing one::

    all:
      vars: {ansible_user: root, netlab_python: python3, netlab_nic_gbps: 100}
      hosts:
        gpu1: {ansible_host: 192.168.10.11, netlab_data_iface: ens1f0, netlab_data_addr: 10.10.0.11,
               netlab_gpus: 8}
      children:
        rack1: {hosts: {gpu1: {}, gpu2: {}}}

Hosts take ``all.vars`` as defaults (as Ansible does). Child groups are racks;
the topology is a leaf per rack plus one spine, unless a topology file is
given. A :class:`PhysicalLab` brings nothing up and tears nothing down: the
agents restore what they shaped. Errors name the file, line, host and field.
"""

from __future__ import annotations

import ipaddress
import os
import re
import socket
from pathlib import Path

import pandas as pd
import yaml

from ..topology import Host, Topology, TopologyError, check_name, load_topology
from .base import Testbed, TestbedError, TestbedHost
from ..yaml_input import load_yaml_file
from .paths import (COMMAND_PATTERN, IFNAME_PATTERN, REMOTE_PATH_PATTERN, USER_PATTERN, ifname_ok, interpreter_ok,
                    workdir_ok)

FIELDS = {  # inventory variable -> (type, required, default)
    "ansible_host": (str, True, None),
    "ansible_port": (int, False, 22),
    "ansible_user": (str, False, "root"),
    "ansible_ssh_private_key_file": (str, False, "~/.ssh/id_ed25519"),
    "netlab_data_iface": (str, True, None),
    "netlab_data_addr": (str, True, None),
    "netlab_gpus": (int, False, 0),
    "netlab_python": (str, False, "python3"),  # on the host's PATH
    "netlab_workdir": (str, False, ".netlab"),  # relative: in the SSH login's home directory
    "netlab_nic_gbps": (float, False, 100.0),
    "netlab_uplink_gbps": (float, False, None),
    "netlab_known_hosts": (str, False, "~/.ssh/known_hosts"),
}


class InventoryError(TestbedError):
    """A bad inventory: the message names the file, line, host and field."""


def _mapping_nodes(node) -> dict:
    """Key -> (key node, value node) of a YAML mapping node (for line numbers)."""
    if not isinstance(node, yaml.MappingNode):
        return {}
    return {k.value: (k, v) for k, v in node.value}


def load_inventory(path) -> tuple[list[dict], dict]:
    """(host records, group-level vars) from an inventory file; every value typed and checked."""
    path = Path(path)
    doc, root = load_yaml_file(path, InventoryError, what="inventory file")  # bounded: aliases, duplicate keys
    if not isinstance(doc, dict) or not isinstance(doc.get("all"), dict):
        raise InventoryError(f"{path}:1: top level must be a mapping with an 'all' group")
    all_node = _mapping_nodes(root)["all"][1]
    groups = _mapping_nodes(all_node)
    defaults = doc["all"].get("vars") or {}
    hosts_doc = doc["all"].get("hosts") or {}
    if not isinstance(hosts_doc, dict) or not hosts_doc:
        line = groups["hosts"][0].start_mark.line + 1 if "hosts" in groups else all_node.start_mark.line + 1
        raise InventoryError(f"{path}:{line}: field 'all.hosts' must map host names to their variables")
    host_nodes = _mapping_nodes(groups["hosts"][1])
    racks = {}
    rack_nodes = _mapping_nodes(groups["children"][1]) if "children" in groups else {}
    for rack, group in (doc["all"].get("children") or {}).items():
        try:  # a rack becomes the switch leaf-<rack>
            check_name(str(rack), f"{path}:{_line(rack_nodes, str(rack))}: group {rack!r} under 'all.children'")
        except TopologyError as exc:
            raise InventoryError(str(exc)) from None
        for name in ((group or {}).get("hosts") or {}):
            racks[str(name)] = str(rack)
    records = []
    for name, vars_ in hosts_doc.items():
        key_node, val_node = host_nodes[name]
        try:  # host names become directory names and agent arguments
            check_name(str(name), f"{path}:{key_node.start_mark.line + 1}: host {name!r}, field 'name'")
        except TopologyError as exc:
            raise InventoryError(str(exc)) from None
        fields = _mapping_nodes(val_node)
        merged = {**defaults, **(vars_ or {})}
        rec = {"name": str(name), "rack": racks.get(str(name), "rack0")}
        for var, (kind, required, default) in FIELDS.items():
            line = (fields[var][0] if var in fields else key_node).start_mark.line + 1
            where = f"{path}:{line}: host {name!r}, field {var!r}"
            if var not in merged or merged[var] is None:
                if required:
                    raise InventoryError(f"{where}: missing")
                rec[var] = default
                continue
            try:
                rec[var] = kind(merged[var])
            except (TypeError, ValueError):
                raise InventoryError(f"{where}: must be {kind.__name__}, got {merged[var]!r}") from None
        _check(rec, path, fields, key_node)
        records.append(rec)
    return records, defaults


def _line(nodes: dict, key: str) -> int | str:
    return nodes[key][0].start_mark.line + 1 if key in nodes else "?"


def _check(rec: dict, path, fields: dict, key_node) -> None:
    def fail(var, why):
        line = (fields[var][0] if var in fields else key_node).start_mark.line + 1
        raise InventoryError(f"{path}:{line}: host {rec['name']!r}, field {var!r}: {why}")

    # Values that reach file names, pip/sshd arguments or the agent's command line: strict patterns.
    if not workdir_ok(rec["netlab_workdir"]):
        fail("netlab_workdir", f"must be an absolute path matching {REMOTE_PATH_PATTERN}, or a path relative to "
                               f"the login's home directory of the same components, without '.' or '..' "
                               f"components, got {rec['netlab_workdir']!r}")
    if not interpreter_ok(rec["netlab_python"]):
        fail("netlab_python", f"must be a command name matching {COMMAND_PATTERN} or an absolute path matching "
                              f"{REMOTE_PATH_PATTERN} without '.' or '..' components, got {rec['netlab_python']!r}")
    if not ifname_ok(rec["netlab_data_iface"]):
        fail("netlab_data_iface", f"must be an interface name matching {IFNAME_PATTERN}, "
                                  f"got {rec['netlab_data_iface']!r}")
    if re.fullmatch(USER_PATTERN, rec["ansible_user"]) is None:
        fail("ansible_user", f"must be a user name matching {USER_PATTERN}, got {rec['ansible_user']!r}")

    try:
        ipaddress.ip_address(rec["netlab_data_addr"])
    except ValueError:
        fail("netlab_data_addr", f"not an IP address: {rec['netlab_data_addr']!r}")
    if not 0 < rec["ansible_port"] < 65536:
        fail("ansible_port", f"must be 1..65535, got {rec['ansible_port']}")
    if rec["netlab_gpus"] < 0:
        fail("netlab_gpus", f"must be >= 0, got {rec['netlab_gpus']}")
    if rec["netlab_nic_gbps"] <= 0:
        fail("netlab_nic_gbps", f"must be > 0, got {rec['netlab_nic_gbps']}")


def inventory_topology(records: list[dict], name: str = "lab") -> Topology:
    """A leaf per rack (child group) and one spine; uplinks default to non-blocking."""
    hosts = [Host(r["name"], r["netlab_gpus"], rack=r["rack"]) for r in records]
    racks = sorted({r["rack"] for r in records})
    switches = {f"leaf-{k}": "leaf" for k in racks}
    cables = [(r["name"], f"leaf-{r['rack']}", r["netlab_nic_gbps"], "host") for r in records]
    if len(racks) > 1:
        switches["spine"] = "spine"
        for k in racks:
            members = [r for r in records if r["rack"] == k]
            up = members[0]["netlab_uplink_gbps"] or sum(r["netlab_nic_gbps"] for r in members)
            cables.append((f"leaf-{k}", "spine", up, "spine"))
    return Topology(name, hosts, switches, cables, params={"builder": "inventory"})


class PhysicalLab(Testbed):
    """Real hosts reached over SSH; the topology is the inventory's or a given one.

    Link shaping happens on the hosts (through the agents); ``set_link_rate``
    on switch links is refused, because netlab does not configure switches.
    """

    def __init__(self, inventory, topology=None, rate_scale: float = 1.0, known_hosts=None):
        self.inventory = Path(inventory)
        records, _ = load_inventory(self.inventory)
        self.topology = load_topology(topology) if topology is not None else inventory_topology(records)
        names = {h.name for h in self.topology.hosts}
        missing = [r["name"] for r in records if r["name"] not in names]
        if missing:
            raise InventoryError(f"{self.inventory}: hosts {missing} are not in topology {self.topology.name!r}")
        self.rate_scale = rate_scale
        self.records = records
        self.known_hosts = Path(os.path.expanduser(known_hosts or records[0]["netlab_known_hosts"]))
        keys = {r["ansible_ssh_private_key_file"] for r in records}
        if len(keys) > 1:
            raise InventoryError(f"{self.inventory}: all hosts must share one SSH key, got {sorted(keys)}")
        self.client_key = Path(os.path.expanduser(keys.pop()))
        index = {h.name: i for i, h in enumerate(self.topology.hosts)}
        self.hosts = [TestbedHost(
            name=r["name"], index=index[r["name"]], netns=None, data_addr=r["netlab_data_addr"],
            ifname=r["netlab_data_iface"], ssh_addr=r["ansible_host"], ssh_port=r["ansible_port"],
            user=r["ansible_user"], gpus=r["netlab_gpus"], python=r["netlab_python"],
            workdir=r["netlab_workdir"]) for r in records]

    def up(self) -> "PhysicalLab":
        return self

    def down(self) -> None:
        return None

    def open_socket(self, host: TestbedHost) -> socket.socket:
        try:
            return socket.create_connection((host.ssh_addr, host.ssh_port), timeout=10)
        except OSError as exc:
            raise TestbedError(f"{host.name}: cannot reach {host.ssh_addr}:{host.ssh_port}: {exc}") from None

    def set_link_rate(self, src: str, dst: str, rate_mbit: float) -> None:
        raise TestbedError("a physical lab's switch links are not shaped by netlab; shape host interfaces "
                           "through the agents (Controller.shape)")

    def link_rates(self) -> pd.DataFrame:
        t = self.topology
        return pd.DataFrame({"link": range(t.n_links), "src": t.link_src, "dst": t.link_dst, "tier": t.link_tier,
                             "rate_gbps": t.link_capacity_gbps, "rate_mbit": t.link_capacity_gbps * 1000.0})

    def link_stats(self) -> pd.DataFrame:
        return pd.DataFrame()

    def spawn(self, host, argv, **popen_kw):
        raise TestbedError("a physical lab runs processes through its agents, not locally")

    def info(self) -> dict:
        return {"kind": "physical", "inventory": str(self.inventory), "hosts": [h.name for h in self.hosts],
                "rate_scale": self.rate_scale, "topology": self.topology.name}
