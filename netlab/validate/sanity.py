"""Checks of the referee itself before its verdicts are trusted.

* :func:`ring_alone_rows`: a ring of n ranks alone across a 2:1 bottleneck
  (hosts 200 Mbit/s, the bottleneck 100 Mbit/s, 2 us per cable, the fabric
  of ``shared/reference/ns3-facts.md``), one hop crossing it each way: its all-reduce
  against ``1.0373 x payload / rate + 2(n-1) x L`` (ns3-facts measured
  L = 188 us, residual 0.0% for n = 2..8), and the 2-rank 375 kB ring with
  20 ms of compute (ns3-facts: 51.62 ms; the emulated testbed 51.24 ms).
  The referee's all-reduce is read as its iteration minus compute: for
  n >= 3 that is less than the formula, because a rank is done when it has
  *received* every chunk while its own last sends still drain through the
  bottleneck, so its next compute overlaps them (two ranks finish together).
  netlab's alone model (compute, then the all-reduce) does not have this;
  the benchmark's ``ape`` applies slowdowns to the referee's time alone, so
  it cancels there, and ``ape_raw`` carries it.
* :func:`testbed_scenarios`: the testbed's own fidelity scenarios
  (``benchmarks/results/fidelity_runs.parquet``, 1-3 jobs on two racks) as
  referee scenarios, beside what the testbed measured on them, so
  :func:`testbed_rows` scores ns-3 against the testbed the way the fidelity
  benchmark scores netlab's models (contended jobs, steady window).
"""

from __future__ import annotations

import json
import math
from dataclasses import replace

import numpy as np
import pandas as pd

from ..topology import Host, Topology
from .scenario import RefereeJob, RefereeScenario, Transport

FACTS_STEP_LATENCY_S = 188e-6
FACTS_ITER_MS = 51.62
TESTBED_ITER_MS = 51.24
REPLICATE_SEED_STEP = 1_000_003


def dumbbell(n_per_side: int, host_mbit: float = 200.0, bottleneck_mbit: float = 100.0) -> Topology:
    """Two switches joined by one bottleneck cable, ``n_per_side`` hosts on each (one GPU each)."""
    hosts, cables = [], []
    for side in ("a", "b"):
        for i in range(n_per_side):
            hosts.append(Host(f"{side}{i}", 1, rack=f"tor{side}"))
            cables.append((f"{side}{i}", f"tor{side}", host_mbit / 1000, "host"))
    cables.append(("tora", "torb", bottleneck_mbit / 1000, "tor-tor"))
    return Topology("dumbbell", hosts, {"tora": "tor", "torb": "tor"}, cables, ecmp="hash")


def ring_alone(n: int, grad_bytes: float = 375_000, compute_s: float = 0.02, transport: Transport | None = None,
               iterations: int = 12) -> RefereeScenario:
    """An n-rank ring alone, ceil(n/2) ranks on side a then the rest on side b (a0, a1, ..., b0, b1, ...):
    exactly one flow crosses the bottleneck each way, as in ns3-facts' calibration, so every ring step waits
    for that flow and the ranks stay in step. (Alternating sides instead puts n/2 flows on each direction of
    the bottleneck; their steps drift apart and a rank's compute overlaps the others' last steps, so the
    iteration is no longer compute plus all-reduce.)"""
    if n < 2:
        raise ValueError(f"ring_alone: need at least 2 ranks, got {n}")
    k = (n + 1) // 2
    hosts = tuple(f"a{i}" for i in range(k)) + tuple(f"b{i}" for i in range(n - k))
    job = RefereeJob(1, hosts, (1,) * n, grad_bytes, compute_s, iterations=iterations)
    return RefereeScenario(f"ring-{n}-alone", dumbbell(k), (job,), transport or Transport(), jitter=0.0,
                           warmup=3)


def ring_alone_rows(iter_of=None, ns=(2, 3, 4, 6, 8), grad_bytes: float = 375_000,
                    compute_s: float = 0.02) -> pd.DataFrame:
    """Per ring size: the referee's all-reduce and iteration alone, the ns3-facts formula's (the one crossing
    flow's bytes through the bottleneck, plus 2(n-1) steps of latency), the per-step latency the referee
    implies (all-reduce minus those bytes, over 2(n-1) steps) and netlab's alone model.
    ``iter_of(scenario)``: the referee's steady iteration of its one job (default: run it)."""
    from .predict import alone_iter_s, steady_iter_s
    from .referee import run_referee

    def run(sc):
        return steady_iter_s(run_referee(sc).starts, {1: compute_s}, sc.warmup)[1]

    iter_of = iter_of or run
    rows = []
    for n in ns:
        sc = ring_alone(n, grad_bytes, compute_s)
        it = iter_of(sc)
        payload = 2 * (n - 1) / n * grad_bytes  # per flow
        bytes_s = 1502 / 1448 * payload * 8 / 100e6  # one flow each way through the bottleneck
        allreduce = it - compute_s
        facts = bytes_s + 2 * (n - 1) * FACTS_STEP_LATENCY_S
        model = alone_iter_s(sc)[1]
        rows.append(dict(ranks=n, grad_bytes=grad_bytes, iter_ms=it * 1e3, allreduce_ms=allreduce * 1e3,
                         facts_allreduce_ms=facts * 1e3, residual_vs_facts=allreduce / facts - 1.0,
                         step_latency_us=(allreduce - bytes_s) / (2 * (n - 1)) * 1e6,
                         netlab_alone_ms=model * 1e3, netlab_alone_residual=model / it - 1.0))
    return pd.DataFrame(rows)


def replicate(sc: RefereeScenario, k: int = 1) -> RefereeScenario:
    """The same scenario with other compute-jitter draws (another run of the same experiment)."""
    return replace(sc, seed=sc.seed + k * REPLICATE_SEED_STEP, name=f"{sc.name}-replicate{k}")


# ----------------------------------------------------------------------------- the testbed's scenarios
def testbed_topology(runs: pd.DataFrame, topo: Topology) -> Topology:
    """The testbed topology at the rates its links ran at (``link_rates_mbit`` of the stored runs, real bits)."""
    rates = {(a, b): float(r) for a, b, r in json.loads(runs.link_rates_mbit.iloc[0])}
    cables = []
    for a, b, _, tier in topo.cables:
        if rates[(a, b)] != rates[(b, a)]:
            raise ValueError(f"link {a}-{b} ran at {rates[(a, b)]} and {rates[(b, a)]} Mbit/s: not one cable rate")
        cables.append((a, b, rates[(a, b)] / 1000.0, tier))
    return Topology(topo.name, list(topo.hosts), dict(topo.switches), cables, ecmp=topo.ecmp)


def testbed_scenarios(runs: pd.DataFrame, topo: Topology, transport: Transport | None = None,
                      iterations: int = 60, warmup: int = 10) -> tuple[list[RefereeScenario], pd.DataFrame]:
    """The stored fidelity runs' scenarios (one per scenario name: repeats share the definition) with the
    slowest job at ``iterations`` (equal duration, as collected), and the testbed's steady iteration time
    per (scenario, repeat, job) with its contention flag."""
    from ..congestion.fidelity import scenario_contention, scenarios_from_runs, steady_iterations

    tb_topo = testbed_topology(runs, topo)
    measured = steady_iterations(runs)
    scenarios, seen = [], set()
    contended = {}
    for (name, _rep), s in scenarios_from_runs(runs).items():
        contended.update({(name, j): c for j, c in scenario_contention(topo, s).items()})
        if name in seen:
            continue
        seen.add(name)
        most = max(j.iterations for j in s.jobs)
        jobs = tuple(RefereeJob(j.job_id, tuple(j.hosts), (1,) * len(j.hosts), float(j.grad_bytes),
                                j.compute_ms / 1000.0, 0.0, j.offset_ms / 1000.0,
                                max(warmup + 3, int(math.ceil(iterations * j.iterations / most))))
                     for j in s.jobs)
        scenarios.append(RefereeScenario(name, tb_topo, jobs, transport or Transport(), warmup=warmup,
                                         meta=dict(source="fidelity_runs")))
    measured["contended"] = [contended[(s, j)] for s, j in zip(measured.scenario, measured.job_id)]
    return scenarios, measured


def testbed_rows(scenarios: list[RefereeScenario], measured: pd.DataFrame, ref_iter: dict) -> pd.DataFrame:
    """Per (scenario, repeat, job): the testbed's steady iteration, the referee's, and the APE
    (``ref_iter[(scenario, job)]`` in seconds)."""
    out = measured[["scenario", "repeat", "job_id", "iter_s", "contended"]].copy()
    out["ns3_s"] = [ref_iter.get((s, int(j)), np.nan) for s, j in zip(out.scenario, out.job_id)]
    out["signed"] = out.ns3_s / out.iter_s - 1.0
    out["ape"] = out.signed.abs()
    return out
