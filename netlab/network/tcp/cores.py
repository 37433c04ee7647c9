"""Phase-aware cores inside a large ``tcp`` component (opt-in: ``phase_cores``).

Why: a component of more than ``max_exact_jobs`` jobs is solved by the
random-phase mean field, blind to the jobs' phases. What holds such a
component together is mostly links that limit nobody: on Philly's large
components a fifth of the binding links limit any job at the fixed point, and
each slowed job is limited by one link (``benchmarks/results/components.json``).
The jobs one link limits compete there, in phase; everyone else on that link
is held back elsewhere and meets them only on average.

So, after the mean field: the jobs each limiting link limits are joined into
cores (:func:`~netlab.network.tcp.mean_field.limiting_entries`); a core of
2 to ``max_exact_jobs`` jobs is simulated by the exact fluid from its jobs'
phase state, on its limiting links only, each link's capacity less the
time-averaged throughput (duty x rate) the other jobs on it have at the mean
field's fixed point. Its jobs take the simulated periods and anchors, and
their times count as phase-aware: their sharing with each other used their
phases; what they meet from outside the core is an average. A core of one
job, a larger one, or one whose simulation does not finish keeps the mean
field's answer and stays phase-blind. One pass: the mean field is not solved
again with the cores' new periods.
"""

from __future__ import annotations

import numpy as np

from ..slots import Entries, Jobs, Rows
from .components import Alone, Components, share_weights
from .mean_field import MeanFieldJobs, limiting_entries
from .params import TcpParams


def limited_cores(e: Entries, cap_link: np.ndarray, mf_jobs: MeanFieldJobs, rate: np.ndarray, duty: np.ndarray):
    """(per entry: its link limits its job; per job: its core's label, -1 if no link limits it). Jobs the
    same link limits are in one core (a job limited by two links joins both)."""
    lim = limiting_entries(e, cap_link, mf_jobs, rate, duty)
    n = rate.shape[0]
    parent = np.arange(n)

    def root(a):
        while parent[a] != a:
            parent[a] = parent[parent[a]]
            a = parent[a]
        return a

    for g in np.unique(e.link[lim]):
        jj = e.job[lim & (e.link == g)]
        for x in jj[1:]:
            a, b = root(jj[0]), root(x)
            if a != b:
                parent[max(a, b)] = min(a, b)
    label = np.array([root(i) for i in range(n)])
    label[np.bincount(e.job[lim], minlength=n) == 0] = -1
    return lim, label


def refine_cores(now_s: float, e: Entries, cap_link: np.ndarray, comps: Components, jobs: Jobs, al: Alone,
                 t: Rows, rows: np.ndarray, it: np.ndarray, p: TcpParams, simulate) -> np.ndarray:
    """The cores of the mean field's large jobs simulated with phase (see the module doc), in place: ``it``
    and the rows' phase state of the jobs of every core simulated. Returns those jobs (local indices).

    ``simulate`` is :func:`~netlab.network.tcp.solve.simulate_component` (passed in: that module calls this
    one). Network allocations in classes (priorities) are left to the mean field.
    """
    large = comps.large
    if not large.any() or jobs.priority[large].min() != jobs.priority[large].max():
        return np.empty(0, np.int64)
    sel = large[e.job] & comps.binding[e.link]
    ej, ew = e.job[sel], e.weight[sel].astype(float)
    blinks, el = np.unique(e.link[sel], return_inverse=True)
    c = cap_link[blinks]
    net = np.maximum(it - al.pre_s - al.tail_s, 0.0)
    rate = np.where(net > 0, al.gbit / np.where(net > 0, net, 1.0), al.cap_gbps)
    duty = net / np.maximum(it, 1e-300)
    phi = share_weights(al.gbit, p.alpha) * jobs.share
    mf_jobs = MeanFieldJobs(al.cap_gbps, phi, al.gbit, al.pre_s, al.tail_s)
    kept = Entries(ej.astype(np.int64), el.astype(np.int64), ew)
    lim, label = limited_cores(kept, c, mf_jobs, rate, duty)
    done = []
    for core in np.unique(label[label >= 0]):
        members = np.flatnonzero(label == core)
        if not 2 <= len(members) <= p.max_exact_jobs:
            continue
        in_core = label[ej] == core
        links = np.unique(el[lim & in_core])
        local = np.full(len(c), -1)
        local[links] = np.arange(len(links))
        on = local[el] >= 0
        background = np.zeros(len(links))
        out = on & ~in_core
        np.add.at(background, local[el[out]], ew[out] * duty[ej[out]] * rate[ej[out]])
        left = c[links] - background
        if not (left > 0).all():
            continue
        pos = np.full(len(jobs.job_id), -1)
        pos[members] = np.arange(len(members))
        flows = np.zeros((len(members), len(links)))
        mine = on & in_core
        np.add.at(flows, (pos[ej[mine]], local[el[mine]]), ew[mine])
        res = simulate(now_s, members, flows, left, jobs, al, t, rows, p)
        if res is None:
            continue
        period, anchor = res[0], res[1]
        it[members] = period
        r = rows[members]
        t.anchor_s[r], t.period_s[r], t.anchor_phase[r] = anchor, period, jobs.phase[members]
        done.append(members)
    return np.concatenate(done) if done else np.empty(0, np.int64)
