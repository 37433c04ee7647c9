"""RoutedTestbed: the namespace testbed with a router namespace per switch instead of Linux bridges.

Everything but the layout is the netns backend's (lifecycle, ledger, guardian, shaping, SSH, per-job
allocations); :mod:`.routed_plan` says why and how it routes. Chosen with ``make_testbed("routed", ...)``;
the bridged testbed stays the default.
"""

from __future__ import annotations

from .netns import NetnsTestbed
from .plan import NetnsPlan
from .routed_plan import plan_routed


class RoutedTestbed(NetnsTestbed):
    """Hosts behind router namespaces with multipath routes (see :mod:`.routed_plan`)."""

    def _make_plan(self) -> NetnsPlan:
        return plan_routed(self.topology, self.tid, self.addressing, self.rate_scale, self._queue, self.tcp_sysctls,
                           self.gso_max_bytes)

    def info(self) -> dict:
        return {**super().info(), "backend": "routed",
                "routers": [{"switch": s, "netns": ns, "address": a} for s, ns, a in self.plan.routed.routers]}
