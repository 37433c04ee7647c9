"""The policy layer sits above the simulator, one way.

Rule (every import counts: module level, inside functions, under TYPE_CHECKING):

* ``netlab.network`` (the network model) imports none of ``netlab.sched``,
  ``netlab.policies``, ``netlab.sensitivity`` or ``netlab.sim``.
* ``netlab.sched`` (the decisions policies return, the cluster state they
  read and the one scheduling pass) imports neither ``netlab.policies``,
  ``netlab.sensitivity`` nor any mechanism (``netlab.sim``, ``netlab.testbed``,
  ``netlab.integrations``): the pass is written against the ``Mechanism``
  interface, and both sides read it.
* ``netlab.policies`` and ``netlab.sensitivity`` never import ``netlab.sim``;
  ``netlab.sensitivity`` (used by Dally's policies) never imports
  ``netlab.policies``. Policies see state and return decisions; sensitivities
  come from the network model.
* ``netlab.sim`` (and the live testbed and the integrations, the other
  mechanisms that carry decisions out) reaches the policies only through the registry front: the
  package ``netlab.policies`` itself (importing it registers every policy),
  for its registries and the three interfaces, never a policy module.

* ``netlab.slowdown`` (the slowdown model the ``predictive`` placement
  scores with: features, fluid simulation, models, training rows) and
  ``netlab.topology`` import neither ``netlab.policies``, ``netlab.sim`` nor
  ``netlab.congestion`` (the front with testbed datasets and experiments).

So the only edge between the simulator and the policies runs sim -> policies.
``netlab.sched``, ``netlab.sensitivity`` and the policies do not reach
``netlab.sim`` through other modules either.

And the imports a module runs when it is imported (module level, outside
functions and ``if TYPE_CHECKING``) form no circle anywhere in ``netlab``: a
circle works only while its modules happen to be imported in one order.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PKG = Path(__file__).resolve().parents[1] / "netlab"
REGISTRY_FRONT = {"ORDERING", "PLACEMENT", "PREEMPTION", "NETWORK_POLICIES", "MIGRATION", "OrderingPolicy",
                  "PlacementPolicy", "PreemptionPolicy", "NetworkPolicy", "MigrationPolicy"}


def _module(path: Path) -> tuple[str, bool]:
    parts = list(path.relative_to(PKG.parent).with_suffix("").parts)
    is_pkg = parts[-1] == "__init__"
    return ".".join(parts[:-1] if is_pkg else parts), is_pkg


def imports(source: str, mod: str, is_pkg: bool = False) -> list[tuple[str, str | None, int]]:
    """Every netlab import in ``source`` (module ``mod``) as (module, imported name or None, line).

    Relative imports are resolved; ``ast.walk`` sees imports inside functions
    and under ``if TYPE_CHECKING`` as well as module-level ones.
    """
    out = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            out += [(a.name, None, node.lineno) for a in node.names if a.name.split(".")[0] == "netlab"]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = mod.split(".") if is_pkg else mod.split(".")[:-1]
                base = base[:len(base) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if target.split(".")[0] == "netlab":
                out += [(target, a.name, node.lineno) for a in node.names]
    return out


def file_imports(path: Path) -> list[tuple[str, str | None, int]]:
    return imports(path.read_text(), *_module(path))


def _files(*prefixes: str) -> list[Path]:
    """Source files of the modules named by ``prefixes`` (packages or single modules)."""
    files = []
    for p in prefixes:
        path = PKG.parent.joinpath(*p.split("."))
        files += sorted(path.rglob("*.py")) if path.is_dir() else [path.with_suffix(".py")]
        assert files and files[-1].exists(), f"no module {p}"
    return files


def _within(target: str, name: str | None, prefix: str) -> bool:
    full = f"{target}.{name}" if name else target
    return any(t == prefix or t.startswith(prefix + ".") for t in (target, full))


def _violations(sources: tuple[str, ...], forbidden: tuple[str, ...]) -> list[str]:
    return [f"{f.relative_to(PKG.parent)}:{line} imports {t}{'.' + n if n else ''}"
            for f in _files(*sources) for t, n, line in file_imports(f)
            if any(_within(t, n, bad) for bad in forbidden)]


def test_the_parser_sees_lazy_and_typing_imports():
    src = ("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from ..sim.state import A\n"
           "def f():\n    from .. import sim\n    import netlab.sim.simulator\n    from .base import B\n")
    found = sorted((t, n) for t, n, _ in imports(src, "netlab.policies.x"))
    assert found == [("netlab", "sim"), ("netlab.policies.base", "B"), ("netlab.sim.simulator", None),
                     ("netlab.sim.state", "A")]
    assert [_within(t, n, "netlab.sim") for t, n in found] == [True, False, True, True]
    assert not _within("netlab.simulation", None, "netlab.sim")


@pytest.mark.parametrize("sources, forbidden", [
    (("netlab.network",), ("netlab.sched", "netlab.policies", "netlab.sensitivity", "netlab.sim")),
    (("netlab.sched",), ("netlab.policies", "netlab.sensitivity", "netlab.sim", "netlab.testbed",
                         "netlab.integrations")),
    (("netlab.policies", "netlab.sensitivity"), ("netlab.sim",)),
    (("netlab.sensitivity",), ("netlab.policies",)),
    (("netlab.slowdown", "netlab.topology"), ("netlab.policies", "netlab.sim", "netlab.congestion")),
])
def test_lower_layers_never_import_upper_ones(sources, forbidden):
    assert _violations(sources, forbidden) == []


def test_mechanisms_reach_policies_only_through_the_registry():
    bad = [f"{f.relative_to(PKG.parent)}:{line} imports {t}{'.' + n if n else ''}"
           for f in _files("netlab.sim", "netlab.testbed", "netlab.integrations") for t, n, line in file_imports(f)
           if _within(t, n, "netlab.policies")
           and not (t == "netlab.policies" and n in REGISTRY_FRONT)  # from netlab.policies import PLACEMENT
           and not (t == "netlab" and n == "policies")]  # from .. import policies (registers them all)
    assert bad == []


def _graph() -> dict[str, set[str]]:
    """Module -> the netlab modules importing it runs (any kind of import; parents' ``__init__`` too)."""
    mods = {_module(f)[0]: f for f in PKG.rglob("*.py")}

    def with_parents(m: str) -> set[str]:
        parts = m.split(".")
        return {".".join(parts[:i]) for i in range(2, len(parts) + 1)} & mods.keys()

    graph = {}
    for m, f in mods.items():
        targets = set()
        for t, n, _ in file_imports(f):
            targets |= with_parents(f"{t}.{n}" if f"{t}.{n}" in mods else t)
        graph[m] = targets - {m}
    return graph


def _path(graph: dict[str, set[str]], start: str, goal: str) -> list[str] | None:
    seen, todo = {start: None}, [start]
    while todo:
        m = todo.pop(0)
        if m == goal or m.startswith(goal + "."):
            path = []
            while m is not None:
                path.append(m)
                m = seen[m]
            return path[::-1]
        for t in sorted(graph.get(m, ())):
            if t not in seen:
                seen[t] = m
                todo.append(t)
    return None


def _reaching_sim(*prefixes: str) -> list[str]:
    graph = _graph()
    return [" -> ".join(p) for m in sorted(graph) if m.startswith(prefixes) if (p := _path(graph, m, "netlab.sim"))]


def test_sched_and_sensitivity_do_not_reach_the_simulator_through_other_modules():
    assert _reaching_sim("netlab.sched", "netlab.sensitivity") == []


def test_the_scheduling_pass_reaches_no_mechanism_through_other_modules():
    graph = _graph()
    found = [" -> ".join(p) for m in sorted(graph) if m.startswith("netlab.sched")
             for goal in ("netlab.sim", "netlab.testbed", "netlab.integrations") if (p := _path(graph, m, goal))]
    assert found == []
    assert "netlab.sched.scheduler" in graph  # the pass is there to be checked


def test_policies_do_not_reach_the_simulator_through_other_modules():
    assert _reaching_sim("netlab.policies") == []


def module_level_imports(source: str, mod: str, is_pkg: bool = False) -> list[tuple[str, str | None, int]]:
    """The netlab imports ``source`` runs when it is imported: module level, inside ``if``/``try``/``with`` blocks
    and class bodies, not inside functions nor under ``if TYPE_CHECKING``. Same tuples as :func:`imports`."""
    keep = []

    def walk(body):
        for node in body:
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                keep.append(node)
            elif isinstance(node, ast.If):
                test = node.test
                typing_only = (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
                    isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")
                if not typing_only:
                    walk(node.body)
                walk(node.orelse)
            elif isinstance(node, ast.Try):
                for block in (node.body, node.orelse, node.finalbody, *(h.body for h in node.handlers)):
                    walk(block)
            elif isinstance(node, (ast.With, ast.ClassDef)):
                walk(node.body)

    walk(ast.parse(source).body)
    return imports(ast.unparse(ast.Module(body=keep, type_ignores=[])), mod, is_pkg) if keep else []


def module_graph() -> dict[str, set[str]]:
    """Module -> the netlab modules its module-level imports name (``from .x import y`` names ``x.y`` when that
    is a module, else ``x``; a package's ``__init__`` is the package's own node)."""
    files = {_module(f)[0]: f for f in PKG.rglob("*.py")}
    graph = {}
    for m, f in files.items():
        targets = set()
        for t, n, _ in module_level_imports(f.read_text(), *_module(f)):
            name = f"{t}.{n}" if n and f"{t}.{n}" in files else t
            while name not in files and "." in name:
                name = name.rsplit(".", 1)[0]
            targets.add(name)
        graph[m] = targets - {m}
    return graph


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm, iteratively)."""
    index, low, stack, on_stack, found = {}, {}, [], set(), []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    m = stack.pop()
                    on_stack.discard(m)
                    component.append(m)
                    if m == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def test_the_circle_finder_finds_circles_and_only_them():
    src = ("import typing\nfrom .b import f\nif typing.TYPE_CHECKING:\n    from .c import C\n"
           "def g():\n    from .d import D\ntry:\n    from .e import E\nexcept ImportError:\n    pass\n")
    assert sorted(t for t, _, _ in module_level_imports(src, "netlab.x.a")) == ["netlab.x.b", "netlab.x.e"]
    assert circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": set()}) == [["a", "b", "c"]]
    assert circles({"a": {"b"}, "b": set(), "c": {"a", "b"}}) == []


def test_the_import_graph_has_no_circle():
    assert circles(module_graph()) == []


def _imported_by(code: str) -> set[str]:
    """Top-level packages a fresh interpreter has loaded after running ``code``."""
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-c", code + "\nimport sys\nprint(' '.join(sorted({m.split('.')[0] "
                          "for m in sys.modules})))"], check=True, capture_output=True, text=True)
    return set(out.stdout.split())


HEAVY = {"pandas", "pyarrow", "matplotlib", "seaborn", "sklearn", "scipy", "networkx", "numba", "dask", "paramiko",
         "pyroute2", "psutil", "torch"}


def test_the_command_line_and_a_simulation_import_no_heavy_package_they_do_not_use():
    """Start-up: ``netlab`` itself, and what a simulation imports (its parameters checked, the simulator, the
    policies, the topology: everything but reading the trace and writing results) load none of these."""
    assert _imported_by("import netlab.cli") & HEAVY == set()
    simulation = ("import netlab.cli\nfrom netlab.run import RunParams\nfrom netlab.sim import Simulator\n"
                  "import netlab.topology, netlab.policies, netlab.network\n"
                  "RunParams(policy='tiresias', placement='cassini', network='tcp', topology='leafspine,racks=2')")
    assert _imported_by(simulation) & HEAVY == set()


def test_kernels_compile_at_their_first_call_and_replace_their_placeholders():
    """netlab.jit: numba is imported when a kernel is first called, then every module holds numba dispatchers
    (a kernel calling a kernel of another module, as the fair model calls maxmin's, finds a dispatcher)."""
    code = """
import sys
import numpy as np
from netlab.network import fair, maxmin
from netlab.jit import Kernel
assert "numba" not in sys.modules and isinstance(maxmin._filling, Kernel)
# two jobs on one 10 Gbit/s link, the second on a second 4 Gbit/s link too: 4 and 6
res = maxmin.max_min(np.array([10.0, 4.0]), np.array([0, 1, 1]), np.array([0, 0, 1]), np.ones(3), 2)
assert np.allclose(res.rate, [6.0, 4.0]), res.rate
from numba.core.registry import CPUDispatcher
assert isinstance(maxmin._filling, CPUDispatcher) and isinstance(fair._filling, CPUDispatcher)
assert not any(isinstance(v, Kernel) for m in list(sys.modules.values()) if m and m.__name__.startswith("netlab")
               for v in vars(m).values())
print("ok")
"""
    import os
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if k != "NUMBA_DISABLE_JIT"}  # compiled, whatever the lane
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr[-2000:]
