"""Goodput of a lossy link: what a binding link delivers when many flows share a shallow queue.

Why: a drop-tail queue of ``B`` packets shared by ``n`` TCP flows leaves each
about ``B / n`` packets of window beyond the path's bandwidth-delay product.
The more flows per packet of buffer, the more often a flow loses, halves its
window with too little queued to keep the link busy, retransmits, or waits for
a timeout: the link carries less than its capacity while it is contended. A
rate-cut transport (DCTCP, DCQCN) holds its queue near the ECN marking
threshold instead, and undershoots the same way when many flows are cut at
once. The fluid (:mod:`~.fluid`) and the mean field (:mod:`~.mean_field`)
both share a link's capacity; giving them the *effective* capacity of every
binding link (every job on it at its isolated rate at once would exceed it:
the only links where a queue builds) puts the loss inside the split, so a job
that shares a lossy link with many others pays for it there, and the others'
answer feels it too:

    effective capacity = capacity / (1 + goodput_k x flows on the link / buffer_packets)

``goodput_k`` is fitted per transport on the referee's calibration half
(:data:`~.params.TRANSPORT_PARAMS`); 0 (deep-buffer ``tcp``) leaves every
capacity as it is, the same array. Links that do not bind keep their capacity,
so which links bind, and so which jobs are solved together, does not change.
"""

from __future__ import annotations

import numpy as np

from ..slots import Entries


def link_flows_offered(e: Entries, m: int, rate_gbps: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per link of ``m``: flows on it, and what they offer at their jobs' isolated per-flow rates ``rate_gbps``."""
    flows = np.bincount(e.link, weights=e.weight, minlength=m)
    offered = np.bincount(e.link, weights=e.weight * rate_gbps[e.job], minlength=m)
    return flows, offered


def effective_capacity(capacity_gbps: np.ndarray, flows: np.ndarray, offered_gbps: np.ndarray, goodput_k: float,
                       buffer_packets: float) -> np.ndarray:
    """Each binding link's capacity / (1 + goodput_k x flows / buffer_packets), others as they are (module doc);
    ``capacity_gbps`` itself when ``goodput_k`` is 0."""
    if goodput_k == 0.0:
        return capacity_gbps
    binding = offered_gbps > capacity_gbps * (1 + 1e-9)  # the binding test of ``components`` and ``incremental``
    return np.where(binding, capacity_gbps / (1.0 + goodput_k * flows / buffer_packets), capacity_gbps)
