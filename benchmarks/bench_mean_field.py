"""How far the ``tcp`` model's mean field is from its exact fluid simulation, on the components the
simulator actually meets: writes benchmarks/results/mean_field.json.

The ``tcp`` network solves components of at most ``max_exact_jobs`` (8) jobs by simulating them; larger
ones by the mean-field fixed point (``netlab.network.tcp._mean_field``). This benchmark replays a prefix of
the Philly trace (Tiresias + consolidated, the 512-GPU 4:1 leaf-spine of ``bench_core.py``), keeps every
``--every``-th solve that reaches the mean field, and for each such component of at most ``--max-jobs``
jobs solves it twice from the same inputs: by the mean field and exactly (``max_exact_jobs`` raised so the
whole component is simulated). It reports, per job, the absolute percentage error of the mean-field
iteration time against the exact one (median, p90, max; on the jobs the exact model slows by 1.5x or
more; and the signed error per bin of the exact slowdown), and whether the fixed point converged (the
relative change one more iteration would make, against the solver's tolerance ``tcp.MF_TOL``). It also
reports the live run's own count: mean-field solves, iterations per solve, solves that hit the
iteration limit, and the share of link passes left out (links that limit nobody, between full passes).

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

import netlab.network.tcp as tcp  # noqa: E402
from netlab.sim.metrics import write_json  # noqa: E402
from netlab.traces import load_trace  # noqa: E402

TOL = tcp.MF_TOL  # the fixed point's tolerance


def capture(n_jobs: int, every: int) -> tuple[list[tuple], np.ndarray]:
    """Every ``every``-th ``solve_arrays`` call with more than ``max_exact_jobs`` jobs, inputs copied; and the
    run's mean-field counts (solves, iterations, solves at the iteration limit)."""
    calls, seen, models = [], [0], []
    solve = tcp.TcpNetwork.solve_arrays

    def spy(self, now_s, cap_link, job, link, weight, cols):
        if not models:
            models.append(self)
        if cols.shape[0] > self.max_exact_jobs:
            seen[0] += 1
            if seen[0] % every == 0:
                calls.append(tuple(np.copy(x) if isinstance(x, np.ndarray) else x
                                   for x in (now_s, cap_link, job, link, weight, cols)))
        return solve(self, now_s, cap_link, job, link, weight, cols)

    tcp.TcpNetwork.solve_arrays = spy
    try:
        philly_run(load_trace("philly", seed=0), n_jobs, network="tcp")
    finally:
        tcp.TcpNetwork.solve_arrays = solve
    return calls, models[0].mf_stats.copy()


def compare(call: tuple, max_jobs: int) -> dict | None:
    """Mean field and exact iteration times of the large component's jobs in one captured solve."""
    now_s, cap_link, job, link, weight, cols = call
    cols = cols[:, :8].copy()  # no warm start: both solves start from the policies' phases
    cap_job = tcp._alone(cols)[0]
    large = tcp._binding_components(job, link, weight, cap_link, cap_job, cols.shape[0], tcp.MAX_EXACT_JOBS)[3]
    members = np.flatnonzero(large)
    if not 0 < len(members) <= max_jobs:
        return None
    mean_field = tcp.TcpNetwork().solve_arrays(now_s, cap_link, job, link, weight, cols)[0][members]
    exact_model = tcp.TcpNetwork(max_exact_jobs=10_000, max_events=5_000_000)
    exact = exact_model.solve_arrays(now_s, cap_link, job, link, weight, cols)[0][members]
    if exact_model.exact_solves == 0:  # the simulation did not finish: nothing exact to compare with
        return None
    _, gbit, _, _, _, alone, _ = (x[members] for x in tcp._alone(cols))
    return dict(jobs=len(members), mean_field=mean_field, exact=exact, alone=alone, gradient_share=gbit / gbit.max(),
                residual=residual(call, members, large))


def residual(call: tuple, members: np.ndarray, large: np.ndarray) -> float:
    """The relative change one more mean-field iteration makes at the returned rates (converged: <= TOL)."""
    now_s, cap_link, job, link, weight, cols = call
    cols = cols[:, :8].copy()
    cap_job, gbit, pre, alone_net, _, _, tail = tcp._alone(cols)
    binding = tcp._binding_components(job, link, weight, cap_link, cap_job, cols.shape[0], tcp.MAX_EXACT_JOBS)[0]
    local = np.full(cols.shape[0], -1)
    local[members] = np.arange(len(members))
    sel = large[job] & binding[link]
    blinks, bl = np.unique(link[sel], return_inverse=True)
    args = [local[job[sel]].astype(np.int64), bl.astype(np.int64), weight[sel].astype(float), cap_link[blinks]]
    g = gbit[members]
    phi = tcp._weights(g, tcp.ALPHA)  # share weights as the solver forms them
    rest = (cap_job[members], phi, g, pre[members], tail[members])
    rate, _ = tcp._mean_field(*tcp._merge_mirrored(*args), *rest, cap_job[members].copy())
    again, _ = tcp._mean_field(*tcp._merge_mirrored(*args), *rest, rate, 1)  # a first step is taken whole
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
               converged_fraction=float(np.mean(resid <= TOL)), residual=pct(resid), tolerance=TOL,
               live_run=dict(mean_field_solves=int(live[0]), iterations_per_solve=float(live[1] / max(live[0], 1)),
                             at_iteration_limit=int(live[2]), iteration_limit=tcp.MF_MAX_ITER,
                             link_passes_left_out=float(live[4] / max(live[3], 1))),
               wall_s=time.perf_counter() - t0)
    print(f"{len(rows)} components, {len(ape)} jobs: APE median {np.median(ape):.3f}, p90 "
          f"{np.percentile(ape, 90):.3f}; converged {out['converged_fraction']:.0%}")
    print("wrote", write_json(args.out, out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
