"""The joint program's tie-break solved in one compiled call: a dense bounded-variable primal simplex.

Why: the programs are small and dense (tens of links by tens of jobs once covered links are dropped). HiGHS
solves one in a few iterations, but a run through ``highspy`` costs a fixed set-up (a run from an optimal basis,
with no iteration, costs about half a run from scratch), and the tie-break's levels (:data:`~.program.TIE_TOL`)
add a run each and Python between them. The same levels on a dense tableau in one compiled call cost a few
pivots of microseconds each (the measured figures are in the commit that added this module).

What it computes is what :func:`.program._highs_lp` computes, level by level, with the same tests: the optimum
of each level (the program, then the rank weights, then each job that may move in the program's order), the
jobs whose reduced cost and the links whose dual is not zero (to :data:`~.program.TIE_TOL`) fixed or made
equalities, and the stop as soon as the optimum is one point (no variable that may move off the basis with a
zero reduced cost or dual). The optimum of the last level is one point, so any exact method returns it; the
two reach it through different bases, equal to rounding (~1e-15), and the caller rounds the speeds to
:data:`~.program.SPEED_DIGITS` decimals.

Method: the links' rows with a slack each (``a z + s = 1``, ``s >= 0``; a link made an equality has ``s = 0``),
every job at its floor and every slack basic to start (feasible: the floor fits every link). The most improving
reduced cost enters (Dantzig), and after a step of length zero (a degenerate pivot, common here: alike jobs)
the least index that improves, the least basic index of the tied ratios leaving (Bland's rule, which cannot
cycle), until a step moves again; a job that reaches its other bound before any basic variable leaves flips
to it without a pivot. The reduced costs are updated through the pivots and computed afresh before a level
stops. The basic values are computed again from the basis inverse the tableau carries after each
level. A program the method does not finish in ``max_pivots_per_var`` pivots per variable
(:data:`MAX_PIVOTS_PER_VAR`) is handed back (``ok`` False) for HiGHS to solve.
"""

from __future__ import annotations

import numpy as np

from ...jit import njit

#: pivots allowed per variable (jobs + links) in one level before the program goes to HiGHS (stated, not
#: tuned: far above the dozen a program takes; a guard, never met on Philly's programs)
MAX_PIVOTS_PER_VAR = 50
#: a reduced cost improves the objective beyond this fraction of its largest coefficient (the optimality test
#: of each level: far below :data:`~.program.TIE_TOL`, far above the tableau's rounding)
OPT_TOL = 1e-12
#: a tableau entry counts in the ratio test beyond this (the programs' shares are ~1e-3-1)
PIVOT_TOL = 1e-12


@njit(cache=True)
def lexicographic(util: np.ndarray, a: np.ndarray, floor: float, tie_tol: float,
                  max_pivots_per_var: int = MAX_PIVOTS_PER_VAR):  # pragma: no cover
    """``(z, ok)``: the tie-break's speeds of the program ``max util . z`` s.t. ``a z <= 1``,
    ``floor <= z <= 1`` (the module doc), and whether the method finished (else the caller asks HiGHS)."""
    m, n = a.shape
    nv = n + m
    tab = np.zeros((m, nv))  # B^-1 [a I]
    tab[:, :n] = a
    for i in range(m):
        tab[i, n + i] = 1.0
    lo = np.empty(nv)
    hi = np.empty(nv)
    lo[:n] = floor
    hi[:n] = 1.0
    lo[n:] = 0.0
    hi[n:] = np.inf
    x = np.empty(nv)  # every variable's value (nonbasic: at a bound)
    x[:n] = floor
    basis = np.arange(n, nv)
    basic = np.zeros(nv, dtype=np.bool_)
    basic[n:] = True
    _basic_values(tab, a, basis, basic, x, n)
    cost = np.zeros(nv)
    cost[:n] = -util
    tol = tie_tol * np.abs(util).max()
    full = np.zeros(m, dtype=np.bool_)
    d = np.empty(nv)
    for k in range(-2, n):  # -2: the program; -1: the most rank weight; then each job that may move
        if k == -1:
            cost[:n] = -(n - np.arange(n)) / n  # program._rank_weights
            tol = tie_tol
        elif k >= 0:
            if lo[k] == hi[k] or x[k] >= hi[k]:  # fixed, or at full speed already: as far as it goes, no solve
                lo[k] = hi[k]
                continue
            cost[:n] = 0.0
            cost[k] = -1.0
        if not _optimise(tab, cost, lo, hi, x, basis, basic, d, max_pivots_per_var * nv):
            return x[:n].copy(), False
        _basic_values(tab, a, basis, basic, x, n)
        _reduced_costs(tab, cost, basis, basic, d)
        for j in range(n):  # at its bound in every point of the set (k: at its most)
            if lo[j] < hi[j] and (abs(d[j]) > tol or j == k):
                v = min(max(x[j], lo[j]), hi[j])
                lo[j] = hi[j] = x[j] = v
        for i in range(m):  # full in every optimum: an equality
            if abs(d[n + i]) > tol and not full[i]:
                full[i] = True
                hi[n + i] = 0.0
        one_point = True
        for j in range(nv):
            free = lo[j] < hi[j] if j < n else not full[j - n]
            if free and not basic[j] and abs(d[j]) <= tol:
                one_point = False
                break
        if one_point:
            break
    z = np.empty(n)
    for j in range(n):
        z[j] = min(max(x[j], floor), 1.0)
    return z, True


@njit(cache=True)
def _optimise(tab, cost, lo, hi, x, basis, basic, d, max_pivots):  # pragma: no cover
    """Primal simplex on ``tab`` from the feasible basis it holds, to the optimum of ``cost`` (the module doc).
    False if it took more than ``max_pivots`` steps."""
    m, nv = tab.shape
    scale = max(np.abs(cost).max(), 1e-300)
    bland = False
    _reduced_costs(tab, cost, basis, basic, d)  # kept up to date through the pivots (a flip leaves it)
    for _ in range(max_pivots):
        enter, sign = _entering(d, lo, hi, x, basic, OPT_TOL * scale, bland)
        if enter < 0:  # optimal on the kept costs: confirmed on costs computed afresh
            _reduced_costs(tab, cost, basis, basic, d)
            enter, sign = _entering(d, lo, hi, x, basic, OPT_TOL * scale, bland)
            if enter < 0:
                return True
        step = hi[enter] - lo[enter]  # a bound flip
        leave, leave_to = -1, 0.0
        for i in range(m):
            delta = -sign * tab[i, enter]  # the change of basic i per unit step
            b = basis[i]
            if delta < -PIVOT_TOL:
                t, to = (x[b] - lo[b]) / -delta, lo[b]
            elif delta > PIVOT_TOL and hi[b] < np.inf:
                t, to = (hi[b] - x[b]) / delta, hi[b]
            else:
                continue
            t = max(t, 0.0)
            if t < step or (t == step and leave >= 0 and b < basis[leave]):
                step, leave, leave_to = t, i, to
        bland = step <= 0.0
        if step == np.inf:  # cannot happen: every job is bounded and so is every slack through its row
            return False
        for i in range(m):
            x[basis[i]] -= sign * step * tab[i, enter]
        x[enter] += sign * step
        if leave < 0:  # the entering job reached its other bound first
            x[enter] = hi[enter] if sign > 0 else lo[enter]
            continue
        out = basis[leave]
        x[out] = leave_to
        p = tab[leave, enter]
        for j in range(nv):
            tab[leave, j] /= p
        f = d[enter]
        if f != 0.0:
            for j in range(nv):
                d[j] -= f * tab[leave, j]
        for i in range(m):
            if i != leave:
                f = tab[i, enter]
                if f != 0.0:
                    for j in range(nv):
                        tab[i, j] -= f * tab[leave, j]
        basis[leave] = enter
        basic[enter] = True
        basic[out] = False
    return False


@njit(cache=True)
def _entering(d, lo, hi, x, basic, tol, bland):  # pragma: no cover
    """The variable to enter and its direction (+1 up from its lower bound, -1 down from its upper), or -1:
    the most improving reduced cost (Dantzig), or after a degenerate step the least index that improves
    (Bland, which cannot cycle)."""
    enter, sign, best = -1, 0.0, tol
    for j in range(d.shape[0]):
        if basic[j] or lo[j] == hi[j]:
            continue
        if x[j] <= lo[j] and -d[j] > best:
            enter, sign, best = j, 1.0, -d[j]
        elif x[j] >= hi[j] and d[j] > best:
            enter, sign, best = j, -1.0, d[j]
        else:
            continue
        if bland:
            break
    return enter, sign


@njit(cache=True)
def _reduced_costs(tab, cost, basis, basic, d):  # pragma: no cover
    """``d = cost - cost_B B^-1 [a I]`` (zero on the basis)."""
    m, nv = tab.shape
    for j in range(nv):
        d[j] = cost[j]
    for i in range(m):
        cb = cost[basis[i]]
        if cb != 0.0:
            for j in range(nv):
                d[j] -= cb * tab[i, j]
    for j in range(nv):
        if basic[j]:
            d[j] = 0.0


@njit(cache=True)
def _basic_values(tab, a, basis, basic, x, n):  # pragma: no cover
    """The basic variables' values from the nonbasic ones: ``x_B = B^-1 (1 - a z_N - s_N)`` (``B^-1`` is the
    tableau's slack columns), so the pivots' rounding does not accumulate from one level to the next."""
    m = a.shape[0]
    r = np.ones(m)
    for j in range(n):
        if not basic[j]:
            for i in range(m):
                r[i] -= a[i, j] * x[j]
    for i in range(m):
        if not basic[n + i]:
            r[i] -= x[n + i]
    for i in range(m):
        v = 0.0
        for k in range(m):
            v += tab[i, n + k] * r[k]
        x[basis[i]] = v
