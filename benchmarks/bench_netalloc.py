"""Per-job network allocations on the emulated testbed beside the simulator (issue 27, item 2).

Four comparisons, each two 2-rank gloo jobs (one rank per host, a ring both ways) crossing 100 Mbit links,
1 MB all-reduced per iteration (T = 83.8 ms alone with TCP/IP headers, 1.047 x the payload):

* ``priority``: on the dumbbell's bottleneck, job 1 (class 0, 40 ms compute per iteration) above job 2
  (class 1, no compute: always sending). Job 1 gets what it asks, job 2 the rest.
* ``weights``: the same link, weights 2:1 in one class, both always sending.
* ``cap``: the same link, job 1 capped at a quarter of it (12.5 Gbit/s in topology units), job 2 uncapped.
* ``path``: a routed leaf-spine with two spines (every uplink 100 Mbit); ``path-collide`` puts both jobs'
  flows on spine 0 (what the simulator's hash ECMP does to two jobs whose keys collide), ``path-separate``
  gives job 2 spine 1.

Reference rows (not comparisons of an allocation): ``alone`` (job 1 alone, no allocation: the T the hand
rules start from) and ``shared`` (the priority case's jobs without allocations, in the one FIFO default
class), both against the simulator's default model (``tcp``) run on the same scenario.

The testbed measure is each job's median period over the steady window (after ``warmup`` iterations, while
both jobs run; :func:`netlab.testbed.scenarios.summarise_logs`), per repeat; the row gives the median over
repeats and their spread. The simulator column is the default network model (``tcp``) run on the same
scenario with the jobs' allocations (:func:`netlab.testbed.scenarios.predict_scenario` hands them to the
model), and each comparison is checked against the 10% target. Beside it, for the allocated cases, the ideal
allocation computed by hand from the documented rules of :class:`netlab.sched.NetAllocation` for these
two-job cases (``hand_iter_s``): strict priority (the low job, always sending, gets the link while the high one
computes), weighted sharing (2:1 of a link both saturate), a cap (the capped job at its cap, the other the
rest), and a collision (two always-sending jobs on one link halve it). The model gives a job with an
allocation no leader advantage (the term by which a TCP flow further into its transfer out-competes a fresh one
in a shared FIFO queue; ``NetAllocation.own_queue``, set by the testbed's prediction): each such job has an HTB
class, a queue, of its own. A third
column (``tcp_lead0_iter_s``) is a sensitivity, not a score: the same model without its leader advantage for
every job (``lead=0``), which moves only the reference rows without allocations.

Every run also checks that every byte of an allocated job went through its own HTB class (its classes'
bytes on its hosts' egress against the default class's growth there), that the tc, address, route and rule
state read back through pyroute2 equals the allocation plan while the jobs run and after they end, and that
nothing of the testbed is left after teardown.

Usage (collection needs root, sshd and torch; without ``--collect`` the stored runs are scored again):
    python benchmarks/bench_netalloc.py --collect [--repeats 3]
    python benchmarks/bench_netalloc.py
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import subprocess
import sys
import time
import warnings
from dataclasses import asdict, dataclass
from pathlib import Path

import pandas as pd

from netlab.congestion.fidelity.scenarios import HEADER_OVERHEAD
from netlab.sched import NetAllocation
from netlab.sim.metrics import write_json
from netlab.testbed.scenarios import (Scenario, ScenarioJob, predict_scenario, run_scenario_logs, split_logs,
                                     summarise_logs)

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
DUMBBELL = ROOT / "testbed" / "topologies" / "dumbbell.yaml"
LEAFSPINE = "leafspine,racks=2,hosts_per_rack=2,spines=2,gpus_per_host=1,oversub=2,ecmp=hash"
GRAD_BYTES = 1_000_000
LINK_MBIT = 100.0  # every contended link (the dumbbell's bottleneck, the leaf-spine's uplinks)
CAP_GBPS = 12.5  # a quarter of the 50 Gbit bottleneck: 25 Mbit at rate_scale 0.002
HIGH_COMPUTE_MS = 40.0
GSO_MAX_BYTES = 16384  # HTB schedules whole packets: smaller GSO packets make priority finer (see NetnsTestbed)
DURATION_S = 15.0  # each job runs about this long (iterations from its expected period)
WARMUP = 5
TARGET = 0.10


@dataclass(frozen=True)
class Case:
    name: str
    comparison: str  # which of the four comparisons (or "reference")
    backend: str
    topology: str
    jobs: tuple[ScenarioJob, ...]


def _job(job_id: int, hosts: tuple[str, str], compute_ms: float = 0.0, allocation: NetAllocation | None = None):
    return ScenarioJob(job_id, hosts, GRAD_BYTES, compute_ms, iterations=0, allocation=allocation)


def cases() -> list[Case]:
    d, ls = ("l0", "r0"), ("l1", "r1")
    a, b = ("r0h0", "r1h0"), ("r0h1", "r1h1")
    db, rt = ("netns", str(DUMBBELL)), ("routed", LEAFSPINE)
    return [
        Case("alone", "reference", *db, (_job(1, d),)),
        Case("shared", "reference", *db, (_job(1, d, HIGH_COMPUTE_MS), _job(2, ls))),
        Case("priority", "priority", *db, (_job(1, d, HIGH_COMPUTE_MS, NetAllocation(priority=0)),
                                           _job(2, ls, 0.0, NetAllocation(priority=1)))),
        Case("weights", "weights", *db, (_job(1, d, 0.0, NetAllocation(weight=2.0)),
                                         _job(2, ls, 0.0, NetAllocation(weight=1.0)))),
        Case("cap", "cap", *db, (_job(1, d, 0.0, NetAllocation(rate_cap_gbps=CAP_GBPS)),
                                 _job(2, ls, 0.0, NetAllocation()))),
        Case("path-collide", "path", *rt, (_job(1, a, 0.0, NetAllocation(paths=(0,))),
                                           _job(2, b, 0.0, NetAllocation(paths=(0,))))),
        Case("path-separate", "path", *rt, (_job(1, a, 0.0, NetAllocation(paths=(0,))),
                                            _job(2, b, 0.0, NetAllocation(paths=(1,))))),
    ]


# -- the simulator's answer ------------------------------------------------------------------------------
def comm_alone_s(job: ScenarioJob, link_mbit: float = LINK_MBIT) -> float:
    """A 2-rank ring's all-reduce alone: each rank sends the gradient once (2(n-1)/n of it) over the
    bottleneck, with TCP/IP headers."""
    n = len(job.hosts)
    return job.grad_bytes * 2 * (n - 1) / n * 8 * HEADER_OVERHEAD / (link_mbit * 1e6)


def hand_iter_s(case: Case) -> dict[int, float]:
    """Each job's iteration time by the documented allocation rules (two jobs, one contended link each way;
    see the module doc). Cases without allocations have no hand rule here (the tcp model answers them)."""
    j = {x.job_id: x for x in case.jobs}
    t = {k: comm_alone_s(x) for k, x in j.items()}
    c = {k: x.compute_ms / 1000.0 for k, x in j.items()}
    if case.name == "priority":  # the high job never waits; the always-sending low one gets its compute time
        hi = c[1] + t[1]
        return {1: hi, 2: t[2] * hi / c[1]}
    if case.name == "weights":
        w = {k: x.allocation.weight for k, x in j.items()}
        return {k: t[k] * sum(w.values()) / w[k] for k in j}
    if case.name == "cap":
        cap_mbit = CAP_GBPS * 1000 * 0.002
        return {1: t[1] * LINK_MBIT / cap_mbit, 2: t[2] * LINK_MBIT / (LINK_MBIT - cap_mbit)}
    if case.name == "path-collide":  # two always-sending jobs halve the link they share
        return {k: 2 * t[k] for k in j}
    if case.name == "path-separate":
        return dict(t)
    raise KeyError(case.name)


def simulator_iter_s(case: Case, tb, **network_kwargs) -> tuple[dict[int, float], str]:
    """(iteration time per job, where it came from): the default network model (``tcp``) run on the same
    scenario, allocations included, iteration counts as the testbed runs it."""
    from netlab.network import model as netmodel

    name = netmodel.DEFAULT_NETWORK
    sc = sized(case, expected_s(case))  # the scenario the testbed runs, iteration counts included
    pred = predict_scenario(tb, sc, network=name, wire_overhead=HEADER_OVERHEAD, **network_kwargs)
    extra = "".join(f",{k}={v}" for k, v in network_kwargs.items())
    return dict(zip(pred.job_id, pred.predicted_iter_s)), f"model:{name}{extra}"


# -- the testbed -----------------------------------------------------------------------------------------
def sized(case: Case, expected: dict[int, float]) -> Scenario:
    """The case as a scenario whose jobs each run about DURATION_S."""
    jobs = tuple(ScenarioJob(x.job_id, x.hosts, x.grad_bytes, x.compute_ms,
                             WARMUP + int(math.ceil(DURATION_S / expected[x.job_id])), x.offset_ms, x.allocation)
                 for x in case.jobs)
    return Scenario(case.name, jobs, {}, WARMUP)


def _host_links(tb, hosts) -> list[int]:
    return [l.link for l in tb.plan.links if l.src in hosts]


def run_case(ctl, case: Case, expected: dict[int, float], repeat: int) -> list[dict]:
    """One run of ``case``: per job its steady period and, for an allocated job, how many of its hosts' bytes
    went through its own classes, and whether the kernel matched the allocation plan throughout."""
    tb = ctl.testbed
    sc = sized(case, expected)
    default_before = _default_bytes(tb)
    checks: list[list[str]] = []
    watcher = _Watcher(tb, checks)
    watcher.start()
    try:
        raw = run_scenario_logs(ctl, sc, start_delay_s=12.0, timeout_s=600.0)
    finally:
        watcher.stop()
    after_end = tb.allocation_mismatches()
    default_growth = {k: v - default_before.get(k, 0) for k, v in _default_bytes(tb).items()}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        summary = summarise_logs(sc, split_logs(raw))
    rows = []
    ids = dict(zip(raw.job_id, raw.testbed_job_id))
    for _, r in summary.iterrows():
        job = next(x for x in case.jobs if x.job_id == r.job_id)
        row = dict(case=case.name, repeat=repeat, job_id=int(r.job_id), iter_s=float(r.iter_s),
                   iterations=int(r.iterations), overlapped=bool(r.overlapped),
                   mismatches_while_running=sorted({m for ms in checks for m in ms}),
                   mismatches_after_end=after_end, warnings=[str(w.message) for w in caught])
        stats = ctl.jobs[int(ids[r.job_id])].net_stats
        if job.allocation is not None and stats is not None:
            links = _host_links(tb, job.hosts)
            own = int(stats[stats.link.isin(links)].bytes.sum())
            stray = int(sum(default_growth.get(l, 0) for l in links))
            row.update(own_class_bytes=own, default_class_bytes=stray, classified=own / (own + stray) if own else 0.0)
        rows.append(row)
    return rows


def _default_bytes(tb) -> dict[int, int]:
    s = tb.job_stats()
    return {int(r.link): int(r.bytes) for r in s[s.job.isna()].itertuples()}


class _Watcher:
    """Reads the kernel's allocation state back every second while a case runs (every change of the job set
    is one of these moments: two jobs start, two end)."""

    def __init__(self, tb, out: list):
        import threading

        self.tb, self.out, self._stop = tb, out, threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self):
        self._thread.start()

    def stop(self):
        self._stop.set()
        self._thread.join()

    def _run(self):
        while not self._stop.wait(1.0):
            if self.tb.allocations():
                self.out.append(self.tb.allocation_mismatches())


def collect(repeats: int, nice: int, only: set[str] | None = None) -> tuple[list[dict], list[dict]]:
    from bench_fidelity import boost_priority  # the same renicing the fidelity collection uses

    from netlab.testbed import make_testbed
    from netlab.testbed.controller import Controller

    runs, teardown = [], []
    for (backend, topo), group in _by_testbed([c for c in cases() if only is None or c.name in only]).items():
        tb = make_testbed(backend, topo, gso_max_bytes=GSO_MAX_BYTES)
        with tb:
            boost_priority(tb, nice)
            with Controller(tb, progress=False) as ctl:
                for case in group:
                    for rep in range(repeats):
                        t0 = time.time()
                        rows = run_case(ctl, case, expected_s(case), rep)
                        runs += rows
                        print(f"{case.name} repeat {rep}: " + ", ".join(f"job {r['job_id']} {r['iter_s'] * 1000:.1f} ms"
                                                                         for r in rows)
                              + f" ({time.time() - t0:.0f} s)", flush=True)
        left = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
        teardown.append(dict(backend=backend, tid=tb.tid, namespaces_left=[n.split()[0] for n in left.splitlines()
                                                                             if n.startswith(f"nl{tb.tid}-")]))
    return runs, teardown


def _by_testbed(cs: list[Case]) -> dict:
    out: dict = {}
    for c in cs:
        out.setdefault((c.backend, c.topology), []).append(c)
    return out


def expected_s(case: Case) -> dict[int, float]:
    """The periods the runs are sized by: the hand rules' for allocated jobs, else each job's alone."""
    if any(x.allocation is not None for x in case.jobs):
        return hand_iter_s(case)
    return {x.job_id: x.compute_ms / 1000.0 + comm_alone_s(x) for x in case.jobs}


# -- scoring ---------------------------------------------------------------------------------------------
def score(runs: list[dict], teardown: list[dict], meta: dict) -> dict:
    from netlab.testbed import make_testbed

    df = pd.DataFrame(runs)
    rows = []
    for case in cases():
        tb = make_testbed(case.backend, case.topology)  # never brought up: topology and rates only
        sim, source = simulator_iter_s(case, tb)
        lead0, _ = simulator_iter_s(case, tb, lead=0.0)
        hand = hand_iter_s(case) if any(x.allocation is not None for x in case.jobs) else None
        for job in case.jobs:
            got = df[(df.case == case.name) & (df.job_id == job.job_id)]
            if got.empty:
                continue
            per_rep = got.iter_s.to_numpy()
            med = float(pd.Series(per_rep).median())
            err = med / sim[job.job_id] - 1
            row = dict(case=case.name, comparison=case.comparison, backend=case.backend, job_id=job.job_id,
                       hosts=list(job.hosts), compute_ms=job.compute_ms, grad_bytes=job.grad_bytes,
                       allocation=asdict(job.allocation) if job.allocation is not None else None,
                       testbed_iter_s=med, testbed_iter_s_repeats=[float(x) for x in per_rep],
                       testbed_spread=float((per_rep.max() - per_rep.min()) / med),
                       sim_iter_s=float(sim[job.job_id]), sim_source=source, error=float(err),
                       within_target=bool(abs(err) <= TARGET), all_overlapped=bool(got.overlapped.all()),
                       tcp_lead0_iter_s=float(lead0[job.job_id]), tcp_lead0_error=float(med / lead0[job.job_id] - 1))
            if hand is not None:
                row.update(hand_iter_s=float(hand[job.job_id]), hand_error=float(med / hand[job.job_id] - 1),
                           hand_within_target=bool(abs(med / hand[job.job_id] - 1) <= TARGET),
                           model_vs_hand=float(sim[job.job_id] / hand[job.job_id] - 1))
            if job.allocation is not None and "classified" in got:
                row["classified_min"] = float(got.classified.min())
                row["default_class_bytes_max"] = int(got.default_class_bytes.max())
            rows.append(row)
    comparisons = [r for r in rows if r["comparison"] != "reference"]
    mism = sorted({m for r in runs for m in (*r["mismatches_while_running"], *r["mismatches_after_end"])})
    return dict(
        **meta, target=f"testbed vs simulator per-job iteration time within {TARGET:.0%}",
        measure="median over repeats of each job's median period in the steady window (after warm-up, both jobs "
                "running); spread = (max - min) / median over repeats",
        rows=rows,
        comparisons_within_target=sum(r["within_target"] for r in comparisons), comparisons=len(comparisons),
        max_abs_error=max(abs(r["error"]) for r in comparisons) if comparisons else None,
        hand_within_target=sum(r["hand_within_target"] for r in comparisons),
        tcp_lead0_within_target=sum(abs(r["tcp_lead0_error"]) <= TARGET for r in comparisons),
        classified_min=min((r["classified_min"] for r in rows if "classified_min" in r), default=None),
        tc_state_equals_plan=not mism, tc_mismatches=mism,
        nothing_left_after_teardown=all(not t["namespaces_left"] for t in teardown), teardown=teardown,
        runs=runs,
    )


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--collect", action="store_true", help="run the testbed (root, sshd, torch)")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--nice", type=int, default=-10, help="niceness of the testbed's processes (0: leave)")
    ap.add_argument("--out", default=str(RESULTS / "netalloc.json"))
    ap.add_argument("--cases", default=None, help="comma-separated case names to collect (default: all: "
                    + ", ".join(c.name for c in cases()) + ")")
    args = ap.parse_args(argv)
    out = Path(args.out)
    if args.collect:
        if os.geteuid() != 0:
            print("collection needs root (network namespaces); run as root or score the stored runs without "
                  "--collect", file=sys.stderr)
            return 2
        t0 = time.time()
        load = os.getloadavg()[0]
        only = None if args.cases is None else set(args.cases.split(","))
        unknown = sorted((only or set()) - {c.name for c in cases()})
        if unknown:
            print(f"--cases: unknown {unknown}; known: {[c.name for c in cases()]}", file=sys.stderr)
            return 2
        runs, teardown = collect(args.repeats, args.nice, only)
        meta = dict(machine=dict(python=platform.python_version(), cpus=os.cpu_count(), load_at_start=load,
                                 load_at_end=os.getloadavg()[0]),
                    collected=time.strftime("%Y-%m-%d %H:%M"), collection_wall_s=round(time.time() - t0),
                    repeats=args.repeats, gso_max_bytes=GSO_MAX_BYTES, link_mbit=LINK_MBIT, grad_bytes=GRAD_BYTES,
                    header_overhead=HEADER_OVERHEAD, rate_scale=0.002)
        write_json(out, dict(**meta, runs=runs, teardown=teardown))  # the raw runs first: scoring reads them again
    else:
        if not out.exists():
            print(f"{out} has no stored runs; collect them first (--collect, as root)", file=sys.stderr)
            return 2
        doc = json.loads(out.read_text())
        runs, teardown = doc["runs"], doc["teardown"]
        meta = {k: doc[k] for k in ("machine", "collected", "collection_wall_s", "repeats", "gso_max_bytes",
                                    "link_mbit", "grad_bytes", "header_overhead", "rate_scale")}
    report = score(runs, teardown, meta)
    write_json(out, report)
    cols = ["case", "job_id", "testbed_iter_s", "testbed_spread", "sim_iter_s", "error", "within_target", "hand_iter_s",
            "hand_error", "tcp_lead0_error"]
    print(pd.DataFrame(report["rows"]).reindex(columns=cols).round(4).to_string(index=False))
    print(f"{report['comparisons_within_target']}/{report['comparisons']} comparisons within {TARGET:.0%} of the model "
          f"(hand rules: {report['hand_within_target']}, tcp lead=0: {report['tcp_lead0_within_target']}); "
          f"classified >= {report['classified_min']}; tc state equals plan: {report['tc_state_equals_plan']}; "
          f"nothing left: {report['nothing_left_after_teardown']}")
    print("wrote", out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
