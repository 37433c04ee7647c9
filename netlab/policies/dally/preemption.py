"""Dally's network-sensitive preemption, bounded so no job is preempted without end.

Why: delay scheduling alone leaves a sensitive job waiting while less
sensitive, lower-priority jobs sit on the one host (or rack) that would
consolidate it. Displacing them costs their checkpoint/restore time (charged
by the simulator) but can save the sensitive job a long slowed-down run
(Dally, Sharma et al. 2024).

Rule (the simulator hands the running jobs ranked below ``job``, worst first):

* enough GPUs free, but the placement declined them (the job waits for
  locality): *locality preemption*, the preemption Dally adds. Only if the
  job's best level is host or rack and its sensitivity is at least
  ``min_sensitivity``; victims must be strictly less sensitive, preempted
  fewer than ``max_preemptions`` times so far and running for at least
  ``min_run_s`` since their last start. The victims are the cheapest set,
  taken worst-ranked first per unit, that lets one host (or one rack) hold
  the job: for every unit the worst-ranked eligible jobs on it until its
  free GPUs reach the job's size; the unit displacing the fewest GPUs wins
  (ties: fewer victims, lower index). The bound is the starvation guard for
  this rule: no job is displaced for someone else's locality more than
  ``max_preemptions`` times in all;
* GPUs short: the preemption Tiresias makes anyway (a better-ranked job
  needs GPUs). Dally only chooses *which* victims: the same consolidating
  choice among candidates running for at least ``min_run_s`` when one
  exists, else exactly Tiresias' victims
  (:class:`~netlab.policies.preemption.priority.ByPriority`). No bound here:
  Tiresias' own starvation guard (promotion back to queue 0) covers it.

Why the bound is not applied to GPUs-short preemptions: on Philly, Tiresias
itself preempts 33 of the first 2,000 jobs 8 times or more (long jobs sink
and every arrival displaces them). With the bound on every preemption those
jobs became unpreemptable wherever they happened to run, often scattered,
and in effect outranked every other job: Dally's 2-8 GPU jobs spread over
3.36 hosts against consolidated Tiresias' 2.30, and its average JCT was 60%
worse (Philly 4:1, first 2,000 jobs, dev seed 0). Bounding only the locality
preemptions: 2.20 hosts, 8% worse (see the repro notebook for the rest).

Only the first ``max_scan`` eligible candidates are considered for
consolidation, which bounds the cost per decision. Eligibility is checked
at scheduling passes; the policy adds no events of its own, so a victim that
becomes eligible (``min_run_s`` elapsed) is displaced at the next pass, not
at that instant.
"""

from __future__ import annotations

from itertools import chain, islice

from ...sensitivity import job_sensitivity
from ..base import PREEMPTION, PreemptionPolicy
from ..preemption.priority import ByPriority
from ...topology.info import ANY, HOST, topo_info

DEFAULT_MAX_PREEMPTIONS = 8


@PREEMPTION.register("dally")
class NetworkPreemption(PreemptionPolicy):
    """Sensitive jobs displace less-sensitive, lower-ranked ones to get one host/rack; bounded per job."""

    name = "dally"

    def __init__(self, max_preemptions: int = DEFAULT_MAX_PREEMPTIONS, min_run_s: float = 60.0,
                 min_sensitivity: float = 0.05, max_scan: int = 64):
        if max_preemptions < 0 or min_run_s < 0 or max_scan < 1:
            raise ValueError("need max_preemptions >= 0, min_run_s >= 0 and max_scan >= 1")
        self.max_preemptions = int(max_preemptions)
        self.min_run_s = float(min_run_s)
        self.min_sensitivity = float(min_sensitivity)
        self.max_scan = int(max_scan)

    def has_run(self, c, now: float) -> bool:
        """Has ``c`` run at least ``min_run_s`` since its last start?"""
        return c.last_start_s is None or now - c.last_start_s >= self.min_run_s

    def eligible(self, c, now: float) -> bool:
        """May ``c`` be displaced for another job's locality now? (the starvation bound)"""
        return c.preemptions < self.max_preemptions and self.has_run(c, now)

    def victims(self, job, candidates, view):
        topo = view.topology
        best = topo_info(topo).best_level(job.gpus)
        now = view.now
        if job.gpus <= view.total_free:  # the placement declined enough free GPUs: locality preemption
            if best == ANY:
                return []
            s = job_sensitivity(job, topo, view.zoo)
            if s < self.min_sensitivity:
                return []
            pool = (c for c in candidates if self.eligible(c, now) and job_sensitivity(c, topo, view.zoo) < s)
            return consolidating_victims(job, list(islice(pool, self.max_scan)), view, best)
        seen, ran = [], []  # GPUs short: Tiresias' preemption, with victims chosen for locality if possible
        if best < ANY:
            for c in candidates:
                seen.append(c)
                if self.has_run(c, now):
                    ran.append(c)
                    if len(ran) == self.max_scan:
                        break
            chosen = consolidating_victims(job, ran, view, best)
            if chosen:
                return chosen
        return ByPriority().victims(job, chain(seen, candidates), view)


def consolidating_victims(job, pool: list, view, level: int) -> list:
    """The cheapest worst-first victim set from ``pool`` that frees one host (``level`` HOST) or one rack for ``job``.

    Per unit (host or rack), the pool's jobs on it in pool order until the
    unit's free GPUs reach ``job.gpus``; the unit displacing the fewest GPUs
    wins (ties: fewer victims, then lower unit index). [] if none can.
    """
    if not pool:
        return []
    topo = view.topology
    n = job.gpus
    if level == HOST:
        unit_of = None
        free = view.free_gpus
        cap = topo.host_gpus
    else:
        unit_of = topo.host_rack
        free = view.rack_free()
        cap = topo_info(topo).rack_gpus
    on_unit: dict[int, list] = {}  # unit -> [(victim, its GPUs there)] in pool order
    for c in pool:
        here: dict[int, int] = {}
        for h, g in zip(c.placement.hosts, c.placement.gpus):
            u = h if unit_of is None else int(unit_of[h])
            here[u] = here.get(u, 0) + g
        for u, g in here.items():
            on_unit.setdefault(u, []).append((c, g))
    best_key, best = None, []
    for u, items in on_unit.items():
        if cap[u] < n:
            continue
        have, chosen, displaced = int(free[u]), [], 0
        for c, g in items:
            if have >= n:
                break
            chosen.append(c)
            have += g
            displaced += c.gpus
        if have >= n and chosen:
            key = (displaced, len(chosen), u)
            if best_key is None or key < best_key:
                best_key, best = key, chosen
    return best
