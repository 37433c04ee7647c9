"""Alibaba PAI "openb" GPU pods (cluster-trace-gpu-v2023, FGD ATC'23).

``openb_pod_list_default.csv`` times are seconds: ``creation_time`` is the
submission, ``scheduled_time`` the start, ``deletion_time`` the end. So
``duration_s = deletion_time - scheduled_time`` and ``submit_s`` is the creation
time. Pods still Running at the end of the trace are deleted at its end, so
their durations are censored there (kept as they are).

Documented filters (counted in ``df.attrs["filtered"]``, not errors):

* CPU-only pods (``num_gpu == 0``): netlab schedules GPUs only;
* never scheduled (``scheduled_time`` empty; the Pending pods): no run time;
* not running for a positive time (``deletion_time <= scheduled_time``).

A pod asking for part of a GPU (``gpu_milli < 1000``, ``num_gpu == 1``) counts
as one whole GPU, since netlab does not model GPU sharing; ``gpu_milli`` is
kept. There are no models, so :func:`assign_models` draws them.

``qos`` becomes the job's ``priority`` (larger first, :data:`QOS_PRIORITY`):
LS (Alibaba's latency-sensitive class) above Guaranteed above Burstable above
BE (best effort), the Kubernetes QoS order with LS on top. A file without the
column gives priority 0 to every pod.
"""

from __future__ import annotations

import pandas as pd

from ..errors import checked
from .files import register, shared_file
from .models import assign_models
from .reader import Table
from .schema import TraceError, finish

HEADER = ("name", "num_gpu", "gpu_milli", "creation_time", "scheduled_time", "deletion_time")
FILE = "alibaba-gpu-v2023/openb_pod_list_default.csv"
CPU_ONLY = "CPU-only pods (num_gpu == 0)"
NEVER_SCHEDULED = "GPU pods never scheduled (scheduled_time empty)"
NO_RUN_TIME = "GPU pods with deletion_time <= scheduled_time"
#: the ``qos`` classes as priorities, larger first
QOS_PRIORITY = {"LS": 3, "Guaranteed": 2, "Burstable": 1, "BE": 0}


def read_alibaba(path, *, seed: int = 0, skip_bad: bool = False, source: str = "alibaba") -> pd.DataFrame:
    """Load an openb pod list: GPU pods that ran, with seeded models."""
    def rows(t: Table) -> pd.DataFrame:
        start = t.number("scheduled_time", nonnegative=True, allow_empty=True)
        end = t.number("deletion_time", nonnegative=True)
        return pd.DataFrame({
            "job_id": t.frame["name"].str.strip(),
            "submit_s": t.number("creation_time", nonnegative=True),
            "gpus": t.number("num_gpu", integer=True, nonnegative=True),
            "duration_s": end - start,
            "gpu_milli": t.number("gpu_milli", nonnegative=True),
            "pod_phase": t.frame.get("pod_phase", pd.Series("", index=t.frame.index)).str.strip(),
            "priority": (t.mapped("qos", QOS_PRIORITY, f"qos class (allowed: {', '.join(QOS_PRIORITY)})")
                         if "qos" in t.frame else 0),
            "line": t.frame["line"],
        })

    df, skipped = Table(path, required=HEADER, skip_bad=skip_bad).load(rows)
    df["priority"] = df["priority"].astype("int64")
    cpu = df["gpus"] == 0
    never = ~cpu & df["duration_s"].isna()
    no_run = ~cpu & ~never & ~(df["duration_s"] > 0)
    filtered = {CPU_ONLY: int(cpu.sum()), NEVER_SCHEDULED: int(never.sum()), NO_RUN_TIME: int(no_run.sum())}
    df = assign_models(df[~(cpu | never | no_run)], seed)
    return finish(df, source, path, skipped, filtered)


@register("alibaba", FILE)
@checked(TraceError, "alibaba", skip=("trace_dir", "seed", "skip_bad"))
def alibaba(trace_dir=None, *, seed: int = 0, skip_bad: bool = False) -> pd.DataFrame:
    """Alibaba PAI openb 2023 GPU pods that ran (real arrivals, run times, GPUs; seeded models)."""
    return read_alibaba(shared_file(trace_dir, FILE), seed=seed, skip_bad=skip_bad)
