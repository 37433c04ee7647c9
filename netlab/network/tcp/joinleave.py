"""A joining or leaving job's per-link sums in the ``tcp`` model, in one compiled call each (``TcpNetwork.join``,
``leave``).

Why: every multi-host start and stop of a run joins or leaves the model (~200,000 times on a 100,000-job busy
16k-GPU trace). Each did a dozen vectorised numpy updates on the job's handful of links and three or four calls
into compiled code, each of which unboxes the 32-array row table again (a few microseconds a call, more than the
work). Here the same operations, in the same order per link, run in one call, so the sums come out bit for bit as
the vectorised updates left them (the job's links are distinct ids, as a route gives them, so a loop over them
does what numpy's fancy-indexed ``+=`` does):

* join: the row onto its links' lists with its kept places (``index_kept``); whether it can run alone (no link
  could bind with it: ``adds_nonbinding``); the offered load (isolated rate), flows and active flows added; whether
  each of its links can bind (``update_binding``);
* leave: whether one of its links could bind before it left; the same sums taken off; its load off the links and
  a link left without jobs cleared (``clear_row_load``); the row off its links' lists; a link left without jobs
  set to zero in the sums (no rounding residue); whether each link can bind.

``TcpNetwork.relink`` does both at once for a re-route (``relink.py``).
"""

from __future__ import annotations

import numpy as np

from ...jit import njit  # numba is imported at the first kernel call
from ..jit import JIT
from ..links import LinkArrays
from ..slots import Rows, index_kept, unindex_row
from .incremental import clear_row_load, row_loads, update_binding


@njit(**JIT)
def join_sums(r, new_links, new_weights, rate, share, capacity, jobs, offered, flows, active, binding, may_bind,
              solved, keep, t):
    """Row ``r`` (written, its block of nodes given: ``SlotTable.add`` with ``index=False``) onto the lists of its
    links ``new_links`` (``new_weights`` flows on each) with its places on the ``keep`` links, and its isolated
    rate ``rate`` and share ``share`` of the iteration added to the per-link sums. True if no link could bind
    with it (it runs alone, at ``rate``), as ``adds_nonbinding`` finds it before the sums move. ``t``: the row
    table, plain (``jit.py``)."""
    index_kept(r, t, keep)
    alone = add_sums(new_links, new_weights, rate, share, capacity, offered, flows, active)
    update_binding(binding, may_bind, new_links, offered, capacity, jobs, t, solved, keep)
    return alone


@njit(**JIT)
def add_sums(new_links, new_weights, rate, share, capacity, offered, flows, active):
    """A job's isolated ``rate`` and ``share`` of the iteration added to the per-link sums of ``new_links``
    (``new_weights`` flows on each); True if none of them could bind with it (``adds_nonbinding``, before the
    sums move). Shared by a join and a re-route's join half (``relink.py``)."""
    alone = True
    for k in range(new_links.shape[0]):
        g = new_links[k]
        if offered[g] + new_weights[k] * rate > capacity[g] * (1 + 1e-9):
            alone = False
            break
    for k in range(new_links.shape[0]):
        g, w = new_links[k], new_weights[k]
        offered[g] += w * rate
        flows[g] += w
        active[g] += w * share
    return alone


@njit(**JIT)
def join_alone(r, rate, iter_s, t, load):
    """Row ``r`` runs alone: its per-flow ``rate`` and ``iter_s`` written, and its load onto its links
    (``row_loads``; the caller has announced the write, ``LinkState.write``)."""
    rows = Rows(*t)
    rows.rate_gbps[r], rows.iter_s[r] = rate, iter_s
    one = np.empty(1, np.int64)  # (row_loads takes rows)
    one[0] = r
    row_loads(one, t, load)


@njit(**JIT)
def leave_sums(r, rate, share, links: LinkArrays, offered, flows, active, binding, may_bind, solved, keep, t):
    """Row ``r`` (its links and weights as joined, its isolated rate ``rate`` and share ``share``) out of the
    per-link sums, its load off its links and the row off their lists (left not joined: ``SlotTable.remove``
    frees it). True if one of its links could bind before it left (``adds_nonbinding`` with rate 0 is False).
    ``links``: named or plain (``jit.py``), written after ``LinkState.write``; ``t``: the row table, plain."""
    rows = Rows(*t)
    lk = LinkArrays(*links)
    cap, jobs = lk.capacity_gbps, lk.jobs
    n = rows.n_links[r]
    old = rows.links[r, :n]
    bound = False
    for k in range(n):
        g = old[k]
        if offered[g] + rows.weights[r, k] * 0.0 > cap[g] * (1 + 1e-9):
            bound = True
            break
    for k in range(n):
        g, w = old[k], rows.weights[r, k]
        offered[g] -= w * rate
        flows[g] -= w
        active[g] -= w * share
    clear_row_load(r, t, links)
    unindex_row(r, t)
    rows.joined[r] = False  # (off its lists: SlotTable.remove has nothing to take off)
    for k in range(n):
        g = old[k]
        if jobs[g] == 0:
            offered[g] = flows[g] = active[g] = 0.0
    update_binding(binding, may_bind, old.copy(), offered, cap, jobs, t, solved, keep)
    return bound
