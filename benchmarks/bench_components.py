"""Why the ``tcp`` model's components are large, on the components the simulator meets on Philly: writes
benchmarks/results/components.json.

Components of more than ``max_exact_jobs`` (8) jobs are solved by the random-phase mean field, blind to
phase (``phase_blind_*_share`` in a run's summary). Before building a phase-aware solver for them this
measures what holds them together. It replays a prefix of the Philly trace (Tiresias + consolidated, the
512-GPU 4:1 leaf-spine of ``bench_core.py``, as ``bench_mean_field.py`` does), keeps every ``--every``-th
re-solve whose component is large, solves its mean field from cold, and reports per sampled solve:

* the component's jobs and its binding links (mirrored links merged, as the mean field sees them);
* per binding link, how strongly it binds: offered (every job at its rate alone at once) over capacity,
  and the duty-weighted load alone (each job's rate alone x the share of its period it communicates)
  over capacity, the load the link sees on average;
* which links limit someone at the fixed point (:func:`~netlab.network.tcp.mean_field.limiting_entries`),
  how many limit each slowed job, and the slowdowns;
* the cores left if the links that limit nobody are cut (all jobs of a limiting link together), and if a
  link joins only the jobs it limits: the share of jobs in cores small enough for the exact simulation;
* phase locking's candidates: the share of jobs that share a limiting link with a job of the same period
  alone (within ``PERIOD_RTOL``). Jobs of unequal periods drift through each other's phases, where the
  random-phase average is the long-run answer; jobs of equal period keep their offsets.

Usage: python benchmarks/bench_components.py [--jobs 20000] [--every 40]
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import time
from pathlib import Path

import numpy as np
from scipy.cluster.hierarchy import DisjointSet

sys.path.insert(0, str(Path(__file__).parent))
from bench_mean_field import capture  # noqa: E402

from netlab.network.slots import Entries  # noqa: E402
from netlab.network.tcp.components import alone, binding_components, share_weights  # noqa: E402
from netlab.network.tcp.mean_field import MeanFieldJobs, limiting_entries, mean_field, merge_mirrored  # noqa: E402
from netlab.network.tcp.params import ALPHA, MAX_EXACT_JOBS  # noqa: E402
from netlab.sim.metrics import write_json  # noqa: E402

PERIOD_RTOL = 0.01  # two periods alone this close count as equal (phase-locking candidates)


def core_sizes(n: int, groups: list[np.ndarray]) -> np.ndarray:
    """Per job, the size of its core when each of ``groups`` (arrays of job indices) is joined."""
    ds = DisjointSet(range(n))
    for g in groups:
        for x in g[1:]:
            ds.merge(g[0], x)
    return np.array([ds.subset_size(i) for i in range(n)])


def anatomy(call: tuple) -> dict | None:
    """One sampled solve's large component, taken apart (see the module doc)."""
    now_s, cap_link, e, jobs = call
    al = alone(jobs)
    comps = binding_components(e, cap_link, al.cap_gbps, MAX_EXACT_JOBS)
    members = np.flatnonzero(comps.large)
    if len(members) == 0:
        return None
    local = np.full(len(jobs.job_id), -1)
    local[members] = np.arange(len(members))
    sel = comps.large[e.job] & comps.binding[e.link]
    blinks, bl = np.unique(e.link[sel], return_inverse=True)
    kept, cap = merge_mirrored(Entries(local[e.job[sel]].astype(np.int64), bl.astype(np.int64),
                                       e.weight[sel].astype(float)), cap_link[blinks])
    g, cj, it_alone = al.gbit[members], al.cap_gbps[members], al.iter_s[members]
    mf_jobs = MeanFieldJobs(cj, share_weights(g, ALPHA), g, al.pre_s[members], al.tail_s[members])
    rate, duty = mean_field(kept, cap, mf_jobs, cj.copy())
    k, m = len(members), len(cap)
    duty_alone = al.net_s[members] / it_alone
    offered, mean_load = np.zeros(m), np.zeros(m)
    np.add.at(offered, kept.link, kept.weight * cj[kept.job])
    np.add.at(mean_load, kept.link, kept.weight * cj[kept.job] * duty_alone[kept.job])
    lim = limiting_entries(kept, cap, mf_jobs, rate, duty)
    limiting = np.unique(kept.link[lim])
    on_link = [kept.job[kept.link == lk] for lk in limiting]
    limited_on_link = [kept.job[(kept.link == lk) & lim] for lk in limiting]
    slowed = rate < cj * (1 - 1e-3)
    per_job_limits = np.bincount(kept.job[lim], minlength=k)
    same_period = np.zeros(k, bool)
    for jj in on_link:
        p = it_alone[jj]
        close = np.abs(p[:, None] / p[None, :] - 1) <= PERIOD_RTOL
        same_period[jj] |= close.sum(axis=1) > 1
    return dict(jobs=k, binding_links=m, limiting_links=len(limiting), offered_ratio=offered / cap,
                mean_load_ratio=mean_load / cap, slowed=slowed, slowdown=cj / rate,
                limits_per_slowed_job=per_job_limits[slowed],
                core_cut=core_sizes(k, on_link), core_limited=core_sizes(k, limited_on_link), same_period=same_period)


def pct(x) -> dict:
    x = np.asarray(x, float)
    return dict(p10=float(np.percentile(x, 10)), median=float(np.median(x)), p90=float(np.percentile(x, 90)),
                max=float(x.max()), n=int(len(x)))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--jobs", type=int, default=20_000)
    ap.add_argument("--every", type=int, default=40)
    ap.add_argument("--out", default=str(Path(__file__).parent / "results" / "components.json"))
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    calls, _ = capture(args.jobs, args.every)
    rows = [r for r in map(anatomy, calls) if r is not None]

    def cat(name):
        return np.concatenate([np.atleast_1d(r[name]) for r in rows])

    core_cut, core_limited = cat("core_cut"), cat("core_limited")
    out = dict(machine=dict(python=platform.python_version(), cpus=os.cpu_count(), loadavg=os.getloadavg()),
               setup=dict(trace="philly", jobs=args.jobs, every=args.every, policy="tiresias",
                          placement="consolidated", topology="bench_core.PHILLY_TOPOLOGY",
                          max_exact_jobs=MAX_EXACT_JOBS, period_rtol=PERIOD_RTOL),
               sampled_solves=len(rows), component_jobs=pct([r["jobs"] for r in rows]),
               binding_links=pct([r["binding_links"] for r in rows]),
               limiting_links=pct([r["limiting_links"] for r in rows]),
               limiting_link_share=float(sum(r["limiting_links"] for r in rows)
                                         / sum(r["binding_links"] for r in rows)),
               offered_over_capacity=pct(cat("offered_ratio")),
               mean_load_alone_over_capacity=pct(cat("mean_load_ratio")),
               slowed_job_share=float(cat("slowed").mean()), slowdown_slowed=pct(cat("slowdown")[cat("slowed")]),
               limiting_links_per_slowed_job=pct(cat("limits_per_slowed_job")),
               job_share_in_small_cores=dict(
                   cut_links_limiting_nobody={str(s): float(np.mean(core_cut <= s)) for s in (8, 16, 32, 64)},
                   join_only_jobs_a_link_limits={str(s): float(np.mean(core_limited <= s)) for s in (1, 8, 16, 32)}),
               same_period_on_a_limiting_link=float(cat("same_period").mean()),
               wall_s=time.perf_counter() - t0)
    print({k: v for k, v in out.items() if k not in ("machine", "setup")})
    print("wrote", write_json(args.out, out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
