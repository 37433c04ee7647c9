"""tc/HTB shaping through pyroute2, read back from the kernel: applying the same shape twice, or over a tree
left by another layout, ends in the plan's state (root, the link class at the rate, the default leaf and its
bounded queue); job leaves and u32 filters are ensured, changed in place and removed."""

from __future__ import annotations

import os

import pytest

from netlab.testbed import shaping
from netlab.testbed.plan import HtbLayout, LeafClass, LeafQueue, U32Filter

from .conftest import needs_netadmin

pytestmark = [needs_netadmin]


@pytest.fixture
def veth():
    """(handle, index) of one end of a veth pair inside a throwaway namespace (gone with it)."""
    from pyroute2 import IPRoute, netns

    name = f"netlab-shaping-test-{os.getpid()}"
    netns.create(name)
    ipr = IPRoute(netns=name, flags=0)
    try:
        ipr.link("add", ifname="a0", kind="veth", peer={"ifname": "b0"})
        idx = ipr.link_lookup(ifname="a0")[0]
        ipr.link("set", index=idx, state="up")
        yield ipr, idx
    finally:
        ipr.close()
        netns.remove(name)


def tree(ipr, index) -> dict:
    """The interface's tc state: root qdisc (kind, handle, default), classes (handle -> Mbit), leaf queues."""
    out = {"root": None, "classes": {}, "leaves": []}
    for q in ipr.get_qdiscs(index=index):
        kind = q.get_attr("TCA_KIND")
        if q["parent"] == shaping.TC_H_ROOT:
            init = q.get_attr("TCA_OPTIONS").get_attr("TCA_HTB_INIT") if kind == "htb" else None
            out["root"] = (kind, q["handle"], init["defcls"] if init else None)
        elif kind in ("pfifo", "bfifo"):
            out["leaves"].append((kind, q["handle"], q["parent"], q.get_attr("TCA_OPTIONS")["limit"]))
    for c in ipr.get_classes(index=index):
        out["classes"][c["handle"]] = c.get_attr("TCA_OPTIONS").get_attr("TCA_HTB_PARMS")["rate"] * 8 / 1e6
    return out


def test_shape_is_idempotent_and_reads_back(veth):
    ipr, idx = veth
    htb = HtbLayout()  # root 1: (0x10000), link class 1:1 (0x10001), default class 1:10 (0x10010), queue 10:
    want = {"root": ("htb", 0x10000, 0x10), "classes": {0x10001: 100.0, 0x10010: 0.008},
            "leaves": [("pfifo", 0x100000, 0x10010, 100)]}
    shaping.shape(ipr, idx, htb, 100.0, LeafQueue("pfifo", 100))
    assert tree(ipr, idx) == want
    shaping.shape(ipr, idx, htb, 100.0, LeafQueue("pfifo", 100))  # again: no EEXIST, the same state
    assert tree(ipr, idx) == want
    assert shaping.class_rate_mbit(ipr, idx, htb) == 100.0
    assert shaping.class_counters(ipr, idx, htb) == dict(bytes=0, packets=0, drops=0, overlimits=0, backlog=0, qlen=0)
    # the default class borrows the link: guaranteed almost nothing, the link as ceiling, weight 1
    assert shaping.read_leaves(ipr, idx, htb) == {"1:10": (LeafClass("1:10", 0, 1 << 16, 0.008, 100.0, "10:"),
                                                           LeafQueue("pfifo", 100))}
    # another rate and a byte-limited queue replace the link's rate and the queue's kind
    shaping.shape(ipr, idx, htb, 50.0, LeafQueue("bfifo", 15140))
    assert tree(ipr, idx) == {"root": ("htb", 0x10000, 0x10), "classes": {0x10001: 50.0, 0x10010: 0.008},
                              "leaves": [("bfifo", 0x100000, 0x10010, 15140)]}
    shaping.set_rate(ipr, idx, htb, 70.0)
    assert shaping.class_rate_mbit(ipr, idx, htb) == 70.0


def test_shape_replaces_a_root_of_another_layout(veth):
    ipr, idx = veth
    ipr.tc("add", "htb", index=idx, handle="1:", default=0x20)  # the same handle, another default class
    shaping.shape(ipr, idx, HtbLayout(), 200.0, None)
    assert tree(ipr, idx) == {"root": ("htb", 0x10000, 0x10), "classes": {0x10001: 200.0, 0x10010: 0.008},
                              "leaves": []}
    assert shaping.class_rate_mbit(ipr, idx, HtbLayout("5:", "5:1", link_class=None)) is None  # no such class


def test_shape_rebuilds_the_layout_without_a_link_class(veth):
    """The tree the netns testbed made before it had a link class (1:10 right under the root, same default):
    its default class cannot get siblings, so shaping rebuilds the tree."""
    ipr, idx = veth
    ipr.tc("add", "htb", index=idx, handle="1:", default=0x10)
    ipr.tc("add-class", "htb", index=idx, handle="1:10", parent="1:", rate="100mbit", ceil="100mbit")
    shaping.shape(ipr, idx, HtbLayout(), 100.0, None)
    assert tree(ipr, idx)["classes"] == {0x10001: 100.0, 0x10010: 0.008}
    # Mininet's layout keeps the rate in its one class, and counts the link there
    mn = HtbLayout("5:", "5:1", link_class=None)
    ipr.tc("del", index=idx, root=True)
    shaping.shape(ipr, idx, mn, 30.0, LeafQueue("pfifo", 10))
    assert tree(ipr, idx)["classes"] == {0x50001: 30.0} and shaping.read_leaves(ipr, idx, mn) == {}


def test_leaves_and_filters_are_ensured_changed_in_place_and_removed(veth):
    ipr, idx = veth
    htb, q = HtbLayout(), LeafQueue("pfifo", 50)
    shaping.shape(ipr, idx, htb, 100.0, q)
    leaf = LeafClass("1:105", 3, 2 << 18, 0.008, 25.0, "105:")
    assert shaping.ensure_leaf(ipr, idx, htb, leaf, q, shaping.read_leaves(ipr, idx, htb)) is True
    assert shaping.read_leaves(ipr, idx, htb)["1:105"] == (leaf, q)
    assert shaping.ensure_leaf(ipr, idx, htb, leaf, q, shaping.read_leaves(ipr, idx, htb)) is False  # nothing to do
    moved = LeafClass("1:105", 1, 1 << 18, 0.008, 100.0, "105:")
    assert shaping.ensure_leaf(ipr, idx, htb, moved, LeafQueue("bfifo", 30000), shaping.read_leaves(ipr, idx, htb))
    assert shaping.read_leaves(ipr, idx, htb)["1:105"] == (moved, LeafQueue("bfifo", 30000))
    fs = frozenset({U32Filter("1:105", 12, "10.77.1.5"), U32Filter("1:105", 16, "10.77.1.5")})
    assert shaping.ensure_filters(ipr, idx, htb, 0x105, fs, shaping.read_filters(ipr, idx, htb)) is True
    assert shaping.read_filters(ipr, idx, htb) == {0x105: fs}
    assert shaping.ensure_filters(ipr, idx, htb, 0x105, fs, shaping.read_filters(ipr, idx, htb)) is False
    fewer = frozenset({U32Filter("1:105", 16, "10.77.2.5")})
    assert shaping.ensure_filters(ipr, idx, htb, 0x105, fewer, shaping.read_filters(ipr, idx, htb)) is True
    assert shaping.read_filters(ipr, idx, htb) == {0x105: fewer}
    assert shaping.remove_filters(ipr, idx, htb, 0x105) is True and shaping.read_filters(ipr, idx, htb) == {}
    assert shaping.remove_filters(ipr, idx, htb, 0x105) is False
    assert shaping.remove_leaf(ipr, idx, "1:105") is True
    assert set(shaping.read_leaves(ipr, idx, htb)) == {"1:10"}
    assert shaping.remove_leaf(ipr, idx, "1:105") is False
