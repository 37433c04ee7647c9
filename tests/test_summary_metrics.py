"""The run summary's queueing metrics, hand-computed on a tiny preemptive run."""

import pytest

from netlab.policies.base import OrderingPolicy
from netlab.sim import simulate
from netlab.topology import load_topology
from netlab.workload.job import Job
from netlab.workload.zoo import ModelZoo

ZOO = ModelZoo.default()


class NewestFirst(OrderingPolicy):
    """Preemptive LIFO: the newest job takes the GPU."""

    name = "newest-first"
    preemptive = True

    def key(self, job, now):
        return (-job.submit_s, job.job_id)


def test_total_waiting_counts_the_wait_after_a_preemption():
    topo = load_topology("leafspine,racks=1,hosts_per_rack=1,gpus_per_host=1")
    it = ZOO["resnet50"].compute_s  # one GPU: no communication
    jobs = [Job(0, 0.0, 1, "resnet50", 100 / it), Job(1, 10.0, 1, "resnet50", 20 / it),
            Job(2, 20.0, 1, "resnet50", 5 / it)]
    res = simulate(topo, jobs, NewestFirst(), "first-fit", checkpoint_s=0, restore_s=0)
    j = res.jobs.set_index("job_id")
    # A runs 0-10; B preempts it and runs 10-20; C preempts B and runs 20-25; B resumes 25-35; A resumes 35-125.
    assert list(j.end_s) == pytest.approx([125.0, 35.0, 25.0])
    assert list(j.queue_s) == pytest.approx([0.0, 0.0, 0.0])  # every job started the moment it arrived
    assert list(j.wait_s) == pytest.approx([25.0, 5.0, 0.0])  # A: 10-35 off the GPU; B: 20-25
    s = res.summary
    assert s["avg_start_delay_s"] == pytest.approx(0.0)  # first-start delay: the preemptive policy looks free
    assert s["avg_wait_s"] == pytest.approx(10.0)  # (25 + 5 + 0) / 3
    assert s["avg_queue_s"] == s["avg_start_delay_s"]  # deprecated alias
