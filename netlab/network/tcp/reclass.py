"""Running jobs' new classes, weights or caps in the ``tcp`` model, taken in one compiled call
(``TcpNetwork.change_allocations``).

Why: a network policy that sets classes or weights (``crux``, ``joint``) changes tens of running jobs' allocations
in one decision, thousands of times a run on full Philly. Each change through ``TcpNetwork.change`` made four
vectorised numpy updates, a call into compiled code (with the row table's arrays unboxed again) and a row
rewrite in Python. Here one decision's changes run in one call, job by job in the order given, each with the
same operations in the same order as ``change`` makes them, so every sum comes out bit for bit as there:

* the offered load on the job's links (its rate alone, which an allocation's cap bounds): the old rate's
  flows subtracted, the new rate's added;
* whether each of its links can bind, as the offered loads then stand (``update_binding``, before the next
  job's change, as ``change`` runs it);
* its row's allocation fields: the per-flow cap in force, its weight, its class, whether it has a queue of
  its own (what ``SlotTable.rewrite`` writes that an allocation changes; the rest of its demand is the same).
"""

from __future__ import annotations

from ...jit import njit  # numba is imported at the first kernel call
from ..jit import JIT
from ..slots import Rows
from .incremental import update_binding


@njit(**JIT)
def reclass_rows(rows, starts, links, weights, old_rate, new_rate, cap, share, priority, own_queue, offered,
                 capacity, jobs, binding, may_bind, solved, keep, t):  # pragma: no cover  (compiled)
    """Change ``i`` (row ``rows[i]``, its links ``links[starts[i]:starts[i + 1]]`` with ``weights`` flows each)
    from per-flow rate alone ``old_rate[i]`` to ``new_rate[i]`` in ``offered``, its links' binding tests then,
    and its row's ``rate_cap_gbps``, ``share``, ``priority`` and ``own_queue`` set to ``cap[i]``, ``share[i]``,
    ``priority[i]``, ``own_queue[i]``; changes in order. ``t``: the row table, plain (``jit.py``), whose kept
    places follow ``keep`` (``update_binding``)."""
    rt = Rows(*t)
    for i in range(rows.shape[0]):
        a, b = starts[i], starts[i + 1]
        for x in range(a, b):
            offered[links[x]] -= weights[x] * old_rate[i]
        for x in range(a, b):
            offered[links[x]] += weights[x] * new_rate[i]
        update_binding(binding, may_bind, links[a:b], offered, capacity, jobs, t, solved, keep)
        r = rows[i]
        rt.rate_cap_gbps[r], rt.share[r], rt.priority[r], rt.own_queue[r] = cap[i], share[i], priority[i], own_queue[i]
