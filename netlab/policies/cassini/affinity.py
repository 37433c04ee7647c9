"""CASSINI's affinity graph: one consistent shift per job across all its shared links.

Why: per-link optimisation gives each link its own best rotation, but a job
crossing several contended links can take only one phase. CASSINI links jobs
and contended links in a bipartite graph and walks it breadth-first from a
root job: each link, when first reached, places the jobs on it that have no
phase yet, relative to those that already have one (the link's own
optimisation, :func:`score.optimise`, with the placed jobs held). Every job
is thus placed exactly once.

Cycles: when the walk reaches a link all of whose jobs already have phases
(the edge that would close a cycle), that link is dropped from the walk:
the first assignment wins and the link is only scored, never used to move a
job. The dropped links are returned in ``Assignment.closing``.

Bounded walks: ``max_jobs`` caps how many jobs the walk may place (root
included). Jobs reached beyond the cap are *frozen*: they keep their current
phase and count as placed, and the walk does not continue through them. This
keeps a decision's cost independent of the size of a busy cluster's (often
cluster-wide) component, at the price of leaving far jobs where they are.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Callable, Mapping, Sequence

from ...network.circle import BINS, MAX_PERIODS
from .score import optimise


def contended(link_jobs: Mapping[int, Sequence[int]]) -> dict[int, tuple[int, ...]]:
    """Links carrying two or more jobs' traffic (the only ones where phases matter)."""
    return {l: tuple(js) for l, js in link_jobs.items() if len(js) >= 2}


def affinity_graph(link_jobs: Mapping[int, Sequence[int]]):
    """Bipartite graph (networkx): nodes ("job", id) and ("link", id), an edge when the job uses the contended
    link."""
    import networkx as nx

    g = nx.Graph()
    for l, js in contended(link_jobs).items():
        g.add_edges_from((("job", j), ("link", l)) for j in js)
    return g


@dataclass
class Assignment:
    phases: dict[int, float]  # every job reached (placed and frozen), as a fraction of its period
    order: list[int]  # jobs in the order the walk placed them (root first)
    closing: list[int] = field(default_factory=list)  # links dropped because all their jobs had phases
    frozen: set[int] = field(default_factory=set)  # jobs beyond max_jobs, left at their current phase
    link_scores: dict[int, float] = field(default_factory=dict)  # score of each link when it placed jobs


def assign_phases(root: int, link_jobs: Mapping[int, Sequence[int]], waves: Callable[[int], object],
                  capacity_gbps: Callable[[int], float] | Mapping[int, float], current: Mapping[int, float | None],
                  root_phase: float = 0.0, max_jobs: int | None = None, bins: int = BINS,
                  max_periods: int = MAX_PERIODS, job_links: Mapping[int, Sequence[int]] | None = None) -> Assignment:
    """Breadth-first phase assignment from ``root`` (held at ``root_phase``).

    ``link_jobs``: link -> jobs on it (links with fewer than two jobs are
    ignored); ``waves(link)``: the :class:`Wave` of each of those jobs, in
    that order (a list, or the (jobs, 4) array of :func:`score.as_array`);
    ``current``: running jobs' current phases (the starting point of the
    coordinate descent, and what frozen jobs keep). ``job_links`` (job ->
    links) may be passed to avoid inverting ``link_jobs``.
    """
    cap = capacity_gbps if callable(capacity_gbps) else capacity_gbps.__getitem__
    if job_links is None:
        inv: dict[int, list[int]] = {}
        for l, js in link_jobs.items():
            if len(js) >= 2:
                for j in js:
                    inv.setdefault(j, []).append(l)
        job_links = inv
    out = Assignment({root: root_phase % 1.0}, [root])
    queue, seen = deque([root]), set()
    while queue:
        u = queue.popleft()
        for l in sorted(job_links.get(u, ())):
            jobs = link_jobs[l]
            if l in seen or len(jobs) < 2:
                continue
            seen.add(l)
            free = [j for j in jobs if j not in out.phases]
            if not free:
                out.closing.append(l)
                continue
            room = len(free) if max_jobs is None else max(0, max_jobs - len(out.order))
            for j in free[room:]:
                out.phases[j] = (current.get(j) or 0.0) % 1.0
                out.frozen.add(j)
            free = free[:room]
            if not free:
                continue
            start = [out.phases.get(j, current.get(j)) for j in jobs]
            held = [i for i, j in enumerate(jobs) if j not in free]
            res = optimise(waves(l), cap(l), start, held, bins, max_periods)
            out.link_scores[l] = res.score
            for i, j in enumerate(jobs):
                if j in free:
                    out.phases[j] = res.phases[i]
                    out.order.append(j)
                    queue.append(j)
    return out
