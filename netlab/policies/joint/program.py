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

a linear program (solved exactly by a compiled simplex, :mod:`.simplex`, and by HiGHS through its own binding
``highspy`` where that does not finish; where it has several optima, a stated tie-break, :data:`TIE_TOL`, picks
one, favouring the jobs submitted last). On one link its optimum serves
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
from .simplex import lexicographic

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
    """One separate program: the jobs (indices into the caller's list, the greatest job id first: the order the
    tie-break favours) that binding links connect, the rows of those links (``a[e, j]`` over its jobs), and
    each job's ``G_j``."""

    members: np.ndarray
    a: np.ndarray
    util: np.ndarray


def programs(jobs: list[JointJob], capacity_gbps: np.ndarray) -> list[Program]:
    """The separate programs of ``jobs``: only links the jobs could overload (``sum_j a_je > 1``) bind, and jobs
    that share no binding link are apart (the optimum of the whole is theirs side by side); a job on no binding
    link is in none (it keeps ``z = 1``). Programs in the order of their first job (in the caller's list); each
    program's members the greatest job id first."""
    if not jobs:
        return []
    cap = np.asarray(capacity_gbps, dtype=float)
    n = len(jobs)
    links = np.concatenate([j.links for j in jobs])
    link_ids, at = np.unique(links, return_inverse=True)
    col = np.repeat(np.arange(n), [len(j.links) for j in jobs])
    a = np.zeros((len(link_ids), n))  # a[e, j] = M_je / (t_iso_j B_e)
    np.add.at(a, (at, col), np.concatenate([j.gbps for j in jobs]) / cap[links])
    return split(a[binding_rows(a.sum(axis=1))], np.array([j.util_alone for j in jobs]),
                 np.array([j.job_id for j in jobs]))


#: a link binds where the jobs' shares of it sum above this (1: its capacity; the margin keeps rounding out)
BINDS = 1 + 1e-9


def binding_rows(load: np.ndarray) -> np.ndarray:
    """The links (rows) whose summed shares ``load`` exceed :data:`BINDS`."""
    return np.flatnonzero(load > BINDS)


def split(a: np.ndarray, util: np.ndarray, ids: np.ndarray) -> list[Program]:
    """:func:`programs` from the binding links' rows ``a`` (links in id order x the jobs in the caller's order)
    and the jobs' ``G_j`` and ids (the same order)."""
    if not len(a):
        return []
    members, m_start, blocks, b_start = _split(np.ascontiguousarray(a), np.asarray(ids, dtype=np.int64))
    if len(m_start) == 1:  # no job on any row (never a binding row): one empty program, as the grouping gave
        return [Program(members, np.zeros((0, 0)), util[members])]
    out = []
    for g in range(len(m_start) - 1):
        mem = members[m_start[g]:m_start[g + 1]]
        out.append(Program(mem, blocks[b_start[g]:b_start[g + 1]].reshape(-1, len(mem)), util[mem]))
    return out


@njit(cache=True)
def _split(a, ids):  # pragma: no cover  (compiled; tested through split)
    """:func:`split`'s programs of the binding rows ``a`` (links x jobs) in one call, flat: the jobs on a
    binding link grouped by :func:`_first_job` (the groups in the order of their first job), each group's jobs
    the greatest id first (the tie-break's order, see :func:`_solve_lp`; ids are distinct), their columns in
    ``members[m_start[g]:m_start[g + 1]]``, and ``a`` over the rows any of them is on and those columns, row by
    row, in ``blocks[b_start[g]:b_start[g + 1]]``. Why one call: a decision splits its binding rows into
    programs at every call, and the per-group numpy operations (masks, sorts, fancy indexing) cost a tenth of
    joint's run on full Philly; the values are copied, not computed."""
    m, n = a.shape
    on = a > 0
    n_on = 0
    idx = np.empty(n, dtype=np.int64)  # jobs on a binding link
    for j in range(n):
        for e in range(m):
            if on[e, j]:
                idx[n_on] = j
                n_on += 1
                break
    idx = idx[:n_on]
    label = _first_job(on[:, idx].copy())
    members = np.empty(n_on, dtype=np.int64)
    m_start = np.zeros(n_on + 1, dtype=np.int64)
    groups = 0
    filled = 0
    for lead in range(n_on):  # each group at its first job (its label is itself)
        if label[lead] != lead:
            continue
        size = 0
        for j in range(lead, n_on):
            if label[j] == lead:
                members[filled + size] = idx[j]
                size += 1
        part = members[filled:filled + size]
        order = np.argsort(-ids[part])
        members[filled:filled + size] = part[order]
        filled += size
        groups += 1
        m_start[groups] = filled
    m_start = m_start[:groups + 1]
    total = 0
    rows_of = np.zeros((groups, m), dtype=np.bool_)
    n_rows = np.zeros(groups, dtype=np.int64)
    for g in range(groups):
        for e in range(m):
            for x in range(m_start[g], m_start[g + 1]):
                if on[e, members[x]]:
                    rows_of[g, e] = True
                    n_rows[g] += 1
                    break
        total += n_rows[g] * (m_start[g + 1] - m_start[g])
    blocks = np.empty(total)
    b_start = np.zeros(groups + 1, dtype=np.int64)
    b = 0
    for g in range(groups):
        for e in range(m):
            if rows_of[g, e]:
                for x in range(m_start[g], m_start[g + 1]):
                    blocks[b] = a[e, members[x]]
                    b += 1
        b_start[g + 1] = b
    return members, m_start, blocks, b_start


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
    """The program's speeds: ``argmax util . z`` s.t. ``a z <= 1``, ``floor <= z <= 1`` (the floor lowered to what
    the links allow), and where several ``z`` reach the optimum, the one :data:`the tie-break <TIE_TOL>` picks.
    With ``memo`` (a dict the caller keeps), a program seen before is answered from it, not solved again."""
    key = None
    if memo is not None:
        key = (util.tobytes(), a.shape, a.tobytes(), min_speed)
        hit = memo.get(key)
        if hit is not None:
            return hit
    floor = min(min_speed, 1.0 / float(a.sum(axis=1).max()))
    rows = a[_kept_rows(a)]  # the same feasible set: repeated and dominated links dropped
    if len(rows) == 1:  # one link left (or several alike): the greedy below is exact, without a solver's set-up
        out = _one_link(util, rows[0], floor)
    else:  # the same levels compiled (simplex.py), HiGHS where that does not finish or the rounding is unsure
        out, done = lexicographic(util, rows, floor, TIE_TOL)
        if not done or _near_half_step(out):
            out = _highs_lp(util, rows, floor)
    out = np.clip(np.round(out, SPEED_DIGITS), floor, 1.0)
    if memo is not None:
        _remember(memo, key, out)
    return out


#: **The tie-break.** Most of Philly's programs have several optima (61% of the first 20k jobs' programs by the
#: solver's own reduced costs): jobs alike in ``G_j`` and ``a_je`` (the same model on the same links, equal to
#: rounding) trade link share at no change of the objective. Which optimum a solver returns then depends on its
#: version and options (HiGHS with presolve on or off returned another optimum for 36% of those programs), and
#: so would the decisions. The answer is made unique by a stated rule, a lexicographic order of objectives:
#:
#: 1. the most GPU utilisation (the program);
#: 2. among those speeds, the most rank weight ``sum_j w_j z_j``, ``w_j = (n - r_j) / n`` for the job of rank
#:    ``r_j`` in the program's order, the greatest job id first (it weighs 1, the least id ``1/n``): of two
#:    alike jobs, the one submitted last runs faster, as fast as any optimum lets it;
#: 3. what is still tied (rarely: rank weights that trade evenly too), lexicographically greatest in that
#:    order: the last-submitted job as fast as it can go, then the one before.
#:
#: Each level keeps the optima of the one before, so the last is one point. Why job ids: they are the jobs'
#: own, not the run's history, so a choice holds from one decision to the next (a job favoured stays favoured,
#: instead of alike jobs trading places at every decision and both finishing late). Why the last submitted:
#: of alike jobs it has usually run the least, and with heavy-tailed run times a job that has run less is the
#: likelier to end soon (Tiresias's own argument), so favouring it ends jobs sooner on average. Measured, not
#: assumed: the first rule (the first submitted favoured) against this one, chosen on Philly's trace seeds 0-2
#: (first 20k jobs, joint / none average JCT: 0.829 against 0.796) and confirmed on seeds 3-5 (0.835 against
#: 0.818; differences inside the seed-to-seed sd, 0.03). What it favours: the newer of alike jobs; it never
#: costs utilisation (level 1 comes first). A reduced cost or a dual within this fraction of the objective's
#: largest coefficient counts as zero (a tie): far above the solver's rounding (~1e-15 on alike jobs), far below
#: any real difference between the trace's models. The rank weights are at least ``1/n`` apart, far above it.
TIE_TOL = 1e-9
#: speeds are rounded to this many decimals: different solver paths reach the same vertex through different
#: bases, equal only to rounding (~1e-15); rounded, the weights are the same bits (stated: far above rounding,
#: far below :data:`~netlab.policies.joint.network.WEIGHT_MARGIN`)
SPEED_DIGITS = 9
#: a speed closer than this to a half step of :data:`SPEED_DIGITS` (where rounding goes up or down) is not
#: rounded from the compiled simplex's answer: the simplex and HiGHS reach the same vertex to ~1e-13 by other
#: bases, and at a vertex on the half step itself they round apart (it happens: a vertex at 0.4552329535).
#: There HiGHS answers, as it does for every program without the simplex, so the decisions are HiGHS's bits.
#: Stated, not tuned: 100x the largest difference between the two seen at such a vertex, 1% of a step. Over
#: every program of a 20k-job Philly run the two differ by up to about an eighth of the band, so the margin
#: against any vertex is ~8x, not 100x: narrowing the band is not safe.
HALF_STEP_BAND = 1e-11


def _near_half_step(z: np.ndarray) -> bool:
    """Whether a speed of ``z`` lies within :data:`HALF_STEP_BAND` of a half step of :data:`SPEED_DIGITS`."""
    steps = z * 10.0 ** SPEED_DIGITS
    return bool((np.abs(steps - np.floor(steps) - 0.5) < HALF_STEP_BAND * 10.0 ** SPEED_DIGITS).any())


@njit(cache=True)
def _kept_rows(a: np.ndarray) -> np.ndarray:
    """The rows (links) to keep: a row another one covers (``a[k] >= a[i]`` everywhere; of equal rows, the first
    is kept) bounds nothing the other does not, since ``z >= 0``. Programs repeat rows: a rack's uplinks to
    every spine carry the same jobs alike (the median program of the first 20k Philly jobs has 110 rows, 39
    distinct, 17 not covered), and the solver's time grows with them."""
    m, n = a.shape
    keep = np.ones(m, dtype=np.bool_)
    for i in range(m):
        for k in range(m):
            if k == i or not keep[k]:
                continue
            covers, equal = True, True
            for j in range(n):
                if a[k, j] < a[i, j]:
                    covers = False
                    break
                if a[k, j] != a[i, j]:
                    equal = False
            if covers and (not equal or k < i):
                keep[i] = False
                break
    return keep


_local = threading.local()  # one HiGHS instance per thread, made at its first program


def _solver(options: dict | None = None):
    """This thread's HiGHS instance (presolve off), or with ``options`` a new one with those set (tests)."""
    import highspy

    h = None if options else getattr(_local, "highs", None)
    if h is None:
        # the bare binding: highspy's ``Highs`` wrapper sets its callbacks on construction, which prints HiGHS's
        # banner to stdout before its output can be switched off
        h = highspy._Highs()
        h.setOptionValue("output_flag", False)
        h.setOptionValue("presolve", "off")
        for name, value in (options or {}).items():
            h.setOptionValue(name, value)
        if not options:
            _local.highs = h
    return h


def _highs_lp(util: np.ndarray, a: np.ndarray, floor: float, options: dict | None = None) -> np.ndarray:
    """The program's optimal ``z`` from HiGHS (dual simplex, presolve off), the tie-break's (:data:`TIE_TOL`)
    where there are several. Why not SciPy's ``linprog``, which runs the same solver: its per-call input checks
    and option set-up cost twice HiGHS's own solve on these programs (about 1.2 of 1.8 ms). Why no presolve: on
    these programs it was more than half of HiGHS's time (1.6 against 0.7 ms a program on the first 20k Philly
    jobs). One solver instance is kept per thread; each model passed replaces the last, so every program is
    solved from scratch (no basis is carried over: the answer does not depend on the programs solved before).

    The tie-break, by complementary slackness: a job whose reduced cost is not zero sits at the same bound in
    every optimum, and a link whose dual is not zero is full in every optimum. Those fixed, what is left is the
    set of optima; if every variable that may move is basic there (no zero reduced cost or dual off the basis),
    it is one point and the solve is done. Else the rank weights are maximised over that set (one warm-started
    solve), the set narrowed the same way, and, if it is still not one point, each job that may move, in
    the program's order, is raised as far as the set lets it (one solve each; a job already at full speed needs none)
    and fixed there. On the first 20k Philly jobs' programs that is 1.6 solves a program. ``options``: another
    HiGHS option set (tests: the answer must not depend on it).
    """
    import highspy

    h = _solver(options)
    m, n = a.shape
    col, row = np.nonzero(a.T)  # column-major: the matrix's entries job by job
    start = np.searchsorted(col, np.arange(n)).astype(np.int32)
    lo, hi = np.full(n, floor), np.ones(n)
    h.passModel(n, m, len(row), int(highspy.MatrixFormat.kColwise), int(highspy.ObjSense.kMinimize), 0.0, -util,
                lo, hi, np.full(m, -highspy.kHighsInf), np.ones(m), start,
                row.astype(np.int32), a.T[col, row], np.zeros(n, dtype=np.int32))
    tol = TIE_TOL * float(np.abs(util).max())  # the program's costs are -G_j; a step's are 0 and -1
    full = np.zeros(m, dtype=bool)  # links full in every optimum
    cols, rows = np.arange(n, dtype=np.int32), np.arange(m, dtype=np.int32)
    for k in range(-2, n):  # -2: the program itself; -1: the most speed-ranks; then each job that may move
        if k == -1:
            h.changeColsCost(n, cols, -_rank_weights(n))
            tol = TIE_TOL
        elif k >= 0:
            if lo[k] == hi[k]:
                continue
            if z[k] >= hi[k]:  # at full speed already: as far as it goes, no solve
                lo[k] = hi[k]
                h.changeColBounds(k, lo[k], hi[k])
                continue
            cost = np.zeros(n)
            cost[k] = -1.0
            h.changeColsCost(n, cols, cost)
        h.run()
        status = h.getModelStatus()
        if status != highspy.HighsModelStatus.kOptimal:  # cannot happen (z = floor is feasible): say so
            raise RuntimeError(f"joint: the bandwidth program failed: {h.modelStatusToString(status)}")
        sol = h.getSolution()
        z = np.clip(np.asarray(sol.col_value), lo, hi)
        zero_col, zero_row = np.abs(np.asarray(sol.col_dual)) <= tol, np.abs(np.asarray(sol.row_dual)) <= tol
        fixed = ~zero_col  # at its bound in every point of the set
        if k >= 0:
            fixed[k] = True  # at its most
        fixed &= lo < hi
        lo[fixed] = hi[fixed] = z[fixed]
        newly_full = ~zero_row & ~full
        full |= newly_full
        if _one_point(h, lo < hi, ~full, zero_col, zero_row):
            return z
        h.changeColsBounds(n, cols, lo, hi)
        if newly_full.any():
            h.changeRowsBounds(m, rows, np.where(full, 1.0, -highspy.kHighsInf), np.ones(m))
    return z


def _one_point(h, free_cols: np.ndarray, free_rows: np.ndarray, zero_col: np.ndarray, zero_row: np.ndarray) -> bool:
    """Whether the last solve's optimum is its only one: no job or link that may still move is off the basis
    with a zero reduced cost or dual (dual non-degeneracy, the standard sufficient condition)."""
    import highspy

    basis = h.getBasis()
    basic = int(highspy.HighsBasisStatus.kBasic)
    col_basic = np.fromiter((int(x) == basic for x in basis.col_status), bool, len(free_cols))
    row_basic = np.fromiter((int(x) == basic for x in basis.row_status), bool, len(free_rows))
    return not ((free_cols & zero_col & ~col_basic).any() or (free_rows & zero_row & ~row_basic).any())


def _remember(memo: dict, key, out: np.ndarray) -> None:
    if len(memo) >= MEMO_PROGRAMS:  # bounded: a run's programs repeat while few jobs start or end
        memo.clear()
    memo[key] = out


def _one_link(util: np.ndarray, a: np.ndarray, floor: float) -> np.ndarray:
    """The program on one link (``a > 0`` for every job): a fractional knapsack. Every job at the floor, then
    what the link has left to the jobs in the order of ``util / a`` (the most GPU work per unit of link first),
    each up to full speed: exact for one constraint with box bounds. Equal ratios (to :data:`TIE_TOL`) trade
    link share at no cost to the objective: among them, the tie-break's second objective (rank weight ``w_j``,
    see :data:`TIE_TOL`) orders them by ``w_j / a_j``, the same knapsack one level down, and equal ``w_j / a_j``
    go by the program's order (the greatest job id first)."""
    ratio = util / a
    z = np.full(len(util), floor)
    left = 1.0 - floor * float(a.sum())
    for j in _tie_order(ratio, _rank_weights(len(util)) / a):
        if left <= 0:
            break
        step = min(1.0 - floor, left / a[j])
        z[j] += step
        left -= step * a[j]
    return z


def _rank_weights(n: int) -> np.ndarray:
    """The tie-break's second objective: the job at rank ``r`` (0: the greatest job id) weighs ``(n - r) / n``."""
    return (n - np.arange(n)) / n


def _tie_order(ratio: np.ndarray, second: np.ndarray) -> list[int]:
    """Indices by ``ratio`` descending; ratios within :data:`TIE_TOL` of the next greater one (a tie) by
    ``second`` descending, and those tied again by index."""
    return [j for run in _runs(ratio, np.arange(len(ratio))) for sub in _runs(second, run) for j in sorted(sub)]


def _runs(value: np.ndarray, idx: np.ndarray) -> list[np.ndarray]:
    """``idx`` by ``value`` descending, cut into runs of values within :data:`TIE_TOL` of the one before."""
    idx = idx[np.argsort(-value[idx], kind="stable")]
    v = value[idx]
    cuts = np.flatnonzero(v[:-1] - v[1:] > TIE_TOL * np.abs(v[:-1])) + 1
    return np.split(idx, cuts)
