"""netlab's network models against a packet-level referee (ns-3), beyond what the testbed reaches.

Writes ``benchmarks/results/referee.json``:

* ``sanity``: the referee checked first. A ring of 2-8 ranks alone across a
  2:1 bottleneck against ns3-facts' formula (``1.0373 x payload / rate +
  2(n-1) x 188 us``) and the 2-rank 375 kB ring (ns3-facts 51.62 ms, testbed
  51.24 ms); the testbed's own 14 fidelity scenarios
  (``fidelity_runs.parquet``) in ns-3 with deep (1000-packet) and shallow
  (100-packet) switch queues against what the testbed measured, and
  ``tcp`` against ns-3 on them; and the referee's own spread (``noise``):
  scenarios of :data:`NOISE_SCENARIOS` run again with other compute-jitter
  draws, per contended job how far the two runs' iteration times are apart
  (on the calibration half's two 8:1 large components p90 1-2% under deep
  Reno, 4-5% under DCQCN, but 13-25% under DCTCP and 22-29% under shallow
  Reno: there a model scored against one draw cannot do better than that
  spread allows).
* ``families``: per scenario family (:data:`netlab.validate.families.FAMILIES`)
  and transport regime (:data:`netlab.validate.scenario.REGIMES`), over the
  *scoring half's* contended jobs, for every network model: median / p90 /
  max APE, the median signed error on jobs the referee slows 2x or more
  (heavy-job bias) and the counts (:func:`netlab.validate.compare.error_summary`;
  ``ape`` applies the model's slowdown to the referee's time alone,
  ``ape_raw`` is its own iteration time); per regime pooled over families
  too; drops, ECN marks and RTOs per regime; ns-3's CPU seconds over each
  model's per scenario (median ratio).
* ``scoring_mean_of_draws``: the scoring half of :data:`DRAW_REGIMES` (the lossy regimes, where one referee draw
  is itself p90 13-29% from the next on 8:1 components) scored twice over the same scenarios: against the original
  single draw (as ``families``; the figure comparable with earlier sessions) and against the per-job mean of
  ``--draws`` draws (:mod:`netlab.validate.draws`; the extra draws are :func:`netlab.validate.sanity.replicate`
  runs, cached like the others), per regime and family, with the draws' own spread. Models unchanged, nothing
  fitted: only the reference moves. Families whose scenarios lack the extra draws are listed, not scored.
  ``cross_draw_heavy``: the heavy-job bias with heavy chosen on one draw and the error read on the other
  (:func:`netlab.validate.draws.cross_heavy`): heavy is the referee's own slowdown >= 2x, so against the draw that
  chose it a job that drew a slow run (a timeout) is under-predicted by that draw's luck alone.
* ``calibration_draws``: the same three ways for the calibration half's scenarios that have the draws, the regimes'
  own models as registered, over all and per oversubscription: whether the fit's misses are the referee's noise
  (they shrink against the mean of draws) or the model's (they stay).
* ``noise_floor``: for :data:`NOISE_FLOOR_REGIMES` (shallow Reno), both halves, the regime's own model (and as
  registered, and :data:`NOISE_FLOOR_BEFORE`'s variants) against every stored draw of each scenario, up to
  ``--noise-draws`` (:mod:`netlab.validate.noise`): the referee's own floor (what a perfect deterministic model
  scores against one draw), the model's part (its error against the draws' centre with the noise left in their mean
  taken out), the score against the centre of k draws for every k, and the misses that persist on every draw.
  Without ``--score-only`` the missing draws of ``--noise-halves`` are run first, every second draw before any third.
* ``beatdown``: the scoring half under DCTCP, the registered ``dctcp`` (with the multi-bottleneck beat-down,
  :mod:`netlab.network.tcp.beatdown`, its exponent and rate cut chosen on the calibration half:
  ``regimes_fit.json['beatdown_grid']``, ``bench_regimes_fit.py --beatdown``) beside ``dctcp`` as registered before
  the term, against one draw and the mean of the draws, with each one's CPU seconds.
* ``coverage``: how thick each of those cells is (:mod:`netlab.validate.coverage`):
  per regime, family and half, the scenarios, contended jobs, heavy jobs and
  the contention components' sizes (min / median / max jobs); the scoring
  half's rows are what ``families`` scores, the calibration half's every
  cached run ``bench_regimes_fit.py`` can fit on (its first
  ``--calibration-per-family`` seeds per family).
* ``loss``: per regime and half, the referee's per-job loss counters
  (:mod:`netlab.validate.loss`): jobs with any RTO, drops / retransmits /
  RTOs / ECN marks per iteration of contended jobs, and the correlation of a
  job's RTOs with the regime's own model's error.

``--trace FAMILY:SEED ...`` runs only those scenarios again, traced (:mod:`netlab.validate.trace`), and writes what
the traces say to ``referee_trace.json``: per switch queue its utilisation, queue found and marked share, per ring flow
its steps' time over alone and the marking queues it crosses, per job the regime's own model's error beside them.

ns-3 runs are cached by scenario hash in ``--runs-dir`` (one JSON per
scenario: re-scoring a changed model re-runs nothing; an interrupted run
resumes), cheapest scenarios first. ``--workers`` runs that many scenarios at
once (the machine has 2 cores shared with others: the default is 1).

Usage:
    python benchmarks/bench_referee.py                      # 2 scoring scenarios per family, every regime
    python benchmarks/bench_referee.py --per-family 2 --score-per-family 4 --workers 2   # what referee.json holds
    python benchmarks/bench_referee.py --score-only --score-per-family 4   # from cached runs only (no ns-3 needed)
    python benchmarks/bench_referee.py --families 3tier --seeds 6 0 --regimes dctcp --need-job-loss  # given seeds
    python benchmarks/bench_referee.py --score-per-family 4 --families 2tier --regimes dctcp   # + its extra draws
    python benchmarks/bench_referee.py --trace 2tier-overlap:18 2tier-large:2   # traced DCTCP runs (referee_trace.json)
    python benchmarks/bench_referee.py --regimes reno-shallow --per-family 0 --score-per-family 4 --noise-draws 4 \
        --out draws.json   # run shallow Reno's missing draws for noise_floor (then --score-only for referee.json)
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import platform
import signal
import sys
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path

import numpy as np
import pandas as pd

from netlab.sim.metrics import write_json
from netlab.validate import sanity
from netlab.validate.compare import compare_jobs, error_summary, scenario_speed
from netlab.validate.coverage import coverage_table, scenario_coverage, stored_family_runs
from netlab.validate.draws import cross_heavy, draw_spread, mean_of_draws, rescore
from netlab.validate.families import FAMILIES, family_seeds, generate, half, scoring_seeds
from netlab.validate.loss import job_loss_rows, loss_summary
from netlab.validate.predict import model_specs, predict_all
from netlab.validate.referee import RefereeError, build_referee, referee_unavailable
from netlab.validate.runs import RunStore, record_times, referee_record
from netlab.validate.scaled import rto_runs
from netlab.validate.scenario import REGIMES, Transport

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
TESTBED_TOPOLOGY = ROOT / "testbed" / "topologies" / "leafspine-2rack.yaml"
#: (family, seed, referee transport) run twice (another compute-jitter draw, :func:`netlab.validate.sanity.replicate`):
#: two 8:1 scenarios of the scoring half under deep Reno, where sharing moves most, and the calibration half's two 8:1
#: large components, where every regime's calibration p90 misses concentrate (regimes_fit.json), under each regime,
#: and DCTCP's worst calibration scenario, the overlapped 8:1 2tier-overlap 18
NOISE_SCENARIOS = (("2tier", 7, "reno-deep"), ("2tier-overlap", 3, "reno-deep"),
                   *(("2tier-large", s, r) for s in (32, 2) for r in ("reno-deep", "reno-shallow", "dctcp", "dcqcn")),
                   ("2tier-overlap", 18, "dctcp"))
#: the regimes whose scoring half is also scored against the mean of several referee draws (``scoring_mean_of_draws``):
#: the lossy ones, where one draw is itself p90 13-29% from the next on 8:1 components (sanity.noise)
DRAW_REGIMES = ("dctcp", "reno-shallow")
#: the regimes whose own model is read against every stored draw of each scenario (``noise_floor``,
#: :mod:`netlab.validate.noise`): shallow Reno, whose p90 miss is about half the referee's own noise
NOISE_FLOOR_REGIMES = ("reno-shallow",)
#: ``--trace``: seconds per time bin of a traced run (a ring step at these rates takes 0.3-3 ms alone)
TRACE_BIN_S = 0.001
#: what the mean-of-draws section keeps per model and reference
DRAW_KEYS = ("n_contended", "n_heavy", "median_ape", "p90_ape", "max_ape", "heavy_median_signed", "heavy_mean_signed")
#: what the cross-draw heavy-job bias keeps per model (heavy by one draw, the error on another)
CROSS_KEYS = ("n_heavy", "heavy_median_signed", "heavy_mean_signed")
ISSUE_NOW = dict(source="issue 26 (ns-3 3.37, Linux Reno, drop-tail, 11 components of 9-40 jobs on 2-tier 2:1-8:1)",
                 tcp_median_ape=0.084, tcp_p90_ape=0.70, tcp_max_ape=3.18, tcp_heavy_median_signed=0.33,
                 tcp_alpha0_median_ape=0.065, tcp_alpha0_p90_ape=0.255, tcp_alpha0_heavy_signed=0.08,
                 shallow_tcp_median_ape=0.15, shallow_tcp_p90_ape=0.82, testbed_contended_median=0.013,
                 testbed_contended_p90=0.043, tcp_vs_ns3_on_testbed_median=0.002, tcp_vs_ns3_on_testbed_p90=0.037)


def failed_runs(path: Path, store: RunStore, new: list[dict]) -> list[dict]:
    """Every scenario the referee could not finish (timed out, or not all jobs done), kept across runs in ``path``
    (``--failed``) so that a later ``--score-only`` still says it was not run, never extrapolated; one that has a
    record since is dropped. ``new``: this run's failures."""
    import json

    old = json.loads(path.read_text()) if path.exists() else []
    out = {(d["family"], d["seed"], d["regime"]): d for d in old + new}
    out = {k: d for k, d in out.items() if store.get(generate(k[0], k[1], REGIMES[k[2]])) is None}
    rows = sorted(out.values(), key=lambda d: (d["regime"], d["family"], d["seed"]))
    if rows or path.exists():
        write_json(path, rows)
    return rows


def _records(df: pd.DataFrame, digits: int = 5) -> list[dict]:
    return [{k: (round(v, digits) if isinstance(v, float) else v) for k, v in r.items()}
            for r in df.to_dict(orient="records")]


def _measure(args):
    """One scenario in the referee (cached); run in a worker process. A scenario the referee cannot finish is
    reported (its error), not fatal: the others still run and are scored."""
    family, seed, regime, runs_dir, timeout_s, binary, need_job_loss = args
    sc = generate(family, seed, REGIMES[regime])
    t = time.time()
    try:
        referee_record(sc, RunStore(runs_dir), timeout_s, binary, need_job_loss)
    except RefereeError as exc:
        return family, seed, regime, time.time() - t, str(exc)[-500:]
    return family, seed, regime, time.time() - t, None


def _sigterm_exit(*_):
    sys.exit(143)


def _exit_on_sigterm():
    """SIGTERM unwinds like Ctrl-C: the referee's temporary folder is removed and its process killed (in the
    main process and in every worker)."""
    signal.signal(signal.SIGTERM, _sigterm_exit)


class Cached:
    """A scenario's record, measured when missing, or (``measure=False``, ``--score-only``) from the store only: a
    missing one is a KeyError, never an ns-3 run. ``used``: the keys of every scenario asked about."""

    def __init__(self, store: RunStore, measure: bool, binary=None):
        self.store, self.measure, self.binary = store, measure, binary
        self.used: set[str] = set()

    def __call__(self, sc) -> dict:
        self.used.add(sc.key())
        if self.measure:
            return referee_record(sc, self.store, binary=self.binary)
        rec = self.store.get(sc)
        if rec is None:
            raise KeyError(f"{sc.name} ({sc.transport.name}, {sc.transport.switch_queue_packets} packets) not in "
                           f"{self.store.folder}")
        return rec


# ----------------------------------------------------------------------------- sanity
def sanity_section(record, runs_path: Path, skip_testbed: bool) -> dict:
    """The referee against ns3-facts' figures and against the testbed (module docstring)."""
    from netlab.topology import load_topology
    from netlab.validate.predict import predict

    out = {}
    ring = sanity.ring_alone_rows(lambda sc: record_times(record(sc))[0][1])
    two = ring[ring.ranks == 2].iloc[0]
    out["ring_alone"] = dict(rows=_records(ring), facts_step_latency_us=sanity.FACTS_STEP_LATENCY_S * 1e6,
                             max_abs_residual_vs_facts=float(ring.residual_vs_facts.abs().max()),
                             max_abs_netlab_alone_residual=float(ring.netlab_alone_residual.abs().max()),
                             two_rank_375kB_iter_ms=float(two.iter_ms), facts_iter_ms=sanity.FACTS_ITER_MS,
                             testbed_iter_ms=sanity.TESTBED_ITER_MS)
    print(ring.round(4).to_string(index=False), flush=True)
    if skip_testbed or not runs_path.exists():
        out["testbed"] = dict(skipped="--skip-testbed" if skip_testbed else f"{runs_path} not found")
        return out
    runs = pd.read_parquet(runs_path)
    topo = load_topology(TESTBED_TOPOLOGY)
    tb = {}
    for label, transport in (("deep", Transport("reno", 1000)), ("shallow", Transport("reno", 100))):
        scenarios, measured = sanity.testbed_scenarios(runs, topo, transport)
        ref, tcp_pred, drops, rtos = {}, {}, 0, 0
        for sc in scenarios:
            rec = record(sc)
            ref.update({(sc.name, j): v for j, v in record_times(rec)[0].items()})
            drops, rtos = drops + rec["stats"]["drops"], rtos + rec["stats"]["rtos"]
            if label == "deep":  # tcp (framing as the referee's wire) on the same scenario
                tcp_pred.update({(sc.name, j): v for j, v in predict(sc, "tcp", how="fluid").items()})
        rows = sanity.testbed_rows(scenarios, measured, ref)
        c = rows[rows.contended]
        res = dict(n_contended=int(len(c)), contended_median_ape=float(c.ape.median()),
                   contended_p90_ape=float(c.ape.quantile(0.9)), contended_median_signed=float(c.signed.median()),
                   alone_median_ape=float(rows[~rows.contended].ape.median()), drops=drops, rtos=rtos,
                   rows=_records(rows))
        if tcp_pred:
            cont = c.drop_duplicates(["scenario", "job_id"])
            errs = np.array([abs(tcp_pred[(s, int(j))] / ref[(s, int(j))] - 1) for s, j in zip(cont.scenario,
                                                                                               cont.job_id)])
            res.update(tcp_vs_ns3_contended_median_ape=float(np.median(errs)),
                       tcp_vs_ns3_contended_p90_ape=float(np.quantile(errs, 0.9)))
        tb[label] = res
        print(f"testbed vs ns-3 ({label}): contended median {res['contended_median_ape']:.4f}, "
              f"p90 {res['contended_p90_ape']:.4f}, drops {drops}, RTOs {rtos}", flush=True)
    out["testbed"] = tb
    return out


def noise_section(record, family: str, seed: int, regime: str) -> dict:
    """The referee's own spread: one family scenario again with other compute-jitter draws; per job, how far
    the two runs' steady iteration times are apart (the floor under any model's APE)."""
    sc = generate(family, seed, REGIMES[regime])
    a = record_times(record(sc))[0]
    b = record_times(record(sanity.replicate(sc)))[0]
    from netlab.validate.compare import contended_jobs
    cont = contended_jobs(sc)
    diff = np.array([abs(b[j] / a[j] - 1) for j in a if cont[j]])
    return dict(scenario=sc.name, regime=regime, n_contended=int(len(diff)), median_abs_diff=float(np.median(diff)),
                p90_abs_diff=float(np.quantile(diff, 0.9)), max_abs_diff=float(diff.max()))


# ----------------------------------------------------------------------------- families
def score_scenario(sc, rec, specs, fluid_max_jobs: int) -> tuple[pd.DataFrame, dict]:
    ref_iter, ref_alone = record_times(rec)
    if len(sc.jobs) > fluid_max_jobs:  # a fluid run of 40+ jobs costs ~20 CPU s a scenario: left out, said
        specs = {m: v for m, v in specs.items() if v[2] != "fluid"}
    preds = predict_all(sc, specs)
    rows = compare_jobs(sc, ref_iter, ref_alone, preds)
    rows["family"], rows["seed"], rows["half"] = sc.meta["family"], sc.meta["seed"], sc.meta["half"]
    info = dict(family=sc.meta["family"], seed=sc.meta["seed"], half=sc.meta["half"], key=sc.key(),
                n_jobs=len(sc.jobs),
                n_contended=int(rows.drop_duplicates("job_id").contended.sum()),
                max_slowdown=float(rows.ref_slowdown.max()), oversub=sc.meta.get("oversub"),
                link_packets=rec["stats"]["link_packets"], drops=rec["stats"]["drops"], rtos=rec["stats"]["rtos"],
                ecn_marks=rec["stats"]["ecn_marks"], cnps=rec["stats"].get("cnps", 0),
                rate_timeouts=rec["stats"].get("rate_timeouts", 0), ns3_cpu_s=rec["ns3_cpu_s"],
                alone_cpu_s=rec["alone_cpu_s"], speed=scenario_speed(rec["ns3_cpu_s"], preds))
    return rows, info


def own_model(transport: str) -> str | None:
    """The network model of the regime validated against referee transport ``transport`` (None: no regime is)."""
    from netlab.network.regimes import regimes

    names = [r.network for r in regimes() if r.referee == transport]
    return names[0] if names else None


def with_own_model(entry: dict, transport: str) -> dict:
    """``entry`` with an ``own_model`` row: the regime's own model's scores (its ``solve``, what a simulation uses)."""
    name = own_model(transport)
    if name is not None and name in entry["models"]:
        entry["own_model"] = dict(model=name, **entry["models"][name])
    return entry


def summarise(rows: pd.DataFrame, infos: list[dict]) -> dict:
    out = {}
    info = pd.DataFrame(infos)
    for (family, regime), d in rows.groupby(["family", "regime"], sort=True):
        i = info[(info.family == family) & (info.regime == regime)]
        out.setdefault(regime, {})[family] = with_own_model(dict(
            scenarios=int(len(i)), jobs=int(i.n_jobs.sum()), models=error_summary(d),
            drops=int(i.drops.sum()), rtos=int(i.rtos.sum()), ecn_marks=int(i.ecn_marks.sum()),
            scenarios_with_drops=int((i.drops > 0).sum()), max_slowdown=float(i.max_slowdown.max())), regime)
    for regime, d in rows.groupby("regime", sort=True):
        i = info[info.regime == regime]
        out[regime]["all"] = with_own_model(dict(
            scenarios=int(len(i)), jobs=int(i.n_jobs.sum()), models=error_summary(d), drops=int(i.drops.sum()),
            rtos=int(i.rtos.sum()), ecn_marks=int(i.ecn_marks.sum()), scenarios_with_drops=int((i.drops > 0).sum())),
            regime)
    return out


def own_model_errors(regime: str, sc, rec, specs, rows: pd.DataFrame | None = None) -> pd.DataFrame | None:
    """The regime's own model's rows of :func:`compare_jobs` for ``sc`` (from ``rows`` if given, else predicted)."""
    name = own_model(regime)
    if name is None or name not in specs:
        return None
    if rows is not None:
        return rows[rows.model == name]
    ref_iter, ref_alone = record_times(rec)
    return compare_jobs(sc, ref_iter, ref_alone, predict_all(sc, {name: specs[name]}))


def loss_section(cells: dict) -> dict:
    """Per regime and half, :func:`loss_summary` of the scenarios' per-job loss rows (``cells``: (regime, half) ->
    (list of rows, scenarios without counters))."""
    out: dict = {}
    for (regime, half_name), (frames, unknown) in sorted(cells.items()):
        rows = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()
        out.setdefault(regime, {})[half_name] = dict(loss_summary(rows, unknown), model=own_model(regime))
    return out


def scenario_draws(store: RunStore, sc, rec: dict, n_draws: int) -> list | None:
    """``sc``'s ``n_draws`` referee draws (its record, then :func:`sanity.replicate` 1, 2, ...) as
    (iteration, alone) times, or None if the store lacks one of them."""
    draws = [record_times(rec)]
    for k in range(1, n_draws):
        other = store.get(sanity.replicate(sc, k))
        if other is None:
            return None
        draws.append(record_times(other))
    return draws


def draws_cell(parts: list[tuple], regime: str, n_draws: int) -> dict:
    """One (regime, family) cell of ``scoring_mean_of_draws`` from its scenarios' (single-draw rows, mean-of-draws
    rows, per contended job spread, jobs with fewer draws[, cross-draw rows]): per model both scores
    (:data:`DRAW_KEYS`) and, where the parts carry :func:`netlab.validate.draws.cross_heavy` rows, the heavy-job
    bias with heavy chosen on one draw and the error read on another (``cross_draw_heavy``: without the selection
    bias of a draw's own noise), the regime's own model's the same ways, and the draws' own spread over contended
    jobs."""
    single = pd.concat([p[0] for p in parts], ignore_index=True)
    mean = pd.concat([p[1] for p in parts], ignore_index=True)
    spread = np.array([x for p in parts for x in p[2]])
    one, avg = error_summary(single), error_summary(mean)
    models = {m: dict(single_draw={k: one[m][k] for k in DRAW_KEYS}, mean_of_draws={k: avg[m][k] for k in DRAW_KEYS})
              for m in one}
    crossed = [p[4] for p in parts if len(p) > 4 and not p[4].empty]
    if crossed:  # heavy by one draw, the error on another (netlab.validate.draws.cross_heavy)
        cross = error_summary(pd.concat(crossed, ignore_index=True))
        for m in models:
            models[m]["cross_draw_heavy"] = {k: cross[m][k] for k in CROSS_KEYS}
    out = dict(scenarios=len(parts), seeds=sorted(int(p[0].seed.iloc[0]) for p in parts), draws_per_scenario=n_draws,
               jobs_with_fewer_draws=int(sum(p[3] for p in parts)),
               spread=dict(n_contended=int(len(spread)), median_abs_diff=float(np.median(spread)),
                           p90_abs_diff=float(np.quantile(spread, 0.9)), max_abs_diff=float(spread.max()))
               if len(spread) else None,
               models=models)
    name = own_model(regime)
    if name in models:
        out["own_model"] = dict(model=name, **models[name])
    return out


def draw_parts(sc, rows: pd.DataFrame, draws: list) -> tuple:
    """One scenario's part of a :func:`draws_cell`: ``rows`` (against the first draw), the rows against the mean of
    ``draws``, the contended jobs' spread, the jobs with fewer draws, and the cross-draw rows (heavy by one draw,
    scored on another: :func:`netlab.validate.draws.cross_heavy`)."""
    mean_iter, mean_alone, count = mean_of_draws(draws)
    cont = rows.drop_duplicates("job_id").set_index("job_id").contended
    spread = draw_spread(draws)
    per_draw = [rows] + [rescore(sc, rows, *d) for d in draws[1:]]
    return (rows, rescore(sc, rows, mean_iter, mean_alone), [v for j, v in spread.items() if cont.get(j, False)],
            sum(1 for n in count.values() if n < len(draws)), cross_heavy(per_draw))


def calibration_draws_section(store: RunStore, regimes: list[str], families: list[str], seeds: dict, specs: dict,
                              n_draws: int, used: set | None = None) -> dict:
    """The calibration half's scenarios that have ``n_draws`` referee draws, scored for the regime's own model only
    (as registered: what the fit chose on the first draws) the three ways of :func:`draws_cell`, per regime over all
    of them and per oversubscription: whether a miss is the referee's draw-to-draw noise (it shrinks against the
    mean of draws) or the model's (it stays). ``seeds``: family -> the calibration seeds counted; ``used``: the
    keys of the records scored here are added to it (``--prune`` keeps them)."""
    cells: dict = {}
    for r, sc, rec in stored_family_runs(store, {r: REGIMES[r] for r in regimes}, families, "calibration"):
        if sc.meta["seed"] not in seeds[sc.meta["family"]]:
            continue
        draws = scenario_draws(store, sc, rec, n_draws)
        rows = own_model_errors(r, sc, rec, specs)
        if draws is None or rows is None:
            continue
        if used is not None:
            used |= {sc.key()} | {sanity.replicate(sc, k).key() for k in range(1, n_draws)}
        rows = rows.assign(family=sc.meta["family"], seed=sc.meta["seed"], half="calibration", regime=r)
        part = draw_parts(sc, rows, draws)
        cells.setdefault((r, "all"), []).append(part)
        cells.setdefault((r, f"{sc.meta['oversub']:g}:1"), []).append(part)
    out: dict = dict(note=(
        "calibration half (what bench_regimes_fit.py fits on), regimes of --draws-regimes, every scenario with "
        "--draws referee draws: the regime's own model as registered scored against the first draw, the per-job "
        "mean of the draws and heavy-by-one-draw-scored-on-another (cross_draw_heavy); all and per "
        "oversubscription; spread as in scoring_mean_of_draws"), draws_per_scenario=n_draws, results={})
    for (r, cell), parts in sorted(cells.items()):
        c = draws_cell(parts, r, n_draws)
        c["scenarios_named"] = sorted(f"{p[0].family.iloc[0]}-{int(p[0].seed.iloc[0])}" for p in parts)
        out["results"].setdefault(r, {})[cell] = c
    return out


def draws_section(cells: dict, not_replicated: list[dict], n_draws: int) -> dict:
    """``scoring_mean_of_draws``: per regime and family (and per regime over the families here) the scoring half
    scored against its original single draw and against the per-job mean of ``n_draws`` draws (:func:`draws_cell`);
    ``all``: over the families whose every scored scenario has its draws. ``cells``: (regime, family) -> list of
    per-scenario parts."""
    out: dict = dict(note=(
        "scoring half, regimes of DRAW_REGIMES: each scenario run again with other compute-jitter draws "
        "(sanity.replicate, cached in referee_runs); per (regime, family) the same scenarios scored against the "
        "original draw (single_draw: what families scores, the figure comparable with earlier sessions) and "
        "against the per-job mean of the draws' iteration and alone times (mean_of_draws: heavy by the mean's "
        "slowdown); cross_draw_heavy: heavy by one draw, the signed error on another (both orders pooled: no "
        "selection bias from a draw's own noise); models unchanged, nothing fitted on this half; spread: per "
        "contended job |draw 2 / draw 1 - 1| "
        "(max over later draws); all: over the families whose every scored seed has its draws (listed in it); "
        "a family with seeds_without_draws is shown but left out of all"),
        draws_per_scenario=n_draws, not_replicated=not_replicated, results={})
    for regime in sorted({r for r, _ in cells}):
        per = {f: dict(draws_cell(parts, regime, n_draws),
                       seeds_without_draws=[d["seed"] for d in not_replicated if (d["regime"], d["family"]) == (r, f)])
               for (r, f), parts in sorted(cells.items()) if r == regime}
        whole = [f for f, c in per.items() if not c["seeds_without_draws"]]  # families with every scored seed drawn
        if whole:
            per["all"] = dict(draws_cell([p for f in whole for p in cells[(regime, f)]], regime, n_draws),
                              families=whole)
        out["results"][regime] = per
    return out


#: ``dctcp`` as registered before the beat-down term (``params.TRANSPORT_PARAMS``): what ``beatdown`` scores the
#: registered model beside (beatdown_beta 0: no term, one solve; cut_k 1: the rate cut the term's joint fit halved)
DCTCP_BEFORE_BEATDOWN = dict(beatdown_beta=0.0, cut_k=1.0)


def beatdown_section(store: RunStore, families: list[str], n_score: int, n_draws: int) -> dict:
    """The scoring half under DCTCP: the registered model (with DCTCP's multi-bottleneck beat-down, chosen on the
    calibration half: ``regimes_fit.json['beatdown_grid']``, :mod:`netlab.network.tcp.beatdown`) beside the model
    as registered before it (:data:`DCTCP_BEFORE_BEATDOWN`), as ``scoring_mean_of_draws`` scores (the first draw,
    the mean of the draws, heavy across draws), over all and per oversubscription, with each model's CPU seconds
    over the scenarios (the term is two solves)."""
    name = own_model("dctcp")
    before = f"{name}(" + ",".join(f"{k}={v:g}" for k, v in DCTCP_BEFORE_BEATDOWN.items()) + ")"
    cells: dict = {}
    cpu = {name: 0.0, before: 0.0}
    for f in families:
        for s in scoring_seeds(f, n_score):
            sc = generate(f, s, REGIMES["dctcp"])
            rec = store.get(sc)
            draws = scenario_draws(store, sc, rec, n_draws) if rec is not None else None
            if draws is None:
                continue
            preds = predict_all(sc, {name: (name, {}, "solve"), before: (name, DCTCP_BEFORE_BEATDOWN, "solve")})
            for m, c in preds.groupby("model").cpu_s.first().items():
                cpu[m] += float(c)
            rows = compare_jobs(sc, *record_times(rec), preds).assign(family=f, seed=s)
            part = draw_parts(sc, rows, draws)
            for c in ("all", f"{sc.meta['oversub']:g}:1"):
                cells.setdefault(c, []).append(part)
    out = {}
    for c, parts in sorted(cells.items()):
        cell = draws_cell(parts, "dctcp", n_draws)
        out[c] = dict({k: v for k, v in cell.items() if k != "own_model"},
                      scenarios_named=sorted(f"{p[0].family.iloc[0]}-{int(p[0].seed.iloc[0])}" for p in parts))
    return dict(note="scoring half under DCTCP: the registered model, with the beat-down term (its beatdown_beta and "
                     "cut_k chosen on the calibration half, regimes_fit.json beatdown_grid.joint), beside the model "
                     "as registered before the term (before); cpu_s: each model's solve seconds over these scenarios",
                model=name, before=before, before_kwargs=DCTCP_BEFORE_BEATDOWN, cpu_s=cpu, cells=out)


def stored_draws(store: RunStore, sc, rec: dict, most: int) -> list:
    """``sc``'s referee draws in the store, at most ``most``: its record, then :func:`sanity.replicate` 1, 2, ... up to
    the first one missing, as (iteration, alone) times."""
    draws = [record_times(rec)]
    for k in range(1, most):
        other = store.get(sanity.replicate(sc, k))
        if other is None:
            break
        draws.append(record_times(other))
    return draws


#: ``tcp-shallow`` with its timeout tail as idle time inside the solve (``rto_idle``, the best point of
#: ``regimes_fit.json['rto_idle_grid']``, not registered: params.TRANSPORT_PARAMS says why): what ``noise_floor`` reads
#: beside the registered model
TCP_SHALLOW_IDLE = dict(alpha=0.0, stretch=0.0, goodput_k=0.75, rto_k=0.05, rto_idle=True)
#: the timeout count with its ramp and bandwidth-delay share as a model term (``regimes_fit.json['rto_ramp_grid']``,
#: ramp and share fitted on calibration counts): the fit's choice by the worse of the referee's objective against the
#: draws and the testbed's (rto_k 0.02), the referee's alone (0.2), and the scale the referee's counts give (1); not
#: registered (params.TRANSPORT_PARAMS says why)
_RAMP = dict(rto_ramp_packets=84.667, rto_bdp_share=0.3029, stretch=0.0, alpha=0.0, rto_idle=True)
TCP_SHALLOW_RAMP = {"rto_ramp": dict(_RAMP, goodput_k=0.3, rto_k=0.02),
                    "rto_ramp_referee": dict(_RAMP, goodput_k=0.75, rto_k=0.2),
                    "rto_ramp_count": dict(_RAMP, goodput_k=0.75, rto_k=1.0)}
#: per regime, the models ``noise_floor`` reads beside the registered one: label -> constructor arguments
NOISE_FLOOR_BEFORE = {"reno-shallow": {"rto_idle": TCP_SHALLOW_IDLE, **TCP_SHALLOW_RAMP}}


def noise_floor_section(store: RunStore, regimes: list[str], families: list[str], n_score: int,
                        calibration_seeds: dict, most: int, specs: dict, used: set) -> dict:
    """Per regime of ``regimes`` and half, the regime's own model (and :data:`NOISE_FLOOR_BEFORE`'s) against every
    stored draw of each scenario (:func:`netlab.validate.noise.noise_split`: the referee's floor, the model's own
    part, the score against the centre of k draws, the persistent misses): over the scenarios with at least ``n``
    draws, for n = 2 and for the fewest and the most draws the half's scenarios have (at most ``most``)."""
    from netlab.validate.noise import noise_split

    out: dict = dict(note=(
        "the regime's own model (as registered, and the variants of before_kwargs) against every stored referee draw "
        "(sanity.replicate) of each scenario: referee_floor, what a perfect deterministic model (each job's centre "
        "over infinitely many draws) scores against one draw; model_part, the APE against the draws' centre with the "
        "noise left in a mean of N draws taken out per job (raw: without); against_k_draws, the APE against the "
        "centre of k draws (mean over every k-subset); persistent, the jobs off by more than 15% against the first "
        "draw that are off by more than that, the same way, against every draw (netlab.validate.noise). "
        "y = log(1 + signed); centre = geometric mean; by_draws: over the scenarios with at least that many draws"),
        most_draws=most, results={})
    for r in regimes:
        name = own_model(r)
        if name is None or name not in specs:
            continue
        models = {name: specs[name]} | {f"{name}({label})": (specs[name][0], kw, "solve")
                                        for label, kw in NOISE_FLOOR_BEFORE.get(r, {}).items()}
        for half_name in ("scoring", "calibration"):
            scenarios = [(f, s) for f in families for s in (scoring_seeds(f, n_score) if half_name == "scoring"
                                                          else sorted(calibration_seeds[f]))]
            parts = []
            for f, s in scenarios:
                sc = generate(f, s, REGIMES[r])
                rec = store.get(sc)
                if rec is None:
                    continue
                draws = stored_draws(store, sc, rec, most)
                if len(draws) < 2:
                    continue
                used |= {sc.key()} | {sanity.replicate(sc, k).key() for k in range(1, len(draws))}
                preds = predict_all(sc, models)
                parts.append((f"{f}-{s}", sc.meta["oversub"], [compare_jobs(sc, *d, preds) for d in draws]))
            if not parts:
                continue
            entry = dict(model=name, before_kwargs=NOISE_FLOOR_BEFORE.get(r, {}), models={})
            for m in models:
                cells = {}
                for n in sorted({2, min(len(p[2]) for p in parts), max(len(p[2]) for p in parts)}):
                    with_n = [p for p in parts if len(p[2]) >= n]

                    def split(sel, n=n):
                        return noise_split([pd.concat([d[k][d[k].model == m] for _, _, d in sel], ignore_index=True)
                                            for k in range(n)])

                    cells[n] = dict(split(with_n), scenarios=sorted(p[0] for p in with_n),
                                    per_oversub={f"{o:g}:1": split([p for p in with_n if p[1] == o])
                                                 for o in sorted({p[1] for p in with_n})})
                entry["models"][m] = cells
                for n, c in cells.items():
                    print(f"noise floor {r} {half_name} {m} ({len(c['scenarios'])} scenarios, {n} draws): referee "
                          f"floor p90 {c['referee_floor']['p90_ape']:.3f}; p90 against 1 / {n} draws "
                          f"{c['against_k_draws'][1]['p90_ape']:.3f} / {c['against_k_draws'][n]['p90_ape']:.3f}; "
                          f"model part p90 {c['model_part']['p90_ape']:.3f} "
                          f"(raw {c['model_part']['raw']['p90_ape']:.3f}); persistent "
                          f"{c['persistent']['of_them_missed_on_every_draw']} of "
                          f"{c['persistent']['missed_on_first_draw']}", flush=True)
            out["results"].setdefault(r, {})[half_name] = entry
    return out


def trace_section(store: RunStore, names: list[str], regime: str, timeout_s: float, binary) -> dict:
    """Per scenario of ``names`` ("family:seed"), a traced referee run of ``regime`` (:mod:`netlab.validate.trace`)
    read over the steady window: whether its times are the stored record's to the bit, per switch queue its
    utilisation / mean queue found / marked share, per ring flow its steps' time over alone and the marking
    queues it crosses (all flows, and summarised by that count), and per job the regime's own model's signed
    error (against this draw) beside the most marking queues one of its flows crosses."""
    from scipy.stats import spearmanr

    from netlab.validate.predict import steady_iter_s
    from netlab.validate.referee import run_referee
    from netlab.validate.runs import _children_cpu_s
    from netlab.validate.trace import flow_rows, queue_rows, steady_window

    out = {}
    for name in names:
        family, seed = name.split(":")
        sc = generate(family, int(seed), REGIMES[regime])
        rec = store.get(sc)
        c0 = _children_cpu_s()
        res = run_referee(sc, timeout_s=timeout_s, binary=binary, trace_bin_s=TRACE_BIN_S)
        cpu = _children_cpu_s() - c0
        iter_s = steady_iter_s(res.starts, {j.job_id: j.compute_s for j in sc.jobs}, sc.warmup)
        window = steady_window(res.starts, sc.warmup)
        queues = queue_rows(res.trace, window)
        flows = flow_rows(sc, res.trace, window)
        by_count = flows.groupby("marking_queues").step_x.agg(["size", "mean", "median"])
        entry = dict(scenario=sc.name, regime=regime, ns3_cpu_s=cpu, window_s=list(window), bin_s=TRACE_BIN_S,
                     same_times_as_record=(None if rec is None else
                                           {str(k): v for k, v in iter_s.items()} == rec["ref_iter_s"]),
                     flows_by_marking_queues={int(k): dict(flows=int(v["size"]), step_x_mean=float(v["mean"]),
                                                           step_x_median=float(v["median"]))
                                              for k, v in by_count.iterrows()},
                     spearman_step_x_mark_sum=float(spearmanr(flows.step_x, flows.mark_sum)[0]),
                     queues=_records(queues[queues.util > 0]), flows=_records(flows))
        if rec is not None:
            model = own_model(regime)
            rows = compare_jobs(sc, *record_times(rec), predict_all(sc, {model: (model, {}, "solve")}))
            worst = flows.groupby("job").marking_queues.max()
            jobs = rows[rows.contended].assign(marking_queues=lambda d: d.job_id.map(worst))
            entry["jobs"] = _records(jobs[["job_id", "ranks", "ref_slowdown", "model_slowdown", "signed",
                                           "marking_queues"]])
            entry["model"] = model
            entry["signed_by_marking_queues"] = {int(k): dict(jobs=int(len(g)), median_signed=float(g.signed.median()))
                                                 for k, g in jobs.groupby("marking_queues")}
        out[sc.name] = entry
        print(f"trace {sc.name} ({regime}): {cpu:.0f} CPU s; step x by marking queues "
              f"{ {k: round(v['step_x_mean'], 2) for k, v in entry['flows_by_marking_queues'].items()} }; "
              f"same times as the record: {entry['same_times_as_record']}", flush=True)
    return out


def speed_summary(infos: list[dict]) -> dict:
    per = pd.DataFrame([dict(i["speed"], regime=i["regime"]) for i in infos])
    models = [c for c in per.columns if c not in ("regime", "ns3_cpu_s")]
    return dict(ns3_cpu_s_median=float(per.ns3_cpu_s.median()), ns3_cpu_s_max=float(per.ns3_cpu_s.max()),
                ratio_median={m: float(per[m].median()) for m in models},
                ratio_min={m: float(per[m].min()) for m in models},
                note="ns-3's CPU seconds for the scenario (jobs together) over the model's CPU seconds to predict it "
                     "(numba compiled beforehand), per scenario")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--per-family", type=int, default=2, help="scenarios per family and half run in ns-3")
    ap.add_argument("--score-per-family", type=int, default=None,
                    help="score the first this many seeds of each family's scoring half that have a cached run "
                         "(default: --per-family), and the family's EXTRA_SCORING_SEEDS (families.py) that have one")
    ap.add_argument("--halves", choices=("scoring", "calibration", "all"), default="scoring",
                    help="which seeds to run (scores always come from the scoring half)")
    ap.add_argument("--seeds", nargs="*", type=int, default=None,
                    help="run exactly these seeds of every family (each in its own half: even calibrate, odd score) "
                         "instead of the first --per-family of each half")
    ap.add_argument("--need-job-loss", action="store_true",
                    help="measure again the scenarios to run whose record has no per-job loss counters (made "
                         "before the referee counted them)")
    ap.add_argument("--families", nargs="*", default=list(FAMILIES), choices=list(FAMILIES))
    ap.add_argument("--regimes", nargs="*", default=list(REGIMES), choices=list(REGIMES))
    ap.add_argument("--workers", type=int, default=1)
    ap.add_argument("--timeout-s", type=float, default=3600.0)
    ap.add_argument("--runs-dir", default=str(RESULTS / "referee_runs"))
    ap.add_argument("--build-dir", default=None, help="where the referee binary is built (default ~/.cache/netlab)")
    ap.add_argument("--fidelity-runs", default=str(RESULTS / "fidelity_runs.parquet"))
    ap.add_argument("--skip-testbed", action="store_true", help="leave the testbed scenarios out of the sanity checks")
    ap.add_argument("--score-only", action="store_true", help="score cached runs only; run nothing in ns-3")
    ap.add_argument("--out", default=str(RESULTS / "referee.json"))
    ap.add_argument("--failed", default=str(RESULTS / "referee_failed.json"),
                    help="the scenarios the referee could not finish, kept across runs (reported as not run)")
    ap.add_argument("--fluid-max-jobs", type=int, default=40,
                    help="ask the time-simulating models' fluid runs (*-fluid) only on scenarios of this many jobs or "
                         "fewer (their CPU cost grows with the component)")
    ap.add_argument("--calibration-per-family", type=int, default=20,
                    help="the calibration half's coverage counts cached runs of this many seeds per family "
                         "(bench_regimes_fit.py's --per-family)")
    ap.add_argument("--draws-regimes", nargs="*", default=list(DRAW_REGIMES), choices=list(REGIMES),
                    help="regimes whose scored scenarios are also scored against the mean of --draws referee draws "
                         "(scoring_mean_of_draws; without --score-only the missing draws are run, one at a time)")
    ap.add_argument("--draws", type=int, default=2, help="referee draws per scenario for scoring_mean_of_draws")
    ap.add_argument("--noise-regimes", nargs="*", default=list(NOISE_FLOOR_REGIMES), choices=list(REGIMES),
                    help="regimes whose own model is read against every stored draw (noise_floor; without "
                         "--score-only the missing draws of --noise-halves up to --noise-draws are run, cheapest "
                         "first)")
    ap.add_argument("--noise-draws", type=int, default=4, help="referee draws per scenario for noise_floor (at most)")
    ap.add_argument("--noise-halves", choices=("scoring", "calibration", "all"), default="scoring",
                    help="whose missing draws for noise_floor are run (both halves are read)")
    ap.add_argument("--trace", nargs="*", default=None, metavar="FAMILY:SEED",
                    help="only run these scenarios traced in the referee (--trace-regime) and write what the traces "
                         "say to --trace-out (netlab.validate.trace); nothing else is scored")
    ap.add_argument("--trace-regime", default="dctcp", choices=list(REGIMES))
    ap.add_argument("--trace-out", default=str(RESULTS / "referee_trace.json"))
    ap.add_argument("--prune", action="store_true",
                    help="afterwards, delete the records in --runs-dir that this run neither scored nor checked")
    args = ap.parse_args(argv)
    # SIGTERM unwinds like Ctrl-C: the referee's temporary folders are removed, its process dies with ours
    _exit_on_sigterm()
    t_start = time.time()
    store = RunStore(args.runs_dir)
    why = referee_unavailable()
    if why and not args.score_only:
        print(f"the ns-3 referee cannot run here: {why}; --score-only scores cached runs", file=sys.stderr)
        return 2
    binary = None if args.score_only else build_referee(args.build_dir)
    if args.trace:
        write_json(args.trace_out, dict(
            note="traced referee runs read over the steady window (netlab.validate.trace): step_x is a ring step's "
                 "time from sent to arrived whole over its time alone at its host link's rate; marking queues mark "
                 ">= 10% of their arrivals; signed: the regime's own model against this (the stored) draw",
            machine=dict(cpus=os.cpu_count(), load_avg_1m=os.getloadavg()[0]),
            scenarios=trace_section(store, args.trace, args.trace_regime, args.timeout_s, binary),
            wall_s=time.time() - t_start))
        print(f"wrote {args.trace_out} ({time.time() - t_start:.0f} s)")
        return 0
    record = Cached(store, not args.score_only, binary)
    try:
        sanity_out = sanity_section(record, Path(args.fidelity_runs), args.skip_testbed)
        sanity_out["noise"] = [noise_section(record, f, s, r) for f, s, r in NOISE_SCENARIOS if f in args.families]
        print("referee noise:", sanity_out["noise"], flush=True)
    except KeyError as exc:
        sanity_out = dict(skipped=f"--score-only and a sanity run is not cached: {exc}")

    halves = ("calibration", "scoring") if args.halves == "all" else (args.halves,)
    if args.seeds is not None:
        todo = [(f, s, r) for r in args.regimes for f in args.families for s in args.seeds]
    else:
        todo = [(f, s, r) for r in args.regimes for f in args.families for h in halves
                for s in family_seeds(f, args.per_family, h)]
    n_score = args.per_family if args.score_per_family is None else args.score_per_family
    # every family's first seed before any family's second; within a round, regimes in --regimes order, cheapest
    # first: a stopped run has scored every family in the first regimes it could
    cost = {(f, s): generate(f, s).meta["estimated_link_packets"] for f, s, _ in todo}
    todo.sort(key=lambda x: (x[1] // 2, args.regimes.index(x[2]), cost[(x[0], x[1])]))
    missing = [x for x in todo if store.get(generate(x[0], x[1], REGIMES[x[2]]), args.need_job_loss) is None]
    failed: list[dict] = []
    print(f"{len(todo)} family scenarios, {len(missing)} not yet in {args.runs_dir}", flush=True)
    if missing and not args.score_only:
        jobs = [(f, s, r, args.runs_dir, args.timeout_s, binary, args.need_job_loss) for f, s, r in missing]
        done = 0

        def report_one(f, s, r, wall, error):
            nonlocal done
            done += 1
            failed_note = f" FAILED: {error}" if error else ""
            print(f"[{done}/{len(jobs)}] {r} {f}-{s}: {wall:.0f} s{failed_note}", flush=True)
            if error:
                failed.append(dict(family=f, seed=s, regime=r, timeout_s=args.timeout_s, error=error))

        if args.workers > 1:
            with ProcessPoolExecutor(args.workers, initializer=_exit_on_sigterm) as pool:
                def stop(*_):  # queued scenarios cancelled, running ones unwound (their referee and folder gone)
                    pool.shutdown(wait=False, cancel_futures=True)
                    for child in multiprocessing.active_children():
                        child.terminate()
                    sys.exit(143)

                signal.signal(signal.SIGTERM, stop)
                for fut in as_completed([pool.submit(_measure, j) for j in jobs]):
                    report_one(*fut.result())
                signal.signal(signal.SIGTERM, _sigterm_exit)
        else:
            for j in jobs:
                report_one(*_measure(j))

    failed = failed_runs(Path(args.failed), store, failed)
    if not args.score_only:  # the extra draws of the scored scenarios of --draws-regimes, cheapest first
        extra = [sanity.replicate(generate(f, s, REGIMES[r]), k) for r in args.draws_regimes if r in args.regimes
                 for f in args.families for s in scoring_seeds(f, n_score) for k in range(1, args.draws)
                 if store.get(generate(f, s, REGIMES[r])) is not None]
        extra = [x for x in extra if store.get(x) is None]
        extra.sort(key=lambda x: x.meta["estimated_link_packets"])
        for i, x in enumerate(extra):
            t = time.time()
            try:
                referee_record(x, store, args.timeout_s, binary)
            except RefereeError as exc:
                print(f"[draw {i + 1}/{len(extra)}] {x.name} FAILED: {str(exc)[-300:]}", flush=True)
                continue
            print(f"[draw {i + 1}/{len(extra)}] {x.transport.name} {x.name}: {time.time() - t:.0f} s", flush=True)
    if not args.score_only:  # noise_floor's draws: replicates up to --noise-draws, cheapest first
        nh = ("scoring", "calibration") if args.noise_halves == "all" else (args.noise_halves,)
        base = [generate(f, s, REGIMES[r]) for r in args.noise_regimes if r in args.regimes for f in args.families
                for h in nh for s in (scoring_seeds(f, n_score) if h == "scoring"
                                      else family_seeds(f, args.calibration_per_family, "calibration"))]
        base = [sc for sc in base if store.get(sc) is not None]
        extra = [(k, sanity.replicate(sc, k)) for k in range(1, args.noise_draws) for sc in base]
        extra = [(k, x) for k, x in extra if store.get(x) is None]
        extra.sort(key=lambda x: (x[0], x[1].meta["estimated_link_packets"]))  # every draw 2 before any draw 3
        for i, (k, x) in enumerate(extra):
            t, c0 = time.time(), os.times()
            try:
                referee_record(x, store, args.timeout_s, binary)
            except RefereeError as exc:
                print(f"[noise draw {i + 1}/{len(extra)}] {x.name} FAILED: {str(exc)[-300:]}", flush=True)
                continue
            c1 = os.times()
            print(f"[noise draw {i + 1}/{len(extra)}] {x.transport.name} {x.name}: {time.time() - t:.0f} s wall, "
                  f"{c1.children_user + c1.children_system - c0.children_user - c0.children_system:.0f} s CPU, "
                  f"load {os.getloadavg()[0]:.1f}", flush=True)
    # score (the scoring half only), netlab's models warmed up first so their CPU time is a solve's
    specs = model_specs()
    warm = generate(args.families[0], 1)
    predict_all(warm, specs)
    frames, infos, not_run, covered = [], [], [], []
    draw_cells: dict = {}
    not_replicated: list[dict] = []
    loss_cells: dict = {}

    def add_loss(regime, sc, rec, rows=None):
        cell = loss_cells.setdefault((regime, sc.meta["half"]), ([], 0))
        lr = job_loss_rows(sc, rec, own_model_errors(regime, sc, rec, specs, rows)) if "job_loss" in rec else None
        loss_cells[(regime, sc.meta["half"])] = (cell[0] + [lr], cell[1]) if lr is not None else (cell[0], cell[1] + 1)

    for f, s, r in [(f, s, r) for r in args.regimes for f in args.families
                    for s in scoring_seeds(f, n_score)]:
        sc = generate(f, s, REGIMES[r])
        record.used.add(sc.key())
        rec = store.get(sc)
        if rec is None:
            not_run.append(dict(family=f, seed=s, regime=r))
            continue
        rows, info = score_scenario(sc, rec, specs, args.fluid_max_jobs)
        rows["regime"], info["regime"] = r, r
        frames.append(rows)
        infos.append(info)
        covered.append(dict(scenario_coverage(sc, rec), regime=r))
        add_loss(r, sc, rec, rows)
        if r in args.draws_regimes:
            draws = scenario_draws(store, sc, rec, args.draws)
            if draws is None:
                not_replicated.append(dict(family=f, seed=s, regime=r))
                continue
            record.used |= {sanity.replicate(sc, k).key() for k in range(1, args.draws)}
            draw_cells.setdefault((r, f), []).append(draw_parts(sc, rows, draws))
    calibration_seeds = {f: set(family_seeds(f, args.calibration_per_family, "calibration")) for f in args.families}
    for r, sc, rec in stored_family_runs(store, {r: REGIMES[r] for r in args.regimes}, args.families, "calibration"):
        if sc.meta["seed"] in calibration_seeds[sc.meta["family"]]:
            covered.append(dict(scenario_coverage(sc, rec), regime=r))
            add_loss(r, sc, rec)
    if not frames:
        print("nothing to score", file=sys.stderr)
        return 1
    rows = pd.concat(frames, ignore_index=True)
    coverage = coverage_table(covered)
    print(coverage.drop(columns="seeds").to_string(index=False), flush=True)
    report = dict(
        machine=dict(python=platform.python_version(), cpus=os.cpu_count(), load_avg_1m=os.getloadavg()[0]),
        referee="netlab/validate/ns3/referee.cc on Debian's ns-3 3.37 (see netlab/validate/README.md)",
        target=("per job: mean period over the steady window (after warm-up, while every job runs); ape: the model's "
                "slowdown (its iteration over its own alone) applied to the referee's measured time alone, against "
                "the referee; ape_raw: the model's own iteration time; over contended jobs (a link shared with "
                "another job); heavy: jobs the referee slows >= 2x; signed: prediction / referee - 1"),
        halves=dict(scored="scoring (odd seeds)", calibration="even seeds, not scored here: the regimes' parameters "
                    "are fitted on them (bench_regimes_fit.py, regimes_fit.json)"),
        families={f: dict(FAMILIES[f].__dict__) for f in args.families},
        regimes={r: dict(REGIMES[r].__dict__, own_model=own_model(r)) for r in args.regimes},
        models={m: dict(network=n, kwargs=k, how=h) for m, (n, k, h) in specs.items()},
        fluid_max_jobs=args.fluid_max_jobs,
        issue_now=ISSUE_NOW,
        sanity=sanity_out,
        results=summarise(rows, infos),
        scoring_mean_of_draws=draws_section(draw_cells, not_replicated, args.draws),
        calibration_draws=calibration_draws_section(store, [r for r in args.draws_regimes if r in args.regimes],
                                                    args.families, calibration_seeds, specs, args.draws,
                                                    record.used),
        noise_floor=noise_floor_section(store, [r for r in args.noise_regimes if r in args.regimes], args.families,
                                        n_score, calibration_seeds, args.noise_draws, specs, record.used),
        speed=speed_summary(infos),
        **({"beatdown": beatdown_section(store, args.families, n_score, args.draws)}
           if "dctcp" in args.regimes else {}),
        coverage=dict(note="per regime, family and half: scenarios run; jobs; contended jobs (sharing a directed "
                           "link with another job: what the scores are over); heavy jobs (contended, slowed >= 2x "
                           "by the referee: the heavy-job bias is over them); components of 2+ jobs joined by "
                           "shared links and their min / median / max size. scoring: the scenarios scored above; "
                           "calibration: every cached run of the first --calibration-per-family seeds",
                      calibration_per_family=args.calibration_per_family, rows=_records(coverage)),
        loss=dict(note="per regime and half, from the referee's per-job counters (runs made before them are "
                       "counted as scenarios_without_counters, never as zero): jobs, contended jobs, those with any "
                       "RTO (TCP's CA_LOSS entries) or drop; per contended job the median / p90 drops, "
                       "retransmits, RTOs and ECN marks per iteration run (counters cover the whole run); the "
                       "median drops per contended job; for the regime's own model (scoring: as scored; "
                       "calibration: predicted here), the Spearman correlation of a contended job's RTOs per "
                       "iteration with its signed error and with its APE, and the median signed error of jobs "
                       "with and without an RTO",
                  cells=loss_section(loss_cells)),
        scenarios=[{k: v for k, v in i.items()} for i in infos],
        not_scored=dict(no_cached_run=not_run, failed=failed),
        wall_s=time.time() - t_start,
    )
    write_json(args.out, report)
    if args.prune and "skipped" in sanity_out:
        print("not pruning: the sanity checks did not run, so their records were not counted", file=sys.stderr)
    elif args.prune:
        record.used |= {generate(f, s, REGIMES[r]).key() for f, s, r in todo}
        record.used |= {sc.key() for sc, _ in rto_runs()}  # bench_regimes_fit.py --rto-scale's scaled runs
        tt = RESULTS / "testbed_timeouts.json"  # bench_testbed_timeouts.py's testbed scenarios in the referee
        record.used |= set(json.loads(tt.read_text()).get("ns3_record_keys", [])) if tt.exists() else set()
        stale = [p for p in store.folder.glob("*.json") if p.stem not in record.used]
        for p in stale:
            p.unlink()
        print(f"pruned {len(stale)} records no sanity check or scenario of this run uses", flush=True)
    for regime, per in report["results"].items():
        a = per["all"]["models"]
        print(f"{regime}: " + ", ".join(f"{m} {v['median_ape']:.3f}/{v['p90_ape']:.3f}" for m, v in a.items()
                                        if v["median_ape"] is not None))
        own = per["all"].get("own_model")
        if own:
            print(f"  own model {own['model']}: median {own['median_ape']:.3f}, p90 {own['p90_ape']:.3f}, max "
                  f"{own['max_ape']:.3f}, heavy bias {own['heavy_median_signed']}")
    print(f"wrote {args.out} ({time.time() - t_start:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
