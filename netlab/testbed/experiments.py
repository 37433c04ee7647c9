"""The testbed notebook's four experiments, each returning a DataFrame.

All run on a two-rack topology (at least two one-rank hosts per rack) whose
rack uplinks are the shared bottleneck:

1. :func:`busbw`: all-reduce bus bandwidth against the shaped rate.
2. :func:`sharing`: one job alone vs two jobs crossing the same uplink.
3. :func:`placement`: a job next to a cross-rack background job, placed in
   one rack (consolidated) or across racks (spread).
4. :func:`time_shift`: two jobs sharing the uplink, started in phase or
   shifted by half an iteration so their all-reduces interleave.
"""

from __future__ import annotations

import pandas as pd

from .controller import Controller
from .scenarios import Scenario, ScenarioJob, ring_busbw_mbit, run_scenario


def rack_hosts(topo) -> list[list[str]]:
    """Host names per rack, in topology order."""
    by_rack: dict[int, list[str]] = {}
    for i, h in enumerate(topo.hosts):
        by_rack.setdefault(int(topo.host_rack[i]), []).append(h.name)
    return [v for _, v in sorted(by_rack.items())]


def uplink_cables(topo) -> list[tuple[str, str]]:
    """Cables between switches (the links racks share)."""
    return [(a, b) for a, b, _, _ in topo.cables if a not in topo.host_index and b not in topo.host_index]


def racks(testbed) -> list[list[str]]:
    """Host names per rack, in topology order; needs two racks of two or more hosts."""
    topo = testbed.topology
    out = rack_hosts(topo)
    if len(out) < 2 or min(len(v) for v in out) < 2:
        raise ValueError(f"these experiments need two racks of two or more hosts; {topo.name} has "
                         f"{[len(v) for v in out]}")
    return out


def _all_links(testbed, rate_mbit: float) -> dict:
    return {(a, b): rate_mbit for a, b, _, _ in testbed.topology.cables}


def _uplinks(testbed, rate_mbit: float) -> dict:
    return {c: rate_mbit for c in uplink_cables(testbed.topology)}


def busbw(ctl: Controller, rates_mbit=(100, 500), ranks=(2, 4), grad_bytes: int = 8_000_000,
          iterations: int = 8) -> pd.DataFrame:
    """Bus bandwidth of one ring all-reduce job with every link shaped to ``rate``, against that rate."""
    a, b = racks(ctl.testbed)
    rows = []
    for rate in rates_mbit:
        for n in ranks:
            hosts = tuple(a[: n // 2] + b[: n - n // 2])
            sc = Scenario(f"busbw-{rate}-{n}", (ScenarioJob(1, hosts, grad_bytes, 0.0, iterations),),
                          _all_links(ctl.testbed, rate))
            r = run_scenario(ctl, sc).iloc[0]
            bw = ring_busbw_mbit(grad_bytes, r.allreduce_s, n)
            rows.append(dict(rate_mbit=rate, ranks=n, grad_bytes=grad_bytes, allreduce_s=r.allreduce_s,
                             busbw_mbit=bw, busbw_over_rate=bw / rate))
    return pd.DataFrame(rows)


def sharing(ctl: Controller, rate_mbit: float = 100, grad_bytes: int = 4_000_000, compute_ms: float = 0.0,
            iterations: int = 8) -> pd.DataFrame:
    """One cross-rack job alone, then two sharing the uplink; iteration times and the slowdown."""
    a, b = racks(ctl.testbed)
    rates = _all_links(ctl.testbed, rate_mbit)
    j1 = ScenarioJob(1, (a[0], b[0]), grad_bytes, compute_ms, iterations)
    j2 = ScenarioJob(2, (a[1], b[1]), grad_bytes, compute_ms, iterations)
    alone = run_scenario(ctl, Scenario("alone", (j1,), rates)).assign(case="alone")
    shared = run_scenario(ctl, Scenario("shared", (j1, j2), rates)).assign(case="shared")
    df = pd.concat([alone, shared], ignore_index=True)
    df["slowdown"] = df.iter_s / float(alone.iter_s.iloc[0])
    return df


def placement(ctl: Controller, rate_mbit: float = 100, uplink_mbit: float | None = None,
              grad_bytes: int = 4_000_000, compute_ms: float = 50.0, iterations: int = 8) -> pd.DataFrame:
    """JCT of a 2-rank job placed consolidated (one rack) or spread (two racks) next to a cross-rack job."""
    a, b = racks(ctl.testbed)
    rates = {**_all_links(ctl.testbed, rate_mbit), **_uplinks(ctl.testbed, uplink_mbit or rate_mbit)}
    background = ScenarioJob(1, (a[-1], b[-1]), grad_bytes, compute_ms, iterations + 4)
    rows = []
    for case, hosts in (("consolidated", (a[0], a[1])), ("spread", (a[0], b[0]))):
        job = ScenarioJob(2, hosts, grad_bytes, compute_ms, iterations)
        r = run_scenario(ctl, Scenario(case, (background, job), rates))
        r = r[r.job_id == 2].assign(case=case)
        r["jct_s"] = r.iter_s * iterations
        rows.append(r)
    return pd.concat(rows, ignore_index=True)


def time_shift(ctl: Controller, rate_mbit: float = 100, grad_bytes: int = 2_000_000, compute_ms: float | None = None,
               iterations: int = 12) -> pd.DataFrame:
    """Two jobs on the shared uplink, in phase and shifted by half an iteration (CASSINI's interleaving).

    Compute time defaults to the all-reduce time alone, so a half-period
    shift puts one job's all-reduce in the other's compute phase.
    """
    a, b = racks(ctl.testbed)
    rates = _all_links(ctl.testbed, rate_mbit)
    if compute_ms is None:
        # a 2-rank ring sends the whole gradient each way: bytes / rate, plus headers
        compute_ms = grad_bytes * 8 / (rate_mbit * 1e6) * 1.047 * 1000.0
    period_ms = 2 * compute_ms
    rows = []
    for case, offset in (("in phase", 0.0), ("shifted", period_ms / 2)):
        j1 = ScenarioJob(1, (a[0], b[0]), grad_bytes, compute_ms, iterations)
        j2 = ScenarioJob(2, (a[1], b[1]), grad_bytes, compute_ms, iterations, offset_ms=offset)
        rows.append(run_scenario(ctl, Scenario(case, (j1, j2), rates)).assign(case=case))
    return pd.concat(rows, ignore_index=True)
