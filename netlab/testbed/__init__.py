"""Testbeds: run the simulator's experiments on real (emulated or physical) hosts.

Backends register in :data:`TESTBEDS`; :func:`make_testbed` builds one by
name from a topology (a Topology, a YAML path or a spec string), so a new
backend is one module and one import line.

Heavier names (``NetnsTestbed``, ``Ledger``, ``ssh_connect``) are imported on
first use: ``python -m netlab.testbed.guard`` and ``... .ledger`` import this
package first, and must not have imported themselves already (runpy warns)
nor pay for paramiko.

>>> tb = make_testbed("netns", "dumbbell,hosts_per_side=2")   # doctest: +SKIP
>>> with tb: print(tb.hosts[0].data_addr)                     # doctest: +SKIP
"""

from __future__ import annotations

import importlib

from ..registry import Registry
from .base import Testbed, TestbedError, TestbedHost

TESTBEDS: Registry[Testbed] = Registry("testbed backend")


@TESTBEDS.register("netns", "network namespaces + Linux bridges + HTB on this machine (root)")
def _netns(**kw) -> Testbed:
    from .netns import NetnsTestbed

    return NetnsTestbed(**kw)


@TESTBEDS.register("routed", "network namespaces as routers (multipath routes, per-flow L4 hash) + HTB (root)")
def _routed(**kw) -> Testbed:
    from .routed import RoutedTestbed

    return RoutedTestbed(**kw)


@TESTBEDS.register("mininet", "Mininet (LinuxBridge switches, TCLink/HTB) on this machine (root, Debian mininet)")
def _mininet(**kw) -> Testbed:
    from .mininet import MininetTestbed

    return MininetTestbed(**kw)


def make_testbed(kind: str, topology, **kw) -> Testbed:
    """A testbed of backend ``kind`` for ``topology``; unknown kinds list the known ones."""
    try:
        factory = TESTBEDS.get(kind)
    except KeyError as exc:
        raise TestbedError(exc.args[0]) from None
    return factory(topology=topology, **kw)


_LAZY = {"NetnsTestbed": ".netns", "RoutedTestbed": ".routed", "MininetTestbed": ".mininet", "Ledger": ".ledger",
         "TeardownReport": ".ledger", "ssh_connect": ".ssh"}


def __getattr__(name: str):
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name], __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["TESTBEDS", "make_testbed", "Testbed", "TestbedHost", "TestbedError", *_LAZY]
