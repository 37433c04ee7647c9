"""``none``: no network policy; every job is treated alike (class 0, weight 1, no cap, the fabric's ECMP)."""

from __future__ import annotations

from ..base import NETWORK_POLICIES, NetworkPolicy


@NETWORK_POLICIES.register("none")
class NoNetworkPolicy(NetworkPolicy):
    """No per-job allocation: every job gets the default share of the network (as without network policies)."""

    name = "none"
    allocates = False

    def allocate(self, view):
        return {}
