"""The DCTCP rate-cut term: what a long transfer loses to ECN window cuts on a binding link.

Why: a DCTCP sender that sees marks in a window cuts its window by
``alpha_m / 2``, ``alpha_m`` its running fraction of marked packets. Held at
the switch's marking threshold by ``a`` flows sending at once, each flow's
window at its share is ``w = (BDP + K) / a`` packets (the link's
bandwidth-delay product at ``rtt_us`` plus the ``K = buffer_packets``
threshold, as :mod:`~.rto` counts a shallow queue), and at that window the
marked fraction settles at ``alpha_m = sqrt(2 / w)`` (Alizadeh et al.,
SIGCOMM 2010, section 3.3). Its window then saw-tooths between
``w (1 - alpha_m / 2)`` and ``w``: on average ``alpha_m / 4`` below its share.
A ring step of ``c`` packets spends its first window at its share, before any
cut answers the marks, and only the rest, ``max(0, 1 - w / c)`` of it, below:
a short step finishes before it is cut, a long one spends most of its time
cut. Work-conserving fluid sharing knows no cut, so every job of a DCTCP
fabric would run as if at its share; on the referee's DCTCP calibration half
the model's signed error grows with a job's bytes per ring step (the referee
slows long steps more). Per iteration, on the job's tightest binding link
(flows counted at their shares of the iteration as solved,
:func:`~.rto.offered_and_active`):

    cut_s = cut_k x alpha_m / 4 x max(0, 1 - w / c) x its network seconds as solved

added to its communication after the solve, and to its iteration as far as its
overlapped compute cannot hide it (:mod:`~.exposed`), where the
timeout tail is (:mod:`~.rto`), by the batch solve, the incremental
``resolve`` and :func:`~.scenarios.simulate_starts` alike, so the mean
field's and the fluid's answers carry the same term. ``c`` is the job's
flow bytes per iteration over its ring steps (``CommDemand.steps``) in
``segment_bytes`` packets. ``cut_k`` scales the analysis (fitted on the
referee's calibration half, ``benchmarks/bench_regimes_fit.py``); 0 for every
transport without ECN: no term, the same answers.
"""

from __future__ import annotations

import numpy as np

from .rto import offered_and_active


def demands_cut_s(demands, capacity_gbps: np.ndarray, offered_gbps: np.ndarray, active_flows: np.ndarray,
                  net_s, p) -> list[float]:
    """Per demand (its ``links`` and ``weights`` index the per-link arrays; ``net_s[n]``: its network seconds per
    iteration as solved), the rate-cut seconds per iteration (module doc; ``p``: :class:`~.params.TcpParams`).
    ``offered_gbps`` (every job at its isolated rate) against ``capacity_gbps`` decides which links bind."""
    binding = offered_gbps > capacity_gbps * (1 + 1e-9)
    bdp = capacity_gbps * 1e9 * p.rtt_us * 1e-6 / (8.0 * p.segment_bytes)
    window = (bdp + p.buffer_packets) / np.maximum(active_flows, 1.0)
    out = []
    for d, t in zip(demands, net_s):
        on = d.links[binding[d.links]]
        if not len(on) or t <= 0.0:
            out.append(0.0)
            continue
        w = float(window[on].min())
        marked = min(1.0, np.sqrt(2.0 / w))
        step_packets = d.flow_bytes / max(int(d.steps), 1) / p.segment_bytes
        out.append(p.cut_k * marked / 4.0 * max(0.0, 1.0 - w / step_packets) * t)
    return out


def cut_s(demands, capacity_gbps: np.ndarray, p, shares, net_s) -> list[float]:
    """Per demand, the rate-cut seconds per iteration when ``demands`` are all the jobs on the links, each
    sending ``shares[n]`` of its iteration for ``net_s[n]`` seconds as solved."""
    return demands_cut_s(demands, capacity_gbps, *offered_and_active(demands, len(capacity_gbps), shares), net_s, p)
