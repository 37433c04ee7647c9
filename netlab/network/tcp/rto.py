"""The expected retransmission-timeout tail of a lossy link: what shallow drop-tail queues add to a job's iteration.

Why: a flow that loses a packet recovers by fast retransmit only if three
duplicate ACKs come back, i.e. if enough of its window is still in flight
behind the lost packet. On a shallow queue shared by many flows each flow
holds a few packets, so a loss often ends in a retransmission timeout: the
flow sends nothing for ``rto_min_s`` (Linux and the referee: 200 ms), and in
a step-synchronous ring all-reduce the whole job waits for it. One such
timeout is tens of iterations of a small job: the fluid's sharing, which
knows no loss, cannot produce it. This module gives the *expected* timeout
time per iteration, from the standard Reno analysis:

* a binding link (every job on it at its isolated rate at once would exceed
  its capacity: the only links where a queue builds, as in :mod:`~.goodput`)
  of ``B = buffer_packets`` packets is shared by ``a`` flows sending at once:
  each flow of a job on it counts with its job's communicating share of the
  iteration *as solved* (communication / iteration time of the solve's
  answer, before the tail; at least one flow counts). Contention lengthens
  every job's all-reduce, so the flows of a contended link overlap more than
  their duty cycles alone say: on the referee's shallow-Reno calibration half
  the timeouts per iteration of contended jobs go with this count's timeout
  rate better than with the duty cycles alone, the job's rank count or its
  ring step's bytes (the rank correlations of every candidate are in
  ``benchmarks/results/regimes_fit.json``, ``timeout_scale.per_job_candidates``);
* each holds a window of ``w = (rto_bdp_share x BDP + B) / a`` packets: its
  share of what the path holds, the link's bandwidth-delay product (its
  capacity x ``rtt_us``, in ``segment_bytes`` packets; under one packet at the
  referee's scaled-down rates, about a hundred at 100 Gbit/s) and the queue.
  ``rto_bdp_share`` (1: the whole product) is how much of the product counts
  as window: in the referee a round trip cuts the timeouts less than the whole
  product in the window says (ring steps restart from a small window, so the
  in-flight share a flow reaches is less than its share of the pipe);
* a Reno flow whose window saw-tooths up to ``w`` loses one packet every
  ``3 w^2 / 8`` it sends: loss probability ``p = min(1, 8 / (3 w^2))``
  (Mathis et al., CCR 1997; Padhye et al., SIGCOMM 1998, eq. 20's ``p``);
* a loss indication is a timeout with probability ``Q(w) = min(1, 3 / w)``
  (Padhye et al., SIGCOMM 1998, the approximation of their ``Q^(w)``: fewer
  than three packets behind the loss, no fast retransmit);

so a job whose flows send ``n = packets / steps`` per ring step (``CommDemand.steps``: 2(n - 1) for a ring) expects,
in one ring step, ``lam = rto_k x sum over its flows' binding links of flows x n x n / (n + rto_ramp_packets) x
p(w) x Q(w)`` timeouts (the ramp, :func:`counted_packets`: a step starts its flows' transfer anew, and a short one
ends before its windows fill the queue and lose, where the analysis counts every packet as if in steady congestion
avoidance; ``rto_ramp_packets`` 0 counts all ``n``), and per iteration

    stalls = steps x (1 - exp(-lam))          (at most one stall per ring step)
    tail_s = stalls x rto_min_s

Why the bound: the Reno analysis counts timeouts per packet, so alone it charges a job in proportion to its
packets, however many arrive in one ring step. A step-synchronous ring cannot stall more often than it has steps:
its flows send a step at once and the step ends when the last arrives, so a timeout of any of them holds the step
for ``rto_min_s`` and two in one step overlap rather than add (the flows restart together). ``1 - exp(-lam)`` is the
probability that a step sees at least one (timeouts independent, as the analysis has them): where ``lam`` is small
(the referee's ring steps of 4-40 packets, where ``rto_k`` was fitted) it is ``lam`` less at most a share ``lam / 2``:
the tail the analysis alone gave; where a step has thousands of packets (a 100 Gbit/s job) it saturates at one
stall per step instead of growing with the step's bytes, so the tail is at most ``steps x rto_min_s`` per iteration.

The tail is added to its communication after the solve, and to its iteration as far as its
overlapped compute cannot hide it (:mod:`~.exposed`), by the model
(:meth:`~.model.TcpNetwork.solve`, its incremental ``resolve``: each job's
share as last solved) and by :func:`~.scenarios.simulate_starts` (its mean
simulated period less its exposed compute), so the mean field's and the
fluid's answers carry the same tail. ``rto_k`` (0 for deep-buffer ``tcp``:
no term at all, the same answers) scales the theory to the timeouts a
referee counts: the formula assumes every flow sends all the time in
congestion avoidance, where ring steps are short bursts that mostly finish
before they lose, so it over-counts; ``benchmarks/bench_regimes_fit.py`` sets
it from the referee's calibration-half timeout *counts* (measured / predicted),
not from iteration times.
"""

from __future__ import annotations

import numpy as np


def link_timeouts_per_packet(capacity_gbps: np.ndarray, active_flows: np.ndarray, binding: np.ndarray,
                             p) -> np.ndarray:
    """Per link: expected timeouts per packet a flow sends, p(w) x Q(w) with w = (``rto_bdp_share`` x
    bandwidth-delay product + buffer) / active flows (module doc; ``p``: :class:`~.params.TcpParams`); 0 on a link
    that does not bind."""
    bdp = capacity_gbps * 1e9 * p.rtt_us * 1e-6 / (8.0 * p.segment_bytes)
    w = (p.rto_bdp_share * bdp + p.buffer_packets) / np.maximum(active_flows, 1.0)
    loss = np.minimum(1.0, 8.0 / (3.0 * w * w))
    timeout = np.minimum(1.0, 3.0 / w)
    return np.where(binding, loss * timeout, 0.0)


def demand_duty(d) -> float:
    """The share of its iteration alone a :class:`~netlab.network.model.CommDemand`'s flows send (a job's share
    before it has been solved)."""
    rate = d.alone_rate_gbps
    it = d.iter_s(rate)
    return d.net_s(rate) / it if it > 0 else 0.0


def solved_share(iter_s: float, comm_s: float) -> float:
    """A job's communicating share of its iteration as solved: ``comm_s / iter_s`` (0 for no iteration)."""
    return min(max(comm_s / iter_s, 0.0), 1.0) if iter_s > 0 else 0.0


def offered_and_active(demands, n_links: int, shares=None) -> tuple[np.ndarray, np.ndarray]:
    """Per link of ``n_links``: what its jobs offer at their isolated rates at once, and its flows sending at once
    (each weighted by its job's share of the iteration: ``shares[n]`` for the ``n``-th demand, as solved by
    :func:`solved_share`; without ``shares``, :func:`demand_duty`)."""
    offered, active = np.zeros(n_links), np.zeros(n_links)
    for n, d in enumerate(demands):
        np.add.at(offered, d.links, d.weights * d.alone_rate_gbps)
        np.add.at(active, d.links, d.weights * (demand_duty(d) if shares is None else shares[n]))
    return offered, active


def demands_tail_s(demands, capacity_gbps: np.ndarray, offered_gbps: np.ndarray, active_flows: np.ndarray,
                   p) -> list[float]:
    """Per demand (its ``links`` and ``weights`` index the per-link arrays), the expected timeout seconds per
    iteration (``p``: :class:`~.params.TcpParams`) on the links as given: ``offered_gbps`` (every job at its
    isolated rate) against ``capacity_gbps`` decides which bind (module doc)."""
    per_packet = link_timeouts_per_packet(capacity_gbps, active_flows, offered_gbps > capacity_gbps * (1 + 1e-9), p)
    return [p.rto_min_s * step_stalls(p.rto_k * float(np.dot(d.weights, per_packet[d.links]))
                                      * counted_packets(d.flow_bytes / (p.segment_bytes * max(d.steps, 1)),
                                                        p.rto_ramp_packets), max(d.steps, 1))
            for d in demands]


def counted_packets(packets_per_step: float, ramp_packets: float) -> float:
    """Of a ring step of ``packets_per_step`` packets per flow, the packets the timeout count counts:
    ``n x n / (n + ramp_packets)`` (module doc, the ramp; ``ramp_packets`` 0: all ``n``)."""
    n = packets_per_step
    if ramp_packets == 0.0:
        return n
    return n * n / (n + ramp_packets) if n > 0 else 0.0


def step_stalls(per_step: float, steps: int) -> float:
    """Expected stalls per iteration of a ring of ``steps`` ring steps that expects ``per_step`` timeouts in each
    (all its flows together): ``steps x (1 - exp(-per_step))``, the steps that see at least one (module doc: a
    step stalls once however many of its flows time out), at most ``steps``."""
    return steps * -np.expm1(-per_step)


def tail_s(demands, capacity_gbps: np.ndarray, p, shares=None) -> list[float]:
    """Per demand, the expected timeout seconds per iteration when ``demands`` are all the jobs on the links,
    each sending ``shares[n]`` of its iteration as solved (:func:`offered_and_active`)."""
    return demands_tail_s(demands, capacity_gbps, *offered_and_active(demands, len(capacity_gbps), shares), p)


def idle_demands(demands, tails: list[float]) -> list:
    """Each demand with its expected timeout seconds per iteration (``tails``, :func:`tail_s`) as time its job
    leaves the network idle: added to its serial time (``serial_intra_s``: communication that loads no link, as a
    ring step's latency is; its iteration on the ideal network follows), so that a solve of these demands counts the
    job's flows as sending a smaller share of its (longer) iteration. Why: a ring stalled in a retransmission
    timeout sends nothing on any of its links for ``rto_min_s``; the flows of the other jobs there get the link for
    that time. Added after the solve (the model's default), the tail lengthens the stalled job and leaves the others
    as slow as if it had kept sending; inside the solve (``rto_idle``), the others are as fast as its silence lets
    them be. A demand with no tail is returned as it is."""
    from dataclasses import replace

    out = []
    for d, t in zip(demands, tails):
        if t > 0.0:
            d = replace(d, serial_intra_s=d.serial_intra_s + t)
            d = replace(d, iso_iter_s=d.iter_s(d.iso_rate_gbps))
        out.append(d)
    return out
