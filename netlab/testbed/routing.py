"""Routes, policy rules and addresses through pyroute2, idempotent, and reading them back.

Why a module of its own: the routed testbed's bring-up (:class:`~netlab.testbed.plan.UnicastRoute`
records, multipath included) and the per-job records (:mod:`.jobplan`: job addresses, source routes, path
rules) are carried out the same way, and every call tolerates what is already there (add: EEXIST; remove:
gone already), so re-applying a plan, or cleaning up after a partial failure, converges instead of failing.
Gateways are always on-link (``RTNH_F_ONLINK``): point-to-point veths carry no subnet.
"""

from __future__ import annotations

import errno
from typing import Callable

from .plan import MAIN_TABLE, NextHop, UnicastRoute

RTNH_F_ONLINK = 4
SCOPE_LINK = 253
_GONE = (errno.ESRCH, errno.ENOENT, errno.ENODEV, errno.EADDRNOTAVAIL)


def _hop(nh: NextHop, index_of: Callable[[str], int]) -> dict:
    hop = {"oif": index_of(nh.ifname)}
    if nh.gateway is not None:
        hop.update(gateway=nh.gateway, flags=RTNH_F_ONLINK)
    return hop


def put_route(ipr, route: UnicastRoute, index_of: Callable[[str], int], replace: bool = True) -> None:
    """Create or replace ``route`` (``index_of``: interface name -> index in its namespace); ``replace``
    False: create only (EEXIST when a route to that destination is there)."""
    kw: dict = {"dst": route.dst, "table": route.table}
    if len(route.nexthops) == 1:
        kw.update(_hop(route.nexthops[0], index_of))
        if route.nexthops[0].gateway is None:
            kw["scope"] = SCOPE_LINK
    else:
        kw["multipath"] = [_hop(nh, index_of) for nh in route.nexthops]
    if route.prefsrc is not None:
        kw["prefsrc"] = route.prefsrc
    ipr.route("replace" if replace else "add", **kw)


def del_route(ipr, dst: str, table: int = MAIN_TABLE) -> bool:
    """Remove the route to ``dst``; False when there was none."""
    from pyroute2 import NetlinkError

    try:
        ipr.route("del", dst=dst, table=table)
    except NetlinkError as exc:
        if exc.code in _GONE:
            return False
        raise
    return True


def read_routes(ipr, table: int = MAIN_TABLE) -> dict[str, tuple[tuple[NextHop, ...], str | None]]:
    """IPv4 routes of ``table`` as ``dst -> (next hops, preferred source)`` (interface names resolved)."""
    names = {link["index"]: link.get_attr("IFLA_IFNAME") for link in ipr.get_links()}
    out = {}
    for r in ipr.get_routes(family=2, table=table):
        if r.get_attr("RTA_TABLE") != table or r["type"] != 1:  # unicast only (no local or broadcast routes)
            continue
        dst = f"{r.get_attr('RTA_DST') or '0.0.0.0'}/{r['dst_len']}"
        mp = r.get_attr("RTA_MULTIPATH")
        if mp:
            hops = tuple(NextHop(names.get(h["oif"], "?"), h.get_attr("RTA_GATEWAY")) for h in mp)
        else:
            hops = (NextHop(names.get(r.get_attr("RTA_OIF"), "?"), r.get_attr("RTA_GATEWAY")),)
        out[dst] = (hops, r.get_attr("RTA_PREFSRC"))
    return out


def add_rule(ipr, src: str, dst: str, table: int, priority: int) -> bool:
    """A policy rule ``from src/32 to dst/32 lookup table`` at ``priority``; False when it was there."""
    from pyroute2 import NetlinkError

    try:
        ipr.rule("add", src=src, src_len=32, dst=dst, dst_len=32, table=table, priority=priority)
    except NetlinkError as exc:
        if exc.code == errno.EEXIST:
            return False
        raise
    return True


def del_rule(ipr, src: str, dst: str, table: int, priority: int) -> bool:
    from pyroute2 import NetlinkError

    try:
        ipr.rule("del", src=src, src_len=32, dst=dst, dst_len=32, table=table, priority=priority)
    except NetlinkError as exc:
        if exc.code in _GONE:
            return False
        raise
    return True


def read_rules(ipr, priorities: range) -> set[tuple[str, str, int, int]]:
    """IPv4 policy rules whose priority is in ``priorities`` as ``(src, dst, table, priority)``."""
    out = set()
    for r in ipr.get_rules(family=2):
        prio = r.get_attr("FRA_PRIORITY") or 0
        if prio in priorities:
            table = r.get_attr("FRA_TABLE") or r["table"]
            out.add((r.get_attr("FRA_SRC"), r.get_attr("FRA_DST"), table, prio))
    return out


def add_address(ipr, index: int, address: str, label: str) -> bool:
    """``address``/32 with ``label`` on interface ``index``; False when it was there."""
    from pyroute2 import NetlinkError

    try:
        ipr.addr("add", index=index, address=address, prefixlen=32, label=label)
    except NetlinkError as exc:
        if exc.code == errno.EEXIST:
            return False
        raise
    return True


def del_address(ipr, index: int, address: str) -> bool:
    from pyroute2 import NetlinkError

    try:
        ipr.addr("del", index=index, address=address, prefixlen=32)
    except NetlinkError as exc:
        if exc.code in _GONE:
            return False
        raise
    return True


def read_labels(ipr, index: int) -> dict[str, str]:
    """IPv4 addresses of interface ``index`` that carry a label of their own (``eth0:j3``): address -> label."""
    out = {}
    for a in ipr.get_addr(family=2, index=index):
        label = a.get_attr("IFA_LABEL")
        if label and ":" in label:
            out[a.get_attr("IFA_ADDRESS")] = label
    return out
