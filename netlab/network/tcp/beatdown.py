"""DCTCP's multi-bottleneck beat-down: a flow marked at two queues gets less than the smaller of its shares.

Why: a DCTCP sender cuts its window by the fraction of its packets marked, and a flow whose path crosses
two marking queues is marked at both (its marked fraction is about the sum of theirs), while the flows
crossing one of them are marked at that one only; its round trip also holds both queues. At equilibrium its
window is smaller than theirs by about the ratio of the marks, and its rate by that again through the
longer round trip: it gets less than the smaller of its two links' shares, and the flows beside it on each
link take the rest. The ``tcp`` fluid gives a flow the smallest of its links' levels (water-filling), so it
over-predicts the jobs that cross one marking queue and under-predicts those whose slowest flow crosses
two. Found in the referee, not assumed: in the traced DCTCP run of the calibration half's worst 8:1
scenario (2tier-overlap seed 18, ``netlab.validate.trace``) the six flows that cross both of the two
hottest queues (an uplink and a downlink marking 22% and 27% of their arrivals) take their ring steps
16-46x as long as alone (median 25x), the flows crossing one of them 2-11x (median 2.9x); over the
calibration half's 8:1 jobs the number of a job's flows crossing two loaded links correlates with the
model's error at Spearman -0.44 (every per-job feature tried before: at most 0.22).

The term, as a share weight per job (:func:`beatdown_weights`): each of the job's ring flows has a price,
the sum of the marked fractions ``q`` of the links it crosses (the model's ``queue_frac``: the share of
time a link is queued above its marking threshold); the flow with the highest price limits the job, and
the job's weight is ``(its price / the largest q on its path) ** -beta``: 1 for a flow whose price is one
link's, ``2 ** -beta`` for one crossing two equally marked links. ``beta`` about 2 is the analysis (window
by the marks, rate by the round trip); the referee's calibration half chooses it
(``benchmarks/bench_regimes_fit.py --beatdown``). Not yet part of any model's solve: it needs the solved
marking to set the weights (two solves), and a simulation's incremental re-solves would need it per entry
inside the mean field; ``regimes_fit.json['beatdown_grid']`` records what it would do.
"""

from __future__ import annotations

from typing import Mapping, Sequence

import numpy as np


def flow_beatdown(links: np.ndarray, marked: np.ndarray) -> tuple[float, float]:
    """(price, beat-down ratio) of one flow over ``links`` (link ids into ``marked``, each link's marked
    fraction): the price is the sum of the marked fractions, the ratio that over the largest (1 if none)."""
    q = marked[np.asarray(links, dtype=np.int64)]
    price, top = float(q.sum()), float(q.max()) if len(q) else 0.0
    return price, (price / top if top > 0.0 else 1.0)


def beatdown_weights(flows: Mapping[int, Sequence[np.ndarray]], marked: np.ndarray, beta: float) -> dict[int, float]:
    """Per job (``flows``: job id -> its ring flows' link ids), its share weight ``ratio ** -beta``, the ratio
    of its highest-priced flow (:func:`flow_beatdown`); 1 for a job with no marked link."""
    out = {}
    for job, paths in flows.items():
        price, ratio = 0.0, 1.0
        for links in paths:
            p, r = flow_beatdown(links, marked)
            if p > price:
                price, ratio = p, r
        out[job] = float(ratio ** -beta)
    return out


def beatdown_solve(network, demands, capacity_gbps: np.ndarray, flows: Mapping[int, Sequence[np.ndarray]],
                   beta: float):
    """``network``'s solution with the beat-down weights (a prototype, module doc): a first solve gives each link's
    marked fraction (``queue_frac``), :func:`beatdown_weights` each job's weight from it, and a second solve of
    ``network.fresh()`` shares the links with every job's allocation weight times its beat-down weight. A weight
    other than 1 also gives a job a queue of its own (``NetAllocation.queue_of_its_own``), which in ``tcp`` only
    drops its leader advantage: nothing for ``dctcp`` (lead 0), but a model with a lead would need the weight
    passed another way."""
    from dataclasses import replace

    from ...sched.allocation import NetAllocation

    first = network.fresh().solve(demands, capacity_gbps)
    marked = np.zeros(len(capacity_gbps))
    if first.queue_frac is not None:
        marked[first.links] = first.queue_frac
    weights = beatdown_weights(flows, marked, beta)
    weighted = [replace(d, allocation=replace(d.allocation or NetAllocation(),
                                              weight=(d.allocation.weight if d.allocation else 1.0)
                                              * weights[d.job_id]))
                for d in demands]
    return network.fresh().solve(weighted, capacity_gbps)
