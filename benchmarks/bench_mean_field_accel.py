"""Can the ``tcp`` model's mean-field fixed point be reached in fewer iterations? Measured on the solves the
simulator makes: writes benchmarks/results/mean_field_accel.json.

The mean field (``netlab.network.tcp.mean_field.mean_field``) iterates a damped map (each job's rate moves
half-way, geometrically, towards the rate the water-filling gives it) until no job's rate would move by
``MF_TOL``; about 16 iterations per solve on full Philly. This benchmark replays a prefix of the Philly trace
(``bench_core.philly_run``: Tiresias + consolidated, the 512-GPU 4:1 leaf-spine) and keeps the kernel's own
inputs at every ``--every``-th large-component re-solve, warm starts included (the inputs ``solve_large``
builds, taken by running its Python body beside the compiled solve). On those it reports:

- ``kernel``: the kernel's iterations per solve (the distribution) and its CPU per solve and per iteration;
- ``residual_history``: the largest relative change per iteration of the damped map, every link in every
  pass (the kernel leaves out links that limit nobody between full passes, which costs it about one
  iteration more);
- ``jacobian``: at the fixed point, the undamped map's Jacobian in log rates (finite differences): its
  diagonal, the eigenvalues of largest modulus, how many are above 0.5, and its largest singular value. This
  is what decides which acceleration can work;
- ``methods``: iterations to the same stopping test (the undamped map's largest relative change below
  ``MF_TOL``, every link) from the same warm starts for the damped iteration, Anderson acceleration (type II,
  memory 3, restarted when the residual grows, alone and from a residual of 0.05), a two-step (momentum)
  iteration with the stationary parameters best on the Jacobians' spectra and with a few others tried on
  these solves, and Newton's method with the exact Jacobian (finite differences, not counted as iterations);
- ``dense_solve_us``: one dense linear solve of a component's size, what each Newton step would add.

Each method here steps in Python around one full pass of the compiled kernel (``mean_field`` with
``max_iter=1``, whose damped step gives back the undamped map), so ``methods`` counts iterations, not time.

Usage: python benchmarks/bench_mean_field_accel.py [--jobs 30000] [--every 50] [--methods-every 3]
"""

from __future__ import annotations

import argparse
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
from bench_mean_field import replay  # noqa: E402

import netlab.network.tcp.mean_field as mf  # noqa: E402
from netlab.network.slots import Entries, Rows, jobs_at  # noqa: E402
from netlab.network.tcp.components import alone, binding_components  # noqa: E402
from netlab.sim.metrics import write_json  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
MAX_ITER = mf.MF_MAX_ITER
TWO_STEP_TRIED = ((0.5625, 0.0), (0.6, -0.05), (0.65, -0.1))  # a larger constant step; the best of a few tried


def capture(n_jobs: int, every: int) -> tuple[list[tuple], dict]:
    """The mean-field kernel's inputs (entries, link capacities, jobs, warm start) at every ``every``-th
    re-solve of a component over ``max_exact_jobs`` jobs, and the run's mean-field counts."""
    calls, kernel = [], mf.mean_field

    def record(e, cap, jobs, rate0, max_iter, tol, counts):
        calls.append((Entries(*(np.copy(x) for x in e)), cap.copy(), mf.MeanFieldJobs(*(np.copy(x) for x in jobs)),
                      rate0.copy()))
        return kernel(e, cap, jobs, rate0, max_iter, tol, counts)

    def take(model, now_s, comp):
        t = model._slots.rows
        jobs, cap = jobs_at(t, comp.rows), model._capacity_eff[comp.links]
        al = alone(jobs)
        comps = binding_components(comp.entries, cap, al.cap_gbps, model.params.max_exact_jobs)
        if comps.large.any() and jobs.priority.min() == jobs.priority.max():
            mf.mean_field = record  # solve_large's Python body calls the module's mean_field
            try:  # on a copy of the rows: the live run's phase state is not touched
                mf.solve_large.py_func(now_s, comp.entries, cap, comps, jobs, al, model.params.alpha,
                                       Rows(*(np.copy(x) for x in t)), comp.rows, al.iter_s.copy(),
                                       np.zeros(len(cap)), np.zeros(len(cap)), mf.mean_field_counts())
            finally:
                mf.mean_field = kernel

    return calls, replay(n_jobs, every, take)


def undamped(call, x: np.ndarray) -> np.ndarray:
    """The map the kernel damps: each job's rate from one full pass at rates ``x`` (the kernel's first step
    is whole for a job at its cap, the geometric half-step otherwise, so the latter is squared back)."""
    e, cap, jobs, _ = call
    out, _ = mf.mean_field(e, cap, jobs, x, 1, mf.MF_TOL)
    return np.where(x >= jobs.cap_gbps, out, out * out / x)


def change(x: np.ndarray, r: np.ndarray) -> float:
    """The kernel's stopping measure: the largest relative move."""
    return float(np.max(np.abs(r - x) / x))


def first_step(call, x, r):
    """The kernel's first step: whole for a new job (at its cap), half-way (geometric) for a warm one."""
    return np.where(call[3] >= call[2].cap_gbps, r, np.sqrt(x * r))


def damped(call, history=None) -> int:
    x = call[3].copy()
    for it in range(1, MAX_ITER + 1):
        r = undamped(call, x)
        c = change(x, r)
        if history is not None:
            history.append(c)
        if c < mf.MF_TOL:
            return it
        x = first_step(call, x, r) if it == 1 else np.sqrt(x * r)
    return MAX_ITER


def anderson(call, memory=3, beta=0.5, start=np.inf) -> int:
    """Anderson acceleration (type II) in log rates on the damped map: the step from the last ``memory``
    differences of iterates and residuals that least-squares cancels the residual; the history restarts when
    the residual grows (and while the largest move is above ``start``); rates capped at each job's cap."""
    x, cap = call[3].copy(), call[2].cap_gbps
    ys, fs, prev = [], [], np.inf
    for it in range(1, MAX_ITER + 1):
        r = undamped(call, x)
        c = change(x, r)
        if c < mf.MF_TOL:
            return it
        y, f = np.log(x), np.log(r) - np.log(x)
        if it == 1:
            x = first_step(call, x, r)
            ys, fs, prev = [y], [f], np.linalg.norm(f)
            continue
        norm = np.linalg.norm(f)
        ys, fs = ([y], [f]) if norm > prev or c > start else ((ys + [y])[-(memory + 1):], (fs + [f])[-(memory + 1):])
        prev = norm
        if len(ys) < 2:
            x = np.sqrt(x * r)
            continue
        dy, df = np.diff(ys, axis=0).T, np.diff(fs, axis=0).T
        gamma = np.linalg.lstsq(df, f, rcond=1e-10)[0]
        x = np.exp(np.minimum(y + beta * f - (dy + beta * df) @ gamma, np.log(cap)))
    return MAX_ITER


def two_step(call, a: float, g: float) -> int:
    """``y + a (log r - y) + g (y - y_prev)`` in log rates (a = 1/2, g = 0 is the damped iteration)."""
    x, cap = call[3].copy(), call[2].cap_gbps
    prev = x
    for it in range(1, MAX_ITER + 1):
        r = undamped(call, x)
        if change(x, r) < mf.MF_TOL:
            return it
        nx = first_step(call, x, r) if it == 1 else np.exp(np.log(x) + a * np.log(r / x) + g * np.log(x / prev))
        prev, x = x, np.minimum(nx, cap)
    return MAX_ITER


def jacobian(call, y: np.ndarray, g0: np.ndarray, h: float = 1e-7) -> np.ndarray:
    """d log(undamped rate) / d log(rate), by forward differences."""
    jac = np.empty((len(y), len(y)))
    for i in range(len(y)):
        yy = y.copy()
        yy[i] += h
        jac[:, i] = (np.log(undamped(call, np.exp(yy))) - g0) / h
    return jac


def newton(call) -> int:
    """Newton's method on log(undamped(x)) = log(x), the Jacobian exact at every step (not counted)."""
    x, cap = call[3].copy(), call[2].cap_gbps
    for it in range(1, MAX_ITER + 1):
        r = undamped(call, x)
        if change(x, r) < mf.MF_TOL:
            return it
        if it == 1:
            x = first_step(call, x, r)
            continue
        y, g = np.log(x), np.log(r)
        step = np.linalg.solve(np.eye(len(y)) - jacobian(call, y, g), g - y)
        x = np.exp(np.minimum(y + step, np.log(cap)))
    return MAX_ITER


def fixed_point(call) -> np.ndarray:
    e, cap, jobs, rate0 = call
    return mf.mean_field(e, cap, jobs, rate0, 5000, 1e-12)[0]


def spectrum(call) -> dict:
    """The undamped map's Jacobian at the fixed point: its diagonal, eigenvalues, largest singular value."""
    x = fixed_point(call)
    y = np.log(x)
    jac = jacobian(call, y, np.log(undamped(call, x)))
    ev = np.linalg.eigvals(jac)
    top = ev[np.argsort(-np.abs(ev))[:4]]
    return dict(jobs=len(y), max_abs_diagonal=float(np.abs(np.diag(jac)).max()),
                top_eigenvalues=[[float(v.real), float(v.imag)] for v in top],
                eigenvalues_above_half=int(np.sum(np.abs(ev) > 0.5)),
                damped_spectral_radius=float(np.abs(0.5 + 0.5 * ev).max()),
                largest_singular_value=float(np.linalg.svd(jac, compute_uv=False)[0]), eigenvalues=ev)


def best_two_step(spectra: list[np.ndarray]) -> tuple[float, float, float]:
    """(a, g, worst over solves of the asymptotic rate) of the two-step iteration best on these spectra: per
    eigenvalue l of the undamped map the error obeys z^2 - (1 - a + a l + g) z + g = 0. The worst solve, not
    the median: parameters best for the median solve diverge on others (tried: a = 0.8, g = -0.15 ended a
    tenth of the solves at the iteration limit)."""
    best = (0.5, 0.0, np.inf)
    for a in np.linspace(0.1, 1.2, 45):
        for g in np.linspace(-0.6, 0.6, 49):
            rates = []
            for ev in spectra:
                b = 1 - a + a * ev + g
                disc = np.sqrt(b * b - 4 * g + 0j)
                rates.append(np.maximum(np.abs(b + disc), np.abs(b - disc)).max() / 2)
            if max(rates) < best[2]:
                best = (float(a), float(g), float(max(rates)))
    return best


def pct(x) -> dict:
    x = np.asarray(x, float)
    return dict(mean=float(x.mean()), median=float(np.median(x)), p90=float(np.percentile(x, 90)),
                max=float(x.max()), n=int(len(x)))


def kernel_cost(calls, repeats: int = 5) -> dict:
    """The kernel's CPU per solve and per iteration on the captured inputs (process time, after a warm-up)."""
    counts = mf.mean_field_counts()
    for e, cap, jobs, rate0 in calls:
        mf.mean_field(e, cap, jobs, rate0, mf.MF_MAX_ITER, mf.MF_TOL, counts)
    t0 = time.process_time()
    for _ in range(repeats):
        for e, cap, jobs, rate0 in calls:
            mf.mean_field(e, cap, jobs, rate0, mf.MF_MAX_ITER, mf.MF_TOL)
    per_solve_us = (time.process_time() - t0) / repeats / len(calls) * 1e6
    its = counts.iterations[0] / counts.solves[0]
    return dict(us_per_solve=per_solve_us, iterations_per_solve=float(its), us_per_iteration=per_solve_us / its,
                doc="called from Python: each solve also pays the call's unboxing (a few us)")


def dense_solve_us(n: int, repeats: int = 2000) -> float:
    rng = np.random.default_rng(0)
    a, b = np.eye(n) + 0.1 * rng.random((n, n)), rng.random(n)
    np.linalg.solve(a, b)
    t0 = time.process_time()
    for _ in range(repeats):
        np.linalg.solve(a, b)
    return (time.process_time() - t0) / repeats * 1e6


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--jobs", type=int, default=30_000)
    ap.add_argument("--every", type=int, default=50)
    ap.add_argument("--methods-every", type=int, default=3, help="the methods on every k-th captured solve")
    ap.add_argument("--spectra-every", type=int, default=12, help="the Jacobian on every k-th captured solve")
    ap.add_argument("--out", default=str(Path(__file__).parent / "results" / "mean_field_accel.json"))
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    calls, live = capture(args.jobs, args.every)
    iters = []
    for e, cap, jobs, rate0 in calls:
        c = mf.mean_field_counts()
        mf.mean_field(e, cap, jobs, rate0, mf.MF_MAX_ITER, mf.MF_TOL, c)
        iters.append(int(c.iterations[0]))
    histories = []
    for call in calls:
        histories.append([])
        damped(call, histories[-1])
    depth = max(len(h) for h in histories)
    median_history = [float(np.median([h[k] for h in histories if len(h) > k])) for k in range(min(depth, 25))]
    spectra = [spectrum(c) for c in calls[::args.spectra_every]]
    a, g, rate = best_two_step([s.pop("eigenvalues") for s in spectra])
    sample = calls[::args.methods_every]
    methods = {
        "damped (the kernel's map, every link each pass)": [damped(c) for c in sample],
        "anderson m=3, restart when the residual grows": [anderson(c) for c in sample],
        "anderson m=3, from a largest move below 0.05": [anderson(c, start=0.05) for c in sample],
        f"two-step a={a:.3f} g={g:.3f} (best on the spectra)": [two_step(c, a, g) for c in sample],
        **{f"two-step a={a2} g={g2}": [two_step(c, a2, g2) for c in sample] for a2, g2 in TWO_STEP_TRIED},
        "newton (exact Jacobian, not counted)": [newton(c) for c in sample],
    }
    jobs_n = [len(c[3]) for c in calls]
    head = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                          check=False).stdout.strip()
    out = dict(machine=dict(python=platform.python_version(), cpus=os.cpu_count(), loadavg=os.getloadavg()),
               commit=head,
               setup=dict(trace="philly", jobs=args.jobs, every=args.every, methods_every=args.methods_every,
                          spectra_every=args.spectra_every, tolerance=mf.MF_TOL, iteration_limit=MAX_ITER,
                          policy="tiresias", placement="consolidated", topology="bench_core.PHILLY_TOPOLOGY"),
               captured_solves=len(calls), component_jobs=pct(jobs_n),
               live_run=dict(mean_field_solves=live["solves"],
                             iterations_per_solve=float(live["iterations"] / max(live["solves"], 1))),
               kernel=dict(iterations=pct(iters), histogram=np.bincount(iters).tolist(), **kernel_cost(calls)),
               residual_history=dict(median_largest_move_by_iteration=median_history,
                                     iterations_above_005=pct([sum(c >= 0.05 for c in h) for h in histories]),
                                     iterations_below_005=pct([sum(c < 0.05 for c in h) for h in histories])),
               jacobian=dict(solves=len(spectra),
                             max_abs_diagonal=max(s["max_abs_diagonal"] for s in spectra),
                             eigenvalues_above_half=pct([s["eigenvalues_above_half"] for s in spectra]),
                             largest_modulus=pct([np.hypot(*s["top_eigenvalues"][0]) for s in spectra]),
                             damped_spectral_radius=pct([s["damped_spectral_radius"] for s in spectra]),
                             largest_singular_value=pct([s["largest_singular_value"] for s in spectra]),
                             per_solve=spectra),
               two_step_best=dict(a=a, g=g, worst_asymptotic_rate=rate),
               methods={k: pct(v) for k, v in methods.items()},
               dense_solve_us={int(n): dense_solve_us(int(n)) for n in (np.median(jobs_n), max(jobs_n))},
               wall_s=time.perf_counter() - t0)
    for k, v in out["methods"].items():
        print(f"{k}: {v['mean']:.2f} iterations (median {v['median']:.0f}, p90 {v['p90']:.0f}, max {v['max']:.0f})")
    print("wrote", write_json(args.out, out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
