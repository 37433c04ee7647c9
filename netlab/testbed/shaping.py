"""Link shaping with tc/HTB through pyroute2: a link's rate as an HTB class, its bounded queue, and reading
both back.

Why a module of its own: both backends shape the same way (the netns testbed builds the HTB tree, Mininet
builds its own and this adds the queue under it and reads it back), and every call is idempotent, so
applying a plan twice, or after a partial failure, ends in the same tc state instead of EEXIST. Rates and
limits arrive as typed values (:class:`~netlab.testbed.plan.HtbLayout`, :class:`~netlab.testbed.plan.LeafQueue`,
Mbit) and become tc's units here, in one place. The callers pass their own pyroute2 handles (one per namespace).
"""

from __future__ import annotations

import errno

from .plan import HtbLayout, LeafQueue

TC_H_ROOT = 0xFFFFFFFF


def rate(rate_mbit: float) -> str:
    """HTB rate string in kbit (whole kbit: the kernel's unit is bytes/s anyway)."""
    return f"{max(1, round(rate_mbit * 1000))}kbit"


def register_bfifo() -> None:
    """Teach pyroute2 the bfifo qdisc: it (0.9) has no bfifo plugin, and for a kind it does not know it sends
    no options (the kernel's default limit) and forces the parent to the root (EEXIST under HTB). bfifo
    takes the same option as pfifo (``struct tc_fifo_qopt { __u32 limit; }``, counted in bytes instead of
    packets), so pfifo's encoder is the right one; ``setdefault`` leaves a future pyroute2's own in place.
    Read back (``tc -s qdisc``): ``qdisc bfifo 10: parent 1:10 limit <bytes>b``."""
    from pyroute2.netlink.rtnl import tcmsg
    from pyroute2.netlink.rtnl.tcmsg import sched_pfifo

    tcmsg.plugins.setdefault("bfifo", sched_pfifo)


def _root_is(ipr, index: int, htb: HtbLayout) -> bool:
    """Whether the interface's root qdisc already is ``htb``'s root with its default class."""
    for msg in ipr.get_qdiscs(index=index):
        if msg["parent"] == TC_H_ROOT and msg["handle"] == htb.root_id and msg.get_attr("TCA_KIND") == "htb":
            init = msg.get_attr("TCA_OPTIONS").get_attr("TCA_HTB_INIT") or {}
            return init.get("defcls") == htb.default_minor
    return False


def shape(ipr, index: int, htb: HtbLayout, rate_mbit: float, queue: LeafQueue | None) -> None:
    """Shape the egress of interface ``index`` to ``rate_mbit`` (rate = ceil) in ``htb``'s default class,
    with ``queue`` under it (None: the kernel's default). Idempotent: an existing root of the same layout is
    kept and its class and queue are replaced; any other root qdisc is replaced."""
    from pyroute2 import NetlinkError

    try:
        ipr.tc("add", "htb", index=index, handle=htb.root, default=htb.default_minor)
    except NetlinkError as exc:
        if exc.code != errno.EEXIST:
            raise
        if not _root_is(ipr, index, htb):
            ipr.tc("del", index=index, parent=TC_H_ROOT)  # e.g. an htb root with another default
            ipr.tc("add", "htb", index=index, handle=htb.root, default=htb.default_minor)
    ipr.tc("replace-class", "htb", index=index, handle=htb.default_class, parent=htb.root,
           rate=rate(rate_mbit), ceil=rate(rate_mbit))
    add_queue(ipr, index, htb, queue)


def add_queue(ipr, index: int, htb: HtbLayout, queue: LeafQueue | None) -> None:
    """The bounded queue under ``htb``'s default class (replacing one that is there); None: leave it."""
    if queue is None:
        return
    from pyroute2 import NetlinkError

    if queue.kind == "bfifo":
        register_bfifo()
    try:
        ipr.tc("replace", queue.kind, index=index, handle=htb.leaf, parent=htb.default_class, limit=queue.limit)
    except NetlinkError as exc:
        if exc.code != errno.EINVAL:
            raise
        # the kernel replaces a queue only by one of its own kind: remove the other kind first
        ipr.tc("del", index=index, handle=htb.leaf, parent=htb.default_class)
        ipr.tc("add", queue.kind, index=index, handle=htb.leaf, parent=htb.default_class, limit=queue.limit)


def set_rate(ipr, index: int, htb: HtbLayout, rate_mbit: float) -> None:
    """Change the rate (and ceil) of the existing default class; a missing class is an error, not created."""
    ipr.tc("change-class", "htb", index=index, handle=htb.default_class, parent=htb.root,
           rate=rate(rate_mbit), ceil=rate(rate_mbit))


def class_rate_mbit(ipr, index: int, htb: HtbLayout) -> float | None:
    """The default class's rate as the kernel has it, or None when there is no such HTB class."""
    for msg in ipr.get_classes(index=index):
        if msg["handle"] == htb.class_id and msg.get_attr("TCA_KIND") == "htb":
            return msg.get_attr("TCA_OPTIONS").get_attr("TCA_HTB_PARMS")["rate"] * 8 / 1e6
    return None


def class_counters(ipr, index: int, htb: HtbLayout) -> dict[str, int]:
    """The default class's counters: bytes, packets, drops (packets its queue refused), overlimits,
    backlog, qlen (zeros when the class is missing)."""
    stats = {}
    for msg in ipr.get_classes(index=index):
        if msg["handle"] == htb.class_id:
            s2 = msg.get_attr("TCA_STATS2")
            stats = {**(s2.get_attr("TCA_STATS_BASIC") or {}), **(s2.get_attr("TCA_STATS_QUEUE") or {})}
    return {k: int(stats.get(k, 0)) for k in ("bytes", "packets", "drops", "overlimits", "backlog", "qlen")}
