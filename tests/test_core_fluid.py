"""The phase cores' compiled fluid (``core_fluid``) runs the fluid's rules: on any core, from any phase state,
its periods and anchors are those of the general fluid (``solve.simulate_component``), to the bit."""

import numpy as np
import pytest

from netlab.network import CommDemand
from netlab.network.slots import SlotTable, jobs_of
from netlab.network.tcp.components import alone
from netlab.network.tcp.core_fluid import simulate_core
from netlab.network.tcp.params import TcpParams
from netlab.network.tcp.solve import simulate_component


def core(seed: int, k: int, m: int):
    """k jobs on m links (each on one to three of them, some with two flows), unequal sizes and computes, some
    with phase state from an earlier solve."""
    rng = np.random.default_rng(seed)
    demands, flows = [], np.zeros((k, m))
    for i in range(k):
        links = np.sort(rng.choice(m, size=int(rng.integers(1, min(3, m) + 1)), replace=False))
        weights = rng.choice([1.0, 2.0], size=len(links))
        flows[i, links] = weights
        demands.append(CommDemand(100 + i, links, weights, float(rng.uniform(1e7, 1e9)),
                                  float(rng.uniform(0.02, 0.5)), serial_intra_s=float(rng.choice([0.0, 0.005])),
                                  overlap=float(rng.choice([0.0, 0.5])), iso_rate_gbps=float(rng.choice([25, 100])),
                                  phase=float(rng.uniform())))
    slots = SlotTable()
    rows = slots.claim(demands)
    jobs = jobs_of(demands)
    al = alone(jobs)
    t = slots.rows
    kept = rng.uniform(size=k) < 0.5  # these carry an anchor and a stretched period from a last solve
    t.anchor_s[rows[kept]] = rng.uniform(-1.0, 0.0, size=kept.sum())
    t.period_s[rows[kept]] = al.iter_s[kept] * rng.uniform(1.0, 2.0, size=kept.sum())
    t.anchor_phase[rows[kept]] = jobs.phase[kept]
    cap = rng.uniform(0.3, 1.0, size=m) * 100.0 * flows.sum(axis=0).clip(1, None) / 2
    return np.arange(k), flows, cap, jobs, al, t, rows


@pytest.mark.parametrize("seed,k,m", [(0, 2, 1), (1, 3, 2), (2, 8, 3), (3, 16, 4), (4, 40, 6)])
@pytest.mark.parametrize("params", [dict(alpha=0.75), dict(alpha=1.0, jitter=0.0125), dict(alpha=0.0, lead=0.0)])
def test_a_core_s_periods_are_the_fluid_s_to_the_bit(seed, k, m, params):
    members, flows, cap, jobs, al, t, rows = core(seed, k, m)
    p = TcpParams.checked(**params)
    before = [a.copy() for a in t]
    mine = simulate_core(0.3, members, flows, cap, jobs, al, t, rows, p)
    assert all(np.array_equal(a, b, equal_nan=True) for a, b in zip(t, before))  # the rows are only read
    fluid = simulate_component(0.3, members, flows, cap, jobs, al, t, rows, p)
    assert fluid is not None and mine is not None
    assert np.array_equal(mine[0], fluid[0]) and np.array_equal(mine[1], fluid[1])


def test_a_core_that_cannot_finish_within_its_events_is_none_as_in_the_fluid():
    members, flows, cap, jobs, al, t, rows = core(5, 16, 3)
    p = TcpParams.checked(max_events=40)
    assert simulate_core(0.0, members, flows, cap, jobs, al, t, rows, p) is None
    assert simulate_component(0.0, members, flows, cap, jobs, al, t, rows, p) is None
