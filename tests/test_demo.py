"""The main job's sweep: what it runs (no duplicate ideal cells), how the ideal cells pair, the warm-up."""

import os
import socket

import pytest

from netlab.sweep import demo_grid, expand, run_sweep
from netlab.sweep.grid import DEMO_BASELINE, DEMO_SCHEDULERS

TOPO = "leafspine,racks=2,hosts_per_rack=2,gpus_per_host=8,host_gbps=100,spines=2"


def test_demo_grid_runs_network_aware_against_classic_with_one_ideal_cell_per_scheduler_and_seed():
    cells = expand(demo_grid(seeds=2))
    labels = {c.label for c in cells}
    assert {"dally+default", "tiresias+cassini", "tiresias+topo-bestfit"} <= labels  # network-aware
    assert {"fifo+consolidated", "fjf+consolidated", "themis+consolidated", DEMO_BASELINE} <= labels  # classic
    tcp = [c for c in cells if c.params["network"] == "tcp"]
    ideal = [c for c in cells if c.params["network"] == "ideal"]
    assert sorted({c.params["oversub"] for c in tcp}) == [2, 8]
    assert len(tcp) == len(DEMO_SCHEDULERS) * 2 * 2  # schedulers x oversub x seeds
    # the ideal network ignores oversubscription: one cell per scheduler and seed, not one per oversub
    assert len(ideal) == len(DEMO_SCHEDULERS) * 2
    assert all(c.params["oversub"] is None for c in ideal)
    assert len({(c.label, c.params["seed"]) for c in ideal}) == len(ideal)
    # per-link rows (the heatmap) only for seed 0 at the most congested level, in each of the demo's regimes
    from netlab.network.regimes import regime
    from netlab.sweep.grid import DEMO_REGIMES

    assert {(c.params["network"], c.params["oversub"], c.params["seed"]) for c in cells if c.keep_links} == {
        (regime(r).network, 8, 0) for r in DEMO_REGIMES}


def test_the_ideal_cell_pairs_with_every_oversub():
    grid = demo_grid(topology=TOPO, max_jobs=30, seeds=1, oversub=(2, 8))
    grid["grid"]["scheduler"] = [dict(policy="fifo", placement="consolidated"), dict(policy="dally")]
    res = run_sweep(grid, backend="serial", progress=False)
    s = res.summary
    ideal = s[s.network == "ideal"].set_index("label").avg_jct_s
    tcp = s[s.network == "tcp"]
    assert len(tcp) == 4 and tcp.jct_vs_ideal.notna().all()
    for row in tcp.itertuples():
        assert row.jct_vs_ideal == pytest.approx(row.avg_jct_s / ideal[row.label])


@pytest.mark.parametrize("warm_up", [True, False])
def test_process_backend_warm_up_runs_the_first_cell_in_this_process(warm_up):
    grid = dict(trace="philly-sample", max_jobs=20, topology=TOPO, grid=dict(policy=["fifo", "sjf", "tiresias"]))
    res = run_sweep(grid, backend="processes", workers=1, warm_up=warm_up, progress=False)
    here = f"{socket.gethostname()}:{os.getpid()}"
    workers = list(res.summary.worker)  # in grid order
    assert len(workers) == 3
    if warm_up:  # the first cell compiled here (numba caches it on disk); the rest went to the pool
        assert workers[0] == here and here not in workers[1:]
    else:
        assert here not in workers


def test_warm_up_plan_compiles_each_network_and_policy_here_while_workers_run_the_ideal_cells():
    from netlab.sweep.backends import warm_up_plan

    grid = dict(trace="philly-sample", max_jobs=20, topology=TOPO,
                grid=dict(network=["tcp", "ideal", "dcqcn"], netpolicy=["crux", "none"], seed=[0, 1]))
    cells = expand(grid)
    here, beside, after = warm_up_plan(cells)
    # every cell runs exactly once
    assert sorted(c.id for c in here + beside + after) == sorted(c.id for c in cells)
    def pair(cell):
        return cell.params["network"], cell.params.get("netpolicy", "none")

    # here: the first cell of each contended (network, netpolicy) pair, in grid order
    assert [pair(c) for c in here] == list(dict.fromkeys(pair(c) for c in cells if c.params["network"] != "ideal"))
    assert len(here) == 4
    # beside: every ideal cell, those with a network policy last; after: the other contended cells
    assert {c.params["network"] for c in beside} == {"ideal"} and len(beside) == 4
    assert [c.params.get("netpolicy", "none") for c in beside] == ["none", "none", "crux", "crux"]
    assert all(c.params["network"] != "ideal" for c in after) and len(after) == 4
    # a grid on the ideal network alone warms up with its first cell
    only_ideal = [c for c in cells if c.params["network"] == "ideal"]
    assert warm_up_plan(only_ideal) == (only_ideal[:1], [], only_ideal[1:])
