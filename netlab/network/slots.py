"""One row per job: the table the compiled models (``fair``, ``tcp``) keep their jobs in.

Why rows: a re-solve happens every time a multi-host job starts or stops on a
link that can bind (tens of thousands of times on the full Philly trace, each
over ~50-110 jobs). Running jobs therefore live as rows of arrays (their
links, weights, parameters, last solution and, for ``tcp``, where their
iterations start), so that finding the component a change reaches, solving
it and writing back are compiled calls over named fields; Python touches only
the jobs whose times moved. A freed row is reused (last freed, first reused).

:class:`Rows` is the table as compiled code reads it; :class:`Jobs` the jobs
of one solve (gathered from rows, or built from demands); :class:`Entries`
the job x link incidence of a solve in local indices.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from ..jit import njit  # numba is imported at the first kernel call
from .jit import JIT


class Rows(NamedTuple):
    """The row table (one entry per row; ``links``, ``weights``, ``link_load`` one column per link of the row)."""

    job_id: np.ndarray  # int64; -1: a free row
    joined: np.ndarray  # bool: in the incremental network (the simulator's), not only in batch solves
    n_links: np.ndarray  # int64: links of the row
    links: np.ndarray  # int64 (row, k): directed link ids
    weights: np.ndarray  # (row, k): the job's flows on each link
    link_load: np.ndarray  # (row, k): its time-averaged load there (Gbit/s), to update link loads by difference
    flow_bytes: np.ndarray  # per flow per iteration
    compute_s: np.ndarray
    intra_s: np.ndarray  # serial intra-host phase
    overlap: np.ndarray
    rate_cap_gbps: np.ndarray  # the per-flow cap in force, the pattern's and the allocation's (flow_cap_gbps)
    iso_rate_gbps: np.ndarray  # per-flow rate alone on its placement
    phase: np.ndarray  # as a policy set it (fraction of the period)
    share: np.ndarray  # its allocation's weight inside its class (1: default)
    priority: np.ndarray  # int64: its allocation's class, 0 served first (0: default)
    own_queue: np.ndarray  # bool: an allocation gave it a queue of its own (CommDemand.own_queue)
    iter_s: np.ndarray  # last iteration time reported (NaN: none yet); tcp's warm start
    rate_gbps: np.ndarray  # last per-flow rate (fair)
    anchor_s: np.ndarray  # tcp: one of its iterations started then (NaN: no phase state)
    period_s: np.ndarray  # tcp: its period since
    anchor_phase: np.ndarray  # tcp: the policy's phase when it was anchored (a new one re-anchors it)


class Jobs(NamedTuple):
    """The jobs of one solve, by local index."""

    job_id: np.ndarray  # int64
    flow_bytes: np.ndarray
    compute_s: np.ndarray
    intra_s: np.ndarray
    overlap: np.ndarray
    rate_cap_gbps: np.ndarray  # the per-flow cap in force (pattern and allocation)
    iso_rate_gbps: np.ndarray
    phase: np.ndarray
    share: np.ndarray  # allocation weight inside its class
    priority: np.ndarray  # int64: allocation class, 0 served first
    last_iter_s: np.ndarray  # NaN: none (no warm start)
    own_queue: np.ndarray  # bool: an allocation gave it a queue of its own (CommDemand.own_queue)


class Entries(NamedTuple):
    """The non-zeros of a solve's job x link incidence: one per job and link, in local indices."""

    job: np.ndarray  # int64
    link: np.ndarray  # int64
    weight: np.ndarray  # the job's flows on the link


class Component(NamedTuple):
    """The jobs a change reaches: their rows, their links (global ids) and the incidence in local indices."""

    rows: np.ndarray
    links: np.ndarray
    entries: Entries


_FILL = dict(job_id=-1, joined=False, n_links=0, links=0, weights=0.0, link_load=0.0, share=1.0, iter_s=np.nan,
             rate_gbps=np.nan, anchor_s=np.nan, period_s=np.nan, anchor_phase=np.nan)
_DTYPE = dict(job_id=np.int64, joined=np.bool_, n_links=np.int64, links=np.int64, priority=np.int64, own_queue=np.bool_)
_WIDE = ("links", "weights", "link_load")  # one column per link of the row


def _empty(rows: int, width: int) -> Rows:
    return Rows(*(np.full((rows, width) if f in _WIDE else rows, _FILL.get(f, 0.0), dtype=_DTYPE.get(f, np.float64))
                  for f in Rows._fields))


class SlotTable:
    """Rows of jobs by job id (see the module doc); ``rows`` is what compiled code gets."""

    def __init__(self, rows: int = 64, width: int = 8):
        self.rows = _empty(rows, width)
        self._row: dict[int, int] = {}
        self._free: list[int] = []
        self._used = 0

    def __len__(self) -> int:
        return len(self._row)

    def row(self, job_id: int) -> int | None:
        """The job's row, None if it has none."""
        return self._row.get(job_id)

    def add(self, job_id: int, demand) -> int:
        """A row for a job joining the incremental network: its demand written, no solution, no phase state."""
        r = self._claim(job_id)
        t, k = self.rows, len(demand.links)
        if k > t.links.shape[1]:
            self._grow_width(k)
            t = self.rows
        t.joined[r], t.n_links[r] = True, k
        t.links[r, :k], t.weights[r, :k], t.link_load[r] = demand.links, demand.weights, 0.0
        self._write(r, demand)
        return r

    def claim_ids(self, job_ids) -> np.ndarray:
        """Each job's row, a new one (no demand, no phase state) for a job without one."""
        return np.array([self._row[j] if j in self._row else self._claim(j) for j in job_ids], dtype=np.int64)

    def claim(self, demands) -> np.ndarray:
        """Rows for a batch solve of ``demands`` (in their order): a job keeps its row (and phase state) from
        one solve to the next; its demand is written and it has no warm start."""
        rows = np.empty(len(demands), dtype=np.int64)
        for i, d in enumerate(demands):
            r = self._row.get(d.job_id)
            rows[i] = r = self._claim(d.job_id) if r is None else r
            self._write(r, d)
            self.rows.iter_s[r] = np.nan
        return rows

    def rewrite(self, job_id: int, demand) -> None:
        """A joined job's demand changed in place (its allocation: class, weight, cap): write it again."""
        self._write(self._row[job_id], demand)

    def remove(self, job_id: int) -> int | None:
        """Free the job's row (its phase state goes with it); the row, None if it had none."""
        r = self._row.pop(job_id, None)
        if r is None:
            return None
        t = self.rows
        t.job_id[r], t.joined[r] = -1, False
        t.anchor_s[r] = t.period_s[r] = t.anchor_phase[r] = np.nan
        self._free.append(r)
        return r

    def _claim(self, job_id: int) -> int:
        if self._free:
            r = self._free.pop()
        else:
            if self._used == len(self.rows.job_id):
                self._grow_rows()
            r, self._used = self._used, self._used + 1
        self._row[job_id] = r
        t = self.rows
        t.job_id[r], t.joined[r], t.n_links[r] = job_id, False, 0
        t.iter_s[r] = t.rate_gbps[r] = t.anchor_s[r] = t.period_s[r] = t.anchor_phase[r] = np.nan
        return r

    def _write(self, r: int, d) -> None:
        t = self.rows
        t.flow_bytes[r], t.compute_s[r], t.intra_s[r], t.overlap[r] = d.flow_bytes, d.compute_s, d.serial_intra_s, \
            d.overlap
        t.rate_cap_gbps[r], t.iso_rate_gbps[r], t.phase[r] = d.flow_cap_gbps, d.iso_rate_gbps, d.phase
        t.share[r], t.priority[r], t.own_queue[r] = d.share, d.priority, d.own_queue

    def _grow_rows(self) -> None:
        n = len(self.rows.job_id)
        grown = _empty(2 * n, self.rows.links.shape[1])
        for old, new in zip(self.rows, grown):
            new[:n] = old
        self.rows = grown

    def _grow_width(self, k: int) -> None:
        old = self.rows
        w = max(k, 2 * old.links.shape[1])
        wide = {}
        for f in _WIDE:
            a = getattr(old, f)
            wide[f] = np.zeros((a.shape[0], w), dtype=a.dtype)
            wide[f][:, :a.shape[1]] = a
        self.rows = old._replace(**wide)


def jobs_of(demands) -> Jobs:
    """The :class:`Jobs` of a list of demands (no warm start)."""
    n = len(demands)
    cols = np.array([(d.flow_bytes, d.compute_s, d.serial_intra_s, d.overlap, d.flow_cap_gbps, d.iso_rate_gbps,
                      d.phase, d.share) for d in demands], dtype=np.float64).reshape(n, 8)
    return Jobs(np.array([d.job_id for d in demands], dtype=np.int64), *(cols[:, c].copy() for c in range(8)),
                np.array([d.priority for d in demands], dtype=np.int64), np.full(n, np.nan),
                np.array([d.own_queue for d in demands], dtype=np.bool_))


@njit(**JIT)
def jobs_at(t: Rows, rows) -> Jobs:
    """The :class:`Jobs` of these rows; their last reported iteration time is the warm start."""
    return Jobs(t.job_id[rows], t.flow_bytes[rows], t.compute_s[rows], t.intra_s[rows], t.overlap[rows],
                t.rate_cap_gbps[rows], t.iso_rate_gbps[rows], t.phase[rows], t.share[rows], t.priority[rows],
                t.iter_s[rows], t.own_queue[rows])


@njit(**JIT)
def component(touched, t: Rows, couple) -> Component:
    """The joined rows on the ``touched`` links and those connected to them through shared ``couple`` links.

    ``touched`` is widened in place to every coupling link of the component. Each sweep adds the rows that
    reach a touched link and touches their coupling links, until a sweep adds nothing (a few sweeps: the
    component's diameter). Under ``fair`` every link couples; under ``tcp`` only links that can bind. Rows
    come in row order, links in the order first met: the order every sum over them is taken in.
    """
    n_rows = t.joined.shape[0]
    member = np.zeros(n_rows, dtype=np.bool_)
    grew = True
    while grew:
        grew = False
        for r in range(n_rows):
            if not t.joined[r] or member[r]:
                continue
            for k in range(t.n_links[r]):
                if touched[t.links[r, k]]:
                    member[r] = True
                    break
            if member[r]:
                grew = True
                for k in range(t.n_links[r]):
                    if couple[t.links[r, k]]:
                        touched[t.links[r, k]] = True
    rows = np.flatnonzero(member)
    nnz = 0
    for r in rows:
        nnz += t.n_links[r]
    job, glink, weight = np.empty(nnz, np.int64), np.empty(nnz, np.int64), np.empty(nnz)
    e = 0
    for i in range(rows.shape[0]):
        r = rows[i]
        for k in range(t.n_links[r]):
            job[e], glink[e], weight[e] = i, t.links[r, k], t.weights[r, k]
            e += 1
    if touched.shape[0] <= 128 * nnz:  # a fabric not much larger than the component: a table over its links
        link, comp_links = first_met_table(glink, touched.shape[0])
    else:
        link, comp_links = first_met(glink)
    return Component(rows, comp_links, Entries(job, link, weight))


@njit(**JIT)
def first_met_table(glink, n_links):
    """:func:`first_met` through a table over the fabric's ``n_links`` links (cheaper on small fabrics)."""
    local = np.full(n_links, -1, dtype=np.int64)
    comp_links = np.empty(glink.shape[0], dtype=np.int64)
    link = np.empty(glink.shape[0], dtype=np.int64)
    n = 0
    for e in range(glink.shape[0]):
        g = glink[e]
        if local[g] < 0:
            local[g], comp_links[n] = n, g
            n += 1
        link[e] = local[g]
    return link, comp_links[:n].copy()


@njit(**JIT)
def first_met(glink):
    """Local ids of global link ids, numbered in the order first met, and the global id of each local one.

    By sorting the component's entries rather than through a table over every link of the fabric: a change
    on a large fabric then costs in proportion to its component, not to the fabric (~400,000 links on
    131,072 GPUs)."""
    nnz = glink.shape[0]
    order = np.argsort(glink, kind="mergesort")  # stable: a group's first entry is where its link is first met
    group = np.empty(nnz, np.int64)  # per entry: its link's group (distinct links in sorted order)
    first = np.empty(nnz, np.int64)  # per group: the entry that meets it first
    n = 0
    for s in range(nnz):
        if s == 0 or glink[order[s]] != glink[order[s - 1]]:
            first[n] = order[s]
            n += 1
        group[order[s]] = n - 1
    rank = np.empty(n, np.int64)
    rank[np.argsort(first[:n], kind="mergesort")] = np.arange(n)
    local = np.empty(nnz, np.int64)
    comp_links = np.empty(n, np.int64)
    for s in range(nnz):
        local[s] = rank[group[s]]
        comp_links[local[s]] = glink[s]
    return local, comp_links
