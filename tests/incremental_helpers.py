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


def run_added_s(without, with_term, capacity_gbps: np.ndarray, demands, iterations: int = 8) -> dict[int, float]:
    """Per job, what a term adds to its mean period in a scenario run (``simulate_starts``, every job started at 0
    for ``iterations``): ``with_term``'s mean period less ``without``'s (two models differing only in the term)."""
    start = {d.job_id: 0.0 for d in demands}
    iters = {d.job_id: iterations for d in demands}
    s0 = without.simulate_starts(demands, capacity_gbps, start, iters)
    s1 = with_term.simulate_starts(demands, capacity_gbps, start, iters)
    return {j: float(np.diff(s1[j]).mean() - np.diff(s0[j]).mean()) for j in s0}


def resolved_iter_s(net, capacity_gbps: np.ndarray, demands) -> dict[int, float]:
    """Per job, ``net``'s iteration seconds from its incremental solve: every demand joined at 0 (:func:`joined`),
    then one ``resolve``."""
    joined(net, capacity_gbps, demands)
    moved = net.resolve(0.0)
    return dict(zip(moved.job_id, moved.iter_s))
