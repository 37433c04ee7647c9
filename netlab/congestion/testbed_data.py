"""Slowdown datasets measured on the live testbed, in the simulator dataset's schema.

An unattended generator: each experiment draws a rack-uplink rate and one to
three jobs (a job kind = gradient bytes and compute time at testbed scale),
places each job's two ranks at random (inside a rack or across racks), runs
them together with :func:`~netlab.testbed.scenarios.run_scenario` for about
the same wall time (a fast job runs proportionally more iterations, so the
window in which iteration times are taken holds steady contention for all),
and writes one row per job. Features are computed as for simulator rows, as if the job
were about to start with the others already running, on the topology at the
experiment's rates (the testbed's rates divided by ``rate_scale``, with the
gradient bytes divided the same way). The target ``slowdown`` is the job's
measured iteration time over its kind's measured isolated time (alone, two
ranks in one rack), taken once at the start.

Telemetry columns hold what the links showed *while the experiment ran*
(HTB drops, overlimits and backlog on the job's links, TCP retransmits on its
hosts): recorded for analysis, left out of the default featuriser.

Rows are appended to ``out`` (parquet, atomically) after every experiment, so
an interrupted collection keeps what it measured and resumes where it stopped.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from ..network.demand import build_demand
from ..network.model import NETWORKS
from ..sched import JobState, Placement
from ..workload.job import Job, isolated_iter_s
from ..workload.zoo import JobModel, ModelZoo
from .dataset import load_dataset, save_dataset
from ..testbed.experiments import rack_hosts, uplink_cables
from ..slowdown.features import Background, feature_rows
from ..slowdown.samples import COLUMNS, check_frame


@dataclass(frozen=True)
class JobKind:
    grad_bytes: int  # testbed bytes per iteration
    compute_ms: float

    @property
    def name(self) -> str:
        return f"tb-{self.grad_bytes // 1000}kB-{self.compute_ms:g}ms"


KINDS = (JobKind(500_000, 20.0), JobKind(1_000_000, 60.0), JobKind(2_000_000, 100.0), JobKind(2_000_000, 250.0),
         JobKind(4_000_000, 150.0))
UPLINK_MBIT = (50.0, 100.0, 200.0)


def _model_zoo(kinds, rate_scale: float) -> ModelZoo:
    zoo = ModelZoo.default()
    for k in kinds:
        zoo = zoo.with_model(JobModel(k.name, k.compute_ms / 1000.0, k.grad_bytes / rate_scale))
    return zoo


class _LinkSampler:
    """HTB counters of every shaped link, sampled in the background while an experiment runs."""

    def __init__(self, testbed, interval_s: float = 0.5):
        self.testbed, self.interval_s = testbed, interval_s
        self.frames: list[pd.DataFrame] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            self.frames.append(self.testbed.link_stats().assign(t=time.monotonic()))
            self._stop.wait(self.interval_s)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()
        self.frames.append(self.testbed.link_stats().assign(t=time.monotonic()))

    def per_link(self) -> pd.DataFrame:
        """Per directed link: drops/s and overlimits/s over the run, mean backlog bytes."""
        df = pd.concat(self.frames, ignore_index=True)
        first, last = df.groupby(["src", "dst"]).first(), df.groupby(["src", "dst"]).last()
        dt = (last.t - first.t).clip(lower=1e-9)
        return pd.DataFrame({"drops_per_s": (last.drops - first.drops) / dt,
                             "overlimits_per_s": (last.overlimits - first.overlimits) / dt,
                             "backlog_bytes": df.groupby(["src", "dst"]).backlog.mean()})


def measure_isolated(ctl, kinds=KINDS, iterations: int = 8) -> dict[str, float]:
    """Each kind alone on two hosts of one rack: its measured isolated iteration time (s)."""
    from ..testbed.scenarios import Scenario, ScenarioJob, run_scenario

    rack = rack_hosts(ctl.testbed.topology)[0]
    out = {}
    for k in kinds:
        sc = Scenario(f"iso-{k.name}", (ScenarioJob(1, (rack[0], rack[1]), k.grad_bytes, k.compute_ms, iterations),))
        out[k.name] = float(run_scenario(ctl, sc, start_delay_s=3.0).iter_s.iloc[0])
    return out


def _equal_duration_iterations(iterations: int, longest_s: float, iso_s: float, most: int = 400) -> int:
    """Iterations that last about as long as ``iterations`` of the slowest job (isolated), at most ``most``."""
    return int(min(most, max(iterations, np.ceil(iterations * longest_s / iso_s))))


def _experiment(ctl, rng: np.random.Generator, e: int, kinds, iso: dict, zoo: ModelZoo, iterations: int,
                max_jobs: int, equal_duration: bool = True) -> list[dict]:
    from ..testbed.scenarios import Scenario, ScenarioJob, run_scenario

    tb = ctl.testbed
    topo0 = tb.topology
    racks = rack_hosts(topo0)
    uplink = float(rng.choice(UPLINK_MBIT))
    rates = {u: uplink for u in uplink_cables(topo0)}
    free = {r: list(rng.permutation(h)) for r, h in enumerate(racks)}
    jobs = []
    for j in range(int(rng.integers(1, max_jobs + 1))):
        kind = kinds[int(rng.integers(len(kinds)))]
        cross = bool(rng.random() < 0.7)  # mostly cross-rack: that is where jobs meet
        ra = int(rng.integers(len(racks)))
        rb = (ra + 1) % len(racks) if cross else ra
        if len(free[ra]) < 1 or len(free[rb]) < (1 if cross else 2):
            continue
        hosts = (free[ra].pop(), free[rb].pop())
        jobs.append((j + 1, tuple(str(h) for h in hosts), kind))
    # Equal duration: each job runs about as long as the slowest kind's ``iterations``, so the common window
    # in which iteration times are taken sees every job's steady contention. With the same iteration count a
    # fast job finished in the slow one's compute gaps: 5 repeats of one pair measured a 31% spread, 0.7% so.
    longest_s = max(iso[kind.name] for _, _, kind in jobs) if jobs else 0.0
    jobs = [(ScenarioJob(jid, hosts, kind.grad_bytes, kind.compute_ms,
                         _equal_duration_iterations(iterations, longest_s, iso[kind.name]) if equal_duration
                         else iterations), kind) for jid, hosts, kind in jobs]
    sc = Scenario(f"exp{e}", tuple(j for j, _ in jobs), rates)
    with _LinkSampler(tb) as sampler:
        tcp0 = ctl.call_all("telemetry_sample")
        measured = run_scenario(ctl, sc, start_delay_s=4.0).set_index("job_id")
        tcp1 = ctl.call_all("telemetry_sample")
    links = sampler.per_link()
    feats = experiment_features(topo0, tb.rate_scale, [(sj.job_id, sj.hosts, kind.name) for sj, kind in jobs],
                                rates, zoo)
    rows = []
    for (sj, kind), (row, path) in zip(jobs, feats):
        lk = links.loc[links.index.intersection(path)] if path else links.iloc[:0]
        retrans = sum(float(tcp1[h]["tcp"].get("RetransSegs", 0)) - float(tcp0[h]["tcp"].get("RetransSegs", 0))
                      for h in sj.hosts)
        m = measured.loc[sj.job_id]
        row.update(tel_drops_per_s=float(lk.drops_per_s.max()) if len(lk) else 0.0,
                   tel_overlimits_per_s=float(lk.overlimits_per_s.max()) if len(lk) else 0.0,
                   tel_backlog_bytes=float(lk.backlog_bytes.max()) if len(lk) else 0.0,
                   tel_retransmits_per_s=retrans / max(m.iter_s * m.iterations, 1e-9))
        row.update(source="testbed", experiment_id=int(e), job_id=int(sj.job_id), model=kind.name, pattern="ring",
                   topology=f"{topo0.name}@uplink{uplink:g}mbit", hosts=",".join(sj.hosts),
                   slowdown=float(m.iter_s) / iso[kind.name], congestion_next=np.nan,
                   measured_iter_s=float(m.iter_s), isolated_measured_s=iso[kind.name], uplink_mbit=uplink)
        rows.append(row)
    return rows


def experiment_features(topo0, rate_scale: float, jobs, rates_mbit: dict, zoo: ModelZoo):
    """(feature row, path as (src, dst) pairs) per job of one experiment, each job seeing the others as
    background; ``jobs`` is (job_id, hosts, kind name) with one rank per host, ``rates_mbit`` the
    experiment's link rates per cable where they differ from the testbed's defaults."""
    from ..testbed.scenarios import both_ways, topology_at

    topo = topology_at(topo0, rate_scale, both_ways(rates_mbit))
    index = topo.host_index
    states, places, demands = [], [], []
    for job_id, hosts, kind in jobs:
        js = JobState(Job(int(job_id), 0.0, len(hosts), kind, 1.0), isolated_iter_s(zoo[kind], "ring", len(hosts), topo))
        p = Placement(tuple(index[h] for h in hosts), (1,) * len(hosts))
        d, _ = build_demand(topo, zoo[kind], "ring", int(job_id), p.hosts, p.gpus, js.iso_iter_s)
        states.append(js)
        places.append(p)
        demands.append(d)
    net = NETWORKS.create("fair")
    out = []
    for js, p, d in zip(states, places, demands):
        others = [o for o in demands if o is not None and o is not d]
        sol = net.solve(others, topo.link_capacity_gbps) if others else None
        bg = Background(topo, others, [sol.rate_gbps[o.job_id] for o in others] if others else [])
        row = feature_rows(bg, js, [p], zoo)[0]
        path = [(topo.link_src[lk], topo.link_dst[lk]) for lk in (d.links if d is not None else [])]
        out.append((row, path))
    return out


def refeaturize(df: pd.DataFrame, topology, rate_scale: float = 0.002, kinds=KINDS) -> pd.DataFrame:
    """Recompute the feature columns of stored testbed rows (e.g. after the schema gained a column).

    Everything a row's features depend on is in the dataset: the experiment's
    jobs (``job_id``, ``hosts``, ``model``) and its ``uplink_mbit``; the
    measured columns (targets, telemetry) are kept.
    """
    from ..topology import load_topology
    from ..slowdown.features import FEATURES

    topo0 = load_topology(topology)
    zoo = _model_zoo(kinds, rate_scale)
    out = []
    for _, exp in df.groupby("experiment_id", sort=False):
        rates = {u: float(exp.uplink_mbit.iloc[0]) for u in uplink_cables(topo0)}
        jobs = [(r.job_id, tuple(r.hosts.split(",")), r.model) for r in exp.itertuples()]
        feats = experiment_features(topo0, rate_scale, jobs, rates, zoo)
        exp = exp.copy()
        for col in FEATURES.columns:
            exp[col] = [row[col] for row, _ in feats]
        out.append(exp)
    return pd.concat(out, ignore_index=True)[list(dict.fromkeys(list(df.columns) + list(FEATURES.columns)))]


def testbed_dataset(ctl, n_experiments: int = 20, seed: int = 0, iterations: int = 8, max_jobs: int = 3,
                    kinds=KINDS, out=None, progress: bool | None = None, equal_duration: bool = True) -> pd.DataFrame:
    """Run ``n_experiments`` randomised co-locations on the testbed behind ``ctl``; rows in the dataset schema.

    ``iterations`` is the slowest job's; with ``equal_duration`` faster jobs run
    proportionally more (by their kinds' measured isolated times), so every
    job's measured iteration time reflects steady contention.

    With ``out``, rows already there are kept and their experiments skipped
    (resume), and the file is rewritten atomically after every experiment.
    """
    from ..progress import tqdm

    if len(rack_hosts(ctl.testbed.topology)) < 2:
        raise ValueError("the testbed dataset needs a topology with two or more racks")
    zoo = _model_zoo(kinds, ctl.testbed.rate_scale)
    done = load_dataset(out) if out is not None and Path(out).exists() else pd.DataFrame(columns=list(COLUMNS))
    have = set(done.experiment_id.astype(int)) if len(done) else set()
    iso = measure_isolated(ctl, kinds)
    frames = [done] if len(done) else []
    streams = np.random.SeedSequence(seed).spawn(n_experiments)
    for e in tqdm(range(n_experiments), desc="testbed experiments", unit="exp", disable=progress is False):
        if e in have:
            continue
        rows = _experiment(ctl, np.random.default_rng(streams[e]), e, kinds, iso, zoo, iterations, max_jobs,
                           equal_duration)
        frames.append(pd.DataFrame(rows))
        if out is not None:
            save_dataset(pd.concat(frames, ignore_index=True), out)
    df = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=list(COLUMNS))
    return check_frame(df)


def simulator_prediction(df: pd.DataFrame, topology, network: str = "tcp", rate_scale: float = 0.002,
                         kinds=KINDS, wire_overhead: float = 1.047, iterations: int = 8,
                         **network_kwargs) -> pd.Series:
    """The slowdown a network model predicts for every row of a testbed dataset, with no learned correction.

    Each experiment is rebuilt as the testbed ran it (its jobs, placements and
    uplink rate; every job from the common start for as many iterations as
    the equal-duration rule gave it, from the stored measured isolated times)
    and predicted with :func:`~netlab.testbed.scenarios.predict_on`; the
    slowdown is that prediction over the same model's prediction of the kind
    alone on two hosts of one rack, as the measured target is defined.
    """
    from ..testbed.scenarios import Scenario, ScenarioJob, both_ways, predict_on, topology_at
    from ..topology import load_topology

    topo0 = load_topology(topology) if isinstance(topology, str) or hasattr(topology, "__fspath__") else topology
    by_name = {k.name: k for k in kinds}
    rack = rack_hosts(topo0)[0]
    iso: dict[str, float] = {}

    def alone(kind: str) -> float:
        if kind not in iso:
            k = by_name[kind]
            sc = Scenario("iso", (ScenarioJob(1, (str(rack[0]), str(rack[1])), k.grad_bytes, k.compute_ms, iterations),))
            iso[kind] = float(predict_on(topology_at(topo0, rate_scale, {}), rate_scale, sc, network, wire_overhead,
                                         **network_kwargs).predicted_iter_s.iloc[0])
        return iso[kind]

    out = pd.Series(np.nan, index=df.index, name=f"{network}_slowdown")
    for e, exp in df.groupby("experiment_id", sort=False):
        rates = {u: float(exp.uplink_mbit.iloc[0]) for u in uplink_cables(topo0)}
        measured_iso = dict(zip(exp.model, exp.isolated_measured_s))
        longest = max(measured_iso.values())
        jobs = tuple(ScenarioJob(int(r.job_id), tuple(r.hosts.split(",")), by_name[r.model].grad_bytes,
                                 by_name[r.model].compute_ms,
                                 _equal_duration_iterations(iterations, longest, measured_iso[r.model]))
                     for r in exp.itertuples())
        pred = predict_on(topology_at(topo0, rate_scale, both_ways(rates)), rate_scale, Scenario(f"exp{e}", jobs),
                          network, wire_overhead, **network_kwargs).set_index("job_id").predicted_iter_s
        out.loc[exp.index] = [pred[int(j)] / alone(m) for j, m in zip(exp.job_id, exp.model)]
    return out
