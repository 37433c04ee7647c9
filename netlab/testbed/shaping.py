"""Link shaping with tc/HTB through pyroute2: a link's rate, its leaf classes (the default one and one per job
with a network allocation), their bounded queues, u32 classifiers, and reading all of it back.

Why a module of its own: both backends shape the same way (the netns testbed builds the HTB tree, Mininet
builds its own and this adds the queue under it and reads it back), and every call is idempotent, so
applying a plan twice, or after a partial failure, ends in the same tc state instead of EEXIST; the
``ensure_*`` calls read the kernel's state first and write only what differs, so applying the same plan
again sends nothing. Rates and limits arrive as typed values (:class:`~netlab.testbed.plan.HtbLayout`,
:class:`~netlab.testbed.plan.LeafClass`, :class:`~netlab.testbed.plan.LeafQueue`, Mbit) and become tc's
units here, in one place. The callers pass their own pyroute2 handles (one per namespace).
"""

from __future__ import annotations

import errno
import struct

from .plan import QUANTUM_BYTES, HtbLayout, LeafClass, LeafQueue, U32Filter, default_leaf, tc_handle

TC_H_ROOT = 0xFFFFFFFF
ETH_P_IP = 0x0800


def kbit(rate_mbit: float) -> int:
    """Whole kbit, at least 1: what :func:`rate` sends and what a read-back is compared in."""
    return max(1, round(rate_mbit * 1000))


def rate(rate_mbit: float) -> str:
    """HTB rate string in kbit (whole kbit: the kernel's unit is bytes/s anyway)."""
    return f"{kbit(rate_mbit)}kbit"


def register_bfifo() -> None:
    """Teach pyroute2 the bfifo qdisc: it (0.9) has no bfifo plugin, and for a kind it does not know it sends
    no options (the kernel's default limit) and forces the parent to the root (EEXIST under HTB). bfifo
    takes the same option as pfifo (``struct tc_fifo_qopt { __u32 limit; }``, counted in bytes instead of
    packets), so pfifo's encoder is the right one; ``setdefault`` leaves a future pyroute2's own in place.
    Read back (``tc -s qdisc``): ``qdisc bfifo 10: parent 1:10 limit <bytes>b``."""
    from pyroute2.netlink.rtnl import tcmsg
    from pyroute2.netlink.rtnl.tcmsg import sched_pfifo

    tcmsg.plugins.setdefault("bfifo", sched_pfifo)


def _tree_is(ipr, index: int, htb: HtbLayout) -> bool:
    """Whether the interface's root qdisc already is ``htb``'s root with its default class, and (with a link
    class) the default class, if there, hangs off the link class."""
    root_ok = False
    for msg in ipr.get_qdiscs(index=index):
        if msg["parent"] == TC_H_ROOT and msg["handle"] == htb.root_id and msg.get_attr("TCA_KIND") == "htb":
            init = msg.get_attr("TCA_OPTIONS").get_attr("TCA_HTB_INIT") or {}
            root_ok = init.get("defcls") == htb.default_minor
    if not root_ok or htb.link_class is None:
        return root_ok
    parents = {c["handle"]: c["parent"] for c in ipr.get_classes(index=index)}
    return htb.class_id not in parents or parents[htb.class_id] == tc_handle(htb.link_class)


def shape(ipr, index: int, htb: HtbLayout, rate_mbit: float, queue: LeafQueue | None,
          quantum: int = QUANTUM_BYTES) -> None:
    """Shape the egress of interface ``index`` to ``rate_mbit`` (rate = ceil) in ``htb``'s rate class, with
    the default class under it (a link class's default leaf) and ``queue`` under that (None: the kernel's
    default); ``quantum``: the default leaf's bytes per turn. Idempotent: an existing root of the same layout
    is kept and its classes and queue are replaced; any other root qdisc is replaced."""
    from pyroute2 import NetlinkError

    try:
        ipr.tc("add", "htb", index=index, handle=htb.root, default=htb.default_minor)
    except NetlinkError as exc:
        if exc.code != errno.EEXIST:
            raise
        if not _tree_is(ipr, index, htb):
            ipr.tc("del", index=index, parent=TC_H_ROOT)  # e.g. an htb root with another default
            ipr.tc("add", "htb", index=index, handle=htb.root, default=htb.default_minor)
    ipr.tc("replace-class", "htb", index=index, handle=htb.rate_class, parent=htb.root,
           rate=rate(rate_mbit), ceil=rate(rate_mbit))
    if htb.link_class is not None:
        _put_leaf(ipr, index, htb, default_leaf(htb, rate_mbit, quantum))
    add_queue(ipr, index, htb, queue)


def add_queue(ipr, index: int, htb: HtbLayout, queue: LeafQueue | None) -> None:
    """The bounded queue under ``htb``'s default class (replacing one that is there); None: leave it."""
    _put_queue(ipr, index, htb.default_class, htb.leaf, queue)


def _put_queue(ipr, index: int, classid: str, handle: str, queue: LeafQueue | None) -> None:
    if queue is None:
        return
    from pyroute2 import NetlinkError

    if queue.kind == "bfifo":
        register_bfifo()
    try:
        ipr.tc("replace", queue.kind, index=index, handle=handle, parent=classid, limit=queue.limit)
    except NetlinkError as exc:
        if exc.code != errno.EINVAL:
            raise
        # the kernel replaces a queue only by one of its own kind: remove the other kind first
        ipr.tc("del", index=index, handle=handle, parent=classid)
        ipr.tc("add", queue.kind, index=index, handle=handle, parent=classid, limit=queue.limit)


def _put_leaf(ipr, index: int, htb: HtbLayout, leaf: LeafClass) -> None:
    ipr.tc("replace-class", "htb", index=index, handle=leaf.classid, parent=htb.link_class, prio=leaf.prio,
           quantum=leaf.quantum, rate=rate(leaf.rate_mbit), ceil=rate(leaf.ceil_mbit))


def set_rate(ipr, index: int, htb: HtbLayout, rate_mbit: float) -> None:
    """Change the rate (and ceil) of the existing rate class; a missing class is an error, not created. The
    leaves' ceilings are the caller's (:mod:`.jobnet` re-applies them with the link's new rate)."""
    ipr.tc("change-class", "htb", index=index, handle=htb.rate_class, parent=htb.root,
           rate=rate(rate_mbit), ceil=rate(rate_mbit))


def class_rate_mbit(ipr, index: int, htb: HtbLayout) -> float | None:
    """The link's rate as the kernel has it (the rate class), or None when there is no such HTB class."""
    for msg in ipr.get_classes(index=index):
        if msg["handle"] == htb.rate_class_id and msg.get_attr("TCA_KIND") == "htb":
            return msg.get_attr("TCA_OPTIONS").get_attr("TCA_HTB_PARMS")["rate"] * 8 / 1e6
    return None


COUNTERS = ("bytes", "packets", "drops", "overlimits", "backlog", "qlen")


def leaf_counters(ipr, index: int) -> dict[int, dict[str, int]]:
    """Counters of every leaf class (no class below it) by class handle: bytes, packets, drops (packets its
    queue refused), overlimits, backlog, qlen."""
    msgs = list(ipr.get_classes(index=index))
    inner = {m["parent"] for m in msgs}
    out = {}
    for msg in msgs:
        if msg["handle"] in inner:
            continue
        s2 = msg.get_attr("TCA_STATS2")
        stats = {**(s2.get_attr("TCA_STATS_BASIC") or {}), **(s2.get_attr("TCA_STATS_QUEUE") or {})} if s2 else {}
        out[msg["handle"]] = {k: int(stats.get(k, 0)) for k in COUNTERS}
    return out


def class_counters(ipr, index: int, htb: HtbLayout) -> dict[str, int]:
    """The link's counters: the sum over its leaf classes (the default class and any job's; zeros when there
    are none). Every packet the link sends passes exactly one leaf."""
    total = dict.fromkeys(COUNTERS, 0)
    for c in leaf_counters(ipr, index).values():
        for k in COUNTERS:
            total[k] += c[k]
    return total


# -- leaves and classifiers: read back, ensure, remove ---------------------------------------------------
def read_leaves(ipr, index: int, htb: HtbLayout) -> dict[str, tuple[LeafClass, LeafQueue | None]]:
    """The leaf classes under ``htb``'s link class as :class:`LeafClass` records (rates to the kbit) with the
    queue under each (None: the kernel's default), by class handle text (``"1:10"``)."""
    if htb.link_class is None:
        return {}
    parent = tc_handle(htb.link_class)
    queues = {}
    for q in ipr.get_qdiscs(index=index):
        kind = q.get_attr("TCA_KIND")
        if kind in ("pfifo", "bfifo"):
            queues[q["parent"]] = (q["handle"], LeafQueue(kind, int(q.get_attr("TCA_OPTIONS")["limit"])))
    out = {}
    for c in ipr.get_classes(index=index):
        if c["parent"] != parent or c.get_attr("TCA_KIND") != "htb":
            continue
        p = c.get_attr("TCA_OPTIONS").get_attr("TCA_HTB_PARMS")
        handle, queue = queues.get(c["handle"], (None, None))
        text = handle_text(c["handle"])
        out[text] = (LeafClass(text, int(p["prio"]), int(p["quantum"]), p["rate"] * 8 / 1e6, p["ceil"] * 8 / 1e6,
                               handle_text(handle) if handle is not None else ""), queue)
    return out


def handle_text(handle: int) -> str:
    """The kernel's 32-bit handle as tc writes it (``0x10105`` -> ``"1:105"``, ``0x1050000`` -> ``"105:"``)."""
    major, minor = handle >> 16, handle & 0xFFFF
    return f"{major:x}:{minor:x}" if minor else f"{major:x}:"


def same_leaf(a: LeafClass, b: LeafClass) -> bool:
    return (a.classid, a.prio, a.quantum, kbit(a.rate_mbit), kbit(a.ceil_mbit)) == \
        (b.classid, b.prio, b.quantum, kbit(b.rate_mbit), kbit(b.ceil_mbit))


def ensure_leaf(ipr, index: int, htb: HtbLayout, leaf: LeafClass, queue: LeafQueue | None,
                have: dict[str, tuple[LeafClass, LeafQueue | None]]) -> bool:
    """Make ``leaf`` (with ``queue`` under it) exist as given, changing a class in place (its counters and
    queued packets stay); ``have`` is :func:`read_leaves`' answer. Returns whether anything was written."""
    now = have.get(leaf.classid)
    wrote = False
    if now is None or not same_leaf(now[0], leaf):
        _put_leaf(ipr, index, htb, leaf)
        wrote = True
    if queue is not None and (now is None or now[1] != queue or now[0].queue_handle != leaf.queue_handle):
        _put_queue(ipr, index, leaf.classid, leaf.queue_handle, queue)
        wrote = True
    return wrote


def remove_leaf(ipr, index: int, classid: str) -> bool:
    """Delete a leaf class and its queue; False when it was not there. Its filters must be gone first (the
    kernel refuses to delete a class a filter still points to)."""
    from pyroute2 import NetlinkError

    try:
        ipr.tc("del-class", index=index, handle=classid)
    except NetlinkError as exc:
        if exc.code in (errno.ENOENT, errno.EINVAL, errno.ENODEV):
            return False
        raise
    return True


def read_filters(ipr, index: int, htb: HtbLayout) -> dict[int, frozenset[U32Filter]]:
    """The u32 classifiers on ``htb``'s root by preference (each preference is one job's), as
    :class:`U32Filter` sets. Only single-key address matches are understood; any other u32 node reads as a
    filter of class "?" so that it never equals a plan's."""
    import ipaddress

    out: dict[int, set[U32Filter]] = {}
    for f in ipr.get_filters(index=index, parent=htb.root_id):
        if f.get_attr("TCA_KIND") != "u32":
            continue
        opts = f.get_attr("TCA_OPTIONS")
        sel = opts.get_attr("TCA_U32_SEL") if opts is not None else None
        if sel is None:
            continue  # the hash table node every preference has
        pref = f["info"] >> 16
        keys = _u32_keys(sel)
        classid = opts.get_attr("TCA_U32_CLASSID")
        if len(keys) == 1 and keys[0][0] == 0xFFFFFFFF and classid is not None:
            _, value, offset = keys[0]
            out.setdefault(pref, set()).add(U32Filter(handle_text(classid), offset,
                                                      str(ipaddress.IPv4Address(value))))
        else:
            out.setdefault(pref, set()).add(U32Filter("?", -1, repr(keys)))
    return {p: frozenset(v) for p, v in out.items()}


def _u32_keys(sel) -> list[tuple[int, int, int]]:
    """(mask, value, offset) of each key of a u32 selector. Decoded here: pyroute2 0.9 reads the keys four
    bytes too early (``struct tc_u32_sel`` is 16 bytes after the attribute's 4-byte header, it starts at 16)."""
    raw = bytes(sel.data[sel.offset: sel.offset + sel.length])
    nkeys = raw[4 + 2]
    return [(*struct.unpack_from(">II", raw, 20 + 16 * k), struct.unpack_from("=i", raw, 28 + 16 * k)[0])
            for k in range(nkeys)]


def _u32_key(f: U32Filter) -> str:
    import ipaddress

    return f"0x{int(ipaddress.IPv4Address(f.address)):08x}/0xffffffff+{f.offset}"


def ensure_filters(ipr, index: int, htb: HtbLayout, pref: int, filters: frozenset[U32Filter],
                   have: dict[int, frozenset[U32Filter]]) -> bool:
    """Make preference ``pref`` hold exactly ``filters`` (``have``: :func:`read_filters`' answer). A
    preference that differs is replaced whole: its filters are removed and added again, so for that instant
    the job's packets go to the default class. Returns whether anything was written."""
    if have.get(pref) == filters:
        return False
    if pref in have:
        remove_filters(ipr, index, htb, pref)
    for f in sorted(filters, key=lambda f: (f.offset, f.address, f.classid)):
        ipr.tc("add-filter", "u32", index=index, parent=htb.root, prio=pref, protocol=ETH_P_IP, target=f.classid,
               keys=[_u32_key(f)])
    return True


def remove_filters(ipr, index: int, htb: HtbLayout, pref: int) -> bool:
    """Delete every u32 filter of preference ``pref``; False when there was none."""
    from pyroute2 import NetlinkError

    try:  # pyroute2's u32 encoder wants a target even to delete; the kernel drops the whole preference
        ipr.tc("del-filter", "u32", index=index, parent=htb.root, prio=pref, protocol=ETH_P_IP, target=0)
    except NetlinkError as exc:
        if exc.code in (errno.ENOENT, errno.EINVAL, errno.ENODEV):
            return False
        raise
    return True
