"""The checkpoint/restore cost grows with the model: hand-computed from the documented formula, and the simulator
charges each job its own (or the fixed override)."""

import pytest

from netlab.errors import InputError
from netlab.policies.base import OrderingPolicy
from netlab.sim import SimConfig, simulate
from netlab.topology import load_topology
from netlab.workload.checkpoint import CheckpointCost, state_bytes
from netlab.workload.job import Job
from netlab.workload.zoo import JobModel, ModelZoo

ZOO = ModelZoo.default()


def test_an_fp32_model_checkpoints_twelve_bytes_per_parameter():
    cost = CheckpointCost(storage_gbps=8.0, launch_s=5.0)
    resnet = ZOO["resnet50"]  # 25.6 M parameters x 12 bytes = 307.2 MB; at 8 Gbit/s = 1 GB/s: 0.3072 s
    assert state_bytes(resnet) == pytest.approx(25.6e6 * 12)
    assert cost.checkpoint_s(resnet) == pytest.approx(0.3072)
    assert cost.restore_s(resnet) == pytest.approx(5.3072)
    assert cost.restart_s(resnet) == pytest.approx(5.6144)


def test_a_bf16_llm_checkpoints_fourteen_bytes_per_parameter_at_the_default_bandwidth():
    gpt3 = ZOO["gpt3-175b"]
    assert gpt3.grad_dtype == "bf16"
    cost = CheckpointCost()  # 20 Gbit/s = 2.5 GB/s, 30 s launch
    # 175e9 x 14 bytes = 2.45 TB; / 2.5 GB/s = 980 s each way
    assert cost.checkpoint_s(gpt3) == pytest.approx(980.0)
    assert cost.restore_s(gpt3) == pytest.approx(1010.0)
    assert cost.restart_s(gpt3) > 50 * cost.restart_s(ZOO["resnet18"])


def test_the_default_bandwidth_reproduces_its_source():
    # Gemini (SOSP'23): MT-NLG's 530 B parameters' model states take 42 minutes at 20 Gbit/s (12 bytes each)
    mt_nlg = JobModel("mt-nlg", compute_s=1.0, grad_bytes=0.0, params_m=530e3)
    assert CheckpointCost().checkpoint_s(mt_nlg) / 60 == pytest.approx(42.4, abs=0.05)


@pytest.mark.parametrize("field, value", [("storage_gbps", 0.0), ("storage_gbps", -1.0), ("launch_s", -0.5)])
def test_bad_parameters_are_refused_by_name(field, value):
    with pytest.raises(ValueError, match=field):
        CheckpointCost(**{field: value})
    with pytest.raises(InputError, match=f"field '{field}'"):
        SimConfig(**{field: value})


class NewestFirst(OrderingPolicy):
    """Preemptive LIFO: a later job stops the running one."""

    name = "newest-first"
    preemptive = True

    def key(self, job, now):
        return (-job.submit_s, job.job_id)


def _end_of_preempted(model: str, **config) -> float:
    """Job 0 (100 s of work) is preempted at t=10 by job 1 (20 s of work, ends at 30), then restarts at 30: its end.
    One GPU, so no network: the end is 30 + restart cost + the 90 s of work left."""
    topo = load_topology("leafspine,racks=1,hosts_per_rack=1,gpus_per_host=1")
    it = ZOO[model].compute_s
    jobs = [Job(0, 0.0, 1, model, 100 / it), Job(1, 10.0, 1, model, 20 / it)]
    res = simulate(topo, jobs, NewestFirst(), "first-fit", **config).jobs.set_index("job_id")
    assert res.loc[1, "end_s"] == pytest.approx(30.0) and res.loc[0, "preemptions"] == 1
    return float(res.loc[0, "end_s"])


def test_the_simulator_charges_each_job_its_own_models_restart():
    # resnet50: 307.2 MB each way at 20 Gbit/s = 0.12288 s, twice, plus 30 s launch: 30.24576 s
    assert _end_of_preempted("resnet50") == pytest.approx(30 + 30.24576 + 90)
    # vgg16: 138 M x 12 = 1.656 GB; at 2 Gbit/s (0.25 GB/s) 6.624 s each way, launch 1 s: 14.248 s
    assert _end_of_preempted("vgg16", storage_gbps=2.0, launch_s=1.0) == pytest.approx(30 + 14.248 + 90)


def test_fixed_seconds_override_the_formula_each_on_its_own():
    assert _end_of_preempted("vgg16", checkpoint_s=10, restore_s=20) == pytest.approx(30 + 30 + 90)
    # only the restore fixed: vgg16's checkpoint at the default 20 Gbit/s is 1.656 GB / 2.5 GB/s = 0.6624 s
    assert _end_of_preempted("vgg16", restore_s=5) == pytest.approx(30 + 0.6624 + 5 + 90)
