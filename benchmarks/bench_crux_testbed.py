"""Crux on the emulated testbed with compute-bearing jobs, beside the simulator (issue 27, item 4's last part).

Four 2-rank gloo jobs on the routed-namespace leaf-spine with two spines (two racks of four one-GPU hosts; every
ToR-spine uplink 100 Mbit at the testbed's rate scale), job ``k`` on ``r0h{k-1}`` and ``r1h{k-1}`` so every job
crosses a spine, 1 MB all-reduced per iteration, compute phases of 80, 60, 40 and 20 ms (job 1 the most GPU
intensive: same traffic, most compute). Two arms:

* ``none``: no network policy. The simulator's hash ECMP picks each flow's spine (key ``job * 1024 + flow``);
  the testbed is given those same paths (the kernel's own multipath hash is not predictable from netlab), every
  job in class 0. Each job has an HTB class of its own on the testbed (how it enforces a path), so the model is
  told the same (``own_queue``, as ``bench_netalloc``).
* ``crux``: the decision the ``crux`` policy takes for these jobs in the simulator (paths and classes, taken
  from the policy itself), enforced on the testbed as ``bench_netalloc`` enforces allocations.

Per job: the testbed's mean period in the common steady window (``summarise_logs``' ``mean_iter_s``: the
window's span over its iterations), median over repeats, beside the default network model's (``tcp``) mean
period for the same scenario and allocation (``predict_scenario``), the score against the 10% target. The mean,
not the median: a class-1 job behind a class-0 job that computes is blocked for none, one or two of the other's
all-reduces per iteration, on the testbed as in the model (its all-reduce is its time alone plus its overlap with
the class-0 all-reduces, both sides), so its periods take a few distinct values and their median lands on one of
them (the model, without noise, alternates two: its median is the longer); the mean is its throughput, what the
GPU utilisation below is made of. The medians stay beside it (``*_median_*``). Per spine uplink: the average utilisation, the sum over its jobs of the bytes the job's
HTB class sent on it over the job's run (first compute to last all-reduce end) on the testbed, and of the bytes
the job puts on it per iteration over its predicted iteration time in the simulator, over the link's capacity.
The testbed's can exceed 1: tc's byte counters include each packet's link-layer header and the job's set-up
traffic, and the span is rank 0's iterations only (a rough measure beside the iteration times, not a score).
Also: the GPU computation utilisation of the four jobs (compute over iteration time, GPU-weighted) per arm and
side, crux's gain over none, that the tc state read back after each run equals the allocation plan, and that no
namespace of the testbed is left after it.

Writes the key ``testbed_compute`` of ``benchmarks/results/crux.json`` (the rest of the file as it was).

Usage (collection needs root, sshd and torch; on a machine others share, hold whatever lock keeps root tests apart):
    python benchmarks/bench_crux_testbed.py --collect [--repeats 2]
    python benchmarks/bench_crux_testbed.py          # score the stored runs again
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from dataclasses import asdict
from pathlib import Path

import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
sys.path.insert(0, str(ROOT / "benchmarks"))

from bench_netalloc import GRAD_BYTES, GSO_MAX_BYTES, HEADER_OVERHEAD, Case, sized  # noqa: E402

from netlab.sched import NetAllocation  # noqa: E402
from netlab.sim.metrics import write_json  # noqa: E402
from netlab.testbed.scenarios import (ScenarioJob, predict_scenario, run_scenario_logs, split_logs,  # noqa: E402
                                      summarise_logs)

TOPOLOGY = "leafspine,racks=2,hosts_per_rack=4,spines=2,gpus_per_host=1,oversub=4,ecmp=hash"
COMPUTE_MS = {1: 80.0, 2: 60.0, 3: 40.0, 4: 20.0}
HOSTS = {k: (f"r0h{k - 1}", f"r1h{k - 1}") for k in COMPUTE_MS}
TARGET = 0.10


def decisions() -> dict[str, dict[int, NetAllocation]]:
    """Each arm's allocation per job: ``none`` the simulator's hash ECMP paths (class 0), ``crux`` the policy's."""
    from netlab.policies import NETWORK_POLICIES, PlacementPolicy
    from netlab.sched import Placement
    from netlab.sched.routes import job_flows
    from netlab.sim import SimConfig, Simulator
    from netlab.topology import load_topology
    from netlab.workload.job import Job
    from netlab.workload.zoo import JobModel, ModelZoo

    topo = load_topology(TOPOLOGY)
    index = {h.name: i for i, h in enumerate(topo.hosts)}
    hosts = {k: tuple(index[h] for h in hs) for k, hs in HOSTS.items()}
    zoo = ModelZoo({f"tb{k}": JobModel(f"tb{k}", c / 1000.0, float(GRAD_BYTES)) for k, c in COMPUTE_MS.items()})

    class Fixed(PlacementPolicy):
        name = "fixed"

        def place(self, job, view):
            return Placement(hosts[job.job_id], (1, 1))

    policy = NETWORK_POLICIES.create("crux")
    seen: list = []
    inner = policy.allocate
    policy.allocate = lambda view: seen.append(inner(view)) or seen[-1]
    Simulator(topo, [Job(k, 0.0, 2, f"tb{k}", 20.0) for k in COMPUTE_MS], "fifo", Fixed(), None,
              SimConfig(network="tcp"), zoo=zoo, netpolicy=policy).run()
    crux = next(d for d in seen if len(d) == len(COMPUTE_MS))
    none = {}
    for k in COMPUTE_MS:
        pairs, _ = job_flows(zoo[f"tb{k}"], "ring", hosts[k], (1, 1))
        picks = []
        for n, (s, d) in enumerate(pairs):
            links, _ = topo.flow_links(s, d, key=k * 1024 + n)
            picks.append([list(p) for p in topo.paths(s, d)].index(links.tolist()))
        none[k] = NetAllocation(paths=tuple(picks))
    return dict(none=none, crux=crux)


def case(arm: str, alloc: dict[int, NetAllocation]) -> Case:
    jobs = tuple(ScenarioJob(k, HOSTS[k], GRAD_BYTES, COMPUTE_MS[k], iterations=0, allocation=alloc[k])
                 for k in COMPUTE_MS)
    return Case(f"crux-testbed-{arm}", arm, "routed", TOPOLOGY, jobs)


def expected_s(c: Case) -> dict[int, float]:
    """Each job's period for sizing its run (about bench_netalloc's DURATION_S): alone, doubled (two per spine)."""
    comm_s = GRAD_BYTES * 8 * HEADER_OVERHEAD / 100e6
    return {x.job_id: x.compute_ms / 1000.0 + 2 * comm_s for x in c.jobs}


def collect(repeats: int, nice: int) -> tuple[list[dict], list[dict], dict]:
    from bench_fidelity import boost_priority

    from netlab.testbed import make_testbed
    from netlab.testbed.controller import Controller

    arms = decisions()
    runs, links = [], {}
    tb = make_testbed("routed", TOPOLOGY, gso_max_bytes=GSO_MAX_BYTES)
    with tb:
        boost_priority(tb, nice)
        links = {int(l.link): f"{l.src}->{l.dst}" for l in tb.plan.links}
        with Controller(tb, progress=False) as ctl:
            for rep in range(repeats):
                for arm, alloc in arms.items():
                    c = case(arm, alloc)
                    sc = sized(c, expected_s(c))
                    t0 = time.time()
                    raw = run_scenario_logs(ctl, sc, start_delay_s=12.0, timeout_s=600.0)
                    mismatches = tb.allocation_mismatches()
                    logs = split_logs(raw)
                    summary = summarise_logs(sc, logs)
                    ids = dict(zip(raw.job_id, raw.testbed_job_id))
                    for _, r in summary.iterrows():
                        jid = int(r.job_id)
                        r0 = logs[jid][logs[jid]["rank"] == 0]
                        span = float(r0.allreduce_end.max() - r0.compute_start.min())
                        stats = ctl.jobs[int(ids[jid])].net_stats
                        link_bytes = {} if stats is None else {int(l): int(b) for l, b in
                                                               stats.groupby("link").bytes.sum().items()}
                        runs.append(dict(arm=arm, repeat=rep, job_id=jid, iter_s=float(r.iter_s),
                                         mean_iter_s=float(r.mean_iter_s),
                                         overlapped=bool(r.overlapped), span_s=span, link_bytes=link_bytes,
                                         mismatches_after_end=mismatches))
                    print(f"repeat {rep} {arm}: " + ", ".join(f"job {int(r.job_id)} {r.iter_s * 1000:.1f} ms"
                                                              for _, r in summary.iterrows())
                          + f" ({time.time() - t0:.0f} s)", flush=True)
    left = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    teardown = [dict(tid=tb.tid, namespaces_left=[n.split()[0] for n in left.splitlines()
                                                  if n.startswith(f"nl{tb.tid}-")])]
    return runs, teardown, links


def score(runs: list[dict], teardown: list[dict], links: dict, meta: dict) -> dict:
    from netlab.network.demand import build_demand
    from netlab.testbed import make_testbed
    from netlab.testbed.scenarios import scenario_rates, topology_at
    from netlab.workload.zoo import JobModel

    df = pd.DataFrame(runs)
    arms = decisions()
    tb = make_testbed("routed", TOPOLOGY)  # never brought up: topology and rates only
    rows, link_rows, util = [], [], {}
    for arm, alloc in arms.items():
        c = case(arm, alloc)
        sc = sized(c, expected_s(c))
        pred = predict_scenario(tb, sc, network="tcp", wire_overhead=HEADER_OVERHEAD)
        sim = dict(zip(pred.job_id, pred.predicted_mean_iter_s))
        sim_median = dict(zip(pred.job_id, pred.predicted_iter_s))
        topo = topology_at(tb.topology, tb.rate_scale, scenario_rates(tb, sc))
        index = {h.name: i for i, h in enumerate(topo.hosts)}
        sim_load, tb_load = {}, {}
        for x in c.jobs:
            got = df[(df.arm == arm) & (df.job_id == x.job_id)]
            med = float(got.mean_iter_s.median())
            rows.append(dict(arm=arm, job_id=x.job_id, hosts=list(x.hosts), compute_ms=x.compute_ms,
                             allocation=asdict(x.allocation), testbed_iter_s=med,
                             testbed_iter_s_repeats=got.mean_iter_s.tolist(), sim_iter_s=float(sim[x.job_id]),
                             error=med / float(sim[x.job_id]) - 1,
                             within_target=bool(abs(med / float(sim[x.job_id]) - 1) <= TARGET),
                             testbed_median_iter_s=float(got.iter_s.median()),
                             sim_median_iter_s=float(sim_median[x.job_id]),
                             median_error=float(got.iter_s.median()) / float(sim_median[x.job_id]) - 1,
                             all_overlapped=bool(got.overlapped.all())))
            model = JobModel(f"job{x.job_id}", x.compute_ms / 1000.0, x.grad_bytes / tb.rate_scale * HEADER_OVERHEAD)
            d, _ = build_demand(topo, model, "ring", x.job_id, [index[h] for h in x.hosts], [1, 1],
                                allocation=x.allocation)
            for l, w in zip(d.links.tolist(), d.weights.tolist()):  # simulator: bytes per iteration / iteration
                sim_load[l] = sim_load.get(l, 0.0) + d.flow_bytes * w * 8 / sim[x.job_id] / 1e9  # Gbit/s (topo)
            for _, r in got.iterrows():  # testbed: each repeat's bytes over its span, averaged over repeats
                for l, b in r.link_bytes.items():
                    tb_load[int(l)] = tb_load.get(int(l), 0.0) + b * 8 / r.span_s / 1e6 / len(got)  # Mbit/s
        for l in sorted(sim_load):
            name = links.get(l, str(l))
            cap_gbps = float(topo.link_capacity_gbps[l])
            if str(topo.link_tier[l]) not in ("tor-spine", "spine-tor", "leaf-spine", "spine-leaf"):
                continue
            link_rows.append(dict(arm=arm, link=int(l), name=name, tier=str(topo.link_tier[l]),
                                  sim_util=sim_load[l] / cap_gbps,
                                  testbed_util=tb_load.get(int(l), 0.0) / (cap_gbps * tb.rate_scale * 1000.0)))
        rs = [r for r in rows if r["arm"] == arm]
        gpus = 2
        work = sum(gpus * r["compute_ms"] / 1000.0 for r in rs)
        util[arm] = {side: sum(gpus * r["compute_ms"] / 1000.0 / r[f"{side}_iter_s"] for r in rs) / (gpus * len(rs))
                     for side in ("testbed", "sim")}
        util[arm]["compute_s_per_iteration"] = work
    gain = {side: util["crux"][side] / util["none"][side] - 1 for side in ("testbed", "sim")}
    return dict(**meta, scenario=f"routed {TOPOLOGY}; four 2-rank jobs, 1 MB all-reduced, compute "
                                 f"{list(COMPUTE_MS.values())} ms", arms={a: {k: asdict(v) for k, v in d.items()}
                                                                         for a, d in arms.items()},
                rows=rows, links=link_rows, gpu_compute_util=util, crux_gain_over_none=gain,
                within_target=sum(r["within_target"] for r in rows), compared=len(rows),
                tc_state_equals_plan=not any(r["mismatches_after_end"] for r in runs),
                nothing_left_after_teardown=all(not t["namespaces_left"] for t in teardown), teardown=teardown,
                runs=runs, link_names={str(k): v for k, v in links.items()})


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--collect", action="store_true", help="run the testbed (root, sshd, torch)")
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--nice", type=int, default=-10, help="niceness of the testbed's processes (0: leave)")
    ap.add_argument("--out", default=str(RESULTS / "crux.json"))
    args = ap.parse_args(argv)
    out = Path(args.out)
    doc = json.loads(out.read_text()) if out.exists() else {}
    if args.collect:
        if os.geteuid() != 0:
            print("collection needs root (network namespaces)", file=sys.stderr)
            return 2
        t0, load = time.time(), os.getloadavg()[0]
        runs, teardown, links = collect(args.repeats, args.nice)
        meta = dict(collected=time.strftime("%Y-%m-%d %H:%M"), collection_wall_s=round(time.time() - t0),
                    load_at_start=load, load_at_end=os.getloadavg()[0], repeats=args.repeats,
                    gso_max_bytes=GSO_MAX_BYTES, grad_bytes=GRAD_BYTES, header_overhead=HEADER_OVERHEAD)
    else:
        stored = doc.get("testbed_compute")
        if not stored or "runs" not in stored:
            print(f"{out} has no stored testbed runs; collect them first (--collect, as root)", file=sys.stderr)
            return 2
        runs, teardown = stored["runs"], stored["teardown"]
        links = {int(k): v for k, v in stored["link_names"].items()}
        meta = {k: stored[k] for k in ("collected", "collection_wall_s", "load_at_start", "load_at_end", "repeats",
                                       "gso_max_bytes", "grad_bytes", "header_overhead")}
    report = score(runs, teardown, links, meta)
    doc = json.loads(out.read_text()) if out.exists() else {}  # the simulation's part as it is now
    doc["testbed_compute"] = report
    write_json(out, doc)
    print(pd.DataFrame(report["rows"])[["arm", "job_id", "testbed_iter_s", "sim_iter_s", "error"]].round(4)
          .to_string(index=False))
    print(pd.DataFrame(report["links"]).round(3).to_string(index=False))
    print("GPU compute util", report["gpu_compute_util"], "crux gain", report["crux_gain_over_none"])
    print(f"{report['within_target']}/{report['compared']} within {TARGET:.0%}; tc state equals plan: "
          f"{report['tc_state_equals_plan']}; nothing left: {report['nothing_left_after_teardown']}; wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
