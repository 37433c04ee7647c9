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
   index). A job therefore avoids the links of the jobs above it. A flow that
   already has a path keeps it unless another finishes it more than
   :data:`PATH_MARGIN` (20%) sooner: a re-pick that gains less than that is
   mostly the loads' churn (jobs starting and ending elsewhere, ties), and
   each move costs the network a re-route (hysteresis).
2. **Priority**: ``P_j = k_j * I_j``; the paper tunes ``k_j`` for a job's
   overlap of compute and communication, here ``k_j = 1`` (stated, not
   measured).
3. **Compression to 8 classes**: jobs in priority order that share a link
   (after path selection) form a contention graph; an edge weighs the
   intensity of its higher-priority job (what that job's GPUs lose while it
   shares instead of going first). The order is cut into at most ``classes``
   contiguous classes so that the weight of edges left inside a class is the
   least (dynamic programming over the cut points, exact; :func:`compress`).
   Class 0 is served first. A group of jobs joined by shared links keeps its
   old classes unless they serve a job after a less intensive one it shares a
   link with, or leave more than :data:`CLASS_MARGIN` (50%) more contention
   weight inside classes than the new ones (:func:`_kept_classes`;
   hysteresis, as for paths). Only the order of two jobs on a link changes a
   rate, and the compression moves its cuts for a small gain whenever a job
   above starts or ends: each move costs the network a re-class. Old classes
   that order every shared pair as the new ones do (a job alone on its links,
   for one) are kept at any margin.

A job's intensity and candidate paths are taken once per placement (its
intensity from the fabric's own routing when it starts), so the order does
not change with the paths crux itself gives it.

**When**: every running job is decided afresh (steps 1-3) at most once per
``redecide_s`` (:data:`REDECIDE_S`), at the first change of the running jobs
after it. In between, a job that starts is fitted in: its flows pick paths as
step 1 does, against every running job's load at its current paths, and it
takes the class of the job just above it in intensity (class 0 if none); the
jobs already running keep their paths and classes, and jobs that end change
nothing for the others. Each decision that moves a running job costs the
network a re-route or a re-solve (and the simulator a pass over the moves),
and at every change most of them would be moved by a few per cent of load (a
new job above them, one that ended): the period bounds that churn. It is long
beside a change of the running jobs (minutes) and short beside the hours a
trace's multi-host jobs run. ``redecide_s=0`` decides everything at every
change.

``crux-paths`` is path selection alone (every job in class 0): the part of
Crux that needs no priority support from the network.
"""

from __future__ import annotations

import bisect
from typing import NamedTuple

import numpy as np

from ...jit import njit
from ...sched import NetAllocation
from ...sched.allocation import PRIORITY_CLASSES
from ...sched.routes import placement_paths
from ..base import NETWORK_POLICIES, NetworkPolicy
from .decided import DecidedTable

GBIT = 1e9
#: a flow moves off its path only to one that finishes it this much sooner (a fraction of the seconds on its
#: busiest link); below it the old path is kept. Each move costs the network a re-route (a leave and a join).
#: Chosen on Philly's first 20k jobs and the Crux setup's seeds 5 and 6 (not the five crux.json reports):
#: 0.05 -> 0.2 cut the re-routes there from 23.4k to 8.8k with average JCT 90.5k -> 90.8k s (no policy: 92.4k s)
#: and GPU utilisation unchanged on seeds 5 and 6 (+4.55%, +5.23% over consolidated at both margins)
PATH_MARGIN = 0.2
#: the running jobs are decided afresh at most once per this many seconds (0: at every change; see the module doc).
#: Chosen with CLASS_MARGIN on Philly's first 20k jobs and the Crux setup's seeds 5 and 6 (not the five crux.json
#: reports): 300 -> 1800 s and a class margin 0 -> 0.5 cut the decisions afresh there from 2,103 to 900, re-routes
#: 8,779 -> 5,465, class changes 14,031 -> 5,919 (fit-ins 3,609 -> 4,574), average JCT 90.8k -> 88.6k s (at 900 s
#: alone: 86.3k; no policy: 92.4k), GPU utilisation over consolidated unchanged on seeds 5 and 6 (+4.55%, +5.23%)
REDECIDE_S = 1800.0
#: a group of jobs keeps its classes unless the new ones leave less than 1 / (1 + this) of the old ones' contention
#: weight inside classes (or the old ones invert a shared pair); chosen with REDECIDE_S (its comment)
CLASS_MARGIN = 0.5


def gpu_intensity(gpu_compute_s: float, flow_bytes: float, links, weights, capacity_gbps) -> float:
    """``W / max_e(M_e / B_e)``: GPU-seconds of compute per second of traffic on the job's busiest link."""
    links = np.asarray(links, dtype=np.int64)
    if len(links) == 0:
        raise ValueError("crux: the GPU intensity of a job on no link")
    t = _busiest_s(float(flow_bytes) * 8, np.asarray(weights, dtype=np.float64), links,
                   np.asarray(capacity_gbps, dtype=np.float64))
    return gpu_compute_s / t if t > 0 else float("inf")


@njit(cache=True)
def _busiest_s(bits, weights, links, capacity):  # pragma: no cover  (compiled; tested through gpu_intensity)
    """The most seconds of traffic on one of ``links``: ``bits x weights[k] / (capacity[links[k]] x 1e9)``, the
    products and quotients numpy took entry by entry, in one call (a job's start made five numpy operations)."""
    t = bits * weights[0] / (capacity[links[0]] * GBIT)
    for k in range(1, links.shape[0]):
        x = bits * weights[k] / (capacity[links[k]] * GBIT)
        if x > t:
            t = x
    return t


def compress(weights: np.ndarray, classes: int = PRIORITY_CLASSES) -> list[int]:
    """Cut jobs in priority order (highest first) into at most ``classes`` contiguous classes, least weight inside.

    ``weights[a, b]`` (``a < b``; the rest is ignored) is the contention weight of jobs ``a`` and ``b``. Returns
    each job's class (0 first). Exact: ``best[k, j]`` is the least inside-weight of the first ``j`` jobs in ``k``
    classes; ties go to fewer classes, then to the earlier cut.
    """
    if len(weights) == 0:
        return []
    return _compress(np.triu(np.asarray(weights, dtype=float), 1), classes).tolist()


@njit(cache=True)
def _compress(a, classes):  # pragma: no cover  (compiled; tested through compress)
    """:func:`compress` of the upper-triangular weights ``a`` (n >= 1): each job's class as an array."""
    n = len(a)
    # c[r, j]: the sum of A[r, b] over b < j, taken in that order (cumulative sums along the rows)
    c = np.zeros((n, n + 1))
    for r in range(n):
        for j in range(n):
            c[r, j + 1] = c[r, j] + a[r, j]
    return _compress_rows(c, classes)


@njit(cache=True)
def _compress_rows(c, classes):  # pragma: no cover  (compiled; tested through compress and CruxPolicy)
    """:func:`_compress` from ``c``, the cumulative sums along the rows of the upper-triangular weights
    (``c[r, j]``: the sum of ``A[r, b]`` over ``b < j``, so 0 for ``j <= r + 1``)."""
    n = len(c)
    # inside[j, i]: weight of edges among jobs i..j-1 = sum over a >= i of c[a, j], taken from a = n - 1 up;
    # kept with i along the rows, the order the cuts' search reads it in. c[a, j] is 0 for a >= j - 1, so
    # inside[j, i] is 0 for i >= j - 1 and the sums start at a = j - 2 (adding those zeros first changes no bit)
    inside = np.zeros((n + 1, n + 1))
    for j in range(n + 1):
        for r in range(j - 2, -1, -1):
            inside[j, r] = inside[j, r + 1] + c[r, j]
    k_max = min(classes, n)
    best, cut = _cuts(inside, k_max, n)
    k = 1  # the fewest classes reaching the least weight
    for m in range(2, k_max + 1):
        if best[m, n] < best[k, n]:
            k = m
    out = np.zeros(n, dtype=np.int64)
    j = n
    while k >= 1:
        i = cut[k, j] if k > 1 else 0
        for m in range(i, j):
            out[m] = k - 1
        j, k = i, k - 1
    return out


@njit(cache=True)
def _cuts(inside, k_max, n):  # pragma: no cover  (compiled; tested through compress)
    """``best[k, j]``: least inside-weight of the first ``j`` jobs in ``k`` classes; ``cut[k, j]``: where the
    last class starts (the first of equal candidates, as ``np.argmin``). ``inside[j, i]``: the weight inside jobs
    ``i..j-1``."""
    best = np.full((k_max + 1, n + 1), np.inf)
    cut = np.zeros((k_max + 1, n + 1), dtype=np.int64)
    for j in range(1, n + 1):
        best[1, j] = inside[j, 0]
    for k in range(2, k_max + 1):
        for j in range(k, n + 1):
            b, at = np.inf, k - 1
            for i in range(k - 1, j):
                v = best[k - 1, i] + inside[j, i]
                if v < b:
                    b, at = v, i
            best[k, j], cut[k, j] = b, at
    return best, cut


@NETWORK_POLICIES.register("crux")
class CruxPolicy(NetworkPolicy):
    """Crux: GPU-intensity path selection and priorities compressed to 8 classes (SIGCOMM 2024)."""

    name = "crux"
    priorities = True
    traffic_only = True

    def __init__(self, classes: int = PRIORITY_CLASSES, redecide_s: float = REDECIDE_S,
                 path_margin: float = PATH_MARGIN, class_margin: float = CLASS_MARGIN):
        if not 1 <= classes <= PRIORITY_CLASSES:
            raise ValueError(f"crux: classes must be 1..{PRIORITY_CLASSES}, got {classes!r}")
        if not (isinstance(redecide_s, (int, float)) and 0 <= redecide_s < np.inf):
            raise ValueError(f"crux: redecide_s must be a number of seconds >= 0, got {redecide_s!r}")
        if not (isinstance(path_margin, (int, float)) and 0 <= path_margin < np.inf):
            raise ValueError(f"crux: path_margin must be a fraction >= 0, got {path_margin!r}")
        if not (isinstance(class_margin, (int, float)) and 0 <= class_margin < np.inf):
            raise ValueError(f"crux: class_margin must be a fraction >= 0, got {class_margin!r}")
        self.classes, self.redecide_s, self.path_margin = classes, float(redecide_s), float(path_margin)
        self.class_margin = float(class_margin)
        self.reset(np.random.default_rng(0))

    def reset(self, rng: np.random.Generator) -> None:
        """A new run: forget what was memoised about the last one's topology and jobs."""
        self.rng = rng
        self._flows: dict = {}  # (model, pattern, hosts, gpus) -> (_Flows, whether some flow has a choice)
        self._jobs: dict = {}  # job id -> _Job of the jobs decided on (its placement, order key, flows)
        self._order: list = []  # the decided jobs' _Job, highest intensity first
        self._keys: list = []  # their order keys (the same order, for bisect)
        self._slot_order: list = []  # their slots in the table (the same order)
        self._ids: list = []  # their job ids (the same order)
        self._table = DecidedTable()  # their flows, last path picks and classes (decided.py)
        self._allocs: dict = {}  # (class, paths) -> the NetAllocation handed out for them
        self._last: dict = {}  # the last decision
        self._mark = None  # where the view's log of starts and stops stood at the last call
        self._decided_s = -np.inf  # when the running jobs were last decided afresh

    def _job(self, view, jid: int, js) -> _Job:
        """The job's order key and flows (:class:`_Job`), taken when it starts on a placement (a restart
        elsewhere gives it a new one; a new path choice does not). The flows (candidate paths and seconds per
        hop) depend only on the model, pattern and placement: memoised by them (a trace starts the same host
        sets again and again); the intensity reads the job's own route (hash ECMP keys it by job id)."""
        topo, d, p = view.topology, js.demand, js.placement
        cap = topo.link_capacity_gbps
        intensity = gpu_intensity(js.gpus * d.compute_s, d.flow_bytes, d.links, d.weights, cap)
        key = (js.job.model, js.job.pattern, p.hosts, p.gpus)
        hit = self._flows.get(key)
        if hit is None:
            lay = placement_paths(topo, view.zoo[js.job.model], js.job.pattern, p.hosts, p.gpus)
            n_paths, hops, links = lay.n_paths, lay.hops, lay.links
            equal, secs, packed, positive = _flow_secs(n_paths, hops, lay.path_start, links, lay.flow_w,
                                                       d.flow_bytes * 8, cap)
            if not equal:
                raise ValueError(f"crux: the equal-cost paths of job {jid}'s flows differ in length on topology "
                                 f"{topo.name}")
            flows = _Flows(n_paths, hops, links, secs, packed, positive)
            if len(self._flows) >= 100_000:  # bounded, as the topology's route memos
                self._flows.clear()
            hit = self._flows[key] = (flows, lay.multi)
        return _Job(p, (-intensity, jid), intensity, *hit)

    def _changes(self, view) -> tuple[list, list]:
        """The decided jobs that stopped or moved, and the running jobs with traffic that started or moved since
        the last call. The jobs that may have changed are the view's log of starts and stops since the last
        call (``ClusterView.changes``: one or two, where a pass runs hundreds of jobs), or, where it cannot
        tell, every running and every decided job. A decided job that runs on the placement it was decided on
        (the same object: a start or a move makes a new one) has not changed."""
        running, jobs, log = view.running, self._jobs, view.changes
        ids = log.since(self._mark)
        self._mark = log.mark()
        if ids is None:
            ids = [*running, *jobs]
        gone, started = [], []
        for jid in dict.fromkeys(ids) if len(ids) > 1 else ids:
            js = running.get(jid)
            j = jobs.get(jid)
            if j is not None:
                if js is not None and js.placement is j.placement:
                    continue
                gone.append(jid)  # it stopped, or restarted elsewhere: the old one goes
            if js is not None and js.demand is not None and js.demand.flow_bytes:
                started.append((jid, js))
        return gone, started

    def allocate(self, view):
        """The decision depends only on the running jobs that have traffic and their placements: while those
        stay the same (a pass that started or stopped one-host jobs), the last decision is returned again.
        Otherwise every job is decided afresh if :attr:`redecide_s` has passed since that was last done, else
        only the jobs that started since are fitted in (the module doc). Only the jobs whose path or class
        changed get a new ``NetAllocation``; the others keep the last one (the same object)."""
        gone, started = self._changes(view)
        if not (gone or started):
            return dict(self._last)
        last = self._last
        for jid in gone:
            self._drop(jid)
        added = []
        for jid, js in started:
            if jid in self._jobs:  # restarted elsewhere since the last call
                self._drop(jid)
            j = self._jobs[jid] = self._job(view, jid, js)
            at = bisect.bisect(self._keys, j.key)
            self._keys.insert(at, j.key)
            self._order.insert(at, j)
            self._slot_order.insert(at, self._table.add(j.flows, j.intensity))
            self._ids.insert(at, jid)
            added.append(j)
        jobs = self._order
        if not jobs:
            self._last = {}
            return {}
        fresh = view.now >= self._decided_s + self.redecide_s
        if not added and not fresh:  # jobs only ended: the others keep theirs
            return self._done(last)
        if fresh:
            self._decided_s = view.now
            return self._afresh(view, jobs, last)
        return self._fit_in(view, jobs, added, last)

    def _drop(self, jid: int) -> None:
        """Forget a decided job (it stopped, or restarted elsewhere)."""
        j = self._jobs.pop(jid)
        at = bisect.bisect_left(self._keys, j.key)
        self._table.remove(self._slot_order[at])
        del self._keys[at], self._order[at], self._slot_order[at], self._ids[at]

    def _afresh(self, view, jobs: list, last: dict) -> dict:
        """Every job decided afresh (steps 1-3): paths with :attr:`path_margin` from the last picks (none for a
        job added since: picks -1, class -1 in the table), classes; the jobs whose new classes order them as
        their old ones did against every job they share a link with keep the old ones (:func:`_kept_classes`)."""
        t = self._table
        order = np.array(self._slot_order, dtype=np.int64)
        changed, classes = _afresh_slots(order, *t.arrays(), t.cls, self.path_margin, view.topology.n_links,
                                         self.classes if self.priorities else 0, self.class_margin)
        out = dict(last)
        for i, c in zip(changed.tolist(), classes.tolist()):
            j = jobs[i]
            jid = j.key[1]
            out[jid] = self._allocation(j, t.picks_of(order[i]), c, last.get(jid))
        return self._done(out)

    def _fit_in(self, view, jobs: list, added: list, last: dict) -> dict:
        """The jobs that started since (``added``) are fitted in: the running ones keep their paths and classes
        and go first (an infinite margin), so a started job's flows see every running job's load; a started job
        takes the class of the job just above it in intensity (class 0 if none)."""
        t = self._table
        order = np.array(self._slot_order, dtype=np.int64)
        at, classes = _fit_in_slots(order, *t.arrays(), t.cls, view.topology.n_links,
                                    any(j.multi for j in added), self.priorities)
        out = dict(last)
        for i, c in zip(at.tolist(), classes.tolist()):
            j = jobs[i]
            jid = j.key[1]
            out[jid] = self._allocation(j, t.picks_of(order[i]), c, last.get(jid))
        return self._done(out)

    def _done(self, out: dict) -> dict:
        """``out`` over the jobs decided on, in intensity order (the order the simulator carries them out in),
        kept as the last decision."""
        ids = self._ids
        self._last = dict(zip(ids, map(out.__getitem__, ids)))
        return dict(self._last)

    def _allocation(self, j: _Job, picks: np.ndarray, c: int, old: NetAllocation | None) -> NetAllocation:
        """A job's allocation from its path picks and class, the old one again if they are its. Allocations are
        immutable and a run hands out the same few (class, paths) again and again: one object each, memoised
        (a new one checks every field, a cost per class change or re-route)."""
        # a job whose every flow has one path keeps the fabric's routing (the same links): nothing to re-route
        paths = tuple(picks.tolist()) if j.multi else None
        if old is not None and old.priority == c and old.paths == paths:
            return old
        key = (c, paths)
        hit = self._allocs.get(key)
        if hit is None:
            if len(self._allocs) >= 100_000:  # bounded, as the route memos
                self._allocs.clear()
            hit = self._allocs[key] = NetAllocation(priority=c, paths=paths)
        return hit


@NETWORK_POLICIES.register("crux-paths")
class CruxPathsPolicy(CruxPolicy):
    """Crux's GPU-intensity path selection alone (every job in class 0: needs no priority support)."""

    name = "crux-paths"
    priorities = False


def _kept_classes(classes: np.ndarray, old: np.ndarray, share: np.ndarray, weight=None,
                  margin: float = 0.0) -> np.ndarray:
    """``classes``, except that the jobs of a group keep their old classes (``old``, all >= 0) if those serve
    no job of it before a more intensive one it shares a link with (``share[a, b]``, a < b: job ``a`` first in
    the order) and leave inside classes at most ``1 + margin`` times the contention weight the new ones do
    (a pair sharing a link inside one class weighs its higher job's ``weight``, its GPU intensity; ``weight``
    None: 1 each). A group is a connected component of the contention graph (jobs joined by shared links); a
    job alone on its links is a group of one and keeps its class. ``share`` empty (no graph was wanted: one
    job, or no classes): every job alone.

    Why: a class orders a job's traffic against other jobs' on the links they share (strict priority per
    link, weighted sharing inside a class), so what the network computes depends on which of two jobs on a
    link comes first or whether they tie, not on the class numbers; groups share no link, so they are
    independent. The compression renumbers jobs whenever a job above them starts or ends (a new job shifts the
    cuts) and on links they have to themselves, and it moves a cut for a small gain in the weight it
    separates; each change costs the network a re-class. Old classes that order every shared pair as the new
    ones do leave the same weight inside (the same ties) and are kept at any margin. A group with a job new
    to the decision (``old`` -1) takes the compression's classes."""
    n = len(classes)
    weight = np.ones(n) if weight is None else np.asarray(weight, dtype=float)
    return _kept_kernel(np.asarray(classes, dtype=np.int64), np.asarray(old, dtype=np.int64),
                        np.asarray(share, dtype=np.bool_), weight, float(margin))


@njit(cache=True)
def _kept_kernel(classes, old, share, weight, margin):  # pragma: no cover  (compiled; tested through _kept_classes)
    """:func:`_kept_classes`: components by union-find over the shares, then a pass over the shared pairs summing
    each component's weight inside classes, old and new, and marking inversions."""
    n = classes.shape[0]
    out = classes.copy()
    if share.shape[0] != n:  # no graph: every job alone
        for a in range(n):
            if old[a] >= 0:
                out[a] = old[a]
        return out
    root = np.arange(n)
    for a in range(n):
        for b in range(a + 1, n):
            if share[a, b]:
                ra, rb = _root(root, a), _root(root, b)
                root[max(ra, rb)] = min(ra, rb)
    for a in range(n):  # every job to its component's root
        root[a] = _root(root, a)
    keep = np.ones(n, dtype=np.bool_)  # by root
    w_old = np.zeros(n)  # by root: the weight inside the old classes, and inside the new ones
    w_new = np.zeros(n)
    for a in range(n):
        if old[a] < 0:
            keep[root[a]] = False
    for a in range(n):
        for b in range(a + 1, n):
            if share[a, b]:
                if old[a] > old[b]:  # an inversion: the old classes serve the less intensive job first
                    keep[root[a]] = False
                if old[a] == old[b]:
                    w_old[root[a]] += weight[a]
                if classes[a] == classes[b]:
                    w_new[root[a]] += weight[a]
    for a in range(n):
        r = root[a]
        if keep[r] and w_old[r] <= w_new[r] * (1.0 + margin):
            out[a] = old[a]
    return out


@njit(cache=True)
def _root(root, a):  # pragma: no cover  (compiled; tested through _kept_classes)
    """The root of ``a``'s tree in the union-find forest ``root``."""
    while root[a] != a:
        a = root[a]
    return a


def contention(share: np.ndarray, intensity: list[float]) -> np.ndarray:
    """Jobs (in priority order) that share a link (``share[a, b]``): ``w[a, b]`` (a < b) = ``intensity[a]``,
    else 0."""
    w = np.where(share, np.asarray(intensity, dtype=float)[:, None], 0.0)
    return np.triu(w, 1)


class _Flows(NamedTuple):
    """A job's flows for :func:`_pick_paths`: flow ``f`` has ``n_paths[f]`` equal-cost paths of ``hops[f]`` links
    each; ``links`` and ``secs`` (seconds of its traffic on that link per iteration) list them path by path, flow
    by flow; ``packed``: ``n_paths``, ``hops`` and ``links`` one after the other (what :func:`_decide_slots`
    unpacks); ``positive``: every ``secs`` entry finite and above zero (None: not known, ``DecidedTable.add``
    finds it)."""

    n_paths: np.ndarray
    hops: np.ndarray
    links: np.ndarray
    secs: np.ndarray
    packed: np.ndarray
    positive: bool | None = None

    @property
    def multi(self) -> bool:
        """True if some flow has a choice of paths."""
        return bool((self.n_paths > 1).any())


class _Job(NamedTuple):
    """What :meth:`CruxPolicy.allocate` keeps of a running job while it keeps its placement."""

    placement: object
    key: tuple  # (-intensity, job id): the order, highest intensity first
    intensity: float
    flows: _Flows
    multi: bool  # some flow has a choice of paths


def _pick_paths(n_paths, hops, links, secs, prev, margin, n_links, flow_job, n_jobs):
    """Path selection (the module doc's step 1) of flat flows in priority order (flow ``f`` of job
    ``flow_job[f]``, each job's flows together, jobs in order 0, 1, ...; ``prev[f]``: its previous path, -1:
    none): each flow's pick, and ``share[a, b]`` (a < b): jobs a and b cross a link (``n_jobs`` 0: not wanted, an
    empty matrix). The flows laid out as one table slot per job and decided by :func:`_pick_slots`, the kernel
    :class:`CruxPolicy` runs (here for tests and readers of flat flows)."""
    flow_job = np.asarray(flow_job, dtype=np.int64)
    if len(flow_job) and (flow_job[0] != 0 or not np.all(np.isin(np.diff(flow_job), (0, 1)))):
        raise ValueError("_pick_paths: each job's flows must come together, jobs in order 0, 1, ...")
    n_paths, hops = np.asarray(n_paths, dtype=np.int64), np.asarray(hops, dtype=np.int64)
    entries = n_paths * hops
    ends = np.cumsum(entries)
    t = DecidedTable()
    slots = []
    for j in range(int(flow_job[-1]) + 1 if len(flow_job) else 0):
        fs = np.flatnonzero(flow_job == j)
        a, b = (int(ends[fs[0]] - entries[fs[0]]), int(ends[fs[-1]])) if len(fs) else (0, 0)
        f = _Flows(n_paths[fs], hops[fs], np.asarray(links[a:b], dtype=np.int64), np.asarray(secs[a:b], float),
                   np.concatenate([n_paths[fs], hops[fs], np.asarray(links[a:b], dtype=np.int64)]))
        s = t.add(f, 0.0)
        t.picks_of(s)[:] = np.asarray(prev)[fs]
        slots.append(s)
    seq = np.array(slots, dtype=np.int64)
    _, share = _pick_slots(seq, *t.arrays()[:8], margin, n_links, n_jobs > 0, 0)
    picks = np.concatenate([t.picks_of(s) for s in slots]) if slots else np.zeros(0, dtype=np.int64)
    if n_jobs == 0:
        return picks, np.zeros((0, 0), dtype=bool)
    out = np.zeros((n_jobs, n_jobs), dtype=bool)
    out[:len(seq), :len(seq)] = share
    return picks, out


@njit(cache=True)
def _flow_secs(n_paths, hops, path_start, links, flow_w, bits, capacity):  # pragma: no cover  (compiled)
    """A placement's layout (``routes.PlacementPaths``) as :class:`_Flows` needs it, in one call (a trace starts
    thousands of new placements, and this was a dozen small numpy operations each): whether each flow's paths
    all have its ``hops[f]`` links (equal cost), the seconds of its traffic per hop entry, ``bits`` (the flow's
    bytes x 8) x its weight / (the link's capacity x 1e9), the operations numpy applied entry by entry,
    ``n_paths``, ``hops`` and ``links`` one after the other, and whether every seconds entry is finite and above
    zero (``_Flows.positive``; three numpy operations per started job in ``DecidedTable.add`` before)."""
    n = n_paths.shape[0]
    equal = True
    secs = np.empty(links.shape[0])
    q, e = 0, 0
    for f in range(n):
        for _ in range(n_paths[f]):
            if path_start[q + 1] - path_start[q] != hops[f]:
                equal = False
            q += 1
        for _ in range(n_paths[f] * hops[f]):
            if e < secs.shape[0]:
                secs[e] = bits * flow_w[f] / (capacity[links[e]] * GBIT)
            e += 1
    packed = np.empty(2 * n + links.shape[0], dtype=np.int64)
    packed[:n] = n_paths
    packed[n:2 * n] = hops
    packed[2 * n:] = links
    positive = True
    for x in range(secs.shape[0]):
        if not (secs[x] > 0.0 and secs[x] < np.inf):
            positive = False
            break
    return equal and e == links.shape[0], secs, packed, positive


@njit(cache=True)
def _pick_slots(seq, packed, secs_pool, picks, pk_off, sec_off, pick_off, n_flows, positive, margin, n_links, want,
                write_from):  # pragma: no cover  (compiled; tested through _pick_paths and CruxPolicy)
    """Path selection (the module doc's step 1) of the jobs in the table slots ``seq`` (``decided.DecidedTable``'s
    arrays), in that order, flow by flow: the path whose busiest link, counting this flow, has the least seconds of
    traffic (the first of equal ones), unless its previous path (the table's pick, -1: none) is within ``margin``
    of that. The picks of the jobs from position ``write_from`` on are written into the table. Returns whether
    each job's picks moved, and (``want``) ``share[a, b]`` for a < b: jobs a and b (positions in ``seq``) cross a
    link (else an empty matrix).

    Each slot's flows are read where they sit in the pools. With an infinite margin a flow with a previous path
    keeps it unless some path costs nothing (the margin's test ``prev_cost <= best * inf`` fails only at
    ``best == 0``): in a slot whose seconds are all finite and above zero (``positive``) no path can, so its
    paths are not priced (the load it adds is the same)."""
    n = len(seq)
    load = np.zeros(n_links)
    moved = np.zeros(n, dtype=np.bool_)
    total = 0  # hops taken, if the shares are wanted
    if want:
        for i in range(n):
            s = seq[i]
            for k in range(n_flows[s]):
                total += packed[pk_off[s] + n_flows[s] + k]
    on_link = np.empty(total, dtype=np.int64)  # (link, job) of every hop taken
    on_job = np.empty(total, dtype=np.int64)
    taken = 0
    keep = margin == np.inf
    for i in range(n):
        s = seq[i]
        nf, a, b, c = n_flows[s], pk_off[s], sec_off[s], pick_off[s]
        base = a + 2 * nf  # the slot's links in packed; its seconds from b in secs_pool, entry by entry
        skip = keep and positive[s]
        e = 0
        for f in range(nf):
            np_f, hf, prev = packed[a + f], packed[a + nf + f], picks[c + f]
            if skip and prev >= 0:
                k = prev
            else:
                best, k, prev_cost = np.inf, 0, np.inf
                for q in range(np_f):
                    cost = 0.0
                    for h in range(hf):
                        x = e + q * hf + h
                        cost = max(cost, load[packed[base + x]] + secs_pool[b + x])
                    if cost < best:
                        best, k = cost, q
                    if q == prev:
                        prev_cost = cost
                if prev >= 0 and prev_cost <= best * (1.0 + margin):
                    k = prev  # the new pick does not beat the old path by the margin: keep it
            for h in range(hf):
                x = e + k * hf + h
                g = packed[base + x]
                load[g] += secs_pool[b + x]
                if want:
                    on_link[taken], on_job[taken] = g, i
                    taken += 1
            if k != prev:
                moved[i] = True
            if i >= write_from:
                picks[c + f] = k
            e += np_f * hf
    share = np.zeros((n if want else 0, n if want else 0), dtype=np.bool_)
    if not want:
        return moved, share
    # the hops by link, each link's in the order taken (a counting sort: links are few beside the hops), so a
    # link's jobs come in increasing position, each once however many of its flows cross it
    start = np.zeros(n_links + 1, dtype=np.int64)
    for x in range(taken):
        start[on_link[x] + 1] += 1
    for g in range(n_links):
        start[g + 1] += start[g]
    fill = start[:n_links].copy()
    by_link = np.empty(taken, dtype=np.int64)
    for x in range(taken):
        by_link[fill[on_link[x]]] = on_job[x]
        fill[on_link[x]] += 1
    jobs = np.empty(n, dtype=np.int64)
    for g in range(n_links):  # every two jobs on a link share it
        m = 0
        for x in range(start[g], start[g + 1]):
            j = by_link[x]
            if m == 0 or jobs[m - 1] != j:
                jobs[m] = j
                m += 1
        for p in range(m):
            for q in range(p + 1, m):
                share[jobs[p], jobs[q]] = True
    return moved, share


@njit(cache=True)
def _afresh_slots(order, packed, secs_pool, picks, pk_off, sec_off, pick_off, n_flows, positive, intensity_of, cls,
                  margin, n_links, classes, class_margin):  # pragma: no cover  (compiled; tested through CruxPolicy)
    """:meth:`CruxPolicy._afresh` on the table's arrays in one call: the jobs in the slots ``order`` decided afresh
    (:func:`_decide_slots`, every pick written), their classes kept where the old ones are within
    ``class_margin`` (:func:`_kept_classes` against the table's ``cls``) and written into ``cls``. Returns the
    positions in ``order`` whose picks or class changed and their new classes. Why one call: the glue between
    the kernels was a dozen numpy operations per decision, ten thousand decisions a full Philly run."""
    moved, new_cls, share = _decide_slots(order, packed, secs_pool, picks, pk_off, sec_off, pick_off, n_flows,
                                          positive, intensity_of, margin, n_links, classes, 0)
    n = order.shape[0]
    old = np.empty(n, dtype=np.int64)
    for i in range(n):
        old[i] = cls[order[i]]
    weight = np.empty(n)
    for i in range(n):
        weight[i] = intensity_of[order[i]]
    new_cls = _kept_kernel(new_cls, old, share, weight, class_margin)
    m = 0
    for i in range(n):
        if moved[i] or new_cls[i] != old[i]:
            m += 1
    changed = np.empty(m, dtype=np.int64)
    out = np.empty(m, dtype=np.int64)
    m = 0
    for i in range(n):
        cls[order[i]] = new_cls[i]
        if moved[i] or new_cls[i] != old[i]:
            changed[m], out[m] = i, new_cls[i]
            m += 1
    return changed, out


@njit(cache=True)
def _fit_in_slots(order, packed, secs_pool, picks, pk_off, sec_off, pick_off, n_flows, positive, intensity_of, cls,
                  n_links, pick, priorities):  # pragma: no cover  (compiled; tested through CruxPolicy)
    """:meth:`CruxPolicy._fit_in` on the table's arrays in one call: the jobs in the slots ``order`` not decided yet
    (``cls`` -1) are fitted in after the others (``pick``: some has a choice of paths, then :func:`_pick_slots`
    with an infinite margin, the decided ones first in their order, only the new ones' picks written; else every
    new pick 0), each new one takes the class of the nearest decided job above it in ``order`` (0 if none, or
    all 0 without ``priorities``), written into ``cls``. Returns the new ones' positions in ``order`` and their
    classes. Why one call: the glue was a dozen numpy operations per started job with traffic."""
    n = order.shape[0]
    n_new = 0
    for i in range(n):
        if cls[order[i]] < 0:
            n_new += 1
    at = np.empty(n_new, dtype=np.int64)
    out = np.zeros(n_new, dtype=np.int64)
    seq = np.empty(n, dtype=np.int64)
    m, k, above = 0, n - n_new, -1
    for i in range(n):
        s = order[i]
        if cls[s] < 0:
            at[k - (n - n_new)] = i
            if priorities and above >= 0:
                out[k - (n - n_new)] = above
            seq[k] = s
            k += 1
        else:
            above = cls[s]
            seq[m] = s
            m += 1
    if pick:
        _pick_slots(seq, packed, secs_pool, picks, pk_off, sec_off, pick_off, n_flows, positive, np.inf, n_links,
                    False, n - n_new)
    else:  # no path to pick
        for x in range(n - n_new, n):
            s = seq[x]
            for f in range(n_flows[s]):
                picks[pick_off[s] + f] = 0
    for x in range(n_new):
        cls[order[at[x]]] = out[x]
    return at, out


@njit(cache=True)
def _decide_slots(seq, packed, secs_pool, picks, pk_off, sec_off, pick_off, n_flows, positive, intensity_of,
                  margin, n_links, classes, write_from):  # pragma: no cover  (compiled; tested through CruxPolicy)
    """Path selection (:func:`_pick_slots`) of the jobs in the table slots ``seq`` in that order, the new picks of
    those from position ``write_from`` on written into the table; then (``classes`` > 0) their compression into
    at most ``classes`` classes (:func:`compress` of :func:`contention`; all 0 when ``classes`` is 0 or there is
    one job). Returns whether each job's picks moved, the classes, and ``share[a, b]`` (a < b: jobs a and b
    cross a link; an empty matrix when the contention graph is not wanted: ``classes`` 0 or one job).

    The contention weights are not laid out: the cumulative sums along their rows (:func:`_compress_rows`) are
    taken from the shares at once, ``c[r, j + 1] = c[r, j] + intensity[r]`` where jobs r < j share a link
    (adding the zero weight elsewhere changes no bit: the sums are never below zero)."""
    n = len(seq)
    want = classes > 0 and n >= 2  # the contention graph is needed only to compress into classes
    moved, share = _pick_slots(seq, packed, secs_pool, picks, pk_off, sec_off, pick_off, n_flows, positive, margin,
                               n_links, want, write_from)
    if not want:
        return moved, np.zeros(n, dtype=np.int64), share
    c = np.zeros((n, n + 1))
    for r in range(n):
        x = intensity_of[seq[r]]
        for j in range(r + 1, n):
            c[r, j + 1] = c[r, j] + x if share[r, j] else c[r, j]
    return moved, _compress_rows(c, classes), share
