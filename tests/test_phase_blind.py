"""The share of job-time run at a phase-blind iteration time (``phase_blind_*_share``), from the model's own word.

Two identical 2-host jobs start together on the dumbbell's bottleneck; a third runs between two hosts of the
left side, sharing no link with them. Every expectation follows from which solver gives the pair its time:
tcp simulates a component of at most ``max_exact_jobs`` jobs exactly (phase-aware), and solves a larger one by
its random-phase mean field (blind to phase); ``fair`` never uses phase; ``ideal`` solves nothing.
"""

from __future__ import annotations

import pytest

from netlab.policies.base import PlacementPolicy
from netlab.sched import Placement
from netlab.sim import SimConfig, Simulator
from netlab.topology import load_topology
from netlab.workload.job import Job
from netlab.workload.zoo import JobModel, ModelZoo

TOPO = load_topology("dumbbell,hosts_per_side=4,gpus_per_host=1,host_gbps=100,bottleneck_gbps=100")
ZOO = ModelZoo.default().with_model(JobModel("half", compute_s=0.1, grad_bytes=1.25e9))
H = TOPO.host_index
WHERE = {1: ((H["l0"], H["r0"]), (1, 1)), 2: ((H["l1"], H["r1"]), (1, 1)), 3: ((H["l2"], H["l3"]), (1, 1))}
JOBS = [Job(1, 0.0, 2, "half", 200), Job(2, 0.0, 2, "half", 200), Job(3, 0.0, 2, "half", 300)]


class Fixed(PlacementPolicy):
    name = "fixed"

    def place(self, job, view):
        return Placement(*WHERE[job.job_id])


def run(network: str, **kwargs):
    cfg = SimConfig(network=network, network_kwargs=kwargs, progress=False)
    return Simulator(TOPO, JOBS, "fifo", Fixed(), config=cfg, zoo=ZOO).run()


def test_the_exact_simulation_of_a_small_component_is_not_phase_blind():
    res = run("tcp", jitter=0.0)
    assert res.jobs.phase_blind_s.tolist() == [0.0, 0.0, 0.0]
    assert res.summary["phase_blind_job_share"] == 0.0 and res.summary["phase_blind_gpu_share"] == 0.0


def test_the_mean_field_is_phase_blind_for_the_contended_pair_only():
    # max_exact_jobs=1: the pair's component (2 jobs) goes to the mean field from the instant both run until
    # both end (identical jobs end together); job 3 runs alone on its links throughout.
    res = run("tcp", jitter=0.0, max_exact_jobs=1)
    t = res.jobs.set_index("job_id")
    assert t.phase_blind_s[1] == pytest.approx(t.run_s[1], rel=1e-12) and t.run_s[1] > 0
    assert t.phase_blind_s[2] == pytest.approx(t.run_s[2], rel=1e-12)
    assert t.phase_blind_s[3] == 0.0
    share = (t.run_s[1] + t.run_s[2]) / t.run_s.sum()  # every job has 2 GPUs: the GPU-time share is the same
    assert res.summary["phase_blind_job_share"] == pytest.approx(share, rel=1e-12)
    assert res.summary["phase_blind_gpu_share"] == pytest.approx(share, rel=1e-12)
    assert 0.0 < share < 1.0


def test_a_model_that_never_uses_phase_is_blind_wherever_it_solves():
    t = run("fair").jobs.set_index("job_id")
    assert t.phase_blind_s[1] == pytest.approx(t.run_s[1], rel=1e-12)
    assert t.phase_blind_s[2] == pytest.approx(t.run_s[2], rel=1e-12)


def test_an_ideal_network_solves_nothing_and_reports_no_phase_blind_time():
    res = run("ideal")
    assert res.jobs.phase_blind_s.tolist() == [0.0, 0.0, 0.0] and res.summary["phase_blind_job_share"] == 0.0
