"""tc/HTB shaping through pyroute2, read back from the kernel: applying the same shape twice, or over a tree
left by another layout, ends in the plan's state (root, one class at the rate, the bounded queue)."""

from __future__ import annotations

import os

import pytest

from netlab.testbed import shaping
from netlab.testbed.plan import HtbLayout, LeafQueue

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
    htb = HtbLayout()  # root 1: (0x10000), default class 1:10 (0x10010), queue 10: (0x100000)
    want = {"root": ("htb", 0x10000, 0x10), "classes": {0x10010: 100.0}, "leaves": [("pfifo", 0x100000, 0x10010, 100)]}
    shaping.shape(ipr, idx, htb, 100.0, LeafQueue("pfifo", 100))
    assert tree(ipr, idx) == want
    shaping.shape(ipr, idx, htb, 100.0, LeafQueue("pfifo", 100))  # again: no EEXIST, the same state
    assert tree(ipr, idx) == want
    assert shaping.class_rate_mbit(ipr, idx, htb) == 100.0
    assert shaping.class_counters(ipr, idx, htb) == dict(bytes=0, packets=0, drops=0, overlimits=0, backlog=0, qlen=0)
    # another rate and a byte-limited queue replace the class's rate and the queue's kind
    shaping.shape(ipr, idx, htb, 50.0, LeafQueue("bfifo", 15140))
    assert tree(ipr, idx) == {"root": ("htb", 0x10000, 0x10), "classes": {0x10010: 50.0},
                              "leaves": [("bfifo", 0x100000, 0x10010, 15140)]}
    shaping.set_rate(ipr, idx, htb, 70.0)
    assert shaping.class_rate_mbit(ipr, idx, htb) == 70.0


def test_shape_replaces_a_root_of_another_layout(veth):
    ipr, idx = veth
    ipr.tc("add", "htb", index=idx, handle="1:", default=0x20)  # the same handle, another default class
    shaping.shape(ipr, idx, HtbLayout(), 200.0, None)
    assert tree(ipr, idx) == {"root": ("htb", 0x10000, 0x10), "classes": {0x10010: 200.0}, "leaves": []}
    assert shaping.class_rate_mbit(ipr, idx, HtbLayout("5:", "5:1")) is None  # no such class here
