"""What a policy sees in a :class:`~netlab.sched.ClusterView`, and in the view with jobs freed for preemption.

``ClusterView.with_freed`` builds the view a placement policy scores a preemption with: the same cluster as if
some jobs had released their GPUs. Everything else the view says must be what the full view says: where the
network model has moved each running job's phase, and the free GPUs counted with the freed ones.
"""

import numpy as np
import pytest

from netlab.network import NETWORKS, Capabilities, NetworkModel
from netlab.sched import ClusterView, JobState, Placement
from netlab.topology import load_topology
from netlab.workload.job import Job


def _running(topo, hosts_gpus):
    running = {}
    for jid, (hosts, gpus) in hosts_gpus.items():
        js = JobState(Job(jid, 0.0, sum(gpus), "resnet50", 100), 0.1)
        js.status, js.placement, js.phase = "running", Placement(hosts, gpus), 0.0
        running[jid] = js
    return running


class Moving(NetworkModel):
    """A model that has moved some jobs' phases (as tcp moves jobs started in step into turns)."""

    name = "moving"
    capabilities = Capabilities(uses_phase=True, moves_phase=True)

    def __init__(self, phases=None):
        self.phases = phases or {}

    def phase_now(self, job_id):
        return self.phases.get(job_id)


def test_the_freed_view_shows_where_the_network_moved_a_job():
    # The model has moved job 1 to half a period (as tcp moves jobs started in step into turns); a policy set
    # phase 0. The view says 0.5, and so must the view with job 2 freed, which a preemption decision reads.
    topo = load_topology("leafspine,racks=2,hosts_per_rack=2,gpus_per_host=4")
    running = _running(topo, {1: ((0, 2), (4, 4)), 2: ((1,), (4,))})
    free = topo.host_gpus.copy()
    for js in running.values():
        for h, g in zip(js.placement.hosts, js.placement.gpus):
            free[h] -= g
    view = ClusterView(topo, free, running, 10.0, network=Moving({1: 0.5}))
    assert view.phase(1) == 0.5 and running[1].phase == 0.0
    freed = view.with_freed([running[2]])
    assert freed.phase(1) == 0.5
    assert 2 not in freed.running and 1 in freed.running


def test_the_freed_view_counts_the_freed_gpus():
    # The owner keeps a running count of free GPUs; the freed view must add the victims' GPUs to it.
    topo = load_topology("leafspine,racks=2,hosts_per_rack=2,gpus_per_host=4")
    running = _running(topo, {1: ((0, 2), (4, 4)), 2: ((1,), (3,))})
    free = np.array([0, 1, 0, 4])
    view = ClusterView(topo, free, running, 0.0, free_total=lambda: 5)
    freed = view.with_freed([running[2]])
    assert view.total_free == 5
    assert freed.total_free == 8 and freed.free_gpus.tolist() == [0, 4, 0, 4]


def test_a_model_that_does_not_move_phases_is_not_asked_and_the_view_carries_no_name():
    topo = load_topology("leafspine,racks=2,hosts_per_rack=2,gpus_per_host=4")
    running = _running(topo, {1: ((0, 2), (4, 4))})
    running[1].phase = 0.25

    class Still(Moving):
        capabilities = Capabilities(uses_phase=True)  # keeps phases but does not move them

    view = ClusterView(topo, topo.host_gpus.copy(), running, 0.0, network=Still({1: 0.5}))
    assert view.phase(1) == 0.25  # the phase set: the model says it moves nothing
    assert ClusterView(topo, topo.host_gpus.copy(), running, 0.0, network=NETWORKS.create("fair")).phase(1) == 0.25
    with pytest.raises(TypeError, match="NetworkModel"):
        ClusterView(topo, topo.host_gpus.copy(), running, 0.0, network="tcp")
    assert ClusterView(topo, topo.host_gpus.copy(), {}, 0.0).network.name == "tcp"  # DEFAULT_NETWORK
