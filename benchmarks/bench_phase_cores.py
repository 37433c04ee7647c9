"""Phase-aware cores at scale (``tcp``'s opt-in ``phase_cores``): what they cost, how much of full Philly they make
phase-aware, and whether the packet-level referee prefers them. Writes ``benchmarks/results/phase_cores.json``.

Why: issue 26 asks that at most 10% of full Philly's job-time be solved phase-blind, with full Philly under the
default model in at most 30 s. By default about two thirds of it is (the random-phase mean field on components of
more than 8 jobs); the opt-in cores (:mod:`netlab.network.tcp.cores`) cut that to a tenth at several times the
CPU. Making them the default is only worth it if phase awareness at scale agrees better with the referee, and
affordable if a cheaper setting keeps most of the share.

* ``referee``: ``tcp`` without and with ``phase_cores`` (``max_core_jobs`` of :data:`CORE_SIZES`) on the stored
  referee runs of the 9-100-job families (``benchmarks/results/referee_runs``, reno-deep: the default model's
  regime; scored from cached runs, no ns-3), per half: median / p90 / max APE and heavy-job bias of contended jobs
  (:func:`netlab.validate.compare.error_summary`), and the same restricted to the jobs a core moved. The calibration
  half decides; the scoring half is reported.
* ``philly``: full Philly (Tiresias, consolidated, the 4:1 leaf-spine of ``bench_core.py``) by default and with
  ``phase_cores`` at each ``max_core_jobs``, each a fresh process, the default run first and last: CPU seconds,
  phase-blind shares of job- and GPU-seconds, average JCT, the cores' simulation events and cache look-ups, with the
  load average around each run (the machine is shared: CPU seconds grow with its load).
* ``horizon``: fewer events per core. Every core simulation of the first ``--jobs`` Philly jobs with
  ``phase_cores`` is recorded (its compiled kernel's inputs, :func:`netlab.network.tcp.core_fluid.core_periods`)
  and simulated again over other horizons (iterations, warm-up left out; cold cores and warm ones, see
  :mod:`netlab.network.tcp.cores`), each against the same core over :data:`LONG_HORIZON`: per-job period APE and
  the kernel's events and CPU against today's horizons. The same horizons on the referee's calibration half are
  scored by ``--part referee --horizons``.
* ``settle``: whether a core's simulation could stop once its pattern repeats. Every ``--every``-th core
  simulation of the first ``--jobs`` Philly jobs at ``max_core_jobs`` 64 is run over :data:`LONG_HORIZON`'s
  iterations; each job's mean period in each of its laggard's iterations, their change from one iteration to the
  next, and stop rules on that change (:func:`settle_part`): starts simulated and period APE against today's.

Usage:
    python benchmarks/bench_phase_cores.py --part referee
    python benchmarks/bench_phase_cores.py --part philly --sizes 8 16 32 64 [--trace-dir DIR]
    python benchmarks/bench_phase_cores.py --part settle --jobs 20000 --every 5 [--trace-dir DIR]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
OUT = RESULTS / "phase_cores.json"
CORE_SIZES = (8, 16, 32, 64)
REGIME = "reno-deep"  # the default model's regime (netlab.network.regimes)
LONG_HORIZON = (48, 24)  # the reference a shorter horizon is measured against (iterations, warm-up)
#: (cold, warm) horizons compared: today's first (cores.py's CORE_HORIZON / WARM_HORIZON and their warm-ups)
HORIZONS = (((24, 12), (12, 4)), ((12, 4), (12, 4)), ((16, 4), (8, 2)), ((12, 4), (8, 2)))


def _commit() -> str:
    head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=ROOT)
    dirty = subprocess.run(["git", "status", "--porcelain", "--", "netlab"], capture_output=True, text=True, cwd=ROOT)
    return head.stdout.strip() + ("+changes" if dirty.stdout.strip() else "")


def _merge(section: str, value) -> None:
    """Write ``value`` as ``section`` of the results file, keeping its other sections."""
    from netlab.sim.metrics import write_json

    out = json.loads(OUT.read_text()) if OUT.exists() else {}
    out[section] = value
    if value is None:
        out.pop(section)
    write_json(OUT, out)


# -- referee ------------------------------------------------------------------------------------------------------

def variants(sizes) -> dict[str, dict]:
    """Model name -> ``tcp`` keyword arguments: the default and phase cores up to each size."""
    return {"tcp": {}} | {f"tcp-cores{k}": dict(phase_cores=True, max_core_jobs=k) for k in sizes}


def moved_summary(rows, base: str = "tcp") -> dict:
    """Per variant, over the contended jobs whose prediction it moved from ``base``'s: how many, and both models'
    median / p90 APE and median signed error on them."""
    c = rows[rows.contended]
    signed = c.pivot_table(index=["scenario", "job_id"], columns="model", values="signed")
    out = {}
    for m in signed.columns:
        if m == base:
            continue
        moved = (signed[m] - signed[base]).abs() > 1e-9
        a, b = signed[base][moved], signed[m][moved]
        out[m] = dict(moved=int(moved.sum()), of=int(len(signed)),
                      base_median_ape=float(a.abs().median()) if len(a) else None,
                      base_p90_ape=float(a.abs().quantile(0.9)) if len(a) else None,
                      median_ape=float(b.abs().median()) if len(b) else None,
                      p90_ape=float(b.abs().quantile(0.9)) if len(b) else None,
                      base_median_signed=float(a.median()) if len(a) else None,
                      median_signed=float(b.median()) if len(b) else None)
    return out


@contextlib.contextmanager
def core_horizon(cold: tuple[int, int], warm: tuple[int, int] | None = None):
    """Cold cores simulated over ``cold`` (iterations, warm-up) inside the block, warm ones over ``warm`` (None:
    unchanged) (cores.py's module constants)."""
    from netlab.network.tcp import cores

    was = cores.CORE_HORIZON, cores.CORE_WARMUP, cores.WARM_HORIZON, cores.WARM_WARMUP
    cores.CORE_HORIZON, cores.CORE_WARMUP = cold
    if warm is not None:
        cores.WARM_HORIZON, cores.WARM_WARMUP = warm
    try:
        yield
    finally:
        cores.CORE_HORIZON, cores.CORE_WARMUP, cores.WARM_HORIZON, cores.WARM_WARMUP = was


def referee_part(sizes, per_family: int, horizons: bool = False) -> dict:
    import pandas as pd

    from netlab.validate.compare import compare_jobs, error_summary
    from netlab.validate.families import FAMILIES, family_seeds, generate
    from netlab.validate.predict import predict_all
    from netlab.validate.runs import RunStore, record_times
    from netlab.validate.scenario import REGIMES

    store = RunStore(RESULTS / "referee_runs")
    specs = {name: ("tcp", kw, "solve") for name, kw in variants(sorted(set(sizes) | {64})).items()}
    out = {}
    for which in ("calibration", "scoring"):
        frames, scenarios = [], []
        for f in FAMILIES:
            for s in family_seeds(f, per_family, which):
                sc = generate(f, s, REGIMES[REGIME])
                rec = store.get(sc)
                if rec is None:
                    continue
                ref_iter, ref_alone = record_times(rec)
                preds = [predict_all(sc, specs)]
                for cold in sorted({h[0] for h in HORIZONS[1:]}) if horizons else ():  # a batch solve: cold cores
                    with core_horizon(cold):
                        got = predict_all(sc, {"tcp-cores64": specs["tcp-cores64"]})
                    preds.append(got.assign(model=f"tcp-cores64-horizon{cold[0]}-{cold[1]}"))
                rows = compare_jobs(sc, ref_iter, ref_alone, pd.concat(preds, ignore_index=True))
                frames.append(rows)
                scenarios.append(f"{f}/{s}")
        rows = pd.concat(frames, ignore_index=True)
        keep = ("n_contended", "n_heavy", "median_ape", "p90_ape", "max_ape", "heavy_median_signed",
                "heavy_mean_signed")
        out[which] = dict(scenarios=scenarios, models={m: {k: v[k] for k in keep}
                                                       for m, v in error_summary(rows).items()},
                          moved=moved_summary(rows))
        print(which, {m: (round(v["median_ape"], 4), round(v["p90_ape"], 4), v["heavy_median_signed"])
                      for m, v in out[which]["models"].items()}, flush=True)
    return dict(regime=REGIME, doc="tcp without and with phase_cores (max_core_jobs in the name) on the stored "
                "referee runs (contended jobs; ape = the model's slowdown applied to the referee's time alone); "
                "'moved': the jobs whose prediction a variant moved from tcp's, both models' errors on them; "
                "tcp-cores64-horizonH-W: cores simulated over H iterations, W left out "
                "(a batch solve's cores are cold)",
                commit=_commit(), **out)


# -- full Philly ----------------------------------------------------------------------------------------------------

def philly_child(kwargs: dict, trace_dir: str | None, jobs: int | None, horizons=None) -> dict:
    """One full-Philly run under ``tcp`` with ``kwargs``, in this process: its row. ``horizons``: the cores'
    ((cold iterations, warm-up), (warm iterations, warm-up)), None for cores.py's."""
    sys.path.insert(0, str(Path(__file__).parent))
    from bench_core import PHILLY_TOPOLOGY

    from netlab.sim import SimConfig, Simulator
    from netlab.topology import load_topology
    from netlab.traces import load_trace
    from netlab.workload.job import jobs_from_frame

    topo = load_topology(PHILLY_TOPOLOGY)
    df = load_trace("philly", trace_dir=trace_dir, seed=0)
    jobs = jobs_from_frame(df if jobs is None else df.iloc[:jobs], topo)
    sim = Simulator(topo, jobs, "tiresias", "consolidated", None, SimConfig(network="tcp", network_kwargs=kwargs))
    wall0, cpu0 = time.perf_counter(), time.process_time()
    with core_horizon(*horizons) if horizons else contextlib.nullcontext():
        res = sim.run()
    wall_s, cpu_s = time.perf_counter() - wall0, time.process_time() - cpu0
    s, net = res.summary, sim.network
    from bench_identity import table_hash

    return dict(kwargs=kwargs, **(dict(horizons=horizons) if horizons else {}), jobs=len(jobs),
                job_table_sha256=table_hash(res.jobs), run_cpu_s=cpu_s,
                run_wall_s=wall_s, sim_wall_s=s["wall_s"],
                avg_jct_s=s["avg_jct_s"], phase_blind_job_share=s["phase_blind_job_share"],
                phase_blind_gpu_share=s["phase_blind_gpu_share"], exact_solves=net.exact_solves,
                mean_field_solves=net.mean_field_solves, **net.mean_field_stats())


def philly_part(sizes, trace_dir: str | None, jobs: int | None, bracket: bool = True, horizons=None,
                partial: str = "philly_partial") -> dict:
    """The default, then ``phase_cores`` at each of ``sizes`` (``max_core_jobs``), each with the cores'
    ``horizons`` (:func:`philly_child`; a size given as ``[size, cold, cold warm-up, warm, warm warm-up]`` sets
    its own), then (``bracket``) the default again."""
    settings = [({}, None)]
    for k in sizes:
        k, h = (k, horizons) if isinstance(k, int) else (k[0], [k[1:3], k[3:5]])
        settings.append((dict(phase_cores=True, max_core_jobs=k), h))
    settings += [({}, None)] if bracket else []
    rows = []
    for kw, h in settings:
        before = os.getloadavg()
        argv = [sys.executable, str(Path(__file__).resolve()), "--part", "philly-child", "--kwargs", json.dumps(kw)]
        argv += ["--core-horizons", json.dumps(h)] if h else []
        argv += ["--trace-dir", trace_dir] if trace_dir else []
        argv += ["--jobs", str(jobs)] if jobs else []
        got = subprocess.run(argv, capture_output=True, text=True, cwd=ROOT)
        if got.returncode != 0:
            raise RuntimeError(got.stderr[-2000:])
        row = json.loads(got.stdout.strip().splitlines()[-1]) | dict(loadavg_before=before,
                                                                      loadavg_after=os.getloadavg())
        rows.append(row)
        print(f"{kw or 'default'} {h or ''}: {row['run_cpu_s']:.1f} s CPU, table {row['job_table_sha256'][:16]}, "
              f"phase-blind {row['phase_blind_job_share']:.3f} "
              f"of job-s ({row['phase_blind_gpu_share']:.3f} of GPU-s), avg JCT {row['avg_jct_s']:.0f} s, "
              f"load {before[0]:.1f} -> {row['loadavg_after'][0]:.1f}", flush=True)
        _merge(partial, dict(commit=_commit(), runs=rows))  # kept if a later run is stopped
    defaults = [r for r in rows if not r["kwargs"]]
    base = statistics.mean(r["run_cpu_s"] for r in defaults)
    for r in rows:
        if r["kwargs"]:
            r["cpu_over_default"] = r["run_cpu_s"] / base
    return dict(order="default, phase_cores at each max_core_jobs" + (", default" if bracket else "")
                + " (fresh processes, one at a time)",
                jobs=jobs or "full trace", commit=_commit(), default_cpu_s_mean=base, runs=rows)


def recorded_cores(kwargs: dict, trace_dir: str | None, jobs: int, every: int) -> tuple[list, dict]:
    """(the inputs of every ``every``-th core simulation, the run's row) of the first ``jobs`` Philly jobs under
    ``tcp`` with ``kwargs`` (:func:`netlab.network.tcp.core_fluid.core_periods`' arguments, in order)."""
    import numpy as np

    import netlab.network.tcp.core_fluid as core_fluid

    kernel, recorded, seen = core_fluid.core_periods, [], [0]

    def recording(*args):  # the kernel's inputs (copied: the caller's arrays are reused)
        seen[0] += 1
        if seen[0] % every == 0:
            recorded.append([a.copy() if isinstance(a, np.ndarray) else a for a in args])
        return kernel(*args)

    core_fluid.core_periods = recording  # (simulate_core calls it by the module's name)
    try:
        row = philly_child(kwargs, trace_dir, jobs)
    finally:
        core_fluid.core_periods = kernel
    return recorded, row


def horizon_part(jobs: int, trace_dir: str | None, every: int) -> dict:
    """Record every ``every``-th core simulation of the first ``jobs`` Philly jobs, then simulate each again over
    each of :data:`HORIZONS` (by whether it was warm: recorded with the warm horizon) and :data:`LONG_HORIZON`."""
    import numpy as np

    import netlab.network.tcp.core_fluid as core_fluid
    from netlab.network.tcp.cores import CORE_HORIZON, CORE_WARMUP, WARM_HORIZON, WARM_WARMUP

    if (CORE_HORIZON, CORE_WARMUP) != HORIZONS[0][0] or (WARM_HORIZON, WARM_WARMUP) != HORIZONS[0][1]:
        raise RuntimeError("HORIZONS[0] must be cores.py's horizons")
    kernel = core_fluid.core_periods
    recorded, row = recorded_cores(dict(phase_cores=True), trace_dir, jobs, every)
    long_ape = {h: [] for h in HORIZONS}
    events, cpu = dict.fromkeys(HORIZONS, 0), dict.fromkeys(HORIZONS, 0.0)
    warm_count = 0
    for args in recorded:
        warm = (args[20], args[21]) == (WARM_HORIZON, WARM_WARMUP)  # (horizon, warmup) are its 21st and 22nd
        warm_count += warm
        a = list(args)
        a[20], a[21], a[22] = *LONG_HORIZON, 10 ** 7  # max_events: the long reference always finishes
        ok, ref, _, _ = kernel(*a)
        if not ok:
            continue
        a[22] = args[22]
        for h in HORIZONS:
            a[20], a[21] = h[1] if warm else h[0]
            t0 = time.process_time()
            ok, period, _, ev = kernel(*a)
            cpu[h] += time.process_time() - t0
            events[h] += ev
            if ok:
                long_ape[h].append(np.abs(period / ref - 1.0))
    rows = []
    for h in HORIZONS:
        x = np.concatenate(long_ape[h])
        rows.append(dict(cold=list(h[0]), warm=list(h[1]), jobs=int(len(x)), median_ape=float(np.median(x)),
                         p90_ape=float(np.quantile(x, 0.9)), p99_ape=float(np.quantile(x, 0.99)),
                         max_ape=float(x.max()), events_over_now=events[h] / events[HORIZONS[0]],
                         kernel_cpu_over_now=cpu[h] / cpu[HORIZONS[0]]))
        print(rows[-1], flush=True)
    return dict(doc=f"core simulations recorded from the first {jobs} Philly jobs with phase_cores (every {every}), "
                f"simulated again over each (cold, warm) horizon (iterations, warm-up): per-job period APE against "
                f"the same core over {LONG_HORIZON}, events and kernel CPU over today's horizons (the first row)",
                commit=_commit(), philly_jobs=jobs, cores=len(recorded), warm_cores=warm_count,
                run_cpu_s=row["run_cpu_s"], loadavg=os.getloadavg(), horizons=rows)


def window_estimates(starts, kept, bounds):
    """Per window between consecutive ``bounds`` (rows) and per job (columns): its mean period over the starts
    it recorded in that window (nan with fewer than two there)."""
    import numpy as np

    out = np.full((len(bounds) - 1, len(kept)), np.nan)
    for i, n in enumerate(kept):
        v = starts[i, :n]
        lo = np.searchsorted(v, bounds[:-1] - 1e-12)
        hi = np.searchsorted(v, bounds[1:] + 1e-12, side="right") - 1
        ok = hi - lo >= 1
        out[ok, i] = (v[hi[ok]] - v[lo[ok]]) / (hi[ok] - lo[ok])
    return out


def settle_part(jobs: int, trace_dir: str | None, every: int, max_core_jobs: int = 64) -> dict:
    """Whether a core settles into a periodic pattern, so that its simulation could stop once it repeats.

    Every ``every``-th core simulation of the first ``jobs`` Philly jobs at ``max_core_jobs`` is simulated again
    over :data:`LONG_HORIZON`'s iterations; its laggard's (the job with the fewest starts) iteration starts after
    today's warm-up cut the run into windows, and in each window every job's mean period is measured. If the
    pattern repeated from one laggard iteration to the next, those would agree. Reported: their window-to-window
    change (per core, the median over jobs and windows; weighted by today's events), and a stop rule on it: stop
    at the first laggard start where the last ``L`` windows' mean periods agree with the ``L`` before within
    ``tol`` for every job, each job's period taken over those ``2 L`` windows (today's horizon as the cap):
    the starts simulated (all jobs' iteration starts, the events' proxy: three events each) against today's,
    and the per-job period APE against today's (the same simulation run to today's horizon)."""
    import numpy as np

    from netlab.network.tcp.core_fluid import core_periods, core_starts

    recorded, row = recorded_cores(dict(phase_cores=True, max_core_jobs=max_core_jobs), trace_dir, jobs, every)
    rules = [(1, 0.005), (1, 0.01), (2, 0.005), (2, 0.01), (2, 0.02)]
    change, weight, size = [], [], []
    work_now, work = 0, dict.fromkeys(rules, 0)
    early, ape = dict.fromkeys(rules, 0), {r: [] for r in rules}
    for args in recorded:
        ok, ref, _, events = core_periods(*args)
        if not ok:
            continue
        horizon, warmup = args[20], args[21]
        starts, count, _, _ = core_starts(*args[:20], LONG_HORIZON[0], 10 ** 7)
        kept = np.minimum(count, starts.shape[1])
        if kept.min() <= horizon:
            continue
        t_now = max(starts[i, horizon] for i in range(len(kept)))  # today's run stops here
        lag = int(np.argmin(count))
        bounds = starts[lag, warmup:kept[lag]]
        est = window_estimates(starts, kept, bounds)
        rel = np.abs(est[1:] / est[:-1] - 1.0)
        if not np.isfinite(rel).any():
            continue
        change.append(float(np.nanmedian(rel)))
        weight.append(events)
        size.append(len(kept))
        done_now = sum(int(np.searchsorted(starts[i, :kept[i]], t_now, side="right")) for i in range(len(kept)))
        work_now += done_now
        for L, tol in rules:
            period, done = ref, done_now
            for c in range(2 * L, len(bounds)):
                if bounds[c] >= t_now:
                    break
                a = window_estimates(starts, kept, bounds[[c - 2 * L, c - L, c]])
                if np.isfinite(a).all() and (np.abs(a[1] / a[0] - 1.0) <= tol).all():
                    period = window_estimates(starts, kept, bounds[[c - 2 * L, c]])[0]
                    done = sum(int(np.searchsorted(starts[i, :kept[i]], bounds[c], side="right"))
                               for i in range(len(kept)))
                    early[(L, tol)] += 1
                    break
            work[(L, tol)] += done
            ape[(L, tol)].append(np.abs(period / ref - 1.0))
    change, weight, size = np.array(change), np.array(weight, float), np.array(size)

    def weighted_quantile(x, w, q):
        o = np.argsort(x)
        return float(x[o][min(np.searchsorted(np.cumsum(w[o]) / w.sum(), q), len(x) - 1)])

    groups = []
    for lo, hi in ((2, 8), (9, 32), (33, max_core_jobs)):
        sel = (size >= lo) & (size <= hi)
        if sel.any():
            groups.append(dict(jobs=[lo, hi], cores=int(sel.sum()),
                               events_share=float(weight[sel].sum() / weight.sum()),
                               median_change=float(np.median(change[sel])),
                               cores_under_1pct=float(np.mean(change[sel] < 0.01))))
    stops = []
    for r in rules:
        x = np.concatenate(ape[r])
        stops.append(dict(windows=r[0], tol=r[1], early_share=early[r] / len(change),
                          starts_over_now=work[r] / work_now, median_ape=float(np.median(x)),
                          p90_ape=float(np.quantile(x, 0.9)), p99_ape=float(np.quantile(x, 0.99)),
                          max_ape=float(x.max())))
        print(stops[-1], flush=True)
    out = dict(doc=settle_part.__doc__.split("\n\n")[1].replace("\n    ", " ").strip(), commit=_commit(),
               philly_jobs=jobs, every=every, max_core_jobs=max_core_jobs, cores=int(len(change)),
               run_cpu_s=row["run_cpu_s"], loadavg=os.getloadavg(),
               change_median=float(np.median(change)), change_p90=float(np.quantile(change, 0.9)),
               change_events_weighted_median=weighted_quantile(change, weight, 0.5),
               change_events_weighted_p90=weighted_quantile(change, weight, 0.9), by_size=groups, stop_rules=stops)
    print({k: v for k, v in out.items() if k not in ("doc", "stop_rules")}, flush=True)
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--part", choices=("referee", "philly", "philly-child", "horizon", "settle"), required=True)
    ap.add_argument("--sizes", nargs="*", type=int, default=list(CORE_SIZES))
    ap.add_argument("--per-family", type=int, default=40, help="referee: seeds per family and half looked up")
    ap.add_argument("--trace-dir", default=None)
    ap.add_argument("--jobs", type=int, default=None, help="philly: first N jobs (default: the full trace)")
    ap.add_argument("--section", default="philly", help="philly: the results file's section written")
    ap.add_argument("--no-final-default", action="store_true", help="philly: no default run after the cores' runs")
    ap.add_argument("--horizons", action="store_true", help="referee: tcp-cores64 at each cold horizon of HORIZONS too")
    ap.add_argument("--every", type=int, default=2, help="horizon, settle: every N-th core simulation recorded")
    ap.add_argument("--kwargs", default="{}", help="philly-child: the tcp model's keyword arguments (JSON)")
    ap.add_argument("--core-horizons", default=None,
                    help="philly, philly-child: the cores' [[cold, warm-up], [warm, warm-up]] iterations (JSON)")
    ap.add_argument("--settings", default=None,
                    help="philly: JSON list of max_core_jobs or [max_core_jobs, cold, warm-up, warm, warm-up]")
    args = ap.parse_args(argv)
    if args.part == "philly-child":
        horizons = json.loads(args.core_horizons) if args.core_horizons else None
        print(json.dumps(philly_child(json.loads(args.kwargs), args.trace_dir, args.jobs, horizons)))
        return 0
    if args.part == "horizon":
        _merge("horizon", horizon_part(args.jobs or 10_000, args.trace_dir, args.every))
    elif args.part == "settle":
        _merge("settle", settle_part(args.jobs or 20_000, args.trace_dir, args.every))
    elif args.part == "referee":
        _merge("referee", referee_part(args.sizes, args.per_family, args.horizons))
    else:
        sizes = json.loads(args.settings) if args.settings else args.sizes
        horizons = json.loads(args.core_horizons) if args.core_horizons else None
        partial = f"{args.section}_partial"
        _merge(args.section, philly_part(sizes, args.trace_dir, args.jobs, not args.no_final_default, horizons,
                                         partial))
        _merge(partial, None)
    print("wrote", OUT)
    return 0


if __name__ == "__main__":
    sys.exit(main())
