"""Changes cost what they reach: the links a network model names as written, the history that reads only those,
and a component's local link numbering through a table kept between calls."""

import math

import numpy as np
import pandas as pd
import pytest

from netlab.network.links import LinkState
from netlab.network.slots import first_met_table
from netlab.sim import history as hist
from netlab.sim.metrics import link_summary
from netlab.sim.simulator import SimConfig, Simulator
from netlab.topology import load_topology
from netlab.traces import poisson_trace
from netlab.workload.job import jobs_from_frame

TOPO = load_topology("leafspine,racks=4,hosts_per_rack=4,gpus_per_host=8,oversub=4")


def test_link_state_names_the_links_written_or_says_any():
    s = LinkState(np.ones(6), track_changes=True)
    s.write(np.array([1, 2]))
    s.mark(np.array([4]))
    assert sorted(s.take_changed().tolist()) == [1, 2, 4]
    assert s.take_changed().tolist() == []  # counting starts again
    s.write(np.array([0]))
    s.write()  # a writer that names nothing may have changed any link
    s.mark(np.array([3]))
    assert s.take_changed() is None
    s.write(np.array([5]))
    assert s.take_changed().tolist() == [5]
    quiet = LinkState(np.ones(3))  # not tracked unless asked: nothing is kept
    quiet.write(np.array([1]))
    assert quiet.take_changed() is None and quiet._changed == []


@pytest.mark.parametrize("seed", range(5))
def test_first_met_numbers_links_in_the_order_met(seed):
    rng = np.random.default_rng(seed)
    glink = rng.integers(0, 50, size=int(rng.integers(0, 200)))
    table = np.full(50, -1)
    local, comp = first_met_table(glink, table)
    # by hand: the first time a link is met it gets the next number
    seen: dict = {}
    for g in glink.tolist():
        seen.setdefault(g, len(seen))
    assert comp.tolist() == list(seen)
    assert local.tolist() == [seen[g] for g in glink.tolist()]
    assert (table == -1).all()  # the table is left as found, for the next call


class _Checked(hist.AggregateHistory):
    """An aggregated history that checks, at every record, that each link whose load or overload differs from the
    previous record's is among the links named."""

    def __init__(self, resolution_s):
        super().__init__(resolution_s)
        self.prev = None
        self.named = self.records = 0

    def record(self, now, load, overload, changed=None):
        if self.prev is not None and changed is not None:
            moved = np.flatnonzero((load != self.prev[0]) | (overload != self.prev[1]))
            assert set(moved.tolist()) <= set(np.asarray(changed).tolist()), now
            self.named += 1
        self.records += 1
        self.prev = (np.array(load), np.array(overload))
        super().record(now, load, overload, changed)


@pytest.mark.parametrize("resolution_s", [600.0, math.inf])
def test_tcp_names_every_link_it_writes_and_the_history_keeps_the_bytes(resolution_s, monkeypatch):
    df = poisson_trace(jobs=300, load=0.9, cluster_gpus=TOPO.total_gpus, seed=4, llm=0.2)
    jobs = jobs_from_frame(df, TOPO)
    full = Simulator(TOPO, jobs, "tiresias", "consolidated", None, SimConfig(network="tcp")).run()
    checked = _Checked(resolution_s)
    monkeypatch.setattr("netlab.sim.simulator.make_history", lambda mode, res: checked)
    agg = Simulator(TOPO, jobs, "tiresias", "consolidated", None,
                    SimConfig(network="tcp", link_history="aggregate", link_resolution_s=resolution_s)).run()
    assert checked.records > 100 and checked.named == checked.records - 1  # tcp named its links every time
    pd.testing.assert_frame_equal(agg.jobs, full.jobs)
    per_full = link_summary(full.links).set_index("link").bytes
    per_agg = link_summary(agg.links).set_index("link").bytes
    pd.testing.assert_series_equal(per_agg.sort_index(), per_full.sort_index(), rtol=1e-9)
    assert agg.summary["overload_gbit"] == pytest.approx(full.summary["overload_gbit"], rel=1e-9)


def _aggregate(records, close_s, resolution_s=math.inf, topology=TOPO):
    h = hist.AggregateHistory(resolution_s)
    for now, load, over, changed in records:
        h.record(now, np.array(load), np.array(over), None if changed is None else np.array(changed))
    h.close(close_s)
    return h.frame(topology)


def test_aggregate_splits_a_link_only_where_its_load_or_overload_changes():
    """A link named as changed whose values are the same keeps integrating from its last change: the sums are
    one product per real change, and the same bits whichever links the writer named (none: a full pass).
    By hand, over a 1 s span (the table's load is the sum over 1 s): link 0 carries 0.1 Gbit/s from 0 to 1 s,
    named at 0.1 and 0.2 s without changing: 0.1 x 1.0 in one product (split at each naming it would be
    0.1 x 0.1 + 0.1 x 0.1 + 0.1 x 0.8 = 0.10000000000000002). Link 1 carries 2 (overload 0.5) until 0.2 s,
    then 3 (overload 0): 2 x 0.2 + 3 x 0.8; overload 0.5 x 0.2. Link 2 carries 1 with an overload that changes
    alone at 0.1 s (0.25 -> 0.75): split there, 1 x 0.1 + 1 x 0.9 and 0.25 x 0.1 + 0.75 x 0.9."""
    loads = [(0.0, [0.1, 2.0, 1.0], [0.0, 0.5, 0.25]), (0.1, [0.1, 2.0, 1.0], [0.0, 0.5, 0.75]),
             (0.2, [0.1, 3.0, 1.0], [0.0, 0.0, 0.75])]
    named = _aggregate([(t, ld, ov, [0, 1, 2, 2, 0]) for t, ld, ov in loads], 1.0)
    every = _aggregate([(t, ld, ov, None) for t, ld, ov in loads], 1.0)
    pd.testing.assert_frame_equal(named, every)
    assert named.link.tolist() == [0, 1, 2]
    assert named.load_gbps.tolist() == [0.1 * (1.0 - 0.0), 2.0 * (0.2 - 0.0) + 3.0 * (1.0 - 0.2),
                                        1.0 * (0.1 - 0.0) + 1.0 * (1.0 - 0.1)]
    assert named.overload_gbps.tolist() == [0.0, 0.5 * (0.2 - 0.0), 0.25 * (0.1 - 0.0) + 0.75 * (1.0 - 0.1)]
    assert named.load_gbps[0] != 0.1 * (0.1 - 0.0) + 0.1 * (0.2 - 0.1) + 0.1 * (1.0 - 0.2)  # the test can tell


@pytest.mark.parametrize("seed", range(10))
def test_aggregate_is_the_same_bits_whatever_superset_of_the_changed_links_is_named(seed):
    """Random loads on a fabric's links, each record changing a few (some back to an earlier value, some to
    idle): naming exactly those, those plus others (with repeats), or none (a full pass) gives the same table,
    bit for bit, across bins."""
    rng = np.random.default_rng(seed)
    topo = load_topology("leafspine,racks=16,hosts_per_rack=8,gpus_per_host=1")
    n = len(topo.link_capacity_gbps)
    load, over = np.zeros(n), np.zeros(n)
    exact, extra, none = [], [], []
    for k in range(60):
        moved = rng.choice(n, size=int(rng.integers(1, 12)), replace=False)
        load[moved] = np.where(rng.random(len(moved)) < 0.3, 0.0, rng.integers(1, 5, len(moved)) * 0.1)
        over[moved] = np.where(rng.random(len(moved)) < 0.5, 0.0, rng.random(len(moved)))
        now = k * 0.37
        named = np.concatenate([moved, rng.integers(0, n, 6), moved[:2]])
        exact.append((now, load.copy(), over.copy(), moved))
        extra.append((now, load.copy(), over.copy(), named))
        none.append((now, load.copy(), over.copy(), None))
    assert max(len(r[3]) for r in extra) < n // 10  # the named lists are read as lists, not by a full pass
    frames = [_aggregate(recs, 60 * 0.37, resolution_s=5.0, topology=topo) for recs in (exact, extra, none)]
    assert len(frames[0]) > 200
    for other in frames[1:]:
        pd.testing.assert_frame_equal(frames[0], other, check_exact=True)


def test_aggregate_idle_link_named_stays_out_of_the_table():
    """A link named while idle (load 0; an overload beside load 0 is not kept) gets no row; a link busy then idle
    gets its busy time only: 4 x 0.5 over a 1 s bin."""
    recs = [(0.0, [0.0, 4.0, 0.0], [0.0, 0.0, 0.3], [0, 1, 2]), (0.5, [0.0, 0.0, 0.0], [0.0, 0.0, 0.0], [0, 1, 2])]
    frame = _aggregate(recs, 1.0, resolution_s=1.0)
    assert frame.link.tolist() == [1] and frame.load_gbps.tolist() == [4.0 * 0.5 / 1.0]
    assert frame.t_start_s.tolist() == [0.0] and frame.t_end_s.tolist() == [1.0]


def test_links_frame_takes_its_arrays_as_columns_with_the_values_and_dtypes_of_a_copied_table():
    """The per-link table is built without pandas stacking its float columns into a new block (``copy=False``):
    the same values and dtypes as the copied table, each float column the caller's array itself, and the
    utilisation load / capacity by hand (a 4-host leaf-spine's links are 100 Gbit/s here)."""
    topo = load_topology("leafspine,racks=2,hosts_per_rack=2,gpus_per_host=1,spines=1")
    link = np.array([0, 3, 0])
    t0, t1 = np.array([0.0, 0.0, 5.0]), np.array([5.0, 5.0, 9.0])
    load, over = np.array([50.0, 25.0, 10.0]), np.array([0.0, 1.0, 0.0])
    frame = hist.links_frame(topo, t0, t1, link, load, over)
    cap = topo.link_capacity_gbps[link]
    copied = pd.DataFrame(dict(t_start_s=t0, t_end_s=t1, link=link, src=hist._names(topo.link_src, link),
                               dst=hist._names(topo.link_dst, link), tier=hist._names(topo.link_tier, link),
                               capacity_gbps=cap, load_gbps=load, utilisation=load / cap, overload_gbps=over))
    pd.testing.assert_frame_equal(frame, copied, check_exact=True)
    assert list(frame.columns) == list(hist.LINK_COLUMNS)
    assert np.shares_memory(frame["load_gbps"].to_numpy(), load)
    assert frame["capacity_gbps"].tolist() == [100.0, 100.0, 100.0]
    assert frame["utilisation"].tolist() == [0.5, 0.25, 0.1]
    assert frame["src"].tolist() == ["r0h0", "tor0", "r0h0"] and frame["dst"].tolist() == ["tor0", "r0h1", "tor0"]
