"""Per-topology constants placement and the slowdown features share: oversubscribed links, rack uplinks, locality levels.

Why here: the topology-aware placements (``topo-bestfit``, Dally) and the
slowdown model's features (:mod:`netlab.slowdown.features`) both need which
links are above the hosts and which rack each uplink serves. It is a fact of
the topology, so it lives with the topology, below both users (the features
used to import it from a placement policy, tying the model to the policy layer).
"""

from __future__ import annotations

import numpy as np

HOST, RACK, ANY = 0, 1, 2
LEVELS = ("host", "rack", "any")


class _TopoInfo:
    """Per-topology constants: which links are oversubscribed-tier links and which rack's uplinks they are."""

    def __init__(self, topo):
        self.oversub = topo.link_tier != "host"
        switch_rack: dict[str, int] = {}
        for h, host in enumerate(topo.hosts):
            for sw in topo.neighbors(host.name):
                switch_rack.setdefault(sw, int(topo.host_rack[h]))
        rack_of_link = np.full(topo.n_links, -1, dtype=np.int64)
        for link in np.flatnonzero(self.oversub).tolist():
            r = switch_rack.get(topo.link_src[link], switch_rack.get(topo.link_dst[link], -1))
            rack_of_link[link] = r
        self.uplinks = np.flatnonzero(rack_of_link >= 0)
        self.uplink_rack = rack_of_link[self.uplinks]
        self.rack_cap = np.bincount(self.uplink_rack, weights=topo.link_capacity_gbps[self.uplinks],
                                    minlength=topo.n_racks)
        self.rack_gpus = np.bincount(topo.host_rack, weights=topo.host_gpus, minlength=topo.n_racks)
        self.max_host_gpus = int(topo.host_gpus.max())
        self.max_rack_gpus = int(self.rack_gpus.max())

    def best_level(self, gpus: int) -> int:
        """The best locality level a job of this size could ever get on this topology."""
        return HOST if gpus <= self.max_host_gpus else RACK if gpus <= self.max_rack_gpus else ANY


_INFO: dict[int, tuple[object, _TopoInfo]] = {}


def topo_info(topo) -> _TopoInfo:
    """Cached :class:`_TopoInfo` (keyed by object identity, kept alive with the topology)."""
    hit = _INFO.get(id(topo))
    if hit is None or hit[0] is not topo:
        if len(_INFO) > 64:
            _INFO.clear()
        hit = _INFO[id(topo)] = (topo, _TopoInfo(topo))
    return hit[1]
