"""Shallow Reno's retransmission timeouts on real Linux across ring-step lengths, beside ns-3 and the analysis count.

Why (issue 26): the timeout tail of shallow Reno (:mod:`netlab.network.tcp.rto`) counts timeouts per packet of a
ring step. ns-3 3.37 (no TLP, no RACK: every tail loss waits for its RTO) matches that count at scale 1 and its
timeouts per packet rise with the step's length; the testbed's real Linux at one step length (125 packets per step)
supported about 1/50 of it. Whether one scale holds for Linux across step lengths decides whether the count can be
registered. This benchmark measures it.

``--collect`` brings up ``testbed/topologies/leafspine-2rack.yaml`` with the byte-limited shallow queue of
``bench_interleave.py``'s ``byte_queue`` part (a bfifo of ``BYTE_QUEUE`` bytes, 10 full frames, under every HTB
class; the rack uplinks at 100 Mbit/s), and runs 2 and 3 aligned 2-rank cross-rack jobs (compute 1.6 x the job's
alone all-reduce time, as the interleave experiment) at ``STEP_PACKETS`` packets per ring step (gradient bytes 2 x
packets x ``SEGMENT_BYTES``), each run moving about the same bytes (``BYTES_PER_JOB``), repeat-major,
``--repeats`` times. Around every run it reads each host namespace's ``/proc/net/netstat`` TcpExt counters
(``TCPTimeouts``, ``TCPLossProbes``, ``TCPLossProbeRecovery``, ``TCPLostRetransmit``, ...): the deltas, summed
over the hosts, are the run's Linux counts (every TCP socket of the namespace: the jobs' and the idle control
connections'). Runs go to ``benchmarks/results/testbed_timeouts_runs.parquet`` (resumable, replaced after each run).

Scoring (also alone, from the stored runs): the same scenarios through the ns-3 referee (reno, a 10-packet switch
queue: the testbed's 10 frames; nice 19) and the analysis count (``tcp-shallow`` at ``rto_k`` 1,
:func:`netlab.validate.timeouts.count_rows`, bounded at one stall per step and with the registered terms), per step
length: Linux timeouts, loss probes and lost retransmits, ns-3's timeouts and the count, each per 1,000 packets
and per ring step, and the implied scales ``k_linux`` / ``k_ns3`` (measured / counted). Output:
``benchmarks/results/testbed_timeouts.json``.

Usage:
    python benchmarks/bench_testbed_timeouts.py --collect [--repeats 3]   # testbed (root), then score
    python benchmarks/bench_testbed_timeouts.py                           # score the stored runs
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import signal
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_fidelity import boost_priority  # noqa: E402
from bench_interleave import BYTE_QUEUE, TOPOLOGY  # noqa: E402

from netlab.congestion import fidelity as fid  # noqa: E402
from netlab.congestion import interleave as il  # noqa: E402
from netlab.sim.metrics import write_json  # noqa: E402
from netlab.topology import load_topology  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
RUNS = "testbed_timeouts_runs.parquet"
SEGMENT_BYTES = 1500  # the model's segment (tcp params SEGMENT_BYTES): packets per step = grad / 2 ranks / this
STEP_PACKETS = (30, 125, 500, 2000)
SCENARIOS = ("2 jobs aligned", "3 jobs aligned")
BYTES_PER_JOB = 320 * 375_000  # the interleave experiment's 320 iterations at 375 kB: ~30-60 s per run
MIN_ITERATIONS = 16
COUNTERS = ("TCPTimeouts", "TCPLossProbes", "TCPLossProbeRecovery", "TCPLostRetransmit", "TCPFastRetrans",
            "TCPSackRecovery", "TCPSpuriousRTOs", "TCPRetransFail")
STALL_S = 0.15  # an all-reduce this much over its job's median waited for a timeout (Linux's minimum RTO: 200 ms)
RAMP_PACKETS = 84.67  # rto_ramp_packets as shallow14b fitted it on the referee's calibration counts (not registered)
NS3_QUEUE_PACKETS = 10  # the testbed's bfifo holds BYTE_QUEUE = 10 full frames


def grad_bytes(packets: int) -> int:
    """Gradient bytes of a 2-rank ring whose every step moves ``packets`` segments (2 steps of grad / 2 each)."""
    return int(2 * packets * SEGMENT_BYTES)


def iterations_for(packets: int) -> tuple[int, int]:
    """(iterations, warm-up) for a run at ``packets`` per step: about ``BYTES_PER_JOB`` per job."""
    n = max(MIN_ITERATIONS, int(round(BYTES_PER_JOB / grad_bytes(packets))))
    return n, min(fid.WARMUP, n // 4)


def step_scenarios(tb) -> list:
    """Every (step length, scenario) of the collection, named ``"<packets> pkt/step <scenario>"``."""
    out = []
    for n in STEP_PACKETS:
        iters, warm = iterations_for(n)
        scs = il.interleave_scenarios(tb, grad_bytes=grad_bytes(n), iterations=iters, warmup=warm, n_random=0)
        out += [replace(sc, name=f"{n} pkt/step {sc.name}") for sc in scs if sc.name in SCENARIOS]
    return out


def tcp_ext(netns: str) -> dict:
    """The TcpExt counters of namespace ``netns`` (``/proc/net/netstat`` read inside it)."""
    text = subprocess.run(["ip", "netns", "exec", netns, "cat", "/proc/net/netstat"], capture_output=True,
                          text=True, check=True).stdout.splitlines()
    for head, vals in zip(text[0::2], text[1::2]):
        if head.startswith("TcpExt:"):
            row = dict(zip(head.split()[1:], (int(v) for v in vals.split()[1:])))
            return {k: row.get(k, 0) for k in COUNTERS}
    return {k: 0 for k in COUNTERS}


def counters(tb) -> dict:
    """TcpExt counters per host namespace."""
    return {h.name: tcp_ext(h.netns) for h in tb.hosts}


def collect(runs_path: Path, repeats: int, nice: int) -> None:
    """Run every scenario ``repeats`` times with the TcpExt deltas around each run (module doc)."""
    from netlab.testbed import NetnsTestbed
    from netlab.testbed.controller import Controller

    signal.signal(signal.SIGINT, signal.default_int_handler)
    t0 = time.time()
    done = pd.read_parquet(runs_path) if runs_path.exists() else pd.DataFrame()
    with NetnsTestbed(load_topology(TOPOLOGY), queue_bytes=BYTE_QUEUE) as tb:
        niceness = boost_priority(tb, nice) if nice else 0
        keys = {fid.scenario_key(sc) for sc in step_scenarios(tb)}
        if len(done):
            done = done[done.scenario_key.isin(keys)]
        have = set(zip(done.scenario_key, done.repeat)) if len(done) else set()
        frames = [done] if len(done) else []
        with Controller(tb, progress=False) as ctl:
            for r in range(repeats):
                for sc in step_scenarios(tb):
                    if (fid.scenario_key(sc), r) in have:
                        continue
                    c0 = counters(tb)
                    df = fid.collect_runs(ctl, [sc], repeats=1, out=None, progress=False, log=lambda *_: None,
                                          extra=dict(rank_nice=niceness, leaf_queue=f"bfifo {BYTE_QUEUE}"))
                    c1 = counters(tb)
                    delta = {k: int(sum(c1[h][k] - c0[h][k] for h in c1)) for k in COUNTERS}
                    df["repeat"] = r
                    df["tcp_ext"] = json.dumps(delta)
                    frames.append(df)
                    print(f"repeat {r} {sc.name}: {float(df.run_wall_s.iloc[0]):.1f} s (load "
                          f"{float(df.load_avg_1m.iloc[0]):.1f}) {delta}", flush=True)
                    fid.write_runs(pd.concat(frames, ignore_index=True), runs_path)
    print(f"collection: {time.time() - t0:.0f} s; {sum(len(f) for f in frames)} rows in {runs_path}")


def run_counts(runs: pd.DataFrame) -> pd.DataFrame:
    """Per run: step length, scenario, jobs, ring steps run (sum over jobs of iterations x 2 steps) and packets
    (steps x packets per step), and the TcpExt deltas."""
    rows = []
    for (name, rep), run in runs.groupby(["scenario", "repeat"], sort=False):
        jobs = run.drop_duplicates("job_id")
        packets = int(name.split(" ", 1)[0])
        iters = run.groupby("job_id")["iter"].max() + 1
        steps = int(2 * iters.sum())
        r0 = run[run["rank"] == 0]
        stalls = 0
        for _, x in r0.groupby("job_id"):
            took = (x.allreduce_end - x.allreduce_start).to_numpy()
            stalls += int((took > np.median(took) + STALL_S).sum())
        rows.append(dict(scenario=name, packets_per_step=packets, kind=name.split("step ", 1)[1], repeat=int(rep),
                         jobs=int(len(jobs)), ring_steps=steps, packets=steps * packets, stalls=stalls,
                         run_wall_s=float(run.run_wall_s.iloc[0]), load_avg_1m=float(run.load_avg_1m.iloc[0]),
                         **json.loads(run.tcp_ext.iloc[0])))
    return pd.DataFrame(rows)


def ns3_and_count(runs: pd.DataFrame, store_dir: Path) -> pd.DataFrame:
    """Per scenario: ns-3's timeouts, drops, ring steps and packets (the testbed scenario through the referee with a
    ``NS3_QUEUE_PACKETS`` queue), and the analysis count for the testbed's runs (per ring step at ``rto_k`` 1,
    bounded and unbounded, with the registered ramp/BDP terms at their defaults)."""
    from netlab.validate import sanity
    from netlab.validate.runs import RunStore, record_job_loss, referee_record
    from netlab.validate.scenario import Transport
    from netlab.validate.timeouts import count_rows

    topo = load_topology(TOPOLOGY)
    transport = Transport("reno", NS3_QUEUE_PACKETS, ecn_threshold_packets=5)
    store = RunStore(store_dir)
    out = []
    for n in STEP_PACKETS:
        sub = runs[runs.scenario.str.startswith(f"{n} pkt/step ")]
        if not len(sub):
            continue
        iters, warm = iterations_for(n)
        scenarios, _ = sanity.testbed_scenarios(sub, topo, transport, iterations=iters, warmup=warm)
        for sc in scenarios:
            t = time.time()
            rec = referee_record(sc, store, need_job_loss=True)
            wall = time.time() - t
            loss = record_job_loss(rec)
            cnt = count_rows(sc)
            queue = count_rows(sc, buffer_packets=float(NS3_QUEUE_PACKETS))
            ref_steps = sum(2 * int(rec["iterations_run"][str(j.job_id)]) for j in sc.jobs)
            per_step = dict(zip(cnt.job_id, cnt.per_step_k1))
            out.append(dict(scenario=sc.name, ns3_key=sc.key(), ns3_rtos=int(sum(v["rtos"] for v in loss.values())),
                            ns3_job_drops=int(sum(v["drops"] for v in loss.values())),
                            ns3_drops=int(rec["stats"]["drops"]),
                            ns3_fast_recoveries=int(rec["stats"]["fast_recoveries"]),
                            ns3_cpu_s=round(float(rec.get("ns3_cpu_s", np.nan)), 1), ns3_ring_steps=ref_steps,
                            ns3_packets=ref_steps * n,
                            ns3_rtos_by_job={str(j.job_id): int(loss[j.job_id]["rtos"]) for j in sc.jobs},
                            count_per_step_k1=float(np.mean(list(per_step.values()))),
                            count_q10_per_step_k1=float(queue.per_step_k1.mean()),
                            ns3_count_k1=float(sum(2 * int(rec["iterations_run"][str(j)]) * -np.expm1(-per_step[j])
                                                   for j in per_step)),
                            ns3_wall_s=round(wall, 1)))
            print(f"ns-3 {sc.name}: rtos {out[-1]['ns3_rtos']}, drops {out[-1]['ns3_drops']}, steps {ref_steps}, "
                  f"count/step {out[-1]['count_per_step_k1']:.4f}", flush=True)
    return pd.DataFrame(out)


def table(per_run: pd.DataFrame, ref: pd.DataFrame) -> pd.DataFrame:
    """Per (step length, scenario): Linux's counts (mean over repeats, and their spread), ns-3's and the count, per
    1,000 packets and per ring step, with the implied scales."""
    g = per_run.groupby(["packets_per_step", "kind", "scenario"], sort=True)
    t = g.agg(repeats=("repeat", "size"), ring_steps=("ring_steps", "mean"), packets=("packets", "mean"),
              linux_timeouts=("TCPTimeouts", "mean"), linux_timeouts_min=("TCPTimeouts", "min"),
              linux_timeouts_max=("TCPTimeouts", "max"), linux_loss_probes=("TCPLossProbes", "mean"),
              linux_probe_recoveries=("TCPLossProbeRecovery", "mean"),
              linux_lost_retransmits=("TCPLostRetransmit", "mean"), linux_fast_retrans=("TCPFastRetrans", "mean"),
              linux_sack_recoveries=("TCPSackRecovery", "mean"), linux_stalls=("stalls", "mean"),
              linux_timeouts_spread=("TCPTimeouts", lambda x: x.std(ddof=1) / x.mean() if x.mean() > 0 else 0.0),
              run_wall_s=("run_wall_s", "mean"), run_wall_spread=("run_wall_s", lambda x: x.max() / x.min() - 1),
              load_avg_1m=("load_avg_1m", "mean")).reset_index()
    k = 1000.0
    t["linux_timeouts_per_kpkt"] = t.linux_timeouts / t.packets * k
    t["linux_probes_per_kpkt"] = t.linux_loss_probes / t.packets * k
    t["linux_stalls_per_kpkt"] = t.linux_stalls / t.packets * k
    t["linux_timeouts_per_step"] = t.linux_timeouts / t.ring_steps
    if "ns3_rtos" not in ref.columns:
        return t
    t = t.merge(ref, on="scenario", how="left")
    t["ns3_timeouts_per_kpkt"] = t.ns3_rtos / t.ns3_packets * k
    t["ns3_timeouts_per_step"] = t.ns3_rtos / t.ns3_ring_steps
    t["count_per_kpkt"] = t.count_per_step_k1 / t.packets_per_step * k
    t["count_q10_per_kpkt"] = t.count_q10_per_step_k1 / t.packets_per_step * k
    t["ramp_share"] = t.packets_per_step / (t.packets_per_step + RAMP_PACKETS)
    t["count_bounded_per_step"] = -np.expm1(-t.count_per_step_k1)
    t["count_ramp_bounded_per_step"] = -np.expm1(-t.count_per_step_k1 * t.ramp_share)
    t["k_linux_ramp"] = t.linux_timeouts_per_step / t.count_ramp_bounded_per_step
    t["k_linux_q10"] = t.linux_timeouts_per_step / -np.expm1(-t.count_q10_per_step_k1)
    t["k_ns3_q10"] = t.ns3_timeouts_per_step / -np.expm1(-t.count_q10_per_step_k1)
    t["k_linux"] = t.linux_timeouts_per_step / t.count_bounded_per_step
    t["k_ns3"] = t.ns3_timeouts_per_step / t.count_bounded_per_step
    return t


def load_correlation(per_run: pd.DataFrame) -> dict:
    """Spearman correlation over all runs of the machine's 1-minute load with each run's timeouts and loss probes
    relative to its cell's mean (step length and scenario): whether the repeats' spread follows the shared
    machine's load (a CPU-starved sender or receiver delays ACKs) rather than chance."""
    rel = per_run.assign(
        timeouts_rel=per_run.TCPTimeouts / per_run.groupby("scenario").TCPTimeouts.transform("mean"),
        probes_rel=per_run.TCPLossProbes / per_run.groupby("scenario").TCPLossProbes.transform("mean"))
    return dict(runs=int(len(rel)),
                timeouts=float(rel.load_avg_1m.corr(rel.timeouts_rel, method="spearman")),
                loss_probes=float(rel.load_avg_1m.corr(rel.probes_rel, method="spearman")))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--collect", action="store_true", help="run the testbed first (root)")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--nice", type=int, default=0, help="niceness of the testbed's processes (0: as started)")
    ap.add_argument("--results", default=str(RESULTS))
    ap.add_argument("--no-ns3", action="store_true", help="score the Linux side only")
    ap.add_argument("--store", default=str(RESULTS / "referee_runs"), help="the referee's run store")
    args = ap.parse_args(argv)
    res = Path(args.results)
    runs_path = res / RUNS
    if args.collect:
        collect(runs_path, args.repeats, args.nice)
    runs = pd.read_parquet(runs_path)
    per_run = run_counts(runs)
    t0, c0 = time.time(), time.process_time()
    ref = pd.DataFrame(columns=["scenario"]) if args.no_ns3 else ns3_and_count(runs, Path(args.store))
    tab = table(per_run, ref)
    cols = ["packets_per_step", "kind", "repeats", "linux_timeouts", "linux_timeouts_spread", "linux_stalls",
            "linux_loss_probes", "ns3_rtos", "linux_timeouts_per_kpkt", "linux_stalls_per_kpkt",
            "linux_probes_per_kpkt", "ns3_timeouts_per_kpkt", "count_per_kpkt",
            "count_q10_per_kpkt", "k_linux", "k_ns3", "k_linux_ramp", "k_linux_q10", "k_ns3_q10", "run_wall_spread"]
    print(tab[[c for c in cols if c in tab.columns]].round(4).to_string(index=False))
    doc = dict(
        what="shallow Reno's timeouts per packet on the testbed's real Linux, ns-3 and the analysis count, by ring "
             "step length (module doc of bench_testbed_timeouts.py)",
        setup=dict(topology=TOPOLOGY.name, queue=f"bfifo {BYTE_QUEUE} bytes under every HTB class",
                   uplink_mbit=fid.UPLINK_MBIT, step_packets=list(STEP_PACKETS), scenarios=list(SCENARIOS),
                   bytes_per_job=BYTES_PER_JOB, ns3_queue_packets=NS3_QUEUE_PACKETS,
                   count="tcp-shallow at rto_k 1, registered terms, bounded at one stall per ring step",
                   linux_counters="TcpExt deltas summed over the 6 host namespaces (all their sockets)"),
        table=json.loads(tab.to_json(orient="records", double_precision=6)),
        load_vs_counts=load_correlation(per_run),
        ns3_record_keys=sorted(ref.ns3_key) if "ns3_key" in ref.columns else [],  # bench_referee.py --prune keeps them
        runs=json.loads(per_run.to_json(orient="records", double_precision=6)),
        score_wall_s=round(time.time() - t0, 1), score_cpu_s=round(time.process_time() - c0, 1),
        load_avg=os.getloadavg(), kernel=platform.release(),
        commit=subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True,
                              text=True).stdout.strip())
    write_json(res / "testbed_timeouts.json", doc)
    return 0


if __name__ == "__main__":
    sys.exit(main())
