"""A policy's view reads the link loads of its moment through a snapshot: the entries written since are saved,
not the whole array (netlab.network.links)."""

import numpy as np
import pytest

from netlab.network.links import LinkState


def _state(n=16):
    links = LinkState(np.full(n, 100.0))
    links.load_gbps[:] = np.arange(n, dtype=float)
    return links


def test_a_snapshot_reads_the_loads_of_its_moment_after_named_writes_without_copying_the_live_array():
    links = _state()
    before = links.load_gbps.copy()
    live = links.load_gbps
    snap = links.snapshot()
    links.write(np.array([2, 3]))
    links.load_gbps[[2, 3]] = [50.0, 60.0]
    links.write(np.array([3, 5]))  # entry 3 again: its value at the snapshot is the first one saved
    links.load_gbps[[3, 5]] = [70.0, 80.0]
    assert links.load_gbps is live  # written in place
    seen = snap.array()
    assert np.array_equal(seen, before)
    links.write(np.array([0]))
    links.load_gbps[0] = 99.0
    assert np.array_equal(snap.array(), before) and seen[0] == 0.0  # its array never changes afterwards


def test_a_write_that_names_no_links_freezes_live_snapshots_into_copies():
    links = _state()
    before = links.load_gbps.copy()
    snap = links.snapshot()
    links.write()
    links.load_gbps[:] = -1.0
    assert np.array_equal(snap.array(), before)
    links.write(np.zeros(0, dtype=np.int64))  # the links are named afterwards (mark): the same
    links.load_gbps[:] = -2.0
    links.mark(np.array([1]))
    assert np.array_equal(snap.array(), before)


def test_a_snapshot_read_before_any_write_is_the_live_array_lent_and_copied_before_the_next_write():
    links = _state()
    snap = links.snapshot()
    seen = snap.array()
    assert seen is links.load_gbps
    links.write(np.array([4]))
    links.load_gbps[4] = 123.0
    assert seen[4] == 4.0 and links.load_gbps[4] == 123.0


def test_a_long_log_is_folded_into_a_copy_and_a_dead_snapshot_costs_nothing():
    links = _state(8)
    before = links.load_gbps.copy()
    snap = links.snapshot()
    for i in range(8):  # a quarter of the links saved: a copy is cheaper from then on
        links.write(np.array([i]))
        links.load_gbps[i] = 1000.0 + i
    assert np.array_equal(snap.array(), before)
    del snap
    links.snapshot()  # nobody keeps it: the next write saves nothing
    links.write(np.array([0]))
    assert links._snapshots == []


def test_naming_more_links_after_a_write_that_named_them_is_refused_while_a_snapshot_is_live():
    links = _state()
    snap = links.snapshot()
    links.write(np.array([1]))
    with pytest.raises(RuntimeError, match="snapshot was live"):
        links.mark(np.array([2]))
    assert snap is not None
