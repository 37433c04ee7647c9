"""Per-job and per-link tables, the run summary, and writing them atomically.

Per-job columns (``jobs.parquet``): job_id, name, model, pattern, gpus,
submit_s, start_s, end_s, jct_s, queue_s (first start - submit), wait_s (all
time not holding GPUs), run_s, hosts, racks, placement, preemptions,
migrations (moves by a migration policy, each paying a restart like a preemption),
comm_fraction (share of progress time spent communicating), iterations,
iso_iter_s, isolated_s (iterations at isolated speed), slowdown (progress time
/ isolated time: the network's cost), jct_slowdown (JCT / isolated time),
runs (a preempted job's run intervals and hosts; empty for a job that ran once);
then the job's goals as the trace gave them: priority, tenant, deadline_s (NaN:
none) and deadline_met (None without a deadline; an unfinished job missed it).

Per-link columns (``links.parquet``): one row per link per interval between
network recomputations (``SimConfig.link_history="full"``; per resolution bin
with ``"aggregate"``, none with ``"none"``: :mod:`netlab.sim.history`): t_start_s, t_end_s, link, src, dst, tier,
capacity_gbps, load_gbps, utilisation, overload_gbps. ``overload_gbps`` x
duration is the time-integrated demand above capacity (the ECN-mark proxy).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from typing import TYPE_CHECKING

import numpy as np

from ..fileio import atomic_write

if TYPE_CHECKING:  # imported where a table is built: a simulation runs without pandas until its result
    import pandas as pd

SUMMARY_KEYS = ("jobs", "avg_jct_s", "p50_jct_s", "p99_jct_s", "makespan_s", "avg_wait_s", "avg_start_delay_s",
                "gpu_util", "overload_gbit", "wall_s", "events")


@dataclass
class SimResult:
    jobs: pd.DataFrame
    links: pd.DataFrame
    summary: dict
    config: dict = field(default_factory=dict)

    def save(self, out_dir) -> Path:
        """Write jobs.parquet, links.parquet, summary.json and config.json (each atomically)."""
        out = Path(out_dir)
        out.mkdir(parents=True, exist_ok=True)
        atomic_write(out / "jobs.parquet", lambda p: self.jobs.to_parquet(p, index=False))
        atomic_write(out / "links.parquet", lambda p: self.links.to_parquet(p, index=False))
        write_json(out / "summary.json", self.summary)
        write_json(out / "config.json", self.config)
        return out

    def tier_bytes(self) -> dict:
        return tier_bytes(self.links)


def _json(value):
    if isinstance(value, (np.integer,)):
        return int(value)
    if isinstance(value, (np.floating,)):
        return float(value)
    if isinstance(value, np.ndarray):
        return value.tolist()
    return str(value)


def write_json(path, obj) -> Path:
    """JSON (numpy values converted) written atomically; parent directories are created."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    text = json.dumps(obj, indent=2, default=_json)
    atomic_write(path, lambda p: Path(p).write_text(text))
    return path


def tier_bytes(links: pd.DataFrame) -> dict:
    """Bytes that crossed each tier (summed over both directions of its links)."""
    if links.empty:
        return {}
    bits = links.load_gbps * 1e9 * (links.t_end_s - links.t_start_s)
    return {str(k): float(v) for k, v in (bits / 8).groupby(links.tier).sum().items()}


def link_summary(links: pd.DataFrame, horizon_s: float | None = None) -> pd.DataFrame:
    """Per link: mean utilisation over ``horizon_s`` (default: the recorded span), overload Gbit, bytes."""
    import pandas as pd

    if links.empty:
        return pd.DataFrame(columns=["link", "src", "dst", "tier", "capacity_gbps", "mean_utilisation",
                                     "overload_gbit", "bytes"])
    dt = links.t_end_s - links.t_start_s
    span = horizon_s or (links.t_end_s.max() - links.t_start_s.min())
    g = links.assign(bits=links.load_gbps * dt * 1e9, over=links.overload_gbps * dt).groupby(
        ["link", "src", "dst", "tier", "capacity_gbps"], as_index=False).agg(bits=("bits", "sum"), over=("over", "sum"))
    g["mean_utilisation"] = g.bits / 1e9 / (g.capacity_gbps * span)
    g["overload_gbit"] = g.over
    g["bytes"] = g.bits / 8
    return g.drop(columns=["bits", "over"])


#: the per-job table's columns and dtypes, in order
JOB_COLUMNS = (("job_id", np.int64), ("name", object), ("model", object), ("pattern", object), ("gpus", np.int64),
               ("submit_s", float), ("start_s", float), ("end_s", float), ("jct_s", float), ("queue_s", float),
               ("wait_s", float), ("run_s", float), ("hosts", np.int64), ("racks", np.int64), ("placement", object),
               ("preemptions", np.int64), ("migrations", np.int64), ("comm_fraction", float), ("iterations", float),
               ("iso_iter_s", float),
               ("isolated_s", float), ("slowdown", float), ("jct_slowdown", float), ("runs", object))
#: progress time (s) at an iteration time the network model computed blind to phase (``Moved.phase_blind``)
MODEL_COLUMNS = (("phase_blind_s", float),)
#: the job's goals as the trace gave them, filled by :func:`_goal_columns`
GOAL_COLUMNS = (("priority", np.int64), ("tenant", object), ("deadline_s", float), ("deadline_met", object))
_STATE_COLUMNS = JOB_COLUMNS
JOB_COLUMNS = JOB_COLUMNS + MODEL_COLUMNS + GOAL_COLUMNS


def job_table(states, topo) -> pd.DataFrame:
    """The per-job table from run-time job states; shared by the simulator and the live testbed.

    Filled column by column into preallocated numpy arrays (about 180 bytes a job beside the placement text),
    not built from one dict per job, which cost about 1.5 KB a job at its peak (a million-job run).
    """
    import pandas as pd

    states = list(states)
    cols = {name: np.empty(len(states), dtype=dtype) for name, dtype in _STATE_COLUMNS}
    (job_id, name, model, pattern, gpus, submit, start, end_col, jct_col, queue, wait, run, n_hosts, racks, placement,
     preemptions, migrations, comm, iterations, iso, isolated, slowdown, jct_slowdown, runs) = cols.values()
    host_rack, host_names = topo.host_rack, topo.hosts
    for i, js in enumerate(states):
        j = js.job
        p = js.placement
        hosts = list(p.hosts) if p else []
        end = js.end_s
        jct = end - j.submit_s if end is not None else np.nan
        job_id[i], name[i], model[i], pattern[i], gpus[i], submit[i] = j.job_id, j.name, j.model, j.pattern, j.gpus, \
            j.submit_s
        start[i] = js.first_start_s if js.first_start_s is not None else np.nan
        end_col[i] = end if end is not None else np.nan
        jct_col[i] = jct
        queue[i] = (js.first_start_s - j.submit_s) if js.first_start_s is not None else np.nan
        wait[i] = jct - js.run_s if end is not None else np.nan
        run[i] = js.run_s
        n_hosts[i] = len(hosts)
        racks[i] = (1 if len(hosts) == 1 else len(set(host_rack[hosts].tolist()))) if hosts else 0
        placement[i] = where = ",".join(f"{host_names[h].name}:{g}" for h, g in zip(p.hosts, p.gpus)) if p else ""
        runs[i] = _runs(js, where, host_names) if js.runs else ""
        preemptions[i] = js.preemptions
        migrations[i] = js.migrations
        comm[i] = js.comm_time_s / js.progress_s if js.progress_s > 0 else 0.0
        iterations[i], iso[i], isolated[i] = j.iterations, js.iso_iter_s, js.isolated_s
        slowdown[i] = js.progress_s / js.isolated_s if js.isolated_s > 0 else np.nan
        jct_slowdown[i] = jct / js.isolated_s if js.isolated_s > 0 else np.nan
    cols["phase_blind_s"] = np.fromiter((js.phase_blind_s for js in states), float, len(states))
    cols.update(_goal_columns(states, end_col))
    return pd.DataFrame(cols).sort_values("job_id", kind="stable").reset_index(drop=True)


def _runs(js, last_placement: str, host_names) -> str:
    """A preempted job's run intervals, ``start_s-end_s@host:gpus,...`` joined by ``;`` (the last one too, ending
    at ``end_s`` or still open): where it held GPUs when. A job that ran once has none (start_s to end_s)."""
    parts = [f"{a:.3f}-{b:.3f}@" + ",".join(f"{host_names[h].name}:{g}" for h, g in zip(p.hosts, p.gpus))
             for a, b, p in js.runs]
    if js.status == "running" or js.end_s is not None:
        end = js.end_s if js.end_s is not None else float("nan")
        parts.append(f"{js.last_start_s:.3f}-{end:.3f}@{last_placement}")
    return ";".join(parts)


def _goal_columns(states, end_s: np.ndarray) -> dict:
    """priority, tenant, deadline_s (NaN: none) and deadline_met (None without a deadline)."""
    n = len(states)
    deadline = np.fromiter((js.job.deadline_s for js in states), float, n)
    has = np.isfinite(deadline)
    met = np.full(n, None, dtype=object)
    met[has] = end_s[has] <= deadline[has]  # NaN end (never finished) compares False: missed
    return {"priority": np.fromiter((js.job.priority for js in states), np.int64, n),
            "tenant": np.array([js.job.tenant for js in states], dtype=object),
            "deadline_s": np.where(has, deadline, np.nan), "deadline_met": met}


def build_result(sim, wall_s: float) -> SimResult:
    topo = sim.topology
    jobs = job_table(sim.states.values(), topo)
    links = _links_frame(sim)
    summary = summarise(jobs, links, topo.total_gpus, wall_s, sim.kernel.events)
    summary.update(ordering=sim.ordering.name, placement=sim.placement.name, preemption=sim.preemption.name,
                   netpolicy=sim.netpolicy.name, migration=sim.migration.name, network=sim.network.name,
                   topology=topo.name, seed=sim.config.seed,
                   tier_bytes=tier_bytes(links))
    config = dict(
        ordering=sim.ordering.describe(), placement=sim.placement.describe(), preemption=sim.preemption.describe(),
        netpolicy=sim.netpolicy.describe(), migration=sim.migration.describe(), network=sim.network.name,
        seed=sim.config.seed, checkpoint_s=sim.config.checkpoint_s, restore_s=sim.config.restore_s,
        storage_gbps=sim.config.storage_gbps, launch_s=sim.config.launch_s, topology=topo.params | {"name": topo.name},
        jobs=len(jobs),
        # the backfill rule in force: SimConfig's override, else the ordering policy's own
        backfill=sim.ordering.backfill if sim.config.backfill is None else sim.config.backfill,
    )
    if sim.config.link_history is not None:  # said only when chosen, so earlier runs' config.json stays as it was
        config.update(link_history=sim.config.link_history, link_resolution_s=sim.config.link_resolution_s)
    return SimResult(jobs, links, summary, config)


def _links_frame(sim) -> pd.DataFrame:
    return sim.fabric.history.frame(sim.topology)


def summarise(jobs: pd.DataFrame, links: pd.DataFrame, total_gpus: int, wall_s: float, events: int) -> dict:
    done = jobs.dropna(subset=["end_s"])
    jct = done.jct_s.to_numpy()
    makespan = float(done.end_s.max() - jobs.submit_s.min()) if len(done) else 0.0
    busy = float((jobs.run_s * jobs.gpus).sum())
    overload = float((links.overload_gbps * (links.t_end_s - links.t_start_s)).sum()) if len(links) else 0.0
    return dict(
        jobs=int(len(jobs)), finished=int(len(done)),
        avg_jct_s=float(jct.mean()) if len(jct) else np.nan,
        p50_jct_s=float(np.percentile(jct, 50)) if len(jct) else np.nan,
        p99_jct_s=float(np.percentile(jct, 99)) if len(jct) else np.nan,
        makespan_s=makespan,
        # the queueing metric: all time not running (before the first start and after every preemption)
        avg_wait_s=float(done.wait_s.mean()) if len(done) else np.nan,
        # first start - submit only: blind to preemptions (a preemptive policy looks free)
        avg_start_delay_s=float(done.queue_s.mean()) if len(done) else np.nan,
        avg_queue_s=float(done.queue_s.mean()) if len(done) else np.nan,  # deprecated alias of avg_start_delay_s
        gpu_util=busy / (total_gpus * makespan) if makespan > 0 else 0.0,
        overload_gbit=overload,
        avg_slowdown=float(done.slowdown.mean()) if len(done) else np.nan,
        preemptions=int(jobs.preemptions.sum()),
        migrations=int(jobs.migrations.sum()) if "migrations" in jobs.columns else 0,
        **phase_blind_summary(jobs),
        **deadline_summary(jobs),
        wall_s=float(wall_s), events=int(events),
    )


def phase_blind_summary(jobs: pd.DataFrame) -> dict:
    """The share of running time (job-seconds, and GPU-seconds) at an iteration time the network model computed
    blind to phase (its ``Moved.phase_blind``: e.g. tcp's random-phase mean field on large components); the rest
    ran alone on its links, inside one host, or at a phase-aware solve's time. NaN: nothing ran."""
    run = jobs.run_s.to_numpy()
    blind = jobs.phase_blind_s.to_numpy() if "phase_blind_s" in jobs else np.zeros(len(jobs))
    gpus = jobs.gpus.to_numpy()
    run_total, gpu_total = float(run.sum()), float((run * gpus).sum())
    return dict(phase_blind_job_share=float(blind.sum()) / run_total if run_total > 0 else np.nan,
                phase_blind_gpu_share=float((blind * gpus).sum()) / gpu_total if gpu_total > 0 else np.nan)


def deadline_summary(jobs: pd.DataFrame) -> dict:
    """Jobs with a deadline, how many missed it (finished late or never), and the share missed (NaN: none)."""
    met = jobs["deadline_met"].dropna() if "deadline_met" in jobs else pd.Series([], dtype=object)
    misses = int((~met.astype(bool)).sum())
    return dict(deadline_jobs=int(len(met)), deadline_misses=misses,
                deadline_miss_share=misses / len(met) if len(met) else np.nan)
