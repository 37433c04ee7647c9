"""A re-routed job's per-link sums in the ``tcp`` model, moved in one compiled call (``TcpNetwork.relink``).

Why: a network policy that chooses paths (``crux``) re-routes a running job tens of thousands of times on full
Philly. Leaving and joining again (``TcpNetwork.leave``, ``join``) did it in a dozen vectorised numpy updates and
three calls into compiled code, each a few microseconds for a job on a handful of links. Here the same
operations, in the same order per link, run in one call, so the sums come out bit for bit as leave + join leave
them:

* off the old links: the offered load (isolated rate), flows and active flows, subtracted; the row's load on
  them taken off the links' loads; a link left without jobs set to zero (no rounding residue);
* onto the new links: the same, added;
* whether each link of either set can bind, as the offered loads now stand.

The fabric has already moved the job's count on ``jobs`` (off the old links, onto the new ones); leave ran with
the count off the old links only, so the old links' checks run with the new links' counts one less.
"""

from __future__ import annotations

from ...jit import njit  # numba is imported at the first kernel call
from ..jit import JIT
from ..links import LinkArrays
from ..slots import Rows, kept_places, relink_row
from .incremental import update_binding
from .joinleave import add_sums


@njit(**JIT)
def relink_sums(r, n_old, row_links, row_weights, row_load, old_rate, old_share, new_links, new_weights, new_rate,
                new_share, links: LinkArrays, offered, flows, active, binding, may_bind, solved, keep, t):
    """Row ``r``'s ``n_old`` links (``row_links[r]``, ``row_weights[r]``, its load there ``row_load[r]``, its
    isolated rate ``old_rate`` and share ``old_share``) exchanged in the per-link sums for ``new_links`` (distinct
    ids, as a route gives them, ``new_weights`` flows on each). Returns (some old link could bind before, no new
    link can bind after: the job runs at its isolated rate), as ``TcpNetwork.leave`` and ``join`` find them; the
    row's load on its links is left at zero. ``links``: named or plain (``jit.py``); ``t``: the row table, plain,
    whose kept places follow ``keep`` (``update_binding``; the row's own are the caller's to rebuild once it
    has moved)."""
    links = LinkArrays(*links)
    cap, jobs, load = links.capacity_gbps, links.jobs, links.load_gbps
    old = row_links[r, :n_old]
    bound = False  # leave: could an old link bind before (``adds_nonbinding`` with rate 0)
    for k in range(n_old):
        g = old[k]
        if offered[g] + row_weights[r, k] * 0.0 > cap[g] * (1 + 1e-9):
            bound = True
            break
    for k in range(n_old):  # leave: the sums off the old links (each its own pass there: the same values)
        g, w = old[k], row_weights[r, k]
        offered[g] -= w * old_rate
        flows[g] -= w
        active[g] -= w * old_share
    for g in new_links:  # the counts as leave saw them (the fabric has counted the job on its new links)
        jobs[g] -= 1
    for k in range(n_old):  # leave: the row's load off (``clear_row_load``), an emptied link to zero
        g = old[k]
        load[g] -= row_load[r, k]
        row_load[r, k] = 0.0
        if jobs[g] == 0:
            load[g] = links.overload_gbps[g] = links.queue_frac[g] = 0.0
    for k in range(n_old):
        g = old[k]
        if jobs[g] == 0:
            offered[g] = flows[g] = active[g] = 0.0
    for g in new_links:
        jobs[g] += 1
    # join: no new link can bind with it (``adds_nonbinding`` with its rate); the sums onto the new links
    alone = add_sums(new_links, new_weights, new_rate, new_share, cap, offered, flows, active)
    # whether each link can bind: an old-only link as leave left it (its count is final), the new ones after
    update_binding(binding, may_bind, old, offered, cap, jobs, t, solved, keep)
    update_binding(binding, may_bind, new_links, offered, cap, jobs, t, solved, keep)
    return bound, alone


@njit(**JIT)
def relink_in_place(r, n_old, old_rate, old_share, new_links, new_weights, new_rate, new_share, links: LinkArrays,
                    offered, flows, active, binding, may_bind, solved, keep, t):
    """:func:`relink_sums` of row ``r`` (of the row table ``t``, plain), then, if the row holds the new links
    (its width, its block of nodes, the per-link lists), the row moved onto them in place
    (:func:`~netlab.network.slots.relink_row`) with its places on the ``keep`` links kept
    (:func:`~netlab.network.slots.kept_places`): (bound, alone, moved). Not moved: the caller removes the row
    and adds it again (it must grow).

    Why one call: each call into compiled code unboxes the row table's arrays (a few microseconds), and a
    re-route made three (the sums, the row, its kept places) tens of thousands of times a run; the same
    operations in the same order."""
    rows = Rows(*t)
    bound, alone = relink_sums(r, n_old, rows.links, rows.weights, rows.link_load, old_rate, old_share, new_links,
                               new_weights, new_rate, new_share, links, offered, flows, active, binding, may_bind,
                               solved, keep, t)
    k = new_links.shape[0]
    fits = k <= rows.links.shape[1] and k <= rows.node_cap[r]
    if fits and k:
        fits = new_links.max() < rows.link_head.shape[0]
    if fits:
        relink_row(r, t, new_links, new_weights)
        kept_places(r, t, keep)
    return bound, alone, fits
