"""Nothing outside ``netlab/network/`` decides by a network model's name: it asks the model.

The simulator, the policies and the result tables learn what a model is from its
:class:`~netlab.network.model.Capabilities` (``contention``, ``uses_phase``,
``moves_phase``, ...). A comparison with a model's name (``== "ideal"``,
``!= "fair"``, ``network in ("phase", "tcp")``, ``.isin(["ideal"])``, or a
module constant of model names that such a test reads, like the former
``PHASED = ("phase", "tcp", "testbed")``) would be a switch every new model must
be added to; this test finds none. Choosing a model by name (``network="tcp"``,
``NETWORKS.create("fair")``, the list of models a reproduction runs) is fine:
that is what the registry is for.
"""

import ast
from pathlib import Path

PKG = Path(__file__).resolve().parents[1] / "netlab"
NAMES = {"fair", "ideal", "tcp", "phase"}
# in a collection "phase" alone is too common (a column, a JobState field): one of the others must be there
COLLECTION_NAMES = NAMES - {"phase"}


def _names_in(node) -> set[str]:
    """The model names a literal tuple/list/set of strings holds (empty for anything else)."""
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)) and node.elts and all(
            isinstance(e, ast.Constant) and isinstance(e.value, str) for e in node.elts):
        return {e.value for e in node.elts} & NAMES
    return set()


def _is_models(node, constants: set[str]) -> bool:
    """A literal collection of model names, or a module constant bound to one."""
    if isinstance(node, ast.Name):
        return node.id in constants
    return bool(_names_in(node) & COLLECTION_NAMES)


def switches(source: str) -> list[int]:
    """Lines of ``source`` that compare with a model name (see the module doc)."""
    tree = ast.parse(source)
    constants = {t.id for node in tree.body if isinstance(node, ast.Assign) and _names_in(node.value) & COLLECTION_NAMES
                 for t in node.targets if isinstance(t, ast.Name)}
    lines = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare):
            sides = [node.left, *node.comparators]
            for op, left, right in zip(node.ops, sides, sides[1:]):
                if isinstance(op, (ast.Eq, ast.NotEq)) and any(
                        isinstance(x, ast.Constant) and x.value in NAMES for x in (left, right)):
                    lines.add(node.lineno)
                if isinstance(op, (ast.In, ast.NotIn)) and _is_models(right, constants):
                    lines.add(node.lineno)
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "isin"
              and node.args and _is_models(node.args[0], constants)):
            lines.add(node.lineno)
    return sorted(lines)


def offending_lines(root: Path = PKG) -> list[str]:
    out = []
    for path in sorted(root.rglob("*.py")):
        if path.relative_to(root).parts[0] == "network":
            continue
        source = path.read_text()
        text = source.splitlines()
        out += [f"{path.relative_to(root.parent)}:{n}: {text[n - 1].strip()}" for n in switches(source)]
    return out


def test_no_switch_on_a_network_model_name_outside_the_network_package():
    assert offending_lines() == []


def test_the_check_finds_each_kind_of_switch(tmp_path):
    # The check itself must be able to fail: each kind of switch, planted in a copy, is found; choosing a model
    # by name, iterating over the models a run uses and columns named "phase" are not switches.
    pkg = tmp_path / "netlab"
    (pkg / "sim").mkdir(parents=True)
    (pkg / "network").mkdir()
    (pkg / "sim" / "x.py").write_text(
        'PHASED = ("phase", "tcp", "testbed")\n'
        'RUNS = ("tcp", "fair")\n'
        'a = net == "ideal"\n'
        'b = "tcp" != name\n'
        'c = view.network in ("phase", "tcp")\n'
        'd = s[s.network.isin(["fair"])]\n'
        'e = view.network in PHASED\n'
        'f = frame.network.isin(PHASED)\n'
        'ok = SimConfig(network="tcp")\n'
        'for net in RUNS:\n'
        '    pass\n'
        'cols = [c for c in ("job_id", "phase") if c in ("phase", "iter")]\n')
    (pkg / "network" / "y.py").write_text('inside = name == "fair"\n')  # the network package may
    assert [int(f.split(":")[1]) for f in offending_lines(pkg)] == [3, 4, 5, 6, 7, 8]
