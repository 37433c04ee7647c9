"""``crux``: communication scheduling by GPU intensity (Cao et al., "Crux", SIGCOMM 2024).

A job's GPU intensity is the compute it does per iteration over the time its
traffic needs on its most loaded link, ``I_j = W_j / t_j`` with
``t_j = max_e M_{j,e} / B_e`` (``M_{j,e}``: the bits the job puts on link
``e`` per iteration, ``B_e`` its capacity). Here ``W_j`` is GPU-seconds of
compute per iteration (the job's GPUs times the model's per-GPU compute time),
netlab's stand-in for FLOPs. Crux serves high-intensity jobs first: their
GPUs lose the most work per second of waiting on the network.

1. **Path selection**: jobs are taken from the highest intensity down; each
   flow takes the equal-cost path on which it would finish first given the
   flows already placed (the least, over candidate paths, of the path's most
   loaded link in seconds of traffic, counting this flow; ties to the lower
   index). A job therefore avoids the links of the jobs above it.
2. **Priority**: ``P_j = k_j * I_j``; the paper tunes ``k_j`` for a job's
   overlap of compute and communication, here ``k_j = 1`` (stated, not
   measured).
3. **Compression to 8 classes**: jobs in priority order that share a link
   (after path selection) form a contention graph; an edge weighs the
   intensity of its higher-priority job (what that job's GPUs lose while it
   shares instead of going first). The order is cut into at most ``classes``
   contiguous classes so that the weight of edges left inside a class is the
   least (dynamic programming over the cut points, exact; :func:`compress`).
   Class 0 is served first.

``crux-paths`` is path selection alone (every job in class 0): the part of
Crux that needs no priority support from the network.
"""

from __future__ import annotations

import numpy as np

from ...jit import njit
from ...sched import NetAllocation
from ...sched.allocation import PRIORITY_CLASSES
from ...sched.routes import job_flows
from ..base import NETWORK_POLICIES, NetworkPolicy

GBIT = 1e9


def gpu_intensity(gpu_compute_s: float, flow_bytes: float, links, weights, capacity_gbps) -> float:
    """``W / max_e(M_e / B_e)``: GPU-seconds of compute per second of traffic on the job's busiest link."""
    t = float(np.max(flow_bytes * 8 * np.asarray(weights) / (np.asarray(capacity_gbps)[links] * GBIT)))
    return gpu_compute_s / t if t > 0 else float("inf")


def compress(weights: np.ndarray, classes: int = PRIORITY_CLASSES) -> list[int]:
    """Cut jobs in priority order (highest first) into at most ``classes`` contiguous classes, least weight inside.

    ``weights[a, b]`` (``a < b``; the rest is ignored) is the contention weight of jobs ``a`` and ``b``. Returns
    each job's class (0 first). Exact: ``best[k, j]`` is the least inside-weight of the first ``j`` jobs in ``k``
    classes; ties go to fewer classes, then to the earlier cut.
    """
    n = len(weights)
    if n == 0:
        return []
    a = np.triu(np.asarray(weights, dtype=float), 1)
    # inside[i, j]: weight of edges among jobs i..j-1 = sum over a >= i of (sum over b < j of A[a, b]).
    c = np.concatenate([np.zeros((n, 1)), np.cumsum(a, axis=1)], axis=1)
    inside = np.cumsum(c[::-1], axis=0)[::-1]
    inside = np.vstack([inside, np.zeros((1, n + 1))])
    k_max = min(classes, n)
    best, cut = _cuts(inside, k_max, n)
    k = 1 + int(np.argmin(best[1:, n]))  # the fewest classes reaching the least weight
    out, j = [0] * n, n
    while k >= 1:
        i = cut[k, j] if k > 1 else 0
        for m in range(i, j):
            out[m] = k - 1
        j, k = i, k - 1
    return out


@njit(cache=True)
def _cuts(inside, k_max, n):  # pragma: no cover  (compiled; tested through compress)
    """``best[k, j]``: least inside-weight of the first ``j`` jobs in ``k`` classes; ``cut[k, j]``: where the
    last class starts (the first of equal candidates, as ``np.argmin``)."""
    best = np.full((k_max + 1, n + 1), np.inf)
    cut = np.zeros((k_max + 1, n + 1), dtype=np.int64)
    for j in range(1, n + 1):
        best[1, j] = inside[0, j]
    for k in range(2, k_max + 1):
        for j in range(k, n + 1):
            b, at = np.inf, k - 1
            for i in range(k - 1, j):
                v = best[k - 1, i] + inside[i, j]
                if v < b:
                    b, at = v, i
            best[k, j], cut[k, j] = b, at
    return best, cut


@NETWORK_POLICIES.register("crux")
class CruxPolicy(NetworkPolicy):
    """Crux: GPU-intensity path selection and priorities compressed to 8 classes (SIGCOMM 2024)."""

    name = "crux"
    priorities = True

    def __init__(self, classes: int = PRIORITY_CLASSES):
        if not 1 <= classes <= PRIORITY_CLASSES:
            raise ValueError(f"crux: classes must be 1..{PRIORITY_CLASSES}, got {classes!r}")
        self.classes = classes
        self.reset(np.random.default_rng(0))

    def reset(self, rng: np.random.Generator) -> None:
        """A new run: forget what was memoised about the last one's topology and jobs."""
        self.rng = rng
        self._paths: dict = {}
        self._jobs: dict = {}  # job id -> (its demand, its intensity, (candidates, seconds) per flow)
        self._last: tuple = ((), {})  # (the (job id, demand) pairs decided on, the decision)

    def _candidates(self, topology, s: int, d: int) -> np.ndarray:
        """A flow's equal-cost paths as an array (paths x hops) of link ids (equal cost: equal hops)."""
        hit = self._paths.get((s, d))
        if hit is None:
            hit = self._paths[(s, d)] = np.array(topology.paths(s, d), dtype=np.int64)
        return hit

    def _job(self, view, js):
        """(intensity, per flow its candidate paths and their links' seconds of its traffic), memoised while the
        job keeps its demand (a new placement or new paths give it a new one)."""
        hit = self._jobs.get(js.job_id)
        if hit is not None and hit[0] is js.demand:
            return hit[1], hit[2]
        topo, d, p = view.topology, js.demand, js.placement
        cap = topo.link_capacity_gbps
        intensity = gpu_intensity(js.gpus * d.compute_s, d.flow_bytes, d.links, d.weights, cap)
        pairs, fweights = job_flows(view.zoo[js.job.model], js.job.pattern, p.hosts, p.gpus)
        flows = []
        for (s, t), w in zip(pairs, fweights):
            cand = self._candidates(topo, s, t)
            flows.append((cand, d.flow_bytes * 8 * w / (cap[cand] * GBIT)))
        self._jobs[js.job_id] = (d, intensity, flows)
        return intensity, flows

    def allocate(self, view):
        """The decision depends only on the running jobs that have traffic and their demands: while those stay
        the same (a pass that started or stopped one-host jobs), the last decision is returned again."""
        now = [(jid, js.demand) for jid, js in view.running.items() if js.demand is not None]
        seen, last = self._last
        if len(seen) == len(now) and all(a[0] == b[0] and a[1] is b[1] for a, b in zip(seen, now)):
            return dict(last)
        active = sorted((jid, view.running[jid]) for jid, d in now if d.flow_bytes)
        for gone in self._jobs.keys() - {jid for jid, _ in active}:
            del self._jobs[gone]
        topo = view.topology
        jobs = []
        for jid, js in active:
            intensity, flows = self._job(view, js)
            jobs.append((-intensity, jid, flows))
        jobs.sort(key=lambda x: (x[0], x[1]))
        load_s = np.zeros(topo.n_links)  # seconds of traffic per iteration placed on each link so far
        used: list[np.ndarray] = []
        choices: list[tuple[int, ...]] = []
        for _, _, flows in jobs:
            picks, links = [], []
            for cand, t in flows:
                k = int(np.argmin((load_s[cand] + t).max(axis=1))) if len(cand) > 1 else 0
                load_s[cand[k]] += t[k]
                picks.append(k)
                links.append(cand[k])
            choices.append(tuple(picks))
            used.append(np.unique(np.concatenate(links)))
        classes = [0] * len(jobs)
        if self.priorities and len(jobs) > 1:
            classes = compress(contention(used, [-x[0] for x in jobs], topo.n_links), self.classes)
        # a job whose every flow has one path keeps the fabric's routing (the same links): nothing to re-route
        out = {jid: NetAllocation(priority=c, paths=paths if any(len(cand) > 1 for cand, _ in flows) else None)
               for (_, jid, flows), paths, c in zip(jobs, choices, classes)}
        self._last = (now, out)
        return dict(out)


@NETWORK_POLICIES.register("crux-paths")
class CruxPathsPolicy(CruxPolicy):
    """Crux's GPU-intensity path selection alone (every job in class 0: needs no priority support)."""

    name = "crux-paths"
    priorities = False


def contention(used: list[np.ndarray], intensity: list[float], n_links: int) -> np.ndarray:
    """Jobs (in priority order) that share a link: ``w[a, b]`` (a < b) = ``intensity[a]``, else 0."""
    n = len(used)
    inc = np.zeros((n, n_links), dtype=bool)
    for j, links in enumerate(used):
        inc[j, links] = True
    share = (inc.astype(np.int32) @ inc.T.astype(np.int32)) > 0
    w = np.where(share, np.asarray(intensity, dtype=float)[:, None], 0.0)
    return np.triu(w, 1)
