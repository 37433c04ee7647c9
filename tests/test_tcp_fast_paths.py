"""The ``tcp`` model's shortcuts must give exactly what the plain computation gives.

The mean field runs on the links left after merging mirrored ones (same jobs, same weights: only the
least capacity matters); the phase state lives in arrays the compiled solve updates in place.
"""

import numpy as np

from netlab.network import NETWORKS, CommDemand
from netlab.network.tcp import _mean_field, _merge_mirrored


def _case(rng, n_jobs=12, n_links=10, copies=3):
    """Random entries (job order, as the fabric builds them) where each link has ``copies`` mirrors, some
    with less capacity, plus one near-mirror that differs only in a weight."""
    job, link, weight = [], [], []
    base = [rng.choice(n_jobs, size=rng.integers(2, 6), replace=False) for _ in range(n_links)]
    w = [rng.choice([1.0, 2.0], size=len(b)) for b in base]
    cap = []
    for g in range(n_links * copies + 1):
        cap.append(100.0 if g % 3 else 75.0)
    for j in range(n_jobs):
        for g in range(n_links * copies):
            b = base[g % n_links]
            if j in b:
                job.append(j), link.append(g), weight.append(w[g % n_links][list(b).index(j)])
        b = base[0]
        if j in b:  # the near-mirror of link 0: one weight differs
            job.append(j), link.append(n_links * copies), weight.append(3.0 if j == b[0] else w[0][list(b).index(j)])
    return (np.array(job), np.array(link), np.array(weight), np.array(cap))


def test_merging_mirrored_links_changes_no_bit_of_the_mean_field():
    rng = np.random.default_rng(3)
    for _ in range(20):
        job, link, weight, cap = _case(rng)
        n = job.max() + 1
        gbit = rng.uniform(1, 10, n)
        phi = gbit / gbit.max()
        pre, tail = rng.uniform(0.01, 0.2, n), rng.uniform(0, 0.05, n)
        cap_job, rate0 = np.full(n, 100.0), rng.uniform(20, 100, n)
        mj, ml, mw, mc = _merge_mirrored(job, link, weight, cap)
        assert len(mc) == 11  # ten distinct links and the near-mirror
        assert np.all(mc == 75.0)  # every group has a mirror of 75 Gbit/s: the least capacity is kept
        plain = _mean_field(job, link, weight, cap, cap_job, phi, gbit, pre, tail, rate0)
        merged = _mean_field(mj, ml, mw, mc, cap_job, phi, gbit, pre, tail, rate0)
        assert np.array_equal(plain[0], merged[0]) and np.array_equal(plain[1], merged[1])


def test_leaving_out_links_that_limit_nobody_keeps_the_fixed_point():
    # 30 jobs, each on two of 6 tight links (100 Gbit/s) and two of 6 loose ones (1,000 Gbit/s, binding on
    # paper: everyone at once would exceed them, but no job's level there comes near its rate). Left out
    # between full passes, the loose links must not move the fixed point (solved to 1e-9 both ways).
    rng = np.random.default_rng(11)
    n = 30
    job, link = [], []
    for j in range(n):
        for g in [*rng.choice(6, 2, replace=False), *(6 + rng.choice(6, 2, replace=False))]:
            job.append(j), link.append(g)
    job, link, weight = np.array(job), np.array(link), np.ones(len(job))
    cap = np.array([100.0] * 6 + [1000.0] * 6)
    gbit = rng.uniform(1, 10, n)
    args = (job, link, weight, cap, np.full(n, 400.0), gbit / gbit.max(), gbit, rng.uniform(0.01, 0.2, n),
            np.zeros(n), np.full(n, 400.0))
    reduced, every = np.zeros(5, np.int64), np.zeros(5, np.int64)
    a = _mean_field(*args, 5000, 1e-9, reduced)[0]
    b = _mean_field(*args, 5000, 1e-9, every, np.inf)[0]
    assert reduced[2] == every[2] == 0  # both converged
    assert np.allclose(a, b, rtol=1e-6, atol=0)
    assert every[4] == 0 and reduced[4] >= 0.4 * reduced[3]  # the loose half (or more) left out mostly
    assert np.all(a < 100.0)  # the tight links limit everyone


def test_phase_state_rows_are_reused_and_forgotten():
    model = NETWORKS.create("tcp", jitter=0.0, max_exact_jobs=1)
    demands = [CommDemand(j, np.array([0]), np.array([1.0]), 1.25e9, 0.1, iso_rate_gbps=100.0) for j in (1, 2, 3)]
    first = model.solve(demands, np.array([100.0])).iter_s
    row = model.state_row(2)
    assert model.period_s[row] == first[2] and not np.isnan(model.anchor_s[row])
    model.forget(2)
    assert model.state_row(2) is None and np.isnan(model.anchor_s[row])
    again = model.solve(demands, np.array([100.0])).iter_s  # job 2 comes back as new: a fresh row
    assert again == first and model.state_row(2) == row


def test_job_ids_beyond_the_row_table_get_the_same_state_through_the_dict():
    # Ids below ROW_TABLE find their rows in an array, others in a dict: the answers must not differ.
    from netlab.network.tcp import ROW_TABLE

    def jobs(offset):
        return [CommDemand(offset + j, np.array([0, 1]), np.array([1.0, 1.0]), 1.25e9 * (1 + j % 3), 0.1 + 0.05 * j,
                           iso_rate_gbps=100.0, phase=0.25 * (j % 2)) for j in range(12)]

    small, large = NETWORKS.create("tcp", jitter=0.0), NETWORKS.create("tcp", jitter=0.0)
    a = small.solve(jobs(0), np.array([100.0, 60.0]), now_s=3.0).iter_s
    b = large.solve(jobs(ROW_TABLE), np.array([100.0, 60.0]), now_s=3.0).iter_s
    assert [a[j] for j in range(12)] == [b[ROW_TABLE + j] for j in range(12)]
    assert small.phase_now(5) == large.phase_now(ROW_TABLE + 5) is not None
    assert len(large._table) == 0 and len(small._table) <= ROW_TABLE  # the big ids never grew the array
    small.forget(5)
    large.forget(ROW_TABLE + 5)
    assert small.phase_now(5) is None and large.phase_now(ROW_TABLE + 5) is None and small._table[5] == -1


def test_state_rows_grow_stay_distinct_and_freed_ones_are_reused():
    # More jobs than the first 64 rows, one id beyond the array table: every job its own row; forgotten jobs'
    # rows go back to the stack and are handed out again before the arrays grow.
    from netlab.network.tcp import ROW_TABLE

    model = NETWORKS.create("tcp", jitter=0.0)
    ids = [*range(100), ROW_TABLE + 7]
    rows = model._rows(np.array(ids, dtype=float)).tolist()
    assert len(set(rows)) == len(ids) and [model.state_row(j) for j in ids] == rows
    size = len(model.anchor_s)
    for j in ids[::2]:
        model.forget(j)
    assert all(model.state_row(j) is None for j in ids[::2])
    again = model._rows(np.array(ids, dtype=float)).tolist()
    assert again[1::2] == rows[1::2]  # jobs never forgotten keep their rows
    assert sorted(again) == sorted(rows) and len(model.anchor_s) == size  # freed rows reused, nothing grew


def test_the_one_call_path_and_the_path_with_exact_components_agree():
    # Twelve jobs on link 0 (mean field) solved alone take the one-call path; with two more jobs sharing link 1
    # (an exact component) the solve goes the Python way. The twelve must get the same times both ways.
    big = [CommDemand(j, np.array([0]), np.array([1.0]), 1.25e8 * (1 + j % 4), 0.05 + 0.01 * j, iso_rate_gbps=100.0)
           for j in range(12)]
    pair = [CommDemand(20 + j, np.array([1]), np.array([1.0]), 1.25e9, 0.1, iso_rate_gbps=100.0) for j in range(2)]
    alone, mixed = NETWORKS.create("tcp", jitter=0.0), NETWORKS.create("tcp", jitter=0.0)
    a = alone.solve(big, np.array([100.0, 100.0])).iter_s
    b = mixed.solve(big + pair, np.array([100.0, 100.0])).iter_s
    assert alone.exact_solves == 0 and alone.mean_field_solves == 1
    assert mixed.exact_solves == 1 and mixed.mean_field_solves == 1
    assert [a[j] for j in range(12)] == [b[j] for j in range(12)]
    assert all(a[j] > big[j].iter_s(100.0) for j in range(12))  # the link binds: everyone is slowed
