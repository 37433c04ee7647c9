"""The interleaving experiment on the testbed (issue 13, part 4): do time shifts between jobs that share a
rack uplink hold on real gloo jobs, and does the simulator predict what they buy?

Scenarios (:func:`interleave_scenarios`): 2-rank cross-rack jobs on the two-rack testbed, rack uplinks at
``fidelity.UPLINK_MBIT``, ``fidelity.GRAD_BYTES`` per all-reduce (``C`` = 31.4 ms alone on the uplink) and
compute ``COMPUTE_OVER_C`` x C, so a job alone communicates C / 2.6C = 38% of its iteration:

* each job alone (jobs 1 and 2; the one-job runs also calibrate the models' wire overhead);
* two identical jobs aligned (offset 0) and at the shift CASSINI chooses (:func:`cassini_offsets`);
* the same pair at ``n_random`` random shifts (uniform over job 2's period, fixed seed);
* unequal compute (0.60 : 0.64) and a 1:2 compute ratio, each started aligned and at CASSINI's shift;
* three jobs aligned and at CASSINI's shifts.

CASSINI's shift is taken from CASSINI's own scorer (:func:`netlab.policies.cassini.score.scan`: the
compatibility score of every shift of a job against the jobs already on the link) and the ranker's rule
for equally good shifts (:func:`netlab.policies.cassini.ranker.plateau_centre`: the centre of the longest
run of best shifts); jobs are placed one after another as they would arrive, each against the ones
before it. For two identical jobs this is half an iteration.

Collection (:func:`collect_interleave`) runs every scenario through :func:`fidelity.collect_runs` (raw
per-iteration logs, link byte/packet/drop counters) and adds, per run, the telemetry
:mod:`netlab.congestion.testbed_data` takes: HTB overlimits/s, drops/s and backlog of every shaped link
(sampled in the background) and TCP retransmits per host (the agents' ``telemetry_sample``), as JSON
columns ``tel_links`` and ``tel_retransmits``. Scoring (:func:`interleave_table`) sets measured mean and
p99 iteration time beside the ``tcp`` (and ``fair``) model's prediction and the shifted/aligned ratios.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd

from . import fidelity as fid
from ..testbed.experiments import racks, uplink_cables
from ..testbed.scenarios import Scenario, ScenarioJob, scenario_rates

COMPUTE_OVER_C = 1.6  # compute = 1.6 C: the job communicates 1 / 2.6 = 38% of its iteration alone
ITERATIONS = 320  # the slowest job of a scenario; the others as long (fidelity.equal_duration)
UNEQUAL = (0.60, 0.64)
SEED = 13


# ----------------------------------------------------------------------------- CASSINI's shift
def job_wave(compute_ms: float, comm_ms: float, rate_gbps: float):
    """A job's on/off wave on the uplink: compute, then its all-reduce at the link's full rate."""
    from ..policies.cassini.score import Wave

    return Wave(period_s=(compute_ms + comm_ms) / 1000.0, start_s=compute_ms / 1000.0, window_s=comm_ms / 1000.0,
                rate_gbps=rate_gbps)


def cassini_offsets(waves, capacity_gbps: float) -> list[float]:
    """Start offsets (ms) CASSINI gives the jobs of ``waves`` on one link: job 0 at 0; each next job at the
    centre of the longest run of its best shifts (CASSINI's score over every shift of the job against the
    jobs already placed; the ranker's ``plateau_centre``), i.e. as the jobs would arrive one by one.
    The phase (a fraction of the job's own period on CASSINI's circle) times its period is the offset."""
    from ..policies.cassini.ranker import plateau_centre
    from ..policies.cassini.score import scan

    phases: list[float | None] = [0.0] + [None] * (len(waves) - 1)
    for j in range(1, len(waves)):
        scores, circle = scan(waves, capacity_gbps, phases, j)
        ok = scores >= scores.max() - 1e-9
        k = plateau_centre(ok)
        phases[j] = 0.0 if k is None else k / int(circle.counts[j])
    return [float(p) * w.period_s * 1000.0 for p, w in zip(phases, waves)]


# ----------------------------------------------------------------------------- scenarios
def uplink_ms(grad_bytes: int, uplink_mbit: float, ranks: int = 2) -> float:
    """``C``: one job's all-reduce alone on the rack uplink (with headers), in ms. A ring of ``ranks`` hosts,
    half in each rack, sends one flow each way across the uplink carrying 2 (n - 1) / n x the gradient
    (nccl-tests' bus bytes): 1x for 2 ranks, 1.5x for 4."""
    return grad_bytes * 2 * (ranks - 1) / ranks * 8 / (uplink_mbit * 1e6) * fid.HEADER_OVERHEAD * 1000.0


def interleave_scenarios(testbed, grad_bytes: int = fid.GRAD_BYTES, compute_over_c: float = COMPUTE_OVER_C,
                         iterations: int = ITERATIONS, uplink_mbit: float = fid.UPLINK_MBIT,
                         warmup: int = fid.WARMUP, n_random: int = 8, seed: int = SEED,
                         three: bool = True, ranks: int = 2) -> list[Scenario]:
    """The experiment's scenarios (see the module doc), headline ones first, the three-job ones last.

    ``ranks`` (2 or 4) per job, half in each rack (job j takes the j-th group of ``ranks / 2`` hosts of
    each rack; the ring visits its rack-0 hosts, then its rack-1 hosts), so every job crosses the uplink
    once each way; compute stays ``compute_over_c`` x that job's own ``C`` (:func:`uplink_ms`).
    """
    if ranks not in (2, 4):
        raise ValueError(f"interleave_scenarios: ranks must be 2 or 4, got {ranks!r}")
    a, b = racks(testbed)
    half = ranks // 2
    rates = {c: float(uplink_mbit) for c in uplink_cables(testbed.topology)}
    cur = scenario_rates(testbed, Scenario("", (), rates))
    uplink = min(cur[(u, v)] for x, y in uplink_cables(testbed.topology) for u, v in ((x, y), (y, x)))
    C = uplink_ms(grad_bytes, uplink, ranks)  # noqa: N806
    cap = uplink / 1000.0
    base = compute_over_c * C
    if min(len(a), len(b)) < 2 * half:
        raise ValueError(f"interleave_scenarios: two {ranks}-rank jobs need {2 * half} hosts per rack; "
                         f"{testbed.topology.name} has {[len(a), len(b)]}")

    def J(jid, compute, offset=0.0):  # noqa: N802
        k = (jid - 1) * half
        return ScenarioJob(jid, tuple(a[k:k + half]) + tuple(b[k:k + half]), int(grad_bytes),
                           round(float(compute), 3), iterations, round(float(offset), 3))

    def S(name, *jobs):  # noqa: N802
        return fid.equal_duration(testbed, Scenario(name, tuple(jobs), dict(rates), warmup), iterations)

    def shifted(computes):
        return cassini_offsets([job_wave(c, C, cap) for c in computes], cap)

    out = [S("job 1 alone", J(1, base)), S("job 2 alone", J(2, base)),
           S("2 jobs aligned", J(1, base), J(2, base))]
    off = shifted([base, base])
    out.append(S("2 jobs at CASSINI's shift", J(1, base), J(2, base, off[1])))
    unequal = base * UNEQUAL[1] / UNEQUAL[0]
    off_u = shifted([base, unequal])
    out += [S("unequal compute 0.60:0.64 aligned", J(1, base), J(2, unequal)),
            S("unequal compute 0.60:0.64 at CASSINI's shift", J(1, base), J(2, unequal, off_u[1]))]
    off_2 = shifted([base, 2 * base])
    out += [S("compute 1:2 aligned", J(1, base), J(2, 2 * base)),
            S("compute 1:2 at CASSINI's shift", J(1, base), J(2, 2 * base, off_2[1]))]
    rng = np.random.default_rng(seed)
    for k, u in enumerate(rng.random(n_random)):
        out.append(S(f"2 jobs at random shift {k}", J(1, base), J(2, base, u * (base + C))))
    if three and min(len(a), len(b)) >= 3 * half:
        off3 = shifted([base] * 3)
        out += [S("3 jobs aligned", J(1, base), J(2, base), J(3, base)),
                S("3 jobs at CASSINI's shifts", *(J(i + 1, base, off3[i]) for i in range(3)))]
    return out


def scenario_kind(name: str) -> str:
    """The scenario's family: alone, aligned, cassini, random (the 2-identical-job ones), or the name."""
    if name.endswith("alone"):
        return "alone"
    if name == "2 jobs aligned":
        return "aligned"
    if name == "2 jobs at CASSINI's shift":
        return "cassini"
    if name.startswith("2 jobs at random shift"):
        return "random"
    return name


# ----------------------------------------------------------------------------- collection with telemetry
def link_telemetry(frames: list[pd.DataFrame]) -> list[list]:
    """Per directed link from the sampler's snapshots (``link_stats`` rows plus ``t``): ``[src, dst,
    overlimits_per_s, drops_per_s, backlog_mean_bytes, backlog_max_bytes, qlen_max]``, links that carried
    traffic (bytes grew) only."""
    df = pd.concat(frames, ignore_index=True)
    g = df.groupby(["src", "dst"])
    first, last = g.first(), g.last()
    dt = (last.t - first.t).clip(lower=1e-9)
    out = []
    for key in first.index:
        if last.bytes[key] <= first.bytes[key]:
            continue
        d = df[(df.src == key[0]) & (df.dst == key[1])]
        out.append([key[0], key[1], float((last.overlimits[key] - first.overlimits[key]) / dt[key]),
                    float((last.drops[key] - first.drops[key]) / dt[key]), float(d.backlog.mean()),
                    float(d.backlog.max()), float(d.qlen.max()) if "qlen" in d.columns else float("nan")])
    return out


def retransmits(tcp0: dict, tcp1: dict) -> dict:
    """TCP segments retransmitted per host between two ``telemetry_sample`` calls."""
    out = {}
    for h in tcp1:
        try:
            out[h] = float(tcp1[h]["tcp"].get("RetransSegs", 0)) - float(tcp0[h]["tcp"].get("RetransSegs", 0))
        except (KeyError, TypeError, AttributeError):
            continue
    return out


def collect_interleave(ctl, scenarios: list[Scenario], repeats: int = 1, out=None, log=print,
                       extra: dict | None = None, sample_s: float = 0.5) -> pd.DataFrame:
    """Every scenario ``repeats`` times (repeat-major), each run through :func:`fidelity.collect_runs` with
    the links' HTB counters sampled and TCP retransmits counted around it; resumable like ``collect_runs``
    (same scenario key and repeat: not run again; scenarios no longer listed: dropped), ``out`` replaced
    atomically after every run."""
    from .testbed_data import _LinkSampler

    keys = {fid.scenario_key(sc) for sc in scenarios}
    done = pd.DataFrame()
    if out is not None and Path(out).exists():
        done = pd.read_parquet(out)
        done = done[done.scenario_key.isin(keys)]
    have = set(zip(done.scenario_key, done.repeat)) if len(done) else set()
    frames = [done] if len(done) else []
    for r in range(repeats):
        for sc in scenarios:
            if (fid.scenario_key(sc), r) in have:
                continue
            with _LinkSampler(ctl.testbed, sample_s) as sampler:
                try:
                    tcp0 = ctl.call_all("telemetry_sample")
                except Exception as exc:  # noqa: BLE001 - telemetry is a bonus
                    log(f"telemetry_sample failed: {exc}")
                    tcp0 = None
                df = fid.collect_runs(ctl, [sc], repeats=1, out=None, progress=False, log=lambda *_: None,
                                      extra=extra)
                tcp1 = ctl.call_all("telemetry_sample") if tcp0 is not None else None
            df["repeat"] = r
            df["tel_links"] = json.dumps(link_telemetry(sampler.frames))
            df["tel_retransmits"] = json.dumps(retransmits(tcp0, tcp1) if tcp0 is not None else {})
            frames.append(df)
            log(f"repeat {r} {sc.name}: {float(df.run_wall_s.iloc[0]):.1f} s (cpu busy "
                f"{float(df.cpu_busy_frac.iloc[0]):.0%}, load {float(df.load_avg_1m.iloc[0]):.1f})")
            if out is not None:
                fid.write_runs(pd.concat(frames, ignore_index=True), out)
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


# ----------------------------------------------------------------------------- scoring
def iteration_stats(raw: pd.DataFrame, rank: int = 0) -> pd.DataFrame:
    """Per run and job: ``mean_ms`` (the steady window's mean period, :func:`fidelity.steady_iterations`)
    and ``p99_ms``, ``p50_ms`` of the single iteration times in that window (rank ``rank``'s starts)."""
    steady = fid.steady_iterations(raw, rank=rank)
    rows = []
    for key, run in fid.run_groups(raw):
        w = int(run["warmup"].iloc[0]) if "warmup" in run.columns else fid.WARMUP
        lo, hi = fid.steady_window(run, w, rank)
        for jid, df in run.groupby("job_id", sort=True):
            d = fid.rank_rows(df, rank)
            d = d[d["iter"] >= w]
            s = d[(d.compute_start >= lo) & (d.allreduce_end <= hi)]
            if len(s) < 2:
                s = d
            per = np.diff(s.compute_start.to_numpy(dtype=float)) * 1000.0
            rows.append(dict(fid.run_dict(raw, key), job_id=int(jid),
                             p50_ms=float(np.median(per)) if len(per) else float("nan"),
                             p99_ms=float(np.quantile(per, 0.99)) if len(per) else float("nan")))
    out = pd.DataFrame(rows)
    keys = [k for k in fid.RUN_KEYS if k in raw.columns] + ["job_id"]
    return steady.assign(mean_ms=steady.iter_s * 1000.0)[keys + ["mean_ms", "n_iters"]].merge(out, on=keys)


def telemetry_rows(runs: pd.DataFrame, topo) -> pd.DataFrame:
    """Per run: on the uplinks (both directions, the max), HTB overlimits/s, drops/s, mean and max backlog
    (bytes), and TCP retransmits per second summed over the hosts; also the link counters' uplink drops."""
    up = {k for a, b in uplink_cables(topo) for k in ((a, b), (b, a))}
    rows = []
    for (name, rep), run in runs.groupby(list(fid.RUN_KEYS), sort=False):
        r0 = run.iloc[0]
        links = [x for x in json.loads(r0.get("tel_links", "[]") or "[]") if (x[0], x[1]) in up]
        rt = json.loads(r0.get("tel_retransmits", "{}") or "{}")
        counters = [x for x in json.loads(r0.get("link_counters", "[]") or "[]") if (x[0], x[1]) in up]
        wall = float(r0.run_wall_s)
        rows.append(dict(scenario=name, repeat=int(rep),
                         uplink_overlimits_per_s=max((x[2] for x in links), default=float("nan")),
                         uplink_drops_per_s=max((x[3] for x in links), default=float("nan")),
                         uplink_backlog_mean_bytes=max((x[4] for x in links), default=float("nan")),
                         uplink_backlog_max_bytes=max((x[5] for x in links), default=float("nan")),
                         uplink_drops=sum(x[4] for x in counters) if counters else 0,
                         uplink_packets=sum(x[3] for x in counters) if counters else 0,
                         retransmits=float(sum(rt.values())) if rt else float("nan"),
                         retransmits_per_s=float(sum(rt.values())) / wall if rt else float("nan")))
    return pd.DataFrame(rows)


def interleave_table(runs: pd.DataFrame, testbed, models=("fair", "tcp")) -> tuple[pd.DataFrame, dict]:
    """Per (scenario, repeat, job): measured mean/p50/p99 iteration (ms), each model's calibrated mean
    (``<model>_mean_ms``, :func:`fidelity.score_runs`) and the ``tcp`` model's own run's mean/p99
    (``tcp_sim_mean_ms``, ``tcp_sim_p99_ms``, :func:`fidelity.simulated_runs`). attrs: the scoring's."""
    scored = fid.score_runs(runs, testbed, models=models)
    keys = ["scenario", "repeat", "job_id"]
    meas = iteration_stats(runs)
    df = scored[keys + ["hosts", "compute_ms", "offset_ms", "contended", "n_jobs"]
                + [f"{m}_s" for m in scored.attrs["models"]]].merge(meas, on=keys)
    for m in scored.attrs["models"]:
        df[f"{m}_mean_ms"] = df.pop(f"{m}_s") * 1000.0
    info = dict(wire_overhead=scored.attrs["wire_overhead"], models=scored.attrs["models"],
                notes=scored.attrs["notes"])
    if "tcp" in scored.attrs["models"]:
        sim = fid.simulated_runs(runs, testbed, "tcp", scored.attrs["wire_overhead"])
        sim = sim.merge(runs.drop_duplicates(["scenario", "repeat"])[["scenario", "repeat", "warmup"]],
                        on=["scenario", "repeat"])
        st = iteration_stats(sim).rename(columns={"mean_ms": "tcp_sim_mean_ms", "p99_ms": "tcp_sim_p99_ms",
                                                  "p50_ms": "tcp_sim_p50_ms", "n_iters": "tcp_sim_n_iters"})
        df = df.merge(st, on=keys, how="left")
        info["simulated"] = sim
    return df, info


def shift_ratios(table: pd.DataFrame, value: str = "mean_ms") -> pd.DataFrame:
    """Per repeat and 2-identical-job scenario, the jobs' mean of ``value`` over the aligned run's: the
    shifted/aligned ratio, measured and by every model column present (``<model>_mean_ms``,
    ``tcp_sim_mean_ms``, and for ``value='p99_ms'`` ``tcp_sim_p99_ms``)."""
    pred_cols = [c for c in table.columns if c.endswith("_mean_ms") and c != "mean_ms"] if value == "mean_ms" \
        else [c for c in ("tcp_sim_p99_ms",) if c in table.columns]
    cols = [value] + pred_cols
    rows = []
    for rep, d in table.groupby("repeat"):
        per = d.groupby("scenario", sort=False)[cols].mean()
        if "2 jobs aligned" not in per.index:
            continue
        base = per.loc["2 jobs aligned"]
        for name, r in per.iterrows():
            if scenario_kind(name) not in ("aligned", "cassini", "random"):
                continue
            row = dict(repeat=int(rep), scenario=name, measured=float(r[value] / base[value]))
            for c in pred_cols:
                row[c.replace("_ms", "")] = float(r[c] / base[c])
            rows.append(row)
    return pd.DataFrame(rows)
