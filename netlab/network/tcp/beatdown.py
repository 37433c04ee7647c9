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
(``benchmarks/bench_regimes_fit.py --beatdown``, ``regimes_fit.json['beatdown_grid']``).

In the model (``beatdown_beta`` of the ``tcp`` transports, :mod:`~.params`; 0: no term, and ``dctcp`` is registered
at 4 with its rate cut halved, the joint calibration grid's best): its ``solve`` is two
solves (:func:`beaten_solve`): the first gives each link's marked fraction, the weights follow, and the second
shares the links with them. The weights need each ring flow's own links, which the demand record carries
(``CommDemand.flow_paths``: per flow, its links and the share of it on each, found with its route); a demand
without them (a record built by hand, or by a path-choice policy that rebuilds it from summed links) gets
weight 1. In a simulation the model re-solves one of two ways (``beatdown_incremental``, :mod:`~.params`). By
default the incremental re-solve does the two solves per component a change touches (:mod:`~.beatdown_resolve`:
the weights of a component's jobs follow from that component's own first solve, since only binding links are
marked and binding links are what joins jobs into components), keeping each component's phase state as the
one-solve model does. Otherwise every running job goes through ``solve`` at each change: the model says it is
not incremental (:func:`beaten_capabilities`) and the fabric drives it through the generic interface
(:class:`~netlab.network.model.GenericIncremental`), each solve from no phase state (both on a fresh model), at
about three times the cost. The two ways differ by the exact components' phase state (params.py's figures);
on the mean field alone they agree to its tolerance, and a schedule's average JCT moves by a few percent with any
perturbation that small (params.py: one way's capacities x 1.0001 move it as much), so compare them over several.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Mapping, Sequence

import numpy as np


def flow_beatdown(links: np.ndarray, marked: np.ndarray, shares: np.ndarray | None = None) -> tuple[float, float]:
    """(price, beat-down ratio) of one flow over ``links`` (link ids into ``marked``, each link's marked
    fraction): the price is the sum of the marked fractions (each times the share of the flow on the link,
    ``shares``, under split ECMP: the expected sum over its paths), the ratio that over the largest (1 if none)."""
    q = marked[np.asarray(links, dtype=np.int64)]
    price = float(q.sum() if shares is None else (q * shares).sum())
    top = float(q.max()) if len(q) else 0.0
    return price, (price / top if top > 0.0 else 1.0)


def beatdown_weights(flows: Mapping[int, Sequence], marked: np.ndarray, beta: float) -> dict[int, float]:
    """Per job (``flows``: job id -> its ring flows, each its link ids or (link ids, share of the flow on each)),
    its share weight ``ratio ** -beta``, the ratio of its highest-priced flow (:func:`flow_beatdown`); 1 for a job
    with no marked link (or no flows given)."""
    out = {}
    for job, paths in flows.items():
        price, ratio = 0.0, 1.0
        for path in paths:
            p, r = flow_beatdown(path[0], marked, path[1]) if isinstance(path, tuple) else flow_beatdown(path, marked)
            if p > price:
                price, ratio = p, r
        out[job] = float(ratio ** -beta)
    return out


def beaten_capabilities(capabilities):
    """A model's ``capabilities`` with the beat-down term re-solved the batch way (``beatdown_incremental`` False):
    not incremental (the fabric drives it through :class:`~netlab.network.model.GenericIncremental`: every running
    job re-solved through ``solve`` at each change), no re-route in place, no phase moved and kept (module doc)."""
    return replace(capabilities, incremental=False, relinks=False, moves_phase=False)


def demand_flows(demands) -> dict[int, Sequence]:
    """Per job, its ring flows' paths (``CommDemand.flow_paths``: (link ids, share on each) per flow), empty for a
    demand that does not carry them (weight 1)."""
    return {d.job_id: (d.flow_paths or ()) for d in demands}


def solved_weights(model, demands, capacity_gbps: np.ndarray) -> dict[int, float]:
    """Per job of ``demands``, its beat-down weight (:func:`beatdown_weights` at ``model``'s ``beatdown_beta``)
    from the marked fractions (``queue_frac``) of one solve of a fresh ``model`` without the weights."""
    first = model.fresh().solve_once(demands, capacity_gbps)
    marked = np.zeros(len(capacity_gbps))
    if first.queue_frac is not None:
        marked[first.links] = first.queue_frac
    return beatdown_weights(demand_flows(demands), marked, model.params.beatdown_beta)


class Reweighted:
    """A job's allocation as the model reads it (``CommDemand.allocation``: duck-typed, see
    :mod:`netlab.network.model`) with its weight times the beat-down weight. The network layer reads the
    scheduler's ``NetAllocation`` through these attributes only, and never imports it (tests/test_layers.py);
    ``base`` None is the default allocation (class 0, weight 1, no cap, ECMP, the class's queue)."""

    __slots__ = ("base", "weight")

    def __init__(self, base, factor: float):
        self.base = base
        self.weight = (1.0 if base is None else float(base.weight)) * factor

    @property
    def priority(self) -> int:
        return 0 if self.base is None else self.base.priority

    @property
    def rate_cap_gbps(self):
        return None if self.base is None else self.base.rate_cap_gbps

    @property
    def paths(self):
        return None if self.base is None else self.base.paths

    @property
    def queue_of_its_own(self) -> bool:
        """As ``NetAllocation``'s: asked for, or implied by a weight other than 1."""
        return (self.base is not None and bool(self.base.own_queue)) or self.weight != 1.0

    def kinds(self) -> frozenset:
        """The base's kinds, and ``weight`` where the weight is not 1."""
        base = frozenset() if self.base is None else self.base.kinds()
        return (base | {"weight"}) if self.weight != 1.0 else (base - {"weight"})


def beaten_solve(model, demands, capacity_gbps: np.ndarray):
    """``model``'s solution of ``demands`` with the beat-down weights (module doc): :func:`solved_weights`, then a
    second solve of a fresh model sharing the links with every job's allocation weight times its beat-down weight
    (:class:`Reweighted`). A weight other than 1 also gives a job a queue of its own (``queue_of_its_own``), which
    in ``tcp`` only drops its leader advantage: nothing for ``dctcp`` (lead 0), but a model with a lead would need
    the weight passed another way. The second solve's exact and mean-field counts are added to ``model``'s."""
    weights = solved_weights(model, demands, capacity_gbps)
    weighted = [d if weights[d.job_id] == 1.0 else replace(d, allocation=Reweighted(d.allocation, weights[d.job_id]))
                for d in demands]
    second = model.fresh()
    out = second.solve_once(weighted, capacity_gbps)
    model.exact_solves += second.exact_solves
    model.mean_field_solves += second.mean_field_solves
    return out
