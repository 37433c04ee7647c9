"""Per-decision cache: running jobs' waves on each link, laid out once at their current phases.

Why: a decision scores several candidates, and busy links (a ToR uplink
carries dozens of jobs) are shared by most of them. Each link's running
jobs are laid out once per decision on a grid whose step is set by their
longest period, ``max_periods x bins`` bins long: any unified circle with
that step is a prefix of it (see :mod:`.score`). A new job whose period is
not longer than the link's longest then only adds its own row; a longer one
changes the step, and the link is recomputed from scratch (same result,
slower path).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .index import LinkIndex
from ...network.circle import circle_bins
from .score import all_shifts, base_profiles, evaluate, excess, layout, scan, score_of, to_shifts, wave_row


@dataclass
class Layout:
    jobs: tuple[int, ...]
    waves: np.ndarray  # (jobs, 4)
    phases: list[float]
    step_s: float
    max_period_s: float
    counts: np.ndarray
    bins: int  # the running jobs' own circle
    profiles: np.ndarray
    rows: np.ndarray  # (jobs, grid) at current phases
    total: np.ndarray  # (grid,)


class Decision:
    def __init__(self, view, index: LinkIndex, bins: int, max_periods: int):
        self.index, self.running = index, view.running
        self.capacity = view.topology.link_capacity_gbps
        self.bins, self.max_periods, self.grid = bins, max_periods, bins * max_periods
        self.phase = {j: view.phase(j) for j in view.running}  # where each job is now, not where it started
        self._rows: dict[int, np.ndarray] = {}
        self._layouts: dict[int, Layout] = {}
        self._current: dict[int, float] = {}

    def waves(self, link: int, root: np.ndarray | None = None) -> np.ndarray:
        """(jobs, 4) waves of the running jobs on ``link`` (weights applied), plus ``root`` last if given."""
        jobs = self.index.link_jobs.get(link, ())
        rows = []
        for j in jobs:
            r = self._rows.get(j)
            if r is None:
                js = self.running[j]
                r = self._rows[j] = wave_row(js.demand, js.iter_s)
            rows.append(r)
        arr = np.array(rows).reshape(-1, 4)
        arr[:, 3] *= self.index.link_weights[link] if jobs else 1.0
        return arr if root is None else np.vstack([arr, root[None, :]])

    def layout(self, link: int) -> Layout:
        lay = self._layouts.get(link)
        if lay is None:
            jobs = self.index.link_jobs[link]
            arr = self.waves(link)
            top = float(arr[:, 0].max())
            step = top / self.bins
            counts = np.maximum(1, np.rint(arr[:, 0] / step)).astype(np.int64)
            prof = base_profiles(arr, step, counts)
            phases = [self.phase[j] for j in jobs]
            rows = layout(prof, counts, to_shifts(phases, counts), self.grid)
            lay = Layout(jobs, arr, phases, step, top, counts, circle_bins(counts, self.grid)[0], prof, rows,
                         rows.sum(axis=0))
            self._layouts[link] = lay
        return lay

    def _root_fits(self, lay: Layout, root: np.ndarray) -> bool:
        return root[0] <= lay.max_period_s * (1 + 1e-12)

    def root_scan(self, link: int, root: np.ndarray) -> tuple[np.ndarray, int]:
        """Scores for every shift of the new job (running jobs at current phases) and its count on the circle."""
        lay = self.layout(link)
        cap = float(self.capacity[link])
        if not self._root_fits(lay, root):
            sc, circle = scan(self.waves(link, root), cap, lay.phases + [None], len(lay.jobs), self.bins,
                              self.max_periods)
            return sc, int(circle.counts[-1])
        c = max(1, int(np.rint(root[0] / lay.step_s)))
        B = circle_bins([c], self.grid, start=lay.bins)[0]
        prof = base_profiles(root[None, :], lay.step_s, np.array([c]))[0]
        return score_of(excess(all_shifts(prof, c, B) + lay.total[:B], cap), B, cap), c

    def score_at(self, link: int, moved: dict[int, float], root: np.ndarray | None = None,
                 root_phase: float = 0.0) -> float:
        """Score of ``link`` with the ``moved`` running jobs at new phases (and the new job, if given)."""
        lay = self.layout(link)
        cap = float(self.capacity[link])
        if root is not None and not self._root_fits(lay, root):
            phases = [moved.get(j, p) for j, p in zip(lay.jobs, lay.phases)] + [root_phase]
            return evaluate(self.waves(link, root), cap, phases, self.bins, self.max_periods)
        total = lay.total
        idx = [i for i, j in enumerate(lay.jobs) if j in moved]
        if idx:
            sh = to_shifts([moved[lay.jobs[i]] for i in idx], lay.counts[idx])
            total = total - lay.rows[idx].sum(axis=0) + layout(lay.profiles[idx], lay.counts[idx], sh, self.grid).sum(0)
        B = lay.bins
        if root is not None:
            c = max(1, int(np.rint(root[0] / lay.step_s)))
            B = circle_bins([c], self.grid, start=lay.bins)[0]
            prof = base_profiles(root[None, :], lay.step_s, np.array([c]))
            total = total[:B] + layout(prof, np.array([c]), to_shifts([root_phase], np.array([c])), B)[0]
        return float(score_of(excess(total[:B], cap), B, cap))

    def current_score(self, link: int) -> float:
        if link not in self._current:
            self._current[link] = self.score_at(link, {})
        return self._current[link]
