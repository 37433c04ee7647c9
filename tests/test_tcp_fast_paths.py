"""The ``tcp`` model's shortcuts must give exactly what the plain computation gives.

The mean field runs on the links left after merging mirrored ones (same jobs, same weights: only the
least capacity matters); the phase state lives in rows of a slot table the compiled solve updates in place.
"""

import numpy as np

from netlab.network import NETWORKS, CommDemand
from netlab.network.slots import Entries
from netlab.network.tcp.mean_field import MeanFieldJobs, mean_field, mean_field_counts, merge_mirrored


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
        entries = Entries(job, link, weight)
        kept, mc = merge_mirrored(entries, cap)
        assert len(mc) == 11  # ten distinct links and the near-mirror
        assert np.all(mc == 75.0)  # every group has a mirror of 75 Gbit/s: the least capacity is kept
        jobs = MeanFieldJobs(cap_job, phi, gbit, pre, tail)
        plain = mean_field(entries, cap, jobs, rate0)
        merged = mean_field(kept, mc, jobs, rate0)
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
    args = (Entries(job, link, weight), cap,
            MeanFieldJobs(np.full(n, 400.0), gbit / gbit.max(), gbit, rng.uniform(0.01, 0.2, n), np.zeros(n)),
            np.full(n, 400.0))
    reduced, every = mean_field_counts(), mean_field_counts()
    a = mean_field(*args, 5000, 1e-9, reduced)[0]
    b = mean_field(*args, 5000, 1e-9, every, np.inf)[0]
    assert reduced.unconverged[0] == every.unconverged[0] == 0  # both converged
    assert np.allclose(a, b, rtol=1e-6, atol=0)
    # the loose half (or more) left out mostly
    assert every.links_skipped[0] == 0 and reduced.links_skipped[0] >= 0.4 * reduced.link_passes[0]
    assert np.all(a < 100.0)  # the tight links limit everyone


def test_phase_state_rows_are_reused_and_forgotten():
    model = NETWORKS.create("tcp", jitter=0.0, max_exact_jobs=1)
    demands = [CommDemand(j, np.array([0]), np.array([1.0]), 1.25e9, 0.1, iso_rate_gbps=100.0) for j in (1, 2, 3)]
    first = model.solve(demands, np.array([100.0])).iter_s
    slots = model._slots
    row = slots.row(2)
    assert slots.rows.period_s[row] == first[2] and not np.isnan(slots.rows.anchor_s[row])
    model.forget(2)
    assert slots.row(2) is None and np.isnan(slots.rows.anchor_s[row]) and model.phase_now(2) is None
    again = model.solve(demands, np.array([100.0])).iter_s  # job 2 comes back as new: the freed row
    assert again == first and slots.row(2) == row


def test_slot_rows_grow_stay_distinct_and_freed_ones_are_reused_last_freed_first():
    # More jobs than the first 64 rows and links wider than 8: every job its own row; forgotten jobs' rows go
    # back and are handed out again (last freed first, the order the simulator's rows have always had) before
    # the table grows; a job never forgotten keeps its row and its demand.
    from netlab.network.slots import SlotTable

    table = SlotTable()
    wide = CommDemand(0, np.arange(12), np.ones(12), 1e9, 0.1, iso_rate_gbps=50.0, phase=0.25)
    demands = [wide] + [CommDemand(j, np.array([j % 5]), np.array([1.0]), 1e9 * j, 0.1) for j in range(1, 100)]
    rows = [table.add(d.job_id, d) for d in demands]
    assert rows == list(range(100)) and len(table.rows.job_id) == 128 and table.rows.links.shape[1] == 16
    t = table.rows
    assert t.n_links[0] == 12 and t.links[0, :12].tolist() == list(range(12)) and t.phase[0] == 0.25
    assert t.flow_bytes[57] == 57e9 and t.joined[57] and np.isnan(t.iter_s[57])
    for j in (10, 20, 30):
        table.remove(j)
    assert table.row(20) is None and not table.rows.joined[20] and table.rows.job_id[20] == -1
    again = [table.add(100 + j, demands[j]) for j in (40, 41, 42, 43)]
    assert again == [30, 20, 10, 100]  # the freed rows, last freed first, then the next new one
    assert table.row(57) == 57 and len(table) == 101


def test_batch_solves_keep_a_job_s_phase_state_by_id_and_give_no_warm_start():
    # Two batch solves of the same jobs: the second finds each job's row (phase state) again, and no job
    # warm-starts from the first solve's times (a batch solve must not depend on the one before).
    model = NETWORKS.create("tcp", jitter=0.0, max_exact_jobs=1)
    demands = [CommDemand(j, np.array([0, 1]), np.array([1.0, 1.0]), 1.25e9 * (1 + j % 3), 0.1 + 0.05 * j,
                          iso_rate_gbps=100.0, phase=0.25 * (j % 2)) for j in range(12)]
    first = model.solve(demands, np.array([100.0, 60.0]), now_s=3.0).iter_s
    rows = [model._slots.row(j) for j in range(12)]
    second = model.solve(demands, np.array([100.0, 60.0]), now_s=3.0).iter_s
    assert [model._slots.row(j) for j in range(12)] == rows
    assert first == second
    assert all(np.isnan(model._slots.rows.iter_s[r]) for r in rows)  # nothing kept as a warm start


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


def test_links_first_met_in_the_order_of_their_ids_by_hand():
    from netlab.network.tcp.mean_field import _as_met

    assert _as_met(np.array([0, 0, 1, 2, 1, 0]), 3)  # met 0, 1, 2 in that order
    assert not _as_met(np.array([0, 2, 1]), 3)  # 2 met before 1
    assert not _as_met(np.array([1, 0]), 2)
    assert not _as_met(np.array([0, 1, 1]), 3)  # link 2 never met
    assert _as_met(np.zeros(0, np.int64), 0)


def _large_case(seed):
    """12 jobs (isolated rate 8 Gbit/s a flow) on 6 links of 10 Gbit/s, 3 links each with 1 or 2 flows, every link
    with 2 jobs or more (so every link binds: 2 x 8 > 10), entries job by job, links numbered as first met."""
    from netlab.network.slots import SlotTable

    rng = np.random.default_rng(seed)
    while True:
        on = [rng.choice(6, 3, replace=False) for _ in range(12)]
        if all(sum(g in o for o in on) >= 2 for g in range(6)):
            break
    first = {}
    for o in on:
        for g in o.tolist():
            first.setdefault(g, len(first))
    job = np.repeat(np.arange(12), 3)
    link = np.array([first[g] for o in on for g in o.tolist()])
    weight = rng.choice([1.0, 2.0], 36)
    demands = [CommDemand(j, np.arange(3), np.ones(3), float(rng.uniform(1e8, 1e9)), float(rng.uniform(0.05, 0.2)),
                          iso_rate_gbps=8.0) for j in range(12)]
    table = SlotTable(rows=16, width=4)
    return Entries(job, link, weight), np.full(6, 10.0) * rng.uniform(1.0, 1.5, 6), table, table.claim(demands)


def test_a_large_component_numbered_as_met_is_solved_on_its_own_entries_with_the_same_bits():
    """The mean field's entries of a component whose jobs are all large and links all binding, numbered as first
    met, are taken as they are (no renumbered copy); the same component with its links numbered otherwise goes
    through the copy, which numbers them back as first met: the same times, the same overload and queue on
    each link (under its own id) and the same phase state, bit for bit."""
    from netlab.network.slots import jobs_at
    from netlab.network.tcp.mean_field import _as_met
    from netlab.network.tcp.solve import SolveCode, solve_unless_exact

    for seed in range(5):
        e, cap, table_a, rows_a = _large_case(seed)
        _, _, table_b, rows_b = _large_case(seed)
        perm = np.random.default_rng(100 + seed).permutation(6)
        while _as_met(perm[e.link], 6):
            perm = np.roll(perm, 1)
        cap_b = np.empty(6)
        cap_b[perm] = cap
        e_b = Entries(e.job, perm[e.link], e.weight)
        assert _as_met(e.link, 6) and not _as_met(e_b.link, 6)
        code_a, a = solve_unless_exact(5.0, e, cap, jobs_at(table_a.rows, rows_a), table_a.rows, rows_a, 8, 1.0,
                                       mean_field_counts())
        code_b, b = solve_unless_exact(5.0, e_b, cap_b, jobs_at(table_b.rows, rows_b), table_b.rows, rows_b, 8, 1.0,
                                       mean_field_counts())
        assert code_a == code_b == SolveCode.MEAN_FIELD
        assert a.iter_s.tobytes() == b.iter_s.tobytes() and a.comm_s.tobytes() == b.comm_s.tobytes()
        assert a.overload_gbps.tobytes() == b.overload_gbps[perm].tobytes() and a.overload_gbps.max() > 0
        assert a.queue_frac.tobytes() == b.queue_frac[perm].tobytes()
        assert a.load_gbps.tobytes() == b.load_gbps[perm].tobytes()
        for f in ("anchor_s", "period_s"):
            assert getattr(table_a.rows, f)[rows_a].tobytes() == getattr(table_b.rows, f)[rows_b].tobytes()


def test_binding_components_told_every_link_binds_gives_what_its_own_test_gives():
    """``bound``: the caller found every link binding, so the offered sums are not taken again; on entries where
    every link does bind the components are the same (and the same when the test runs)."""
    from netlab.network.tcp.components import binding_components

    e, cap, _, _ = _large_case(0)
    cap_job = np.full(12, 8.0)
    a = binding_components(e, cap, cap_job, 8)
    b = binding_components(e, cap, cap_job, 8, True)
    assert a.binding.all() and b.binding.all()
    for x, y in zip(a, b):
        assert np.array_equal(x, y)
