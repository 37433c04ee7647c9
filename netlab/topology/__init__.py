"""Topologies: one model (:class:`Topology`) built from a spec string, a YAML
file or the Crux host list.

>>> topo = load_topology("leafspine,racks=2,hosts_per_rack=2,gpus_per_host=4,oversub=2")
>>> topo.n_hosts, topo.total_gpus
(4, 16)
"""

from __future__ import annotations

from pathlib import Path

import yaml

from ..spec import Spec, SpecError
from .builders import BUILDERS
from .model import NAME_PATTERN, Host, Topology, TopologyError, check_name

__all__ = ["Topology", "Host", "TopologyError", "BUILDERS", "NAME_PATTERN", "check_name", "load_topology",
           "load_yaml", "save_yaml"]


def load_topology(what) -> Topology:
    """A Topology from a Topology, a YAML path, a Crux ``topo.csv`` path or a spec string."""
    if isinstance(what, Topology):
        return what
    text = str(what)
    path = Path(text)
    if path.suffix in (".yaml", ".yml"):
        return load_yaml(path)
    if path.suffix == ".csv":
        return BUILDERS.create("crux", path=str(path))
    try:
        spec = Spec.parse(text)
    except SpecError as exc:
        raise TopologyError(str(exc)) from None
    try:
        builder = BUILDERS.get(spec.kind)
    except KeyError as exc:
        raise TopologyError(f"topology spec {text!r}: {exc.args[0]}") from None
    try:
        return builder(**spec.params)
    except TypeError as exc:
        raise TopologyError(f"topology spec {text!r}: {exc}") from None


def _field(doc: dict, key: str, where: str, kind=None, default=...):
    if key not in doc:
        if default is ...:
            raise TopologyError(f"{where}: missing field {key!r}")
        return default
    value = doc[key]
    if kind is not None:
        try:
            value = kind(value)
        except (TypeError, ValueError):
            raise TopologyError(f"{where}: field {key!r} must be {kind.__name__}, got {value!r}") from None
    return value


def _entries(doc: dict, key: str, path, default=...):
    """(where, mapping) for each entry of the list ``doc[key]``; ``where`` names file, list and index."""
    for i, entry in enumerate(_field(doc, key, str(path), list, default)):
        where = f"{path}: {key}[{i}]"
        if not isinstance(entry, dict):
            raise TopologyError(f"{where}: must be a mapping")
        yield where, entry


def load_yaml(path) -> Topology:
    """Read a topology YAML file.

    Two forms are accepted:

    * builder form: ``builder: leafspine`` plus ``params: {racks: 2, ...}``;
    * explicit form: ``hosts`` (name, gpus, rack, [pod, intra_gbps]),
      ``switches`` (name, tier) and ``links`` (a, b, gbps, [tier]).

    Errors name the file, the list entry and the field.
    """
    path = Path(path)
    try:
        doc = yaml.safe_load(path.read_text())
    except FileNotFoundError:
        raise TopologyError(f"{path}: no such file") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = f"line {mark.line + 1}: " if mark else ""
        raise TopologyError(f"{path}: {line}invalid YAML: {getattr(exc, 'problem', exc)}") from None
    if not isinstance(doc, dict):
        raise TopologyError(f"{path}: top level must be a mapping")
    name = str(doc.get("name", path.stem))  # a label only: never a file name or a command argument
    if "builder" in doc:
        params = doc.get("params") or {}
        if not isinstance(params, dict):
            raise TopologyError(f"{path}: field 'params' must be a mapping")
        try:
            builder = BUILDERS.get(str(doc["builder"]))
        except KeyError as exc:
            raise TopologyError(f"{path}: field 'builder': {exc.args[0]}") from None
        try:
            return builder(name=name, **params)
        except TypeError as exc:
            raise TopologyError(f"{path}: field 'params': {exc}") from None
        except TopologyError as exc:
            raise TopologyError(f"{path}: {exc}") from None
    hosts = []
    for where, h in _entries(doc, "hosts", path):
        gpus = _field(h, "gpus", where, int)
        if gpus < 0:
            raise TopologyError(f"{where}: field 'gpus' must be >= 0, got {gpus}")
        name = check_name(str(_field(h, "name", where)), f"{where}: field 'name'")
        hosts.append(Host(name, gpus, rack=str(_field(h, "rack", where)),
                          pod=str(h.get("pod", "pod0")), intra_gbps=_field(h, "intra_gbps", where, float, 1200.0)))
    switches = {}
    for where, s in _entries(doc, "switches", path, []):
        switches[check_name(str(_field(s, "name", where)), f"{where}: field 'name'")] = str(s.get("tier", "switch"))
    cables = []
    for where, c in _entries(doc, "links", path):
        gbps = _field(c, "gbps", where, float)
        if gbps <= 0:
            raise TopologyError(f"{where}: field 'gbps' must be > 0, got {gbps}")
        cables.append((str(_field(c, "a", where)), str(_field(c, "b", where)), gbps, str(c.get("tier", "link"))))
    try:
        return Topology(name, hosts, switches, cables, ecmp=str(doc.get("ecmp", "split")),
                        params={"builder": "yaml", "path": str(path)})
    except TopologyError as exc:
        raise TopologyError(f"{path}: {exc}") from None


def save_yaml(topology: Topology, path) -> None:
    """Write the explicit form; ``load_yaml`` reads it back to an equal topology."""
    Path(path).write_text(yaml.safe_dump(topology.to_dict(), sort_keys=False))
