"""Suite-wide test marks.

``exclusive``: tests that bring up machine-wide things (network namespaces with their root-namespace routes,
Mininet's bridges, sshd, a Slurm cluster on its fixed ports) and so must not run beside another run of
themselves on the same machine. CI runs the whole suite at once; developers sharing one machine run
``pytest -m "not exclusive"`` freely and ``pytest -m exclusive`` one at a time.
"""

from __future__ import annotations

from pathlib import Path

import pytest

HERE = Path(__file__).parent
#: pure tests inside tests/testbed (no root, nothing machine-wide)
PURE_TESTBED = {"test_plan.py", "test_inventory.py", "test_scenarios.py", "test_jobplan.py"}
#: notebooks that bring up the testbed when run as root
TESTBED_NOTEBOOKS = ("04-", "05-")


def _exclusive(item) -> bool:
    path = Path(str(item.fspath))
    if path.parent == HERE / "testbed":
        return path.name not in PURE_TESTBED
    if path.name == "test_slurm.py":
        return True
    return path.name == "test_notebooks.py" and any(nb in item.nodeid for nb in TESTBED_NOTEBOOKS)


def pytest_collection_modifyitems(config, items):
    for item in items:
        if _exclusive(item):
            item.add_marker(pytest.mark.exclusive)
