"""The fidelity scenarios: which jobs run where, at what rates, and which of them contend.

Kept apart from running and scoring because both sides read it: collection
turns a scenario into testbed runs, scoring rebuilds the same scenario from the
stored runs and needs its link geometry (which directed links each ring loads,
which jobs share one) to split contended jobs from jobs alone. Everything here
is arithmetic on the topology; nothing touches a testbed.
"""

from __future__ import annotations

import hashlib
import json
import math

from ...testbed.experiments import racks, uplink_cables
from ...testbed.scenarios import Scenario, ScenarioJob, scenario_rates

# A 1514-byte frame (as HTB counts it) carries 1448 payload bytes (TCP/IP with timestamps): 1.046; measured 1.047.
HEADER_OVERHEAD = 1.047

# Scenario scale: the rack uplinks at 100 Mbit (host links stay at the testbed's 200), 375 kB per all-reduce,
# which a 2-rank ring moves across the uplink in C = 31.4 ms alone (with headers). Iterations are 50-130 ms,
# far below what two cores can push (testbed-facts.md: only unshaped jobs slow each other from CPU contention).
UPLINK_MBIT = 100.0
GRAD_BYTES = 375_000
COMPUTE_MS = 20.0  # the "share" scenarios: compute 0.64 x the all-reduce, as in the first fidelity report
ITERATIONS = 600  # the slowest job of a scenario runs this many; faster ones more (equal duration)
WARMUP = 10


def ring_link_bytes(topo, hosts, grad_bytes: float) -> dict[tuple[str, str], float]:
    """Bytes per iteration a ring all-reduce over ``hosts`` (one rank each, ring in this order) puts on each
    directed link: every rank sends ``2(n-1)/n`` of the gradient to the next."""
    n = len(hosts)
    out: dict[tuple[str, str], float] = {}
    if n < 2:
        return out
    index = topo.host_index
    per_flow = grad_bytes * 2 * (n - 1) / n
    for k in range(n):
        src, dst = index[hosts[k]], index[hosts[(k + 1) % n]]
        links, weights = topo.flow_links(src, dst)
        for li, w in zip(links, weights):
            key = (topo.link_src[li], topo.link_dst[li])
            out[key] = out.get(key, 0.0) + per_flow * float(w)
    return out


def alone_period_ms(topo, job: ScenarioJob, rates_mbit: dict, wire_overhead: float = HEADER_OVERHEAD) -> float:
    """A job's iteration alone, by arithmetic: compute + its busiest link's bytes at that link's rate."""
    lb = ring_link_bytes(topo, job.hosts, job.grad_bytes)
    comm = max((b * 8 * wire_overhead / (rates_mbit[k] * 1e6) for k, b in lb.items()), default=0.0)
    return job.compute_ms + comm * 1000.0


def equal_duration(testbed, sc: Scenario, iterations: int) -> Scenario:
    """``sc`` with every job's iteration count set so all run about as long as the slowest job's
    ``iterations`` (alone periods by arithmetic): the common window then holds hundreds of iterations of each."""
    rates = scenario_rates(testbed, sc)
    period = {j.job_id: alone_period_ms(testbed.topology, j, rates) for j in sc.jobs}
    longest = max(period.values())
    jobs = tuple(ScenarioJob(j.job_id, j.hosts, j.grad_bytes, j.compute_ms,
                             int(math.ceil(iterations * longest / period[j.job_id] - 1e-9)), j.offset_ms)
                 for j in sc.jobs)
    return Scenario(sc.name, jobs, sc.rates_mbit, sc.warmup)


def fidelity_scenarios(testbed, grad_bytes: int = GRAD_BYTES, compute_ms: float = COMPUTE_MS,
                       iterations: int = ITERATIONS, uplink_mbit: float | None = UPLINK_MBIT,
                       warmup: int = WARMUP) -> list[Scenario]:
    """The report's scenarios on a two-rack testbed (3 hosts per rack for all of them): one job alone
    (cross-rack, in one rack, a 4-rank ring), 2 and 3 jobs sharing the uplink, consolidated and spread
    next to a cross-rack job, 2 and 3 jobs in step, 2 jobs half an iteration apart, unequal periods
    (1.07 and 1:2), a 4-rank ring beside a 2-rank job, and the "2 jobs in step" pair with one job
    moved inside a rack.

    ``C`` is one 2-rank job's all-reduce alone on the uplink (with headers). The "share" scenarios use
    ``compute_ms`` (shorter than ``C``); the dynamics scenarios use compute ``C`` (iteration ``2C`` alone,
    so two jobs exactly fill the link when they interleave). ``uplink_mbit`` shapes the rack uplinks
    (None: the testbed's own rate). Every job runs ``iterations`` or more (equal duration per scenario).
    """
    a, b = racks(testbed)
    topo = testbed.topology
    rates = {c: float(uplink_mbit) for c in uplink_cables(topo)} if uplink_mbit else {}
    cur = scenario_rates(testbed, Scenario("", (), rates))
    uplink = min(cur[(u, v)] for x, y in uplink_cables(topo) for u, v in ((x, y), (y, x)))
    C = grad_bytes * 8 / (uplink * 1e6) * HEADER_OVERHEAD * 1000.0  # noqa: N806 - the report's name

    def J(jid, hosts, compute, offset=0.0):  # noqa: N802 - a short constructor keeps the table readable
        return ScenarioJob(jid, tuple(hosts), int(grad_bytes), round(float(compute), 3), iterations,
                           round(float(offset), 3))

    def S(name, *jobs):  # noqa: N802
        return equal_duration(testbed, Scenario(name, tuple(jobs), dict(rates), warmup), iterations)

    three = min(len(a), len(b)) >= 3
    out = [
        S("alone (cross-rack)", J(1, (a[0], b[0]), compute_ms)),
        S("alone (one rack)", J(1, (a[0], a[1]), compute_ms)),
        S("2 jobs share the uplink", J(1, (a[0], b[0]), compute_ms), J(2, (a[1], b[1]), compute_ms)),
    ]
    if three:
        out.append(S("3 jobs share the uplink", *(J(i + 1, (a[i], b[i]), compute_ms) for i in range(3))))
    out += [
        S("consolidated next to a cross-rack job", J(1, (a[-1], b[-1]), compute_ms), J(2, (a[0], a[1]), compute_ms)),
        S("spread next to a cross-rack job", J(1, (a[-1], b[-1]), compute_ms), J(2, (a[0], b[0]), compute_ms)),
        S("2 jobs in step (no shift)", J(1, (a[0], b[0]), C), J(2, (a[1], b[1]), C)),
    ]
    if three:
        out.append(S("3 jobs in step (no shift)", *(J(i + 1, (a[i], b[i]), C) for i in range(3))))
    out += [
        S("2 jobs shifted half an iteration", J(1, (a[0], b[0]), C), J(2, (a[1], b[1]), C, offset=C)),
        # job 2's iteration alone is 1.07 x (and 2 x) job 1's 2C: compute 2.14C - C (and 4C - C)
        S("unequal iterations 1.07", J(1, (a[0], b[0]), C), J(2, (a[1], b[1]), 2 * C * 1.07 - C)),
        S("unequal iterations 1:2", J(1, (a[0], b[0]), C), J(2, (a[1], b[1]), 3 * C)),
    ]
    if three:
        # ring a0 -> a1 -> b0 -> b1 -> a0 crosses the uplink once each way, 1.5 x the gradient per flow
        out += [
            S("4-rank job alone", J(1, (a[0], a[1], b[0], b[1]), C)),  # its own time: 6 ring steps, not 2
            S("4-rank job beside a 2-rank job", J(1, (a[0], a[1], b[0], b[1]), C), J(2, (a[2], b[2]), C)),
            # the same two jobs as "2 jobs in step", job 2 placed inside rack a
            S("in-rack pair beside a cross-rack job", J(1, (a[0], b[0]), C), J(2, (a[1], a[2]), C)),
        ]
    return out


def scenario_key(sc: Scenario) -> str:
    """A short hash of everything that defines a scenario (collection resumes only identical ones)."""
    text = json.dumps([sc.name, [list(map(str, (j.job_id, ",".join(j.hosts), j.grad_bytes, j.compute_ms,
                                                j.iterations, j.offset_ms))) for j in sc.jobs],
                       sorted([f"{a}-{b}", r] for (a, b), r in sc.rates_mbit.items()), sc.warmup])
    return hashlib.sha1(text.encode()).hexdigest()[:12]


# ----------------------------------------------------------------------------- contention
def job_links(topo, hosts) -> set[tuple[str, str]]:
    """Directed links a job's ring loads."""
    return set(ring_link_bytes(topo, hosts, 1.0))


def contended_jobs(links: dict) -> dict:
    """Per job id: True when one of its links also carries another job of the scenario."""
    out = {}
    for jid, mine in links.items():
        out[jid] = any(mine & other for oid, other in links.items() if oid != jid)
    return out


def scenario_contention(topo, sc: Scenario) -> dict:
    """Per job id of ``sc``: whether it contends (:func:`contended_jobs` on its rings' links)."""
    return contended_jobs({j.job_id: job_links(topo, j.hosts) for j in sc.jobs})


def crosses_uplink(topo, hosts) -> bool:
    """Whether a job's ring uses a link between switches (the links racks share)."""
    up = {k for a, b in uplink_cables(topo) for k in ((a, b), (b, a))}
    return bool(job_links(topo, hosts) & up)
