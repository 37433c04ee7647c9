"""What a preemption or a migration costs a job: writing its training state, and reading it back at the restart.

A job that is stopped keeps its progress only through a checkpoint, and a
restarted job runs again only after it has read that checkpoint back and
its processes have started. The cost grows with the model: a ResNet-50's
state is a third of a gigabyte, GPT-3's over two terabytes. The formula
(one place; :class:`CheckpointCost`)::

    state_bytes   = params x bytes_per_param
    checkpoint_s  = state_bytes / (writers x storage_gbps / 8 x 1e9)
    restore_s     = launch_s + state_bytes / (writers x storage_gbps / 8 x 1e9)

* ``bytes_per_param``: what a checkpoint holds per parameter. 12 for a model
  trained in fp32 with Adam-style state (fp32 weights and two optimizer
  moments, 4 + 4 + 4 bytes; SGD with momentum needs 8, so this is an upper
  bound for the CNN rows), 14 for the mixed-precision LLM rows (bf16 weights
  plus the fp32 master copy and two fp32 moments, 2 + 12: the optimizer-state
  accounting of ZeRO, Rajbhandari et al., SC'20, section 3.1, without the
  gradients, which a checkpoint does not keep).
* ``writers``: the ranks that write distinct shards in parallel: one per
  model-parallel shard (``tp x pp`` for the LLM rows; 1 for data-parallel
  models, whose replicas hold the same state and write one copy).
* ``storage_gbps``: the storage bandwidth each writer gets (Gbit/s, read and
  write alike). ``launch_s``: starting the processes and the framework again
  before the state is read.

Both parameters are the user's to state for their cluster; the defaults (10
Gbit/s per writer, 10 s launch) are assumptions, not measurements.
"""

from __future__ import annotations

from dataclasses import dataclass

from .zoo import JobModel

#: checkpoint bytes per parameter: fp32 weights + two fp32 optimizer moments
FP32_STATE_BYTES = 12
#: bf16 weights + fp32 master weights + two fp32 moments (mixed-precision LLM training)
MIXED_STATE_BYTES = 14


def state_bytes(model: JobModel) -> float:
    """Bytes of training state a checkpoint of ``model`` holds (see the module doc)."""
    per_param = MIXED_STATE_BYTES if model.llm is not None else FP32_STATE_BYTES
    return model.params_m * 1e6 * per_param


def writers(model: JobModel) -> int:
    """Ranks writing distinct shards at once: one per model-parallel shard."""
    return model.llm.model_parallel if model.llm is not None else 1


@dataclass(frozen=True)
class CheckpointCost:
    """Seconds to checkpoint a job and to restore it, from its model's size (the module doc's formula)."""

    storage_gbps: float = 10.0
    launch_s: float = 10.0

    def __post_init__(self):
        if not self.storage_gbps > 0:
            raise ValueError(f"storage_gbps must be > 0, got {self.storage_gbps!r}")
        if not self.launch_s >= 0:
            raise ValueError(f"launch_s must be >= 0, got {self.launch_s!r}")

    def transfer_s(self, model: JobModel) -> float:
        return state_bytes(model) * 8 / (writers(model) * self.storage_gbps * 1e9)

    def checkpoint_s(self, model: JobModel) -> float:
        return self.transfer_s(model)

    def restore_s(self, model: JobModel) -> float:
        return self.launch_s + self.transfer_s(model)
