"""Topologies: one model (:class:`Topology`) built from a spec string, a YAML
file or the Crux host list.

>>> topo = load_topology("leafspine,racks=2,hosts_per_rack=2,gpus_per_host=4,oversub=2")
>>> topo.n_hosts, topo.total_gpus
(4, 16)
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Optional

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ..errors import Label, describe_errors
from ..spec import Spec, SpecError
from ..yaml_input import load_yaml_file
from .builders import BUILDERS, Ecmp, Gbps, Gpus
from . import clos  # noqa: F401,E402  (registers clos3 and rail)
from .model import MAX_CABLES, MAX_HOSTS, NAME_PATTERN, Host, Topology, TopologyError, check_name

__all__ = ["Topology", "Host", "TopologyError", "BUILDERS", "NAME_PATTERN", "check_name", "load_topology",
           "load_yaml", "save_yaml", "MAX_HOSTS", "MAX_CABLES", "MAX_YAML_BYTES"]

#: topology YAML files are written by hand or by save_yaml; anything larger is refused before it is parsed
MAX_YAML_BYTES = 64 * 2**20


def load_topology(what) -> Topology:
    """A Topology from a Topology, a YAML path, a Crux ``topo.csv`` path or a spec string.

    Every bad input is one :class:`TopologyError` naming the spec or file, the
    field (and line, in a file) and the allowed values.
    """
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
    except TopologyError as exc:
        raise TopologyError(f"topology spec {text!r}: {exc}") from None


# -- the YAML schema -------------------------------------------------------------------------------------------------

#: host, rack and pod names may be written as numbers in YAML (``rack: 1``); they are names, so text
Name = Label


class _Entry(BaseModel):
    model_config = ConfigDict(extra="forbid")


class HostEntry(_Entry):
    name: Name
    gpus: Gpus
    rack: Name
    pod: Name = "pod0"
    intra_gbps: Gbps = 1200.0


class SwitchEntry(_Entry):
    name: Name
    tier: Name = "switch"


class LinkEntry(_Entry):
    a: Name
    b: Name
    gbps: Gbps
    tier: Name = "link"


class BuilderDoc(_Entry):
    builder: Name
    name: Optional[Label] = None
    params: Optional[dict[str, Any]] = Field(default=None, description="a mapping of the builder's parameters")


class ExplicitDoc(_Entry):
    name: Optional[Label] = None
    ecmp: Ecmp = "split"
    hosts: list[HostEntry] = Field(description=f"a list of at most {MAX_HOSTS:,} hosts")
    switches: list[SwitchEntry] = []
    links: list[LinkEntry] = Field(description=f"a list of at most {MAX_CABLES:,} links")


def _node_line(node, loc: tuple) -> Optional[int]:
    """The 1-based line of ``loc`` (keys and list indexes) in a composed YAML node tree."""
    import yaml

    line = None
    for part in loc:
        if node is None:
            break
        line = node.start_mark.line + 1
        if isinstance(node, yaml.MappingNode):
            node = next((v for k, v in node.value if getattr(k, "value", None) == part), None)
        elif isinstance(node, yaml.SequenceNode) and isinstance(part, int) and part < len(node.value):
            node = node.value[part]
        else:
            node = None
    if node is not None:
        line = node.start_mark.line + 1
    return line


def _parse_yaml(path: Path):
    """(document, root node): one bounded loader for every YAML netlab reads (aliases, duplicate keys)."""
    return load_yaml_file(path, TopologyError, MAX_YAML_BYTES, what="topology YAML file")


def load_yaml(path) -> Topology:
    """Read a topology YAML file.

    Two forms are accepted:

    * builder form: ``builder: leafspine`` plus ``params: {racks: 2, ...}``;
    * explicit form: ``hosts`` (name, gpus, rack, [pod, intra_gbps]),
      ``switches`` (name, [tier]) and ``links`` (a, b, gbps, [tier]), with
      optional ``name`` and ``ecmp``.

    The file is checked against that schema (pydantic models above) before
    anything is built: errors name the file, the list entry, the field, its
    line and the allowed values; unknown fields are errors too.
    """
    path = Path(path)
    doc, node = _parse_yaml(path)
    if not isinstance(doc, dict):
        raise TopologyError(f"{path}: top level must be a mapping (the builder or the explicit form), "
                            f"got {type(doc).__name__}")
    model = BuilderDoc if "builder" in doc else ExplicitDoc
    if model is ExplicitDoc:
        for key, limit in (("hosts", MAX_HOSTS), ("links", MAX_CABLES), ("switches", MAX_CABLES)):
            if isinstance(doc.get(key), list) and len(doc[key]) > limit:
                raise TopologyError(f"{path}: field {key!r}: {len(doc[key]):,} entries, over the limit of {limit:,}")
    try:
        parsed = model.model_validate(doc)
    except ValidationError as exc:
        where = lambda loc: (f"line {line}" if (line := _node_line(node, loc)) else None)  # noqa: E731
        raise TopologyError(f"{path}: " + describe_errors(exc, model, where)) from None
    except RecursionError:
        raise TopologyError(f"{path}: nested too deeply") from None
    name = parsed.name or path.stem  # a label only: never a file name or a command argument
    if isinstance(parsed, BuilderDoc):
        try:
            builder = BUILDERS.get(parsed.builder)
        except KeyError as exc:
            raise TopologyError(f"{path}: field 'builder': {exc.args[0]}") from None
        try:
            return builder(**{"name": name, **(parsed.params or {})})  # a name in params wins
        except TopologyError as exc:
            raise TopologyError(f"{path}: field 'params': {exc}") from None
    hosts = []
    for i, h in enumerate(parsed.hosts):
        where = f"{path}: hosts[{i}]"
        hosts.append(Host(check_name(h.name, f"{where}: field 'name'"), h.gpus, rack=h.rack, pod=h.pod,
                          intra_gbps=h.intra_gbps))
    switches = {}
    for i, s in enumerate(parsed.switches):
        switches[check_name(s.name, f"{path}: switches[{i}]: field 'name'")] = s.tier
    cables = [(c.a, c.b, c.gbps, c.tier) for c in parsed.links]
    try:
        return Topology(name, hosts, switches, cables, ecmp=parsed.ecmp, params={"builder": "yaml", "path": str(path)})
    except TopologyError as exc:
        raise TopologyError(f"{path}: {exc}") from None


def save_yaml(topology: Topology, path) -> None:
    """Write the explicit form; ``load_yaml`` reads it back to an equal topology."""
    import yaml

    Path(path).write_text(yaml.safe_dump(topology.to_dict(), sort_keys=False))
