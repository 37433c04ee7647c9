"""One YAML loader for every document netlab reads (grids, topologies, inventories, link files).

Why not ``yaml.safe_load``: safe means no arbitrary objects, not bounded. Two
inputs of a few hundred bytes defeat it:

* aliases: ``a1: &a1 [*a0, *a0, ...]`` nested ten levels is a 10^10-leaf
  document in 400 bytes. PyYAML builds it with shared references, so loading
  is instant, but anything that walks it (``repr``, ``json.dumps``, a grid's
  cross product, pydantic) expands it and runs out of memory. Here the size
  of the document *with aliases expanded* is counted on the composed node
  graph (each node once, memoised) before anything is constructed, and a
  document over :data:`ALIAS_FACTOR` times its own node count (plus
  :data:`ALIAS_ALLOWANCE`) is refused, as is an alias that contains itself;
* duplicate keys: YAML says a key appears once in a mapping, PyYAML keeps the
  last one silently, so ``policy: fifo`` followed further down by ``policy:
  sjf`` runs a different experiment than the one the reader sees. Refused,
  naming both lines (keys merged in with ``<<`` may still be overridden, as
  YAML's merge key allows).

Every failure is one error of the caller's :class:`~netlab.errors.InputError`
class naming the document and the line.
"""

from __future__ import annotations

from pathlib import Path

import yaml

from .errors import InputError, read_text, short

#: a document may expand (through aliases) to this many times its own node count ...
ALIAS_FACTOR = 10
#: ... plus this many nodes (so a small file may reuse a block a few times)
ALIAS_ALLOWANCE = 10_000
#: the largest YAML file read (grids, inventories; topology files have their own limit)
MAX_YAML_BYTES = 16 * 2**20


class _Refused(yaml.YAMLError):
    def __init__(self, line: int | None, message: str):
        super().__init__(message)
        self.line, self.message = line, message


def _line(node) -> int | None:
    mark = getattr(node, "start_mark", None)
    return mark.line + 1 if mark is not None else None


class BoundedLoader(yaml.SafeLoader):
    """A SafeLoader that refuses duplicate keys (see the module docstring)."""

    def construct_mapping(self, node, deep=False):
        if isinstance(node, yaml.MappingNode):
            seen: dict = {}
            for key_node, _ in node.value:
                if key_node.tag == "tag:yaml.org,2002:merge":
                    continue
                key = self.construct_object(key_node, deep=True)
                try:
                    first = seen.get(key)
                except TypeError:  # an unhashable key: SafeConstructor refuses it itself
                    continue
                if first is not None:
                    raise _Refused(_line(key_node), f"duplicate key {short(key)} (first at line {first}); a key "
                                                    "may appear once in a mapping")
                seen[key] = _line(key_node)
        return super().construct_mapping(node, deep=deep)


def expanded_size(root) -> tuple[int, int]:
    """(nodes in the graph, nodes with every alias expanded) of a composed YAML node; raises on a cycle."""
    sizes: dict[int, int] = {}
    active: set[int] = set()
    distinct = 0

    def size(node) -> int:
        nonlocal distinct
        key = id(node)
        if key in sizes:
            return sizes[key]
        if key in active:
            raise _Refused(_line(node), "an alias refers to a node that contains it (a recursive document)")
        active.add(key)
        distinct += 1
        total = 1
        if isinstance(node, yaml.SequenceNode):
            total += sum(size(child) for child in node.value)
        elif isinstance(node, yaml.MappingNode):
            total += sum(size(k) + size(v) for k, v in node.value)
        active.discard(key)
        sizes[key] = total
        return total

    try:  # PyYAML's composer recursed as deep as the text nests, so this recursion fits too; guarded anyway
        expanded = size(root)
    except RecursionError:
        raise _Refused(None, "nested too deeply") from None
    return distinct, expanded


def load_yaml(text: str, where: str, error: type[InputError]):
    """(document, composed root node) of YAML ``text``; ``where`` names it in errors of class ``error``.

    The node carries line numbers for messages about the document's content (``node.start_mark``).
    """
    loader = None
    try:
        loader = BoundedLoader(text)  # its reader refuses control characters already here
        root = loader.get_single_node()
        if root is None:
            return None, None
        distinct, expanded = expanded_size(root)
        limit = ALIAS_FACTOR * distinct + ALIAS_ALLOWANCE
        if expanded > limit:
            raise _Refused(None, f"its aliases expand it to {expanded:,} nodes, over the limit of {limit:,} "
                                 f"({ALIAS_FACTOR}x its own {distinct:,} nodes + {ALIAS_ALLOWANCE:,}); write the "
                                 "repeated parts out or repeat them less")
        return loader.construct_document(root), root
    except _Refused as exc:
        at = f", line {exc.line}" if exc.line else ""
        raise error(f"{where}{at}: {exc.message}") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        at = f", line {mark.line + 1}" if mark is not None else ""
        raise error(f"{where}{at}: invalid YAML: {getattr(exc, 'problem', None) or exc}") from None
    except RecursionError:
        raise error(f"{where}: invalid YAML: nested too deeply") from None
    finally:
        if loader is not None:
            loader.dispose()


def load_yaml_file(path, error: type[InputError], max_bytes: int = MAX_YAML_BYTES, what: str = "YAML file"):
    """(document, root node) of a YAML file, read with :func:`netlab.errors.read_text`'s checks (size, UTF-8,
    a regular file); errors name the file."""
    path = Path(path)
    return load_yaml(read_text(path, error, max_bytes, what=what), str(path), error)
