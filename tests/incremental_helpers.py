"""Set-up shared by tests of a network model's incremental solve: a LinkState attached, jobs joined one by one."""

from __future__ import annotations

import numpy as np

from netlab.network.links import LinkState


def joined(net, capacity_gbps: np.ndarray, demands) -> LinkState:
    """``net`` attached to a fresh LinkState of ``capacity_gbps``, every demand joined at time 0 (each counted on
    its links first, as the simulator does); the LinkState, for the caller's leaves."""
    links = LinkState(capacity_gbps.copy())
    net.attach(links)
    for d in demands:
        links.jobs[d.links] += 1
        net.join(d.job_id, d, 0.0)
    return links
