"""One row per job: the table the compiled models (``fair``, ``tcp``) keep their jobs in.

Why rows: a re-solve happens every time a multi-host job starts or stops on a
link that can bind (tens of thousands of times on the full Philly trace, each
over ~50-110 jobs). Running jobs therefore live as rows of arrays (their
links, weights, parameters, last solution and, for ``tcp``, where their
iterations start), so that finding the component a change reaches, solving
it and writing back are compiled calls over named fields; Python touches only
the jobs whose times moved. A freed row is reused (last freed, first reused).

The table also keeps, per link, the joined rows on it (a doubly linked list
of nodes, one node per link of a joined row, updated as rows join and leave),
so finding a component walks its own links and rows, at a cost in proportion
to the component rather than to the whole table (where a component is a large
share of the running jobs, as on a busy rail fabric, the two cost about the
same). The nodes live in blocks, one per
row (kept when the row is reused), not in a column per link of every row: the
index costs memory in proportion to the joined jobs' links, not to rows x the
widest job.

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
    """The row table: one entry per row (``links``, ``weights``, ``link_load`` one column per link of the row),
    then the index's nodes (``node_*``: one per link of a joined row, a row's in one block) and its per-link
    lists and scratch (``link_*``: one entry per link id met so far)."""

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
    n_kept: np.ndarray  # int64: places of the row on kept links (a joined row of a table that keeps some links)
    member: np.ndarray  # bool scratch of the component walk (all False between calls)
    node_base: np.ndarray  # int64: the row's block of nodes (node of ``links[row, k]``: node_base + k; -1: none)
    node_cap: np.ndarray  # int64: its block's size
    node_row: np.ndarray  # int32 per node: its row
    node_next: np.ndarray  # int32 per node: the next node on its link's list (-1: none)
    node_prev: np.ndarray  # int32 per node: the one before (-1: none, the list's head)
    node_kept: np.ndarray  # int32 per node: the row's kept places ``k`` (of ``links[row, k]``), ascending, in the
    # first ``n_kept`` nodes of its block (a block holds a place per link of the row: room for every one)
    link_head: np.ndarray  # int64 per link: the first node on its list (-1: no joined row)
    link_seen: np.ndarray  # bool per link: scratch of the component walk (all False between calls)
    link_local: np.ndarray  # int64 per link: scratch of :func:`first_met_table` (all -1 between calls)


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
             rate_gbps=np.nan, anchor_s=np.nan, period_s=np.nan, anchor_phase=np.nan, n_kept=0, member=False,
             node_base=-1, node_cap=0, node_row=-1, node_next=-1, node_prev=-1, link_head=-1, link_seen=False,
             link_local=-1)
_DTYPE = dict(job_id=np.int64, joined=np.bool_, n_links=np.int64, links=np.int64, priority=np.int64, own_queue=np.bool_,
              n_kept=np.int64, member=np.bool_, node_base=np.int64, node_cap=np.int64, node_row=np.int32,
              node_next=np.int32, node_prev=np.int32, node_kept=np.int32, link_head=np.int64, link_seen=np.bool_,
              link_local=np.int64)
_WIDE = ("links", "weights", "link_load")  # one column per link of the row
_PER_LINK = ("link_head", "link_seen", "link_local")  # one entry per link id
#: one entry per node of the index (unset until in a block)
_PER_NODE = ("node_row", "node_next", "node_prev", "node_kept")


def _column(f: str, shape) -> np.ndarray:
    fill, dtype = _FILL.get(f, 0.0), _DTYPE.get(f, np.float64)
    if f in _PER_NODE:  # a node is written when its row joins, before it is read: pages are mapped as used
        return np.empty(shape, dtype)
    return np.zeros(shape, dtype) if fill == 0 else np.full(shape, fill, dtype)  # (zeros: pages mapped when written)


def _empty(rows: int, width: int, n_links: int = 64, nodes: int = 256) -> Rows:
    return Rows(*(_column(f, (rows, width) if f in _WIDE else n_links if f in _PER_LINK else
                          nodes if f in _PER_NODE else rows) for f in Rows._fields))


class SlotTable:
    """Rows of jobs by job id (see the module doc); ``rows`` is what compiled code gets."""

    def __init__(self, rows: int = 64, width: int = 8):
        self.rows = _empty(rows, width)
        self._row: dict[int, int] = {}
        self._free: list[int] = []
        self._used = 0
        self._nodes_used = 0  # nodes handed out to rows' blocks
        self._free_blocks: dict[int, list[int]] = {}  # blocks rows outgrew, by size: handed out again first

    def __len__(self) -> int:
        return len(self._row)

    def row(self, job_id: int) -> int | None:
        """The job's row, None if it has none."""
        return self._row.get(job_id)

    def add(self, job_id: int, demand, keep=None, index: bool = True) -> int:
        """A row for a job joining the incremental network: its demand written, no solution, no phase state.
        ``keep`` (per link, optional): the links the table keeps the row's places on (:func:`keep_link`), for a
        model that builds components with entries on those links only (``tcp``: :func:`component_rows` with
        ``kept``, ``tcp.incremental.binding_entries``). ``index`` False: the row is not put on its links' lists
        (nor its kept places found); the caller does it (:func:`index_kept`) in a compiled call of its own."""
        r = self._claim(job_id)
        t, k = self.rows, len(demand.links)
        if k > t.links.shape[1]:
            self._grow_width(k)
            t = self.rows
        if k and demand.links.max() >= len(t.link_head):
            self._grow(_PER_LINK, int(demand.links.max()) + 1)
            t = self.rows
        if k > t.node_cap[r]:  # a block of nodes for its links (a power of two; a reused row keeps its block)
            t = self._new_block(r, 1 << (k - 1).bit_length())
        t.joined[r], t.n_links[r] = True, k
        t.links[r, :k], t.weights[r, :k], t.link_load[r] = demand.links, demand.weights, 0.0
        if index and keep is None:
            index_row(r, tuple(t))
        elif index:
            index_kept(r, tuple(t), keep)
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
        if t.joined[r]:
            unindex_row(r, tuple(t))
        t.job_id[r], t.joined[r], t.n_kept[r] = -1, False, 0
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
        t.job_id[r], t.joined[r], t.n_links[r], t.n_kept[r] = job_id, False, 0, 0
        t.iter_s[r] = t.rate_gbps[r] = t.anchor_s[r] = t.period_s[r] = t.anchor_phase[r] = np.nan
        return r

    def _write(self, r: int, d) -> None:
        t = self.rows
        t.flow_bytes[r], t.compute_s[r], t.intra_s[r], t.overlap[r] = d.flow_bytes, d.compute_s, d.serial_intra_s, \
            d.overlap
        t.rate_cap_gbps[r], t.iso_rate_gbps[r], t.phase[r] = d.flow_cap_gbps, d.iso_rate_gbps, d.phase
        t.share[r], t.priority[r], t.own_queue[r] = d.share, d.priority, d.own_queue

    def _new_block(self, r: int, cap: int) -> Rows:
        """Row ``r`` gets a block of ``cap`` nodes (one it outgrew goes to the free blocks); the table."""
        t = self.rows
        if t.node_cap[r]:
            self._free_blocks.setdefault(int(t.node_cap[r]), []).append(int(t.node_base[r]))
        free = self._free_blocks.get(cap)
        if free:
            base = free.pop()
        else:
            if self._nodes_used + cap > len(t.node_row):
                self._grow(_PER_NODE, self._nodes_used + cap)
                t = self.rows
            base, self._nodes_used = self._nodes_used, self._nodes_used + cap
        t.node_base[r], t.node_cap[r] = base, cap
        return t

    def _grow_rows(self) -> None:
        n = len(self.rows.job_id)
        per_row = [f for f in Rows._fields if f not in _PER_LINK + _PER_NODE]
        grown = self.rows._replace(**{f: _column(f, (2 * n,) + getattr(self.rows, f).shape[1:]) for f in per_row})
        for f in per_row:
            getattr(grown, f)[:n] = getattr(self.rows, f)
        self.rows = grown

    def _grow_width(self, k: int) -> None:
        old = self.rows
        w = max(k, 2 * old.links.shape[1])
        wide = {}
        for f in _WIDE:
            a = getattr(old, f)
            wide[f] = _column(f, (a.shape[0], w))
            wide[f][:, :a.shape[1]] = a
        self.rows = old._replace(**wide)

    def _grow(self, fields: tuple, n: int) -> None:
        """The per-link or per-node ``fields`` for at least ``n`` entries (at least twice as many as before)."""
        old = self.rows
        n = max(n, 2 * len(getattr(old, fields[0])))
        new = {f: _column(f, n) for f in fields}
        used = self._nodes_used if fields == _PER_NODE else len(getattr(old, fields[0]))
        for f in fields:
            new[f][:used] = getattr(old, f)[:used]
        self.rows = old._replace(**new)


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
def index_row(r, t: Rows):
    """Row ``r`` (joined, its block of nodes given) onto the lists of its links, at their heads. Named tuple or
    plain (``jit.py``)."""
    t = Rows(*t)
    for k in range(t.n_links[r]):
        g, e = t.links[r, k], t.node_base[r] + k
        head = t.link_head[g]
        t.node_row[e], t.node_next[e], t.node_prev[e] = r, head, -1
        if head >= 0:
            t.node_prev[head] = e
        t.link_head[g] = e


@njit(**JIT)
def unindex_row(r, t: Rows):
    """Row ``r`` off the lists of its links. Named tuple or plain (``jit.py``)."""
    t = Rows(*t)
    for k in range(t.n_links[r]):
        e = t.node_base[r] + k
        nxt, prv = t.node_next[e], t.node_prev[e]
        if prv >= 0:
            t.node_next[prv] = nxt
        else:
            t.link_head[t.links[r, k]] = nxt
        if nxt >= 0:
            t.node_prev[nxt] = prv
        t.node_row[e] = t.node_next[e] = t.node_prev[e] = -1


@njit(**JIT)
def kept_places(r, t: Rows, keep):
    """Row ``r``'s places on the ``keep`` links (per link), ascending, as its kept places. Named tuple or plain
    (``jit.py``)."""
    t = Rows(*t)
    n, base = 0, t.node_base[r]
    for k in range(t.n_links[r]):
        if keep[t.links[r, k]]:
            t.node_kept[base + n] = k
            n += 1
    t.n_kept[r] = n


@njit(**JIT)
def index_kept(r, t: Rows, keep):
    """:func:`index_row` and :func:`kept_places` in one compiled call. Why: each call from Python passes the
    32-array table, and numba's dispatcher types and unboxes every array of it on every call (about 3-5 us, more
    than either kernel's own work on a join). Named tuple or plain (``jit.py``)."""
    t = Rows(*t)
    index_row(r, t)
    kept_places(r, t, keep)


@njit(**JIT)
def keep_link(g, keep, t: Rows):
    """Link ``g`` joined (``keep`` True) or left the kept links: every joined row on it (its list in the index)
    gets its place there added to or taken from its kept places, which stay ascending. Costs in proportion to
    the rows on the link and their kept places, so a table keeps its rows' places on a mask that changes a few
    links at a time (the ``tcp`` model's links that may bind) without a pass over its rows."""
    if g >= t.link_head.shape[0]:  # (a link beyond the index never had a joined row)
        return
    e = t.link_head[g]
    while e >= 0:
        r = t.node_row[e]
        base = t.node_base[r]
        k = e - base
        n = t.n_kept[r]
        j = n
        while j > 0 and t.node_kept[base + j - 1] > k:  # where k goes (or is), from the end
            j -= 1
        if keep:
            for i in range(n, j, -1):
                t.node_kept[base + i] = t.node_kept[base + i - 1]
            t.node_kept[base + j] = k
            t.n_kept[r] = n + 1
        else:  # k is at j - 1
            for i in range(j - 1, n - 1):
                t.node_kept[base + i] = t.node_kept[base + i + 1]
            t.n_kept[r] = n - 1
        e = t.node_next[e]


@njit(**JIT)
def component(touched, t: Rows, couple) -> Component:
    """:func:`component_at` seeded with every ``touched`` link (a pass over the fabric's links to find them)."""
    return component_at(np.flatnonzero(touched), touched, t, couple)


@njit(**JIT)
def _grown(buf, n, size):
    """A new ``buf`` of ``size`` with its first ``n`` entries."""
    out = np.empty(size, buf.dtype)
    out[:n] = buf[:n]
    return out


@njit(**JIT)
def component_at(seeds, touched, t: Rows, couple) -> Component:
    """The joined rows on the ``touched`` links and those connected to them through shared ``couple`` links.

    ``seeds``: the touched links (repeats allowed); ``touched`` may hold more, but only coupling links of the
    component (what an earlier call widened it to). ``touched`` is widened in place to every coupling link of
    the component (:func:`component_rows`). Rows come in row order, links in the order first met: the order
    every sum over them is taken in.
    """
    rows = component_rows(seeds, touched, t, couple)
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
    link, comp_links = first_met_table(glink, t.link_local)
    return Component(rows, comp_links, Entries(job, link, weight))


@njit(**JIT)
def component_rows(seeds, touched, t: Rows, couple, kept=False):
    """The component's rows, in row order (see :func:`component_at`). A walk from the seeds: each link met
    gives its joined rows (the table's per-link lists), each new row its coupling links, until nothing new is
    met: the least set of rows on a touched link whose coupling links are all touched, as a sweep over every
    row until nothing changes would find it, at a cost in proportion to the component. ``touched`` widened in
    place to every coupling link of the component. ``kept``: a row's coupling links are looked for among its
    kept places only (:func:`keep_link`; they must hold every coupling link), so the walk costs in proportion
    to them, not to every link of the rows."""
    n_index = t.link_head.shape[0]
    queue = np.empty(seeds.shape[0] + 1024, np.int64)  # links met, to walk
    n_queue = 0
    for g in seeds:
        if g < n_index and not t.link_seen[g]:  # (a link beyond the index never had a joined row)
            t.link_seen[g] = True
            queue[n_queue] = g
            n_queue += 1
    found = np.empty(256, np.int64)
    n_found = head = 0
    e = -1
    while True:  # the walk, in a kernel of its own that stops where it runs out of room; grown here and resumed
        n_queue, head, e, n_found, done = _walk(queue, n_queue, head, e, found, n_found, touched, t, couple, kept)
        if done:
            break
        if n_found == found.shape[0]:
            found = _grown(found, n_found, 2 * n_found)
        else:
            queue = _grown(queue, n_queue, 2 * queue.shape[0])
    for i in range(n_queue):
        t.link_seen[queue[i]] = False
    rows = np.sort(found[:n_found])
    for r in rows:
        t.member[r] = False
    return rows


@njit(**JIT)
def _walk(queue, n_queue, head, e, found, n_found, touched, t: Rows, couple, kept):
    """:func:`component_rows`' walk from list node ``e`` (-1: the next link of ``queue`` from ``head``) until
    nothing new is met (done) or a new row finds no room in ``found`` or for its links in ``queue`` (not done:
    the caller grows it and calls again from the returned node, that row not taken yet): (n_queue, head, e,
    n_found, done).

    Why a kernel of its own: with ``queue`` and ``found`` arguments, never reassigned inside the loops, the walk
    takes a third of the time it took when they were grown in place (about 30 -> 9 us a re-solve on full Philly:
    an array reassigned in a loop costs its reference counting and reloads at every use)."""
    while True:
        while e >= 0:
            r = t.node_row[e]
            if not t.member[r]:
                n = t.n_kept[r] if kept else t.n_links[r]
                if n_found == found.shape[0] or n_queue + n > queue.shape[0]:  # room for every link of the row
                    return n_queue, head, e, n_found, False
                t.member[r] = True
                found[n_found] = r
                n_found += 1
                base = t.node_base[r]
                for j in range(n):
                    g = t.links[r, t.node_kept[base + j] if kept else j]
                    if couple[g]:
                        touched[g] = True
                        if not t.link_seen[g]:
                            t.link_seen[g] = True
                            queue[n_queue] = g
                            n_queue += 1
            e = t.node_next[e]
        if head == n_queue:
            return n_queue, head, e, n_found, True
        e = t.link_head[queue[head]]
        head += 1


@njit(**JIT)
def first_met_table(glink, local):
    """Local ids of global link ids (``glink``), numbered in the order first met, and the global id of each
    local one, through ``local``: a table over every link id in ``glink``, all -1 on entry and left so (reset
    by id), so a change costs in proportion to its component, not to the fabric (~400,000 links on 131,072
    GPUs), and no table is allocated per call."""
    comp_links = np.empty(glink.shape[0], dtype=np.int64)
    link = np.empty(glink.shape[0], dtype=np.int64)
    n = 0
    for e in range(glink.shape[0]):
        g = glink[e]
        if local[g] < 0:
            local[g], comp_links[n] = n, g
            n += 1
        link[e] = local[g]
    for i in range(n):
        local[comp_links[i]] = -1
    return link, comp_links[:n].copy()


@njit(**JIT)
def relink_row(r, t: Rows, links, weights):
    """Joined row ``r`` moved onto new ``links`` (``weights`` flows on each) in place: what removing the row and
    adding it again leaves (the row a removal frees is the one the next add takes): off its old links' lists and
    onto the heads of its new ones', no load on its links, no solution or phase state. The caller has checked
    that the row's width and block of nodes and the per-link lists hold the new links, and writes the demand's
    other fields (:meth:`SlotTable.rewrite`). Named tuple or plain (``jit.py``).

    Why: a network policy's re-route (a new path choice) moves tens of thousands of rows on full Philly, and a
    removal and an add cost three calls into compiled code and their bookkeeping in Python; the row, its block of
    nodes and the order of the lists come out the same."""
    t = Rows(*t)
    unindex_row(r, t)
    k = links.shape[0]
    t.n_links[r] = k
    for i in range(k):
        t.links[r, i], t.weights[r, i] = links[i], weights[i]
    t.link_load[r, :] = 0.0
    t.iter_s[r] = t.rate_gbps[r] = t.anchor_s[r] = t.period_s[r] = t.anchor_phase[r] = np.nan
    index_row(r, t)
