"""The joint allocator's bandwidth program: the speeds that keep the most GPU work going over the links.

Objective (stated once, used by both halves of ``joint``): **GPU computation utilisation**, the GPU-seconds of
compute the jobs do per second (the measure ``benchmarks/bench_crux.py`` scores): job ``j`` on ``g_j`` GPUs,
computing ``c_j`` seconds an iteration, contributes ``g_j c_j / t_j`` at ``t_j`` seconds an iteration.

Model (a steady-state fluid bound): job ``j`` puts ``M_je`` Gbit on link ``e`` per iteration, so at speed
``z_j`` (a fraction of its speed alone, ``t_j = t_iso_j / z_j``) it loads the link on average with
``M_je z_j / t_iso_j``; the links' capacities bound the sum. With ``G_j = g_j c_j / t_iso_j`` (its
utilisation alone) and ``a_je = M_je / (t_iso_j B_e)`` (the share of link ``e`` it takes at full speed):

    maximise   sum_j G_j z_j
    subject to sum_j a_je z_j <= 1  on every link,   f <= z_j <= 1,

a linear program (solved exactly by HiGHS, through its own binding ``highspy``). On one link its optimum serves
jobs in the order of ``G_j / a_je``, the compute they keep going per unit of the link: Crux's GPU intensity. The
floor ``f`` (``min_speed``, lowered where the links cannot give every job that much) keeps the least intensive
job moving: the LP's corner would stop it, and a stopped job holds its GPUs doing nothing. Only links the jobs
could overload (``sum_j a_je > 1``) constrain; a job on none of them keeps ``z = 1``.

The fluid bound ignores when each job communicates inside its iteration (it is the time average), so it
promises what perfect interleaving would give: the program ranks placements and sets shares, the network
model still decides the speeds.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

import numpy as np

from ...jit import njit  # numba is imported at the first kernel call

GBIT = 1e9
#: the least speed (fraction of its speed alone) the program leaves a job, where the links allow it
MIN_SPEED = 0.05
#: programs a memo keeps before it starts again
MEMO_PROGRAMS = 4096


@dataclass(frozen=True)
class JointJob:
    """One job as the program sees it: its GPU work per iteration, its speed alone, its Gbit per link."""

    job_id: int
    gpu_compute_s: float  # g_j x c_j: GPU-seconds of compute per iteration
    iso_iter_s: float  # t_iso_j on its (candidate) placement
    links: np.ndarray  # link ids
    gbit: np.ndarray  # M_je: Gbit per iteration on each of ``links``
    #: M_je / t_iso_j: Gbit/s on each of ``links`` at full speed (computed once: the programs read it at every call)
    gbps: np.ndarray = field(init=False, repr=False, compare=False)

    def __post_init__(self):
        object.__setattr__(self, "gbps", self.gbit / self.iso_iter_s)

    @property
    def util_alone(self) -> float:
        """G_j: GPU-seconds of compute per second at full speed."""
        return self.gpu_compute_s / self.iso_iter_s


@dataclass(frozen=True)
class Shares:
    """The program's answer: each job's speed ``z`` (1: as alone), the objective (GPU-seconds per second), and
    the jobs on a link the jobs could overload (the ones whose shares the links decide)."""

    speed: dict[int, float]
    gpu_util: float
    constrained: frozenset = frozenset()


def job_of(job_id: int, gpus: int, demand) -> JointJob | None:
    """The program's view of a job from its network demand (None: no traffic, nothing to share)."""
    if demand is None or not demand.flow_bytes:
        return None
    iso = float(demand.iter_s(demand.iso_rate_gbps))
    gbit = demand.flow_bytes * 8 / GBIT * np.asarray(demand.weights, dtype=float)
    return JointJob(job_id, gpus * float(demand.compute_s), iso, np.asarray(demand.links, dtype=np.int64), gbit)


@dataclass(frozen=True)
class Program:
    """One separate program: the jobs (indices into the caller's list, ascending) that binding links connect, the
    rows of those links (``a[e, j]`` over its jobs), and each job's ``G_j``."""

    members: np.ndarray
    a: np.ndarray
    util: np.ndarray


def programs(jobs: list[JointJob], capacity_gbps: np.ndarray) -> list[Program]:
    """The separate programs of ``jobs``: only links the jobs could overload (``sum_j a_je > 1``) bind, and jobs
    that share no binding link are apart (the optimum of the whole is theirs side by side); a job on no binding
    link is in none (it keeps ``z = 1``). Programs in the order of their first job."""
    if not jobs:
        return []
    cap = np.asarray(capacity_gbps, dtype=float)
    n = len(jobs)
    links = np.concatenate([j.links for j in jobs])
    link_ids, at = np.unique(links, return_inverse=True)
    col = np.repeat(np.arange(n), [len(j.links) for j in jobs])
    a = np.zeros((len(link_ids), n))  # a[e, j] = M_je / (t_iso_j B_e)
    np.add.at(a, (at, col), np.concatenate([j.gbps for j in jobs]) / cap[links])
    binding = a.sum(axis=1) > 1 + 1e-9
    if not binding.any():
        return []
    a = a[binding]
    idx = np.flatnonzero((a > 0).any(axis=0))  # jobs on a binding link
    util = np.array([jobs[i].util_alone for i in idx])
    out = []
    for part in _components(a[:, idx]):
        rows = (a[:, idx[part]] > 0).any(axis=1)
        out.append(Program(idx[part], a[np.ix_(rows, idx[part])], util[part]))
    return out


def solve(jobs: list[JointJob], capacity_gbps: np.ndarray, min_speed: float = MIN_SPEED,
          memo: dict | None = None) -> Shares:
    """Maximise ``sum_j G_j z_j`` over the links' capacities (see the module doc), each of the separate
    :func:`programs` on its own; ``memo`` (a dict the caller keeps across calls) answers a program met before
    without solving it again."""
    if not jobs:
        return Shares({}, 0.0)
    z = np.ones(len(jobs))
    constrained = []
    for prog in programs(jobs, capacity_gbps):
        z[prog.members] = solve_program(prog, min_speed, memo)
        constrained += prog.members.tolist()
    util = np.array([j.util_alone for j in jobs])
    return Shares({j.job_id: float(v) for j, v in zip(jobs, z)}, float(util @ z),
                  frozenset(jobs[i].job_id for i in constrained))


def solve_program(prog: Program, min_speed: float = MIN_SPEED, memo: dict | None = None) -> np.ndarray:
    """One program's speeds, its members' order."""
    return _solve_lp(prog.util, prog.a, min_speed, memo)


def _components(a: np.ndarray) -> list[np.ndarray]:
    """The jobs (columns of ``a``) grouped by the binding links (rows) that connect them: each group's jobs in
    ascending order, the groups in the order of their first job. The connected components of the links-and-jobs
    graph, by a compiled union-find (SciPy's ``connected_components`` cost about 1 ms a call in building and
    checking its sparse graph, half of the grouping on the first 20k Philly jobs; a fixed point over the dense
    job-by-job matrix cost the most of a decision on full Philly's hundreds of jobs)."""
    key = _first_job(a > 0)
    order = np.argsort(key, kind="stable")
    cuts = np.flatnonzero(np.diff(key[order])) + 1
    return np.split(order, cuts)


@njit(cache=True)
def _first_job(on: np.ndarray) -> np.ndarray:
    """Per job (a column of ``on``: links x jobs, True where the job is on the link), the least job of its
    component. Union-find in which a union hangs the larger root under the smaller, so every job's parent is a
    lesser job (or itself) and one pass in job order reads each job's root from its parent's."""
    m, n = on.shape
    parent = np.arange(n)
    for e in range(m):
        r = -1  # the root of the jobs met on this link so far
        for j in range(n):
            if on[e, j]:
                b = j
                while parent[b] != b:
                    b = parent[b]
                if r < 0 or b == r:
                    r = b
                else:
                    parent[max(r, b)] = min(r, b)
                    r = min(r, b)
    label = parent.copy()
    for j in range(n):
        label[j] = label[parent[j]]
    return label


def _solve_lp(util: np.ndarray, a: np.ndarray, min_speed: float, memo: dict | None = None) -> np.ndarray:
    """``argmax util . z`` s.t. ``a z <= 1``, ``floor <= z <= 1``; the floor lowered to what the links allow.
    With ``memo`` (a dict the caller keeps), a program seen before is answered from it, not solved again."""
    key = None
    if memo is not None:
        key = (util.tobytes(), a.shape, a.tobytes(), min_speed)
        hit = memo.get(key)
        if hit is not None:
            return hit
    floor = min(min_speed, 1.0 / float(a.sum(axis=1).max()))
    if len(a) == 1:  # one binding link (most programs): the greedy below is exact, without a solver's set-up
        out = _one_link(util, a[0], floor)
    else:
        out = np.clip(_highs_lp(util, a, floor), floor, 1.0)
    if memo is not None:
        _remember(memo, key, out)
    return out


_local = threading.local()  # one HiGHS instance per thread, made at its first program


def _highs_lp(util: np.ndarray, a: np.ndarray, floor: float) -> np.ndarray:
    """The program's optimal ``z`` from HiGHS (dual simplex, presolve off), the model handed over column-wise in
    one call. Why not SciPy's ``linprog``, which runs the same solver: its per-call input checks and option set-up
    cost twice HiGHS's own solve on these programs (about 1.2 of 1.8 ms). Why no presolve: on these programs (tens
    of jobs, up to ~190 links, most rows repeating others) it was more than half of HiGHS's time (1.6 against 0.7
    ms a program on the first 20k Philly jobs), and the simplex alone reaches an optimum as well. One solver
    instance is kept per thread; each model passed replaces the last, so every program is solved from scratch
    (no basis is carried over: the answer does not depend on the programs solved before).

    Where the optimum is not unique (jobs alike in ``G_j`` and ``a_je`` on the same links: a third of the
    programs on Philly), which optimal speeds come back is the solver's choice, and changes with its version and
    options; the objective does not. Of the 4,805 programs of the first 20k Philly jobs, presolve-less HiGHS
    1.16 and SciPy's HiGHS 1.12 with presolve agree to 5e-13 on 64% and return another optimum on 36%."""
    import highspy

    h = getattr(_local, "highs", None)
    if h is None:
        # the bare binding: highspy's ``Highs`` wrapper sets its callbacks on construction, which prints HiGHS's
        # banner to stdout before its output can be switched off
        h = _local.highs = highspy._Highs()
        h.setOptionValue("output_flag", False)
        h.setOptionValue("presolve", "off")
    m, n = a.shape
    col, row = np.nonzero(a.T)  # column-major: the matrix's entries job by job
    start = np.searchsorted(col, np.arange(n)).astype(np.int32)
    h.passModel(n, m, len(row), int(highspy.MatrixFormat.kColwise), int(highspy.ObjSense.kMinimize), 0.0, -util,
                np.full(n, floor), np.ones(n), np.full(m, -highspy.kHighsInf), np.ones(m), start,
                row.astype(np.int32), a.T[col, row], np.zeros(n, dtype=np.int32))
    h.run()
    status = h.getModelStatus()
    if status != highspy.HighsModelStatus.kOptimal:  # cannot happen (z = floor is feasible); say so rather than guess
        raise RuntimeError(f"joint: the bandwidth program failed: {h.modelStatusToString(status)}")
    return np.asarray(h.getSolution().col_value)


def _remember(memo: dict, key, out: np.ndarray) -> None:
    if len(memo) >= MEMO_PROGRAMS:  # bounded: a run's programs repeat while few jobs start or end
        memo.clear()
    memo[key] = out


def _one_link(util: np.ndarray, a: np.ndarray, floor: float) -> np.ndarray:
    """The program on one link (``a > 0`` for every job): a fractional knapsack. Every job at the floor, then
    what the link has left to the jobs in the order of ``util / a`` (the most GPU work per unit of link first;
    ties to the lower index), each up to full speed: exact for one constraint with box bounds."""
    z = np.full(len(util), floor)
    left = 1.0 - floor * float(a.sum())
    for j in np.argsort(-(util / a), kind="stable"):
        if left <= 0:
            break
        step = min(1.0 - floor, left / a[j])
        z[j] += step
        left -= step * a[j]
    return z
