"""Testbed benchmark: writes benchmarks/results/testbed.json. Needs root (namespaces), sshd and torch.

Measures, on the emulated (network-namespace) testbed:

* bring-up + agent deployment for 8 hosts (target 20 s or less) and teardown
  (target 2 s or less), median of ``--repeats``;
* telemetry at 10 Hz on 8 hosts for ``--telemetry-s`` seconds (target: no
  sample lost over 60 s);
* all-reduce bus bandwidth / shaped link rate for 2 and 4 ranks at 100 and
  500 Mbit (target 0.9 or more; TCP/IP headers cap it near 0.955).

Usage: python benchmarks/bench_testbed.py [--repeats 3] [--telemetry-s 60] [--out ...]
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import time
from pathlib import Path

from netlab.sim.metrics import write_json
from netlab.testbed import NetnsTestbed
from netlab.testbed.controller import Controller
from netlab.testbed.experiments import busbw
from netlab.topology import load_topology

TOPOLOGY = "leafspine,racks=2,hosts_per_rack=4,gpus_per_host=1,oversub=1,spines=1"


def bring_up(repeats: int) -> dict:
    up, deploy, down = [], [], []
    for _ in range(repeats):
        t0 = time.perf_counter()
        tb = NetnsTestbed(load_topology(TOPOLOGY)).up()
        t1 = time.perf_counter()
        ctl = Controller(tb, progress=False).deploy()
        t2 = time.perf_counter()
        ctl.close()  # teardown = agents' shutdown + the testbed's
        tb.down()
        t4 = time.perf_counter()
        up.append(t1 - t0)
        deploy.append(t2 - t1)
        down.append(t4 - t2)
    total = [u + d for u, d in zip(up, deploy)]
    return dict(hosts=8, repeats=repeats, bringup_s=up, deploy_s=deploy, teardown_s=down,
                median_bringup_plus_deploy_s=statistics.median(total), median_teardown_s=statistics.median(down),
                target_bringup_plus_deploy_s=20.0, target_teardown_s=2.0,
                met=statistics.median(total) <= 20.0 and statistics.median(down) <= 2.0)


def telemetry(seconds: float) -> dict:
    with NetnsTestbed(load_topology(TOPOLOGY)) as tb, Controller(tb, progress=False) as ctl:
        ctl.start_telemetry(interval_ms=100)
        time.sleep(seconds)  # the measurement window itself, not a race
        stats = ctl.stop_telemetry()
        frame = ctl.telemetry()
        seqs = frame.groupby("host").seq.agg(lambda s: sorted(set(s)))
        gaps = {h: sum(1 for a, b in zip(s, s[1:]) if b != a + 1) for h, s in seqs.items()}
        expected = int(seconds * 10)
        return dict(hosts=len(tb.hosts), interval_ms=100, seconds=seconds, expected_per_host=expected,
                    samples_per_host={r.host: int(r.samples) for r in stats.itertuples()},
                    lost_per_host={r.host: int(r.lost) for r in stats.itertuples()},
                    seq_gaps_per_host=gaps,
                    met=all(int(r.lost) == 0 for r in stats.itertuples()) and not any(gaps.values())
                    and all(int(r.samples) >= expected - 1 for r in stats.itertuples()))


def bandwidth(grad_bytes: int, iterations: int) -> dict:
    with NetnsTestbed(load_topology(TOPOLOGY)) as tb, Controller(tb, progress=False) as ctl:
        df = busbw(ctl, rates_mbit=(100, 500), ranks=(2, 4), grad_bytes=grad_bytes, iterations=iterations)
    return dict(rows=df.to_dict(orient="records"), min_ratio=float(df.busbw_over_rate.min()), target_ratio=0.9,
                met=bool(df.busbw_over_rate.min() >= 0.9))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--telemetry-s", type=float, default=60.0)
    ap.add_argument("--grad-bytes", type=int, default=16_000_000)
    ap.add_argument("--iterations", type=int, default=8)
    ap.add_argument("--out", default=str(Path(__file__).parent / "results" / "testbed.json"))
    args = ap.parse_args(argv)
    if os.geteuid() != 0:
        print("bench_testbed needs root (network namespaces)", file=sys.stderr)
        return 2
    res = dict(machine=dict(python=platform.python_version(), cpus=os.cpu_count(), kernel=platform.release()),
               topology=TOPOLOGY)
    res["bringup"] = bring_up(args.repeats)
    print("bring-up", res["bringup"])
    res["busbw"] = bandwidth(args.grad_bytes, args.iterations)
    print("busbw", res["busbw"])
    res["telemetry"] = telemetry(args.telemetry_s)
    print("telemetry", res["telemetry"])
    write_json(args.out, res)
    print("wrote", args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
