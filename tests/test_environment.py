"""environment.yml (conda) lists the same dependencies as pyproject.toml, and installs netlab with its extras."""

import re
from pathlib import Path

import pytest
import yaml

tomllib = pytest.importorskip("tomllib", reason="tomllib is in the standard library from Python 3.11")

ROOT = Path(__file__).resolve().parents[1]
REQ = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*(?:\[([^\]]*)\])?\s*(.*)$")


def _name(text: str) -> str:
    return re.sub(r"[-_.]+", "-", text).lower()


def parse(requirement: str) -> dict:
    """'dask[distributed]>=1' -> {'dask': '>=1', 'distributed': '>=1'}: conda packages an extra as its own package."""
    name, extras, spec = REQ.match(requirement).groups()
    spec = spec.replace(" ", "")
    return {_name(n): spec for n in [name, *(extras.split(",") if extras else [])]}


def test_environment_yml_matches_pyproject():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    assert env["channels"][0] == "conda-forge"
    wanted = {}
    for req in project["dependencies"] + [r for reqs in project["optional-dependencies"].values() for r in reqs]:
        wanted.update(parse(req))
    # torch is pinned exactly to a pip wheel (a local CPU build on the lab machines); conda would fetch another
    # build, so pip installs it through netlab's extras below.
    assert wanted.pop("torch") == "==2.13.0"
    conda = [d for d in env["dependencies"] if isinstance(d, str)]
    listed = {}
    for dep in conda:
        listed.update(parse(dep))
    listed.pop("pip")
    assert listed.pop("python") == ">=" + project["requires-python"].lstrip(">=")
    assert listed == wanted
    # then netlab itself, with every extra
    pip = next(d["pip"] for d in env["dependencies"] if isinstance(d, dict))
    m = re.fullmatch(r"-e \.\[(.*)\]", pip[0])
    assert m and set(m.group(1).split(",")) == set(project["optional-dependencies"])
