"""Synthetic cluster states for benchmarks and tests: clusters fragmented by running jobs.

Placement policies are cheap on an empty cluster and expensive on a
fragmented one; benchmarks and tests need the latter without running a
whole simulation to get there. The fragmenting itself is
:func:`netlab.slowdown.samples.scatter` (the slowdown model's training rows
use it too); :func:`fair_view` gives such a state its exact fair rates.
"""

from __future__ import annotations

import numpy as np

from ..sched import ClusterView


def fair_view(topo, running: dict, free: np.ndarray, zoo=None):
    """The cluster view with ``running`` jobs (placements set) at their exact max-min fair rates.

    Fills each job's demand and communication time, and the time-averaged
    link loads, as the simulator would once they all run.
    """
    from ..network.demand import build_demand
    from ..network.model import NETWORKS
    from ..workload.zoo import ModelZoo

    zoo = zoo or ModelZoo.default()
    demands = []
    for js in running.values():
        p = js.placement
        js.status = "running"
        js.demand, _ = build_demand(topo, zoo[js.job.model], js.job.pattern, js.job_id, p.hosts, p.gpus,
                                    js.iso_iter_s)
        if js.demand is not None:
            demands.append(js.demand)
    fair = NETWORKS.create("fair")
    sol = fair.solve(demands, topo.link_capacity_gbps)
    for d in demands:
        running[d.job_id].comm_s = sol.comm_s[d.job_id]
    load = np.zeros(topo.n_links)
    load[sol.links] = sol.load_gbps
    return ClusterView(topo, free, running, 0.0, load, network=fair)
