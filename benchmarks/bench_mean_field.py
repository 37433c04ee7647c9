"""How far the ``tcp`` model's mean field is from its exact fluid simulation, on the components the
simulator actually meets: writes benchmarks/results/mean_field.json.

The ``tcp`` network solves components of at most ``max_exact_jobs`` (8) jobs by simulating them; larger
ones by the mean-field fixed point (``netlab.network.tcp.mean_field``). This benchmark replays a prefix of
the Philly trace (Tiresias + consolidated, the 512-GPU 4:1 leaf-spine of ``bench_core.py``), keeps every
``--every``-th solve that reaches the mean field, and for each such component of at most ``--max-jobs``
jobs solves it twice from the same inputs: by the mean field and exactly (``max_exact_jobs`` raised so the
whole component is simulated). It reports, per job, the absolute percentage error of the mean-field
iteration time against the exact one (median, p90, max; on the jobs the exact model slows by 1.5x or
more; and the signed error per bin of the exact slowdown), and whether the fixed point converged (the
relative change one more iteration would make, against the solver's tolerance ``MF_TOL``). It also
reports the live run's own count: mean-field solves, iterations per solve, solves that hit the
iteration limit, and the share of link passes left out (links that limit nobody, between full passes).
A third solve of each component with ``phase_cores=True`` (:mod:`netlab.network.tcp.cores`: the jobs one
link limits, up to ``max_core_jobs``, simulated with phase after the mean field) is scored the same way
(``phase_cores``).

Usage: python benchmarks/bench_mean_field.py [--jobs 30000] [--every 50] [--max-jobs 60]
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
from bench_core import philly_run  # noqa: E402

from netlab.network.slots import Entries, component, jobs_at  # noqa: E402
from netlab.network.tcp import TcpNetwork  # noqa: E402
from netlab.network.tcp.components import alone, binding_components, share_weights  # noqa: E402
from netlab.network.tcp.mean_field import MF_MAX_ITER, MF_TOL, MeanFieldJobs, mean_field, merge_mirrored  # noqa: E402
from netlab.network.tcp.params import ALPHA, MAX_CORE_JOBS, MAX_EXACT_JOBS  # noqa: E402
from netlab.network.tcp.solve import solve_component  # noqa: E402
from netlab.sim.metrics import write_json  # noqa: E402
from netlab.traces import load_trace  # noqa: E402

TOL = MF_TOL  # the fixed point's tolerance


def replay(n_jobs: int, every: int, take) -> dict:
    """Run the first ``n_jobs`` of Philly under ``tcp`` and call ``take(model, now_s, comp)`` before every
    ``every``-th incremental re-solve whose component has more than ``max_exact_jobs`` jobs (``comp``: the
    component, found as the re-solve finds it); the run's mean-field counts by name."""
    seen, models = [0], []
    resolve = TcpNetwork.resolve

    def spy(self, now_s):
        if not models:
            models.append(self)
        comp = component(self._touched.copy(), self._slots.rows,
                         self._offered > self._links.capacity_gbps * (1 + 1e-9))
        if len(comp.rows) > self.params.max_exact_jobs:
            seen[0] += 1
            if seen[0] % every == 0:
                take(self, now_s, comp)
        return resolve(self, now_s)

    TcpNetwork.resolve = spy
    try:
        philly_run(load_trace("philly", seed=0), n_jobs, network="tcp")
    finally:
        TcpNetwork.resolve = resolve
    return models[0].mean_field_stats()


def capture(n_jobs: int, every: int) -> tuple[list[tuple], dict]:
    """Every ``every``-th incremental re-solve whose component has more than ``max_exact_jobs`` jobs, its
    inputs copied (now, link capacities, entries, jobs); and the run's mean-field counts by name."""
    calls = []

    def take(model, now_s, comp):
        entries = Entries(*(np.copy(x) for x in comp.entries))
        calls.append((now_s, model._links.capacity_gbps[comp.links].copy(), entries,
                      jobs_at(model._slots.rows, comp.rows)))

    return calls, replay(n_jobs, every, take)


def _solve(model: TcpNetwork, now_s, cap_link, e, jobs) -> np.ndarray:
    """Iteration times of ``jobs`` solved by ``model`` (new jobs: no phase state, no warm start)."""
    rows = model._slots.claim_ids(jobs.job_id.tolist())
    return model.solve_rows(now_s, rows, e, cap_link, jobs).iter_s


def compare(call: tuple, max_jobs: int) -> dict | None:
    """Mean field and exact iteration times of the large component's jobs in one captured solve."""
    now_s, cap_link, e, jobs = call
    jobs = jobs._replace(last_iter_s=np.full(len(jobs.job_id), np.nan))  # both solves from the policies' phases
    al = alone(jobs)
    large = binding_components(e, cap_link, al.cap_gbps, MAX_EXACT_JOBS).large
    members = np.flatnonzero(large)
    if not 0 < len(members) <= max_jobs:
        return None
    mean_field_it = _solve(TcpNetwork(), now_s, cap_link, e, jobs)[members]
    cores_model = TcpNetwork(phase_cores=True)
    rows = cores_model._slots.claim_ids(jobs.job_id.tolist())
    blind = np.zeros(len(jobs.job_id), dtype=bool)
    cores_it = solve_component(now_s, e, cap_link, jobs, cores_model._slots.rows, rows, cores_model.params,
                               cores_model.counts, blind)[0].iter_s[members]
    exact_model = TcpNetwork(max_exact_jobs=10_000, max_events=5_000_000)
    exact = _solve(exact_model, now_s, cap_link, e, jobs)[members]
    if exact_model.exact_solves == 0:  # the simulation did not finish: nothing exact to compare with
        return None
    gbit = al.gbit[members]
    return dict(jobs=len(members), mean_field=mean_field_it, cores=cores_it, cored=~blind[members], exact=exact,
                alone=al.iter_s[members],
                gradient_share=gbit / gbit.max(), residual=residual(call, members, large))


def residual(call: tuple, members: np.ndarray, large: np.ndarray) -> float:
    """The relative change one more mean-field iteration makes at the returned rates (converged: <= TOL)."""
    now_s, cap_link, e, jobs = call
    al = alone(jobs)
    binding = binding_components(e, cap_link, al.cap_gbps, MAX_EXACT_JOBS).binding
    local = np.full(len(jobs.job_id), -1)
    local[members] = np.arange(len(members))
    sel = large[e.job] & binding[e.link]
    blinks, bl = np.unique(e.link[sel], return_inverse=True)
    kept, cap = merge_mirrored(Entries(local[e.job[sel]].astype(np.int64), bl.astype(np.int64),
                                       e.weight[sel].astype(float)), cap_link[blinks])
    g = al.gbit[members]
    mf_jobs = MeanFieldJobs(al.cap_gbps[members], share_weights(g, ALPHA), g, al.pre_s[members], al.tail_s[members])
    rate, _ = mean_field(kept, cap, mf_jobs, al.cap_gbps[members].copy())
    again, _ = mean_field(kept, cap, mf_jobs, rate, 1)  # a first step is taken whole
    return float(np.max(np.abs(again / rate - 1)))


SLOWDOWN_BINS = ((1.0, 1.2), (1.2, 2.0), (2.0, 5.0), (5.0, float("inf")))
SMALL = 0.1  # a job's gradient below this share of its component's largest: it waits for gaps in the big ones'
#              transfers (weights follow bytes), which the mean field spreads as an average spare capacity


def by_slowdown(signed: np.ndarray, slowdown: np.ndarray) -> list[dict]:
    """Signed relative error (mean field / exact - 1) per bin of the exact slowdown: where it errs, and which way."""
    out = []
    for lo, hi in SLOWDOWN_BINS:
        sel = (slowdown >= lo) & (slowdown < hi)
        if sel.any():
            p10, p50, p90 = np.percentile(signed[sel], [10, 50, 90])
            out.append(dict(slowdown_from=lo, slowdown_to=hi if np.isfinite(hi) else None, jobs=int(sel.sum()),
                            p10=float(p10), median=float(p50), p90=float(p90)))
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--jobs", type=int, default=30_000)
    ap.add_argument("--every", type=int, default=50)
    ap.add_argument("--max-jobs", type=int, default=60, help="largest component simulated exactly")
    ap.add_argument("--out", default=str(Path(__file__).parent / "results" / "mean_field.json"))
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    calls, live = capture(args.jobs, args.every)
    rows = [r for r in (compare(c, args.max_jobs) for c in calls) if r is not None]
    mf = np.concatenate([r["mean_field"] for r in rows])
    ex = np.concatenate([r["exact"] for r in rows])
    alone = np.concatenate([r["alone"] for r in rows])
    share = np.concatenate([r["gradient_share"] for r in rows])
    ape = np.abs(mf / ex - 1)
    cores = np.concatenate([r["cores"] for r in rows])
    cored = np.concatenate([r["cored"] for r in rows])
    ape_cores = np.abs(cores / ex - 1)
    slowed = ex >= 1.5 * alone
    resid = np.array([r["residual"] for r in rows])

    def pct(x):
        return dict(median=float(np.median(x)), p90=float(np.percentile(x, 90)), max=float(x.max()), n=int(len(x)))

    out = dict(machine=dict(python=platform.python_version(), cpus=os.cpu_count(), loadavg=os.getloadavg()),
               setup=dict(trace="philly", jobs=args.jobs, every=args.every, max_component_jobs=args.max_jobs,
                          policy="tiresias", placement="consolidated", topology="bench_core.PHILLY_TOPOLOGY"),
               captured_solves=len(calls), components=len(rows),
               component_jobs=pct(np.array([r["jobs"] for r in rows], float)),
               ape_all_jobs=pct(ape), ape_slowed_jobs=pct(ape[slowed]) if slowed.any() else None,
               exact_slowdown=pct(ex / alone), signed_error_by_exact_slowdown=by_slowdown(mf / ex - 1, ex / alone),
               signed_error_small_gradients=by_slowdown((mf / ex - 1)[share < SMALL], (ex / alone)[share < SMALL]),
               signed_error_other_gradients=by_slowdown((mf / ex - 1)[share >= SMALL], (ex / alone)[share >= SMALL]),
               small_gradient_share=SMALL, ape_small_gradients=pct(ape[share < SMALL]),
               ape_other_gradients=pct(ape[share >= SMALL]),
               phase_cores=dict(
                   max_core_jobs=MAX_CORE_JOBS,
                   doc="the same components solved with phase_cores=True (netlab.network.tcp.cores): APE against "
                       "the exact fluid on every job, on the jobs a simulated core gave their time (phase-aware), "
                       "and the mean field alone on those same jobs",
                   cored_job_share=float(cored.mean()), ape_all_jobs=pct(ape_cores),
                   ape_cored_jobs=pct(ape_cores[cored]) if cored.any() else None,
                   mean_field_ape_cored_jobs=pct(ape[cored]) if cored.any() else None,
                   signed_error_by_exact_slowdown=by_slowdown(cores / ex - 1, ex / alone)),
               converged_fraction=float(np.mean(resid <= TOL)), residual=pct(resid), tolerance=TOL,
               live_run=dict(mean_field_solves=live["solves"],
                             iterations_per_solve=float(live["iterations"] / max(live["solves"], 1)),
                             at_iteration_limit=live["unconverged"], iteration_limit=MF_MAX_ITER,
                             link_passes_left_out=float(live["links_skipped"] / max(live["link_passes"], 1))),
               wall_s=time.perf_counter() - t0)
    print(f"{len(rows)} components, {len(ape)} jobs: APE median {np.median(ape):.3f}, p90 "
          f"{np.percentile(ape, 90):.3f}; converged {out['converged_fraction']:.0%}; phase cores: "
          f"{cored.mean():.0%} of jobs, APE median {np.median(ape_cores):.3f}, p90 {np.percentile(ape_cores, 90):.3f}")
    print("wrote", write_json(args.out, out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
