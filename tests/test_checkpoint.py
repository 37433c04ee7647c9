"""The checkpoint/restore cost grows with the model: hand-computed from the documented formula."""

import pytest

from netlab.workload.checkpoint import CheckpointCost, state_bytes, writers
from netlab.workload.zoo import ModelZoo

ZOO = ModelZoo.default()


def test_a_data_parallel_model_writes_its_fp32_state_once():
    cost = CheckpointCost(storage_gbps=8.0, launch_s=5.0)
    resnet = ZOO["resnet50"]  # 25.6 M parameters x 12 bytes = 307.2 MB; at 8 Gbit/s = 1 GB/s: 0.3072 s
    assert state_bytes(resnet) == pytest.approx(25.6e6 * 12)
    assert writers(resnet) == 1
    assert cost.checkpoint_s(resnet) == pytest.approx(0.3072)
    assert cost.restore_s(resnet) == pytest.approx(5.3072)


def test_an_llm_writes_its_mixed_precision_state_from_every_model_parallel_shard():
    llm = next(ZOO[n] for n in ZOO.names() if ZOO[n].llm is not None)
    shape = llm.llm
    cost = CheckpointCost(storage_gbps=10.0, launch_s=0.0)
    expected = llm.params_m * 1e6 * 14 * 8 / (shape.tp * shape.pp * 10e9)
    assert cost.checkpoint_s(llm) == pytest.approx(expected)
    assert cost.restore_s(llm) == pytest.approx(expected)
    # bigger models cost more than smaller ones at the same bandwidth
    assert cost.checkpoint_s(ZOO["gpt2-xl"]) > cost.checkpoint_s(ZOO["resnet18"])


@pytest.mark.parametrize("field, value", [("storage_gbps", 0.0), ("storage_gbps", -1.0), ("launch_s", -0.5)])
def test_bad_parameters_are_refused_by_name(field, value):
    with pytest.raises(ValueError, match=field):
        CheckpointCost(**{field: value})
