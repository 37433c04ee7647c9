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
