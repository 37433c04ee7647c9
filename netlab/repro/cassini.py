"""CASSINI's reproduction: host schedulers alone, in step, and with CASSINI (:func:`cassini_runs`),
the per-setup table (:func:`cassini_table`) and each claim beside what netlab measured
(:func:`cassini_claims`).

Setups (both on 24 one-GPU servers, a 2-tier leaf-spine of 8 racks x 3 hosts with one spine whose
rack uplinks are oversubscribed ``oversub``:1):

* ``paper``: Poisson arrivals of the 13 models CASSINI used, 2/4/8 GPUs per job (every job is
  distributed, as in CASSINI's testbed). Iteration times and gradient sizes come from
  ``netlab/data/zoo.csv`` (CASSINI's own per-model tables were not available to cite; the zoo's
  rows say where each number comes from, most are scaled assumptions).
* ``snapshot``: jobs whose iteration times match (one model, BERT-base, 4 GPUs each; about 31% of
  its isolated iteration communicates across racks), the case interleaving is made for.

CASSINI paired A100s with 50 Gbit/s NICs; the zoo's compute times are V100/T4-era (about 4x slower),
so the NICs are scaled to 12.5 Gbit/s to keep CASSINI's communication/compute ratio.

Per host scheduler (Themis, Tiresias) three placements: ``consolidated`` with the simulator's default
phases (iterations start when the job starts: random relative phases, "the host alone"),
``aligned`` (the same placement, every job in step: the paper's worst case) and ``cassini``
(the host's short list, scored, phases shifted). Each runs in every transport regime, on the model spec
the regime registry names for it (:mod:`netlab.repro.regimes`; CASSINI's own testbed corresponds to the
rate-fair RDMA/ECN one), and the host alone on ``ideal`` (the non-blocking bound).

ECN proxy: ``ecn_s``, link-seconds with the queue above the ECN threshold (the model's ``queue_frac`` per
link, integrated between network re-solves; a model without a queue records 0); ``overload_gbit`` (demand
above capacity, time-integrated) is the older proxy, kept beside it.

Where CASSINI loses to its host, the per-job measures of each run (:data:`CAUSES`: waiting and running
time, the network-added time, the shares of contended and cross-rack jobs) say why (:func:`loss_cause`);
whether it is CASSINI's doing or the host's schedule moving on its own is measured by
:mod:`netlab.repro.cassini_cause` (``benchmarks/bench_cassini_cause.py``).
"""

from __future__ import annotations

import itertools

import numpy as np
import pandas as pd

from ..sim import SimConfig, Simulator

CASSINI_MODELS = ("vgg11", "vgg16", "vgg19", "resnet50", "wideresnet101", "bert-base", "roberta-base", "xlm",
                  "camembert-base", "gpt1", "gpt2", "gpt3-xl", "dlrm")
CASSINI_TOPOLOGY = "leafspine,racks=8,hosts_per_rack=3,gpus_per_host=1,host_gbps=12.5,spines=1"
CASSINI_GPUS = "0+0.35+0.4+0.25"  # weights for 1, 2, 4, 8 GPUs: every job is distributed
SNAPSHOT_MODEL = "bert-base"
HOSTS = ("themis", "tiresias")
PLACEMENTS = ("consolidated", "aligned", "cassini")  # random-phase baseline, aligned baseline, CASSINI
DEV_SEEDS = (0, 1)  # what the setup was developed on
REPORT_SEEDS = (10, 11, 12)  # the final table


def cassini_trace(setup: str = "paper", jobs: int = 120, load: float = 0.9, duration_median_s: float = 1800.0) -> str:
    """The trace spec of a setup: Poisson arrivals on 24 GPUs (see the module doc)."""
    models, gpus = (CASSINI_MODELS, CASSINI_GPUS) if setup == "paper" else ((SNAPSHOT_MODEL,), "0+0+1+0")
    return (f"synthetic,jobs={jobs},load={load},cluster_gpus=24,duration_median_s={duration_median_s},"
            f"gpus={gpus},models={'+'.join(models)}")


class _EcnSimulator(Simulator):
    """The simulator, integrating the network model's ``queue_frac`` per link over time (link-seconds)."""

    def run(self):
        self.ecn_s, self._ecn_t = 0.0, 0.0
        return super().run()

    def _tick(self, now: float) -> None:
        q = getattr(self.fabric, "queue_frac", None)
        if q is not None and now > self._ecn_t:
            self.ecn_s += float(q.sum()) * (now - self._ecn_t)
        self._ecn_t = max(self._ecn_t, now)

    def _release(self, js) -> None:
        self._tick(self.kernel.now)
        super()._release(js)

    def _recompute_network(self, now: float) -> None:
        self._tick(now)
        super()._recompute_network(now)


def simulate(cell: dict, placement=None, capacity_scale: float = 1.0):
    """(simulator, result) of one cell (see :func:`run_one`); ``placement``: a placement policy object to run
    instead of the cell's by name; ``capacity_scale``: every link's capacity times it (a nudge)."""
    from ..topology import load_topology
    from ..traces import load_trace
    from ..workload.job import jobs_from_frame

    topo = load_topology(f"{CASSINI_TOPOLOGY},oversub={cell['oversub']}")
    if capacity_scale != 1.0:
        topo.link_capacity_gbps = topo.link_capacity_gbps * capacity_scale
    jobs = jobs_from_frame(load_trace(cassini_trace(cell["setup"], cell["jobs"], cell["load"]), seed=cell["seed"]),
                           topo)
    sim = _EcnSimulator(topo, jobs, cell["host"], placement or cell["placement"],
                        config=SimConfig(network=cell["network"], seed=cell["seed"]))
    return sim, sim.run()


def run_one(cell: dict) -> dict:
    """One simulation: ``cell`` has setup, oversub, host, placement, network, seed, jobs, load (and ``regime``,
    the regime its network stands for)."""
    sim, res = simulate(cell)
    s = res.summary
    return dict(cell, avg_jct_s=s["avg_jct_s"], p99_jct_s=s["p99_jct_s"], makespan_s=s["makespan_s"],
                avg_slowdown=s["avg_slowdown"], overload_gbit=s["overload_gbit"], ecn_s=sim.ecn_s,
                finished=s["finished"], wall_s=s["wall_s"], **job_causes(res.jobs))


#: a job the network slowed by more than this share of its isolated progress time counts as contended
CONTENDED_SLOWDOWN = 1.05
#: per-run measures of where a job's time went, the terms :func:`loss_cause` explains a ratio below 1 with
CAUSES = ("avg_wait_s", "avg_run_s", "avg_net_s", "contended_share", "cross_rack_share")


def job_causes(jobs: pd.DataFrame) -> dict:
    """Over the finished jobs of one run: mean seconds waiting (``wait_s``: not holding GPUs) and holding GPUs
    (``run_s``), whose sum is the average JCT; mean seconds the network added to a job's progress
    (``avg_net_s``: (slowdown - 1) x isolated time, :func:`netlab.repro.dally.comm_overhead`); the share of jobs
    slowed over :data:`CONTENDED_SLOWDOWN` and the share placed over more than one rack."""
    from .dally import comm_overhead

    done = jobs[jobs.end_s.notna()]
    if done.empty:
        return dict.fromkeys(CAUSES, np.nan)
    return dict(avg_wait_s=float(done.wait_s.mean()), avg_run_s=float(done.run_s.mean()),
                avg_net_s=float(comm_overhead(done).mean()),
                contended_share=float((done.slowdown > CONTENDED_SLOWDOWN).mean()),
                cross_rack_share=float((done.racks > 1).mean()))


def cassini_cells(setups=("paper", "snapshot"), oversub=(2, 4, 8), seeds=DEV_SEEDS, hosts=HOSTS,
                  regimes=None, jobs: int = 120, load: float = 0.9) -> list[dict]:
    """Every (setup, oversub, host, placement, regime, seed), each regime on its model spec
    (:func:`netlab.repro.regimes.network_of`; ``regimes`` default: every registered one), plus each host alone
    on ``ideal`` (regime None: the bound every regime is measured against)."""
    from . import regimes as reg

    nets = {r: reg.network_of(r) for r in (reg.names() if regimes is None else regimes)}
    cells = []
    for setup, o, host, seed in itertools.product(setups, oversub, hosts, seeds):
        base = dict(setup=setup, oversub=o, host=host, seed=seed, jobs=jobs, load=load)
        cells += [dict(base, placement=p, regime=r, **net) for r, net in nets.items() for p in PLACEMENTS]
        cells.append(dict(base, placement="consolidated", regime=None, network="ideal"))
    return cells


def cassini_runs(cells: list[dict], workers: int = 1, progress: bool = False) -> pd.DataFrame:
    """Run the cells (in ``workers`` processes); one row per run."""
    from ..procguard import kill_pool, process_pool, stop_signals_unwind

    pool = process_pool(workers) if workers > 1 else None  # workers die with this process
    it = map(run_one, cells) if pool is None else pool.map(run_one, cells)
    if progress:
        from ..progress import tqdm

        it = tqdm(it, total=len(cells), desc="cassini")
    try:
        with stop_signals_unwind():
            rows = list(it)
    except BaseException:
        if pool is not None:
            kill_pool(pool)  # stop the runs in flight instead of waiting for them
        raise
    if pool is not None:
        pool.shutdown()
    return pd.DataFrame(rows)


METRICS = ("avg_jct_s", "p99_jct_s", "ecn_s", "overload_gbit")


def cassini_table(runs: pd.DataFrame) -> pd.DataFrame:
    """Per (setup, oversub, host, regime, seed): CASSINI against both baselines.

    ``<metric>_vs_random`` = host alone (random phases) / CASSINI, ``<metric>_vs_aligned`` = host in
    step / CASSINI (> 1: CASSINI better); ``base_vs_ideal`` = the host alone's average JCT over its
    own on the ideal network (how much the network costs at all, a cap on any gain); the
    :data:`CAUSES` of the host alone (``<cause>_random``) and of CASSINI (``<cause>_cassini``), and
    ``cause``: :func:`loss_cause` where CASSINI's average JCT is above its host's, else "".
    """
    key = ["setup", "oversub", "host", "seed"]
    from ..network import ideal_networks
    bound = runs.network.isin(ideal_networks())
    ideal = runs[bound].set_index(key).avg_jct_s
    rows = []
    for (setup, o, host, regime, seed), g in runs[~bound].groupby(key[:3] + ["regime", "seed"]):
        by = g.set_index("placement")
        if not set(PLACEMENTS) <= set(by.index):
            continue
        row = dict(setup=setup, oversub=o, host=host, regime=regime, network=by.network.iloc[0], seed=seed,
                   base_vs_ideal=by.loc["consolidated", "avg_jct_s"] / ideal.get((setup, o, host, seed), np.nan))
        for m in METRICS:
            c = by.loc["cassini", m]
            row[f"{m}_random"], row[f"{m}_aligned"], row[f"{m}_cassini"] = (by.loc["consolidated", m],
                                                                            by.loc["aligned", m], c)
            row[f"{m}_vs_random"] = by.loc["consolidated", m] / c if c > 0 else np.nan
            row[f"{m}_vs_aligned"] = by.loc["aligned", m] / c if c > 0 else np.nan
        for m in CAUSES:
            if m in by.columns:
                row[f"{m}_random"], row[f"{m}_cassini"] = by.loc["consolidated", m], by.loc["cassini", m]
        rows.append(row)
    out = pd.DataFrame(rows)
    if out.empty:
        return out
    return out.assign(cause=[loss_cause(r) if r.avg_jct_s_vs_random < 1 else "" for r in out.itertuples()])


def loss_cause(r) -> str:
    """Why CASSINI's average JCT is above its host's, from the measured :data:`CAUSES` (``r`` has
    ``avg_jct_s_{random,cassini}`` and ``<cause>_{random,cassini}``): the difference split into waiting and
    running (their sum, for finished jobs), the larger one named first, with the running part's network
    share (``avg_net_s``: seconds the network added) and the shares of contended and cross-rack jobs."""
    g = lambda name: float(getattr(r, name, np.nan))  # noqa: E731
    d_jct = g("avg_jct_s_cassini") - g("avg_jct_s_random")
    d_wait, d_run = g("avg_wait_s_cassini") - g("avg_wait_s_random"), g("avg_run_s_cassini") - g("avg_run_s_random")
    d_net = g("avg_net_s_cassini") - g("avg_net_s_random")
    if not np.isfinite(d_wait) or not np.isfinite(d_run):
        return f"average JCT {d_jct:+.0f} s per job (no per-job measures recorded)"
    head = "waiting" if d_wait > d_run else "running"
    parts = dict(waiting=f"{d_wait:+.0f} s waiting", running=f"{d_run:+.0f} s running (network-added {d_net:+.0f} s)")
    order = [head] + [k for k in parts if k != head]
    return (f"{head}: average JCT {d_jct:+.0f} s per job = {parts[order[0]]}, {parts[order[1]]}; jobs slowed over "
            f"{CONTENDED_SLOWDOWN - 1:.0%} host {g('contended_share_random'):.0%} vs CASSINI "
            f"{g('contended_share_cassini'):.0%}, on more than one rack {g('cross_rack_share_random'):.0%} vs "
            f"{g('cross_rack_share_cassini'):.0%}")


def cassini_summary(table: pd.DataFrame) -> pd.DataFrame:
    """The table averaged over seeds, with the worst seed's average-JCT ratio (never worse?) and, per
    claimed ratio, the smallest and largest of one seed (``<ratio>_seed_min`` / ``_seed_max``)."""
    key = ["setup", "oversub", "host", "regime", "network"]
    cols = [c for c in table.columns if c not in key + ["seed", "cause"]]
    out = table.groupby(key, as_index=False)[cols].mean()
    worst = table.groupby(key).agg(worst_avg_vs_random=("avg_jct_s_vs_random", "min"),
                                   worst_p99_vs_random=("p99_jct_s_vs_random", "min"),
                                   seeds=("seed", lambda s: ",".join(map(str, sorted(s)))))
    from .common import seed_range

    claimed = [col for *_, col in CLAIMS if col in table.columns]
    return out.merge(worst.reset_index(), on=key).merge(seed_range(table, key, claimed), on=key)


def cassini_vs_host(table: pd.DataFrame) -> pd.DataFrame:
    """CASSINI against its host scheduler in every setup of the grid, per regime: the average-JCT ratio host /
    CASSINI (> 1: CASSINI better) as the seed mean with its smallest and largest seed, the seeds below 1, and
    ``cause``: where the seed mean is below 1 and so is the ratio of the seeds' mean average JCTs, :func:`loss_cause`
    of the seed means; where only some seeds are, the worst seed's cause (named), saying so when their one loss
    pulls the seed mean of ratios below 1 while the mean JCTs say CASSINI is ahead (seeds of unequal JCT scale:
    the means' cause would describe a gain); else "". The ratio is never tuned: CASSINI runs as it is."""
    key = ["setup", "oversub", "host", "regime"]
    rows = []
    for k, g in table.groupby(key, sort=True):
        ratio = g.avg_jct_s_vs_random
        means = g.drop(columns=["cause"], errors="ignore").mean(numeric_only=True)
        row = dict(zip(key, k), network=g.network.iloc[0], seeds=len(g), ratio=float(ratio.mean()),
                   ratio_seed_min=float(ratio.min()), ratio_seed_max=float(ratio.max()),
                   seeds_below_1=int((ratio < 1).sum()), base_vs_ideal=float(means.base_vs_ideal))
        d_jct = means.avg_jct_s_cassini - means.avg_jct_s_random
        if row["ratio"] < 1 and d_jct > 0:
            row["cause"] = loss_cause(means)
        elif row["seeds_below_1"]:
            w = g.loc[ratio.idxmin()]
            pulled = (f"; the seed mean of ratios is below 1, the seeds' mean average JCT is not: {d_jct:+.0f} s "
                      f"per job" if row["ratio"] < 1 else "")
            row["cause"] = f"seed {w.seed} only ({w.avg_jct_s_vs_random:.3f}x{pulled}): {w.cause}"
        else:
            row["cause"] = ""
        rows.append(row)
    return pd.DataFrame(rows)


CLAIMS = (("avg_jct", "avg JCT up to 1.6x better than the host alone (Themis/Pollux)", 1.6, "avg_jct_s_vs_random"),
          ("p99_jct", "p99 JCT up to 2.5x better", 2.5, "p99_jct_s_vs_random"),
          ("ecn_marks", "up to 33x fewer ECN-marked packets", 33.0, "ecn_s_vs_random"))


def cassini_claims(summary: pd.DataFrame, testbed: dict | None = None, regimes=None) -> pd.DataFrame:
    """Each claim per transport regime (``regimes``, default: the summary's, in the registry's order): the paper's
    factor, the best measured (seed-mean) setup with its seeds' smallest and largest factor (``seed_min``,
    ``seed_max``), the aligned-baseline factor there, where a claim does not hold the measured reason, which
    regime the paper's setup corresponds to and why (``paper_regime``, ``paper_regime_why``:
    :data:`netlab.repro.regimes.PAPER_REGIMES`), and what the testbed measured (``testbed``: the recorded
    results of :func:`netlab.repro.common.testbed_results`; None: "not measured on the testbed")."""
    from .common import with_testbed
    from .regimes import ordered, with_paper_regime

    parts = [_with_reasons(_claims(summary[summary.regime == r], r)) for r in ordered(regimes, summary.regime)]
    claims = pd.concat(parts, ignore_index=True) if parts else pd.DataFrame()
    return with_testbed(with_paper_regime(claims, "CASSINI"), "CASSINI", testbed or {})


def _with_reasons(c: pd.DataFrame) -> pd.DataFrame:
    """A ``reason`` per claim from the measured columns: "holds", or what the best (worst) setup showed."""
    reasons = []
    for r in c.itertuples():
        if r.holds:
            reasons.append("holds")
        elif r.holds is None or not np.isfinite(r.measured_factor):
            reasons.append("not measured")
        elif r.claim == "never_worse":
            reasons.append(f"CASSINI took {1 / r.measured_factor:.3f}x its host's average JCT in the worst seed "
                           f"({r.best_setup})")
        elif r.claim == "ecn_marks":
            reasons.append(f"the model's queue proxy fell {r.measured_factor:.2f}x at best ({r.best_setup}); the host "
                           f"alone there is {r.base_vs_ideal:.2f}x its ideal-network JCT")
        elif r.base_vs_ideal < r.paper_factor:
            reasons.append(f"in the best setup ({r.best_setup}) the network makes the host alone only "
                           f"{r.base_vs_ideal:.2f}x slower than on the ideal network: no placement can gain "
                           f"{r.paper_factor:.1f}x; CASSINI reached {r.measured_factor:.2f}x "
                           f"({r.vs_aligned:.2f}x against aligned)")
        else:
            reasons.append(f"the room is there (best setup {r.best_setup}: the host alone is {r.base_vs_ideal:.2f}x "
                           f"its ideal-network average JCT) but CASSINI reached {r.measured_factor:.2f}x "
                           f"({r.vs_aligned:.2f}x against aligned)")
    return c.assign(reason=reasons)


def _claims(summary: pd.DataFrame, regime: str) -> pd.DataFrame:
    """The claims' measured factors in one regime's rows (see :func:`cassini_claims`)."""
    s = summary.replace([np.inf], np.nan).reset_index(drop=True)
    rows = []
    for name, claim, factor, col in CLAIMS:
        if s[col].notna().any():
            b = s.loc[s[col].idxmax()]
            rows.append(dict(regime=regime, claim=name, paper=claim, paper_factor=factor,
                             measured_factor=float(b[col]),
                             vs_aligned=float(b[col.replace("random", "aligned")]), base_vs_ideal=float(b.base_vs_ideal),
                             best_setup=f"{b.setup} {b.host} {b.oversub}:1", holds=bool(b[col] >= factor),
                             seed_min=float(b.get(f"{col}_seed_min", np.nan)),
                             seed_max=float(b.get(f"{col}_seed_max", np.nan))))
        else:
            rows.append(dict(regime=regime, claim=name, paper=claim, paper_factor=factor, measured_factor=np.nan,
                             holds=None))
    worst = s.loc[s.worst_avg_vs_random.idxmin()] if len(s) else None
    rows.append(dict(regime=regime, claim="never_worse",
                     paper="never worse than its host scheduler in any setup (implied)",
                     paper_factor=1.0,
                     measured_factor=float(worst.worst_avg_vs_random) if worst is not None else np.nan,
                     best_setup=(f"worst: {worst.setup} {worst.host} {worst.oversub}:1 (seeds {worst.seeds})"
                                 if worst is not None else ""),
                     holds=bool(worst.worst_avg_vs_random >= 1.0) if worst is not None else None))
    return pd.DataFrame(rows)
