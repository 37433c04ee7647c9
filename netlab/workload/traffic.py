"""What the LLM jobs of a finished run moved: bytes per parallelism dimension, over the network and over NVLink.

An analysis of a run's job table (:mod:`netlab.sim.metrics`) with the zoo's LLM
shapes and :func:`netlab.workload.llm.traffic`; it sits above both, so the zoo
and the traffic model need not know about each other's users.
"""

from __future__ import annotations

from .llm import DIMENSIONS, traffic
from .zoo import ModelZoo


def placement_traffic(jobs, zoo: ModelZoo | None = None):
    """Per LLM job of a run's job table (``3d`` rows): bytes moved over its run per dimension, over the network
    and over NVLink, from its placement (``host:gpus,...`` in placement order) and its iterations.

    Columns: job_id, model, gpus, tp, pp, dp, hosts, then ``<dim>_network_gb`` and ``<dim>_nvlink_gb`` for
    tp, pp, dp (GB = 1e9 bytes). Preempted jobs are counted on their last placement.
    """
    import pandas as pd

    zoo = zoo or ModelZoo.default()
    rows = []
    for row in jobs[jobs.pattern == "3d"].itertuples(index=False):
        if not row.placement:
            continue
        model = zoo[row.model]
        gpus = tuple(int(part.rsplit(":", 1)[1]) for part in row.placement.split(","))
        tr = traffic(model.llm, float(model.params_m) * 1e6, gpus)
        out = dict(job_id=row.job_id, model=row.model, gpus=row.gpus, tp=model.llm.tp, pp=model.llm.pp,
                   dp=model.llm.dp_of(row.gpus), hosts=len(gpus))
        for dim in DIMENSIONS:
            out[f"{dim}_network_gb"] = tr.network_bytes[dim] * row.iterations / 1e9
            out[f"{dim}_nvlink_gb"] = tr.nvlink_bytes[dim] * row.iterations / 1e9
        rows.append(out)
    columns = ["job_id", "model", "gpus", "tp", "pp", "dp", "hosts"] + [f"{d}_{w}_gb" for d in DIMENSIONS
                                                                           for w in ("network", "nvlink")]
    return pd.DataFrame(rows, columns=columns)


def traffic_long(traffic):
    """:func:`placement_traffic`'s byte columns in long form: one row per job, ``dimension`` (tp, pp, dp) and
    ``path`` (network, nvlink), with ``gb``."""
    cols = [f"{d}_{w}_gb" for d in DIMENSIONS for w in ("network", "nvlink")]
    long = traffic.melt(id_vars=["job_id", "model"], value_vars=cols, var_name="what", value_name="gb")
    parts = long.what.str.split("_")
    return long.assign(dimension=parts.str[0], path=parts.str[1]).drop(columns="what")
