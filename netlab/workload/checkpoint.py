"""What a preemption or a migration costs a job: writing its training state, and reading it back at the restart.

A job that is stopped keeps its progress only through a checkpoint, and a
restarted job runs again only after it has read that checkpoint back and
its processes have started. The cost grows with the model: a ResNet-50's
state is a third of a gigabyte, GPT-3's over two terabytes. The formula
(one place; :class:`CheckpointCost`)::

    state_bytes   = params x bytes_per_param
    transfer_s    = state_bytes x 8 / (storage_gbps x 1e9)
    checkpoint_s  = transfer_s
    restore_s     = launch_s + transfer_s

* ``bytes_per_param``: what a checkpoint holds per parameter. 12 for a model
  trained in fp32 with Adam-style state (fp32 weights and two optimizer
  moments, 4 + 4 + 4 bytes; SGD with momentum needs 8, so this is an upper
  bound for the CNN rows), 14 for a model trained in fp16/bf16 (the zoo's
  ``grad_dtype``: half-precision weights plus the fp32 master copy and two
  fp32 moments, 2 + 12: the optimizer-state accounting of ZeRO, Rajbhandari et
  al., SC'20, section 3.1, without the gradients, which a checkpoint does not
  keep).
* ``storage_gbps``: the bandwidth between the job and the storage that keeps
  its checkpoints, for the whole job (its writers share it). Default 20
  Gbit/s, the remote persistent storage of Gemini (Wang et al., SOSP'23,
  section 2: checkpointing MT-NLG's model states "takes 42 minutes ... when the
  bandwidth is 20Gbps", which is 530 B parameters x 12 bytes at 20 Gbit/s;
  they also find the time does not shrink with more machines: the storage's
  aggregate bandwidth is what limits it).
* ``launch_s``: starting the processes and the framework again before the
  state is read, whatever the model. Default 30 s: Pollux's restart penalty
  (the fixed 10 + 20 s netlab charged before), to which a small model's
  state adds little (ResNet-50: 0.12 s each way at 20 Gbit/s).

Both are the user's to state for their cluster (``SimConfig.storage_gbps``,
``SimConfig.launch_s``; ``checkpoint_s`` / ``restore_s`` there replace the
formula by fixed seconds for every job).
"""

from __future__ import annotations

from dataclasses import dataclass

from .zoo import JobModel

#: checkpoint bytes per parameter: fp32 weights + two fp32 optimizer moments
FP32_STATE_BYTES = 12
#: fp16/bf16 weights + fp32 master weights + two fp32 moments (mixed-precision training)
MIXED_STATE_BYTES = 14
#: the defaults (see the module doc for their sources)
STORAGE_GBPS = 20.0
LAUNCH_S = 30.0


def state_bytes(model: JobModel) -> float:
    """Bytes of training state a checkpoint of ``model`` holds (see the module doc)."""
    per_param = MIXED_STATE_BYTES if model.half_precision else FP32_STATE_BYTES
    return model.params_m * 1e6 * per_param


@dataclass(frozen=True)
class CheckpointCost:
    """Seconds to checkpoint a job and to restore it, from its model's size (the module doc's formula)."""

    storage_gbps: float = STORAGE_GBPS
    launch_s: float = LAUNCH_S

    def __post_init__(self):
        if not self.storage_gbps > 0:
            raise ValueError(f"storage_gbps must be > 0, got {self.storage_gbps!r}")
        if not self.launch_s >= 0:
            raise ValueError(f"launch_s must be >= 0, got {self.launch_s!r}")

    def transfer_s(self, model: JobModel) -> float:
        return state_bytes(model) * 8 / (self.storage_gbps * 1e9)

    def checkpoint_s(self, model: JobModel) -> float:
        return self.transfer_s(model)

    def restore_s(self, model: JobModel) -> float:
        return self.launch_s + self.transfer_s(model)

    def restart_s(self, model: JobModel) -> float:
        """What one stop and restart costs: the checkpoint written, then the restore."""
        return self.checkpoint_s(model) + self.restore_s(model)
