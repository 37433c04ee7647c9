"""Per-job and per-link tables, the run summary, and writing them atomically.

Per-job columns (``jobs.parquet``): job_id, name, model, pattern, gpus,
submit_s, start_s, end_s, jct_s, queue_s (first start - submit), wait_s (all
time not holding GPUs), run_s, hosts, racks, placement, preemptions,
comm_fraction (share of progress time spent communicating), iterations,
iso_iter_s, isolated_s (iterations at isolated speed), slowdown (progress time
/ isolated time: the network's cost) and jct_slowdown (JCT / isolated time).

Per-link columns (``links.parquet``): one row per link per interval between
network recomputations: t_start_s, t_end_s, link, src, dst, tier,
capacity_gbps, load_gbps, utilisation, overload_gbps. ``overload_gbps`` x
duration is the time-integrated demand above capacity (the ECN-mark proxy).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from ..fileio import atomic_write  # noqa: F401  (here since before netlab.fileio; report, sweep and testbed import it here)

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


def job_table(states, topo) -> pd.DataFrame:
    """The per-job table from run-time job states; shared by the simulator and the live testbed."""
    rows = []
    for js in states:
        j = js.job
        p = js.placement
        hosts = list(p.hosts) if p else []
        end = js.end_s
        jct = end - j.submit_s if end is not None else np.nan
        rows.append(dict(
            job_id=j.job_id, name=j.name, model=j.model, pattern=j.pattern, gpus=j.gpus, submit_s=j.submit_s,
            start_s=js.first_start_s if js.first_start_s is not None else np.nan,
            end_s=end if end is not None else np.nan, jct_s=jct,
            queue_s=(js.first_start_s - j.submit_s) if js.first_start_s is not None else np.nan,
            wait_s=jct - js.run_s if end is not None else np.nan, run_s=js.run_s,
            hosts=len(hosts), racks=len(set(topo.host_rack[hosts].tolist())) if hosts else 0,
            placement=",".join(f"{topo.hosts[h].name}:{g}" for h, g in zip(p.hosts, p.gpus)) if p else "",
            preemptions=js.preemptions,
            comm_fraction=js.comm_time_s / js.progress_s if js.progress_s > 0 else 0.0,
            iterations=j.iterations, iso_iter_s=js.iso_iter_s, isolated_s=js.isolated_s,
            slowdown=js.progress_s / js.isolated_s if js.isolated_s > 0 else np.nan,
            jct_slowdown=jct / js.isolated_s if js.isolated_s > 0 else np.nan,
        ))
    return pd.DataFrame(rows).sort_values("job_id", kind="stable").reset_index(drop=True)


def build_result(sim, wall_s: float) -> SimResult:
    topo = sim.topology
    jobs = job_table(sim.states.values(), topo)
    links = _links_frame(sim)
    summary = summarise(jobs, links, topo.total_gpus, wall_s, sim.kernel.events)
    summary.update(ordering=sim.ordering.name, placement=sim.placement.name, preemption=sim.preemption.name,
                   network=sim.config.network, topology=topo.name, seed=sim.config.seed,
                   tier_bytes=tier_bytes(links))
    config = dict(
        ordering=sim.ordering.describe(), placement=sim.placement.describe(), preemption=sim.preemption.describe(),
        network=sim.config.network, seed=sim.config.seed, checkpoint_s=sim.config.checkpoint_s,
        restore_s=sim.config.restore_s, topology=topo.params | {"name": topo.name}, jobs=len(jobs),
        # the backfill rule in force: SimConfig's override, else the ordering policy's own
        backfill=sim.ordering.backfill if sim.config.backfill is None else sim.config.backfill,
    )
    return SimResult(jobs, links, summary, config)


LINK_COLUMNS = ("t_start_s", "t_end_s", "link", "src", "dst", "tier", "capacity_gbps", "load_gbps", "utilisation",
                "overload_gbps")


def empty_links() -> pd.DataFrame:
    return pd.DataFrame({c: pd.Series(dtype=object if c in ("src", "dst", "tier") else float) for c in LINK_COLUMNS})


def _links_frame(sim) -> pd.DataFrame:
    topo = sim.topology
    segs = [s for s in sim.fabric.segments if len(s[2])]
    if not segs:
        return empty_links()
    t0 = np.concatenate([np.full(len(s[2]), s[0]) for s in segs])
    t1 = np.concatenate([np.full(len(s[2]), s[1]) for s in segs])
    link = np.concatenate([s[2] for s in segs])
    load = np.concatenate([s[3] for s in segs])
    over = np.concatenate([s[4] for s in segs])
    cap = topo.link_capacity_gbps[link]
    src = np.asarray(topo.link_src, dtype=object)[link]
    dst = np.asarray(topo.link_dst, dtype=object)[link]
    return pd.DataFrame(dict(t_start_s=t0, t_end_s=t1, link=link, src=src, dst=dst, tier=topo.link_tier[link],
                             capacity_gbps=cap, load_gbps=load, utilisation=load / cap, overload_gbps=over))


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
        wall_s=float(wall_s), events=int(events),
    )
