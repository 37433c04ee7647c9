"""The joint GPU + bandwidth allocator: its program, its weights and its placement scores, by hand."""

from __future__ import annotations

import numpy as np
import pytest

from netlab.policies import NETWORK_POLICIES, PLACEMENT, PlacementPolicy
from netlab.policies.joint.program import JointJob, solve
from netlab.sched import ClusterView, JobState, Placement
from netlab.sim import SimConfig, Simulator
from netlab.topology import load_topology
from netlab.workload.job import Job
from netlab.workload.zoo import JobModel, ModelZoo


def jj(job_id, gpu_compute_s, iso_s, gbit, link=0):
    return JointJob(job_id, gpu_compute_s, iso_s, np.array([link]), np.array([float(gbit)]))


def test_one_link_serves_the_more_gpu_intensive_job_first_down_to_the_floor():
    # 10 Gbit/s link; each job alone sends 10 Gbit in its 1 s iteration (a = 1: they need twice the link).
    # Job 0 keeps 8 GPU-s of compute going per second alone, job 1 2: job 0 first, job 1 at the floor (0.05),
    # job 0 takes the rest (0.95). Utilisation 8 x 0.95 + 2 x 0.05 = 7.7.
    s = solve([jj(0, 8.0, 1.0, 10), jj(1, 2.0, 1.0, 10)], np.array([10.0]))
    assert s.speed == pytest.approx({0: 0.95, 1: 0.05})
    assert s.gpu_util == pytest.approx(7.7)
    assert s.constrained == {0, 1}


def test_a_job_that_needs_little_of_the_link_runs_at_full_speed_and_the_other_gets_the_rest():
    # Job 0: a = 0.5, 2 GPU-s/s (4 per unit of link); job 1: a = 1, 3 GPU-s/s (3 per unit). Job 0 at full
    # speed takes half the link; job 1 gets the other half: z = 0.5. Utilisation 2 + 1.5.
    s = solve([jj(0, 2.0, 1.0, 5), jj(1, 3.0, 1.0, 10)], np.array([10.0]))
    assert s.speed == pytest.approx({0: 1.0, 1: 0.5})
    assert s.gpu_util == pytest.approx(3.5)


def test_links_the_jobs_cannot_overload_leave_every_job_at_full_speed():
    s = solve([jj(0, 2.0, 1.0, 4), jj(1, 3.0, 1.0, 5)], np.array([10.0]))  # 0.4 + 0.5 <= 1
    assert s.speed == {0: 1.0, 1: 1.0} and s.constrained == frozenset()
    assert s.gpu_util == pytest.approx(5.0)


def test_the_floor_is_lowered_where_the_links_cannot_give_every_job_that_much():
    # 40 jobs that each need the whole link: a floor of 0.05 would need 2 links; each gets 1/40 at least.
    s = solve([jj(i, 1.0, 1.0, 10) for i in range(40)], np.array([10.0]))
    assert min(s.speed.values()) == pytest.approx(1 / 40)
    assert sum(s.speed.values()) == pytest.approx(1.0)


# Three racks of two one-GPU hosts, one spine: every link 100 Gbit/s. A 2-rank ring puts one 50 Gbit flow
# (6.25e9 bytes) each way per iteration; across racks it crosses both racks' ToR-spine links.
TOPO = load_topology("leafspine,racks=3,hosts_per_rack=2,gpus_per_host=1,oversub=2,spines=1,ecmp=hash")
ZOO = ModelZoo({"m0": JobModel("m0", 0.25, 6.25e9), "m1": JobModel("m1", 0.5, 6.25e9)})
# m0: 0.25 s compute + 0.5 s traffic = 0.75 s alone, a = 50 / (0.75 x 100) = 2/3 of each uplink, 2 GPUs:
#     G = 2 x 0.25 / 0.75 = 2/3 GPU-s per second.
# m1: 0.5 + 0.5 = 1 s alone, a = 1/2, G = 1. Together on the uplinks: 2/3 + 1/2 > 1.
# The program serves m1 first (G / a = 2 against 1): m1 at full speed, m0 at (1 - 1/2) / (2/3) = 0.75.


class Fixed(PlacementPolicy):
    name = "fixed"

    def place(self, job, view):
        return Placement({0: (0, 2), 1: (1, 3)}[job.job_id], (1, 1))


def test_the_network_policy_weights_jobs_by_the_rate_they_need_while_sending():
    # m1 at full speed sends 50 Gbit in 0.5 s: 100 Gbit/s. m0 at 0.75 iterates in 1 s, 0.75 s of it sending:
    # 66.7 Gbit/s. Weights 1 and 2/3.
    policy = NETWORK_POLICIES.create("joint")
    seen = []
    inner = policy.allocate
    policy.allocate = lambda view: seen.append(inner(view)) or seen[-1]
    jobs = [Job(0, 0.0, 2, "m0", 10.0), Job(1, 0.0, 2, "m1", 10.0)]
    Simulator(TOPO, jobs, "fifo", Fixed(), None, SimConfig(network="fair"), zoo=ZOO, netpolicy=policy).run()
    first = seen[0]
    assert first[1].weight == pytest.approx(1.0) and first[0].weight == pytest.approx(2 / 3)
    assert first[0].priority == first[1].priority == 0 and first[0].rate_cap_gbps is None


def test_the_placement_scores_what_a_candidate_adds_to_utilisation_with_the_links_re_shared():
    # m0 runs on hosts 0 and 2 (racks 0 and 1). Job 1 (m1) on hosts 1 and 3 shares both uplinks: with it the
    # program gives 1 + 2/3 x 0.75 = 1.5, without it m0 alone 2/3: it adds 5/6. On hosts 4 and 5 (rack 2) it
    # shares nothing and adds its own 1. Scores are minus what is added (the least wins): rack 2.
    running = {}
    js0 = JobState(Job(0, 0.0, 2, "m0", 10.0), 0.75)
    js0.placement = Placement((0, 2), (1, 1))
    view0 = ClusterView(TOPO, np.ones(6, dtype=np.int64), running, 0.0, zoo=ZOO)
    js0.demand = view0.demand_for(js0, js0.placement)
    js0.status = "running"
    running[0] = js0
    free = np.array([0, 1, 0, 1, 1, 1])
    view = ClusterView(TOPO, free, running, 0.0, zoo=ZOO)
    job = JobState(Job(1, 0.0, 2, "m1", 10.0), 1.0)
    policy = PLACEMENT.create("joint")
    a, b = Placement((1, 3), (1, 1)), Placement((4, 5), (1, 1))
    assert policy.score(job, [a, b], view) == pytest.approx([-(1.5 - 2 / 3), -1.0])
    assert policy.place(job, view).hosts in {(4, 5), (5, 4)}


@pytest.mark.parametrize("redecide_s, kept", [(300.0, True), (0.0, False)])
def test_within_its_period_a_job_keeps_its_weight_when_the_other_ends(redecide_s, kept):
    # As above, m0 (job 0, 2000 iterations) gets weight 2/3 beside m1 (job 1, 10 iterations). When job 1 ends
    # (about 10 s in, inside the 300 s period) nothing is solved again: job 0 keeps 2/3. Deciding at every change
    # (redecide_s=0), job 0 alone overloads no link and gets the default allocation back (left out).
    policy = NETWORK_POLICIES.create("joint", redecide_s=redecide_s)
    seen = []
    inner = policy.allocate
    policy.allocate = lambda view: seen.append(inner(view)) or seen[-1]
    jobs = [Job(0, 0.0, 2, "m0", 2000.0), Job(1, 0.0, 2, "m1", 10.0)]
    Simulator(TOPO, jobs, "fifo", Fixed(), None, SimConfig(network="fair"), zoo=ZOO, netpolicy=policy).run()
    assert seen[0][0].weight == pytest.approx(2 / 3) and seen[0][1].weight == pytest.approx(1.0)
    after = seen[1]  # job 1 ended
    assert 1 not in after
    assert (after.get(0) is seen[0][0]) == kept and (0 in after) == kept


@pytest.mark.parametrize("kwargs, want", [({}, {}), (dict(fit_starts=True), {0: 2 / 3, 1: 1.0}),
                                           (dict(redecide_s=0.0), {0: 2 / 3, 1: 1.0})])
def test_a_job_that_starts_between_decisions_runs_on_the_default_until_the_next(kwargs, want):
    # Job 0 (m0) starts alone at 0: no link it can overload, nothing decided (the decision at 0 is the period's).
    # Job 1 (m1) starts at 10 s, inside the 300 s period: it runs on the default allocation and job 0 keeps its
    # (the default): nothing is solved. Solving a started job's program at once (fit_starts=True) or deciding at
    # every change (redecide_s=0) gives the pair's weights, m1 1 and m0 2/3 (as above).
    policy = NETWORK_POLICIES.create("joint", **kwargs)
    seen = []
    inner = policy.allocate
    policy.allocate = lambda view: seen.append(inner(view)) or seen[-1]
    jobs = [Job(0, 0.0, 2, "m0", 2000.0), Job(1, 10.0, 2, "m1", 10.0)]
    Simulator(TOPO, jobs, "fifo", Fixed(), None, SimConfig(network="fair"), zoo=ZOO, netpolicy=policy).run()
    assert seen[0] == {}
    assert {jid: a.weight for jid, a in seen[1].items()} == pytest.approx(want)


def test_a_bad_period_is_refused():
    with pytest.raises(ValueError, match="redecide_s"):
        NETWORK_POLICIES.create("joint", redecide_s=-1.0)


def test_the_one_link_program_matches_the_lp_solver():
    # One binding link is solved by the greedy (a fractional knapsack); HiGHS on the same programs must agree on
    # the objective (the optimum; speeds may differ only where ties leave a choice).
    from netlab.policies.joint.program import _highs_lp, _one_link

    rng = np.random.default_rng(7)
    for n in (2, 3, 5, 12, 40):
        util, a = rng.uniform(0.1, 5.0, n), rng.uniform(0.05, 1.0, n)
        a *= rng.uniform(1.1, 3.0) / a.sum()  # overloaded: sum a in (1.1, 3)
        floor = min(0.05, 1.0 / a.sum())
        z = _one_link(util, a, floor)
        ref = _highs_lp(util, a[None, :], floor)
        assert a @ z <= 1 + 1e-9 and z.min() >= floor - 1e-12 and z.max() <= 1 + 1e-12
        assert util @ z == pytest.approx(util @ ref, rel=1e-9)


def test_two_links_sharing_the_most_intensive_job_give_it_what_the_others_leave():
    # Links 0 and 1, 10 Gbit/s each. Job 1 (1.5 GPU-s/s alone) is on both, job 0 (1 GPU-s/s) on link 0 only,
    # job 2 (1 GPU-s/s) on link 1 only; each takes 0.6 of each link it is on at full speed (6 Gbit in a 1 s
    # iteration). Per link job 1 is the most intensive (1.5 / 0.6 against 1 / 0.6), but serving it first costs
    # both links: z1 = 1 leaves z0 = z2 = (1 - 0.6) / 0.6 = 2/3, utilisation 1.5 + 2 x 2/3 = 2.83. Jobs 0 and 2
    # at full speed leave z1 = 2/3: 1 + 1 + 1.5 x 2/3 = 3, the optimum (along z0 = z2 = 5/3 - z1 the utilisation
    # 10/3 - z1 / 2 falls as z1 grows past 2/3; below it the links are not full). HiGHS solves it (two links).
    s = solve([JointJob(0, 1.0, 1.0, np.array([0]), np.array([6.0])),
               JointJob(1, 1.5, 1.0, np.array([0, 1]), np.array([6.0, 6.0])),
               JointJob(2, 1.0, 1.0, np.array([1]), np.array([6.0]))], np.array([10.0, 10.0]))
    assert s.speed == pytest.approx({0: 1.0, 1: 2 / 3, 2: 1.0}, abs=1e-9)
    assert s.gpu_util == pytest.approx(3.0)
    assert s.constrained == {0, 1, 2}


def test_the_solver_prints_nothing(capfd):
    # HiGHS logs a banner at a new instance's first call unless its output is off before: a new thread makes a
    # new instance (one per thread), and neither it nor the solve may print.
    import threading

    from netlab.policies.joint.program import _highs_lp

    out = []
    t = threading.Thread(target=lambda: out.append(_highs_lp(np.array([1.0, 2.0]), np.array([[0.6, 0.6], [0.6, 0.0]]),
                                                           0.05)))
    t.start()
    t.join()
    assert out[0] == pytest.approx([2 / 3, 1.0])  # 2 GPU-s/s first: z1 = 1, z0 = (1 - 0.6) / 0.6
    assert capfd.readouterr().out == ""


def test_jobs_are_grouped_by_the_binding_links_that_connect_them():
    # Links (rows) x jobs (columns). Link 0 carries jobs 0 and 3, link 1 jobs 3 and 4 (so 0, 3, 4 are one
    # program through job 3), link 2 jobs 1 and 2, link 3 job 5 alone. Groups in the order of their first job,
    # each ascending: [0, 3, 4], [1, 2], [5].
    from netlab.policies.joint.program import _components

    a = np.zeros((4, 6))
    a[0, [0, 3]] = 0.7
    a[1, [3, 4]] = 0.6
    a[2, [1, 2]] = 0.9
    a[3, 5] = 1.2
    assert [g.tolist() for g in _components(a)] == [[0, 3, 4], [1, 2], [5]]
    # Two groups found apart, then joined: link 0 joins jobs 2 and 3, link 1 jobs 0 and 1, link 2 jobs 1 and 3.
    a = np.zeros((3, 5))
    a[0, [2, 3]] = a[1, [0, 1]] = a[2, [1, 3]] = 0.6
    assert [g.tolist() for g in _components(a)] == [[0, 1, 2, 3], [4]]


def test_the_grouping_matches_scipy_connected_components_on_random_programs():
    # The compiled union-find against SciPy's graph search (links and jobs as nodes), groups by their first job.
    from scipy.sparse import coo_matrix
    from scipy.sparse.csgraph import connected_components

    from netlab.policies.joint.program import _components

    rng = np.random.default_rng(11)
    for _ in range(300):
        m, n = rng.integers(1, 30), rng.integers(1, 40)
        a = rng.uniform(0.1, 1.0, (m, n)) * (rng.random((m, n)) < rng.uniform(0.02, 0.3))
        rows, cols = np.nonzero(a)
        graph = coo_matrix((np.ones(len(rows)), (rows, m + cols)), shape=(m + n, m + n))
        label = connected_components(graph, directed=False)[1][m:]
        want = {}
        for j in range(n):
            want.setdefault(label[j], []).append(j)
        assert [g.tolist() for g in _components(a)] == sorted(want.values())



def test_the_programs_are_split_as_the_grouping_the_sorts_and_the_masks_split_them():
    # split's compiled pass against the numpy steps it replaced: the jobs on a binding link, grouped by
    # _components, each group the greatest id first, its rows the links any member is on; the same bits.
    from netlab.policies.joint.program import _components, split

    def by_numpy(a, util, ids):
        idx = np.flatnonzero((a > 0).any(axis=0))
        out = []
        for part in _components(a[:, idx]):
            part = part[np.argsort(-ids[idx][part], kind="stable")]
            rows = (a[:, idx[part]] > 0).any(axis=1)
            out.append((idx[part], a[np.ix_(rows, idx[part])], util[idx][part]))
        return out

    rng = np.random.default_rng(5)
    for _ in range(300):
        m, n = rng.integers(1, 20), rng.integers(1, 30)
        a = rng.uniform(0.1, 1.0, (m, n)) * (rng.random((m, n)) < rng.uniform(0.02, 0.4))
        util, ids = rng.uniform(0.1, 2.0, n), rng.permutation(1000)[:n].astype(np.int64)
        got, want = split(a, util, ids), by_numpy(a, util, ids)
        assert len(got) == len(want)
        for p, (members, block, u) in zip(got, want):
            assert p.members.tolist() == members.tolist() and p.a.shape == block.shape
            assert p.a.tobytes() == block.tobytes() and p.util.tobytes() == u.tobytes()
    # by hand: link 0 carries jobs 0 (id 7) and 2 (id 9), link 1 job 1 (id 3) alone, job 3 on none
    a = np.array([[0.5, 0.0, 0.25, 0.0], [0.0, 1.5, 0.0, 0.0]])
    progs = split(a, np.array([1.0, 2.0, 3.0, 4.0]), np.array([7, 3, 9, 4]))
    assert [p.members.tolist() for p in progs] == [[2, 0], [1]]
    assert [p.a.tolist() for p in progs] == [[[0.25, 0.5]], [[1.5]]] and progs[0].util.tolist() == [3.0, 1.0]

# The tie-break (program.TIE_TOL): the most utilisation; among those speeds the most rank weight (the greatest job
# id weighs 1, the least 1/n); then the lexicographically greatest in that order (the greatest id first). Each case
# has a line of optima.

def test_two_alike_jobs_on_one_link_the_one_submitted_last_runs_at_full_speed():
    # Both: 1 GPU-s/s alone, 8 Gbit in a 1 s iteration on a 10 Gbit/s link (a = 0.8). z0 + z1 = 1.25 is optimal
    # anywhere along it; rank weights 1 (greater id) and 1/2 pick the greater id at full speed, the other at
    # 0.25. The input order does not matter: the job ids do.
    s = solve([jj(0, 1.0, 1.0, 8), jj(1, 1.0, 1.0, 8)], np.array([10.0]))
    assert s.speed == {0: 0.25, 1: 1.0}
    s = solve([jj(3, 1.0, 1.0, 8), jj(7, 1.0, 1.0, 8)], np.array([10.0]))
    assert s.speed == {3: 0.25, 7: 1.0}


@pytest.mark.parametrize("small_id, big_id, want_small, want_big", [
    # rank weights 1 (small, the greater id), 1/2 (big): per unit of link 1 / 0.5 = 2 against 0.5 / 1: the small
    # job first, at full speed (half the link); the big job the other half: z = 0.5
    (1, 0, 1.0, 0.5),
    # rank weights 1/2 (small), 1 (big, the greater id): 0.5 / 0.5 = 1 / 1, tied again: the greater id (big)
    # first, as fast as the small job's floor lets it: 1 - 0.5 x 0.05 = 0.975
    (0, 1, 0.05, 0.975),
])
def test_proportional_jobs_on_one_link_go_by_rank_weight_per_unit_of_link_then_by_id(small_id, big_id, want_small,
                                                                                      want_big):
    # small: 1 GPU-s/s, a = 0.5; big: 2 GPU-s/s, a = 1. Equal ratios (2): any split of the full link gives 2.
    s = solve([jj(small_id, 1.0, 1.0, 5), jj(big_id, 2.0, 1.0, 10)], np.array([10.0]))
    assert s.speed == {small_id: pytest.approx(want_small, abs=1e-9), big_id: pytest.approx(want_big, abs=1e-9)}
    assert s.gpu_util == pytest.approx(2.0)


def _three(shared_id, a_id, b_id):
    # Links A and B (10 Gbit/s). One job on A only, one on B only (1 GPU-s/s each), one on both (2 GPU-s/s); each
    # takes 0.6 of each link it is on at full speed. Utilisation (z_a + z_s) + (z_s + z_b) <= 2 / 0.6 = 10/3, met
    # with both links full: z_a = z_b = 5/3 - z_s, for z_s in [2/3, 1].
    return solve([JointJob(a_id, 1.0, 1.0, np.array([0]), np.array([6.0])),
                  JointJob(shared_id, 2.0, 1.0, np.array([0, 1]), np.array([6.0, 6.0])),
                  JointJob(b_id, 1.0, 1.0, np.array([1]), np.array([6.0]))], np.array([10.0, 10.0]))


def test_three_jobs_on_two_links_the_rank_weights_decide():
    # ids: A-only 2, shared 1, B-only 0: rank weights 1, 2/3, 1/3. Along the line: (5/3 - z_s) + 2/3 z_s +
    # 1/3 (5/3 - z_s) = 20/9 - 2/3 z_s, the most at z_s = 2/3: the two one-link jobs at full speed.
    s = _three(shared_id=1, a_id=2, b_id=0)
    assert s.speed == {0: 1.0, 1: pytest.approx(2 / 3, abs=1e-9), 2: 1.0}
    assert s.gpu_util == pytest.approx(10 / 3)


def test_three_jobs_on_two_links_tied_again_the_least_id_goes_first():
    # ids: shared 2, A-only 1, B-only 0: rank weights 1, 2/3, 1/3: z_s + (2/3 + 1/3)(5/3 - z_s) = 5/3 all along
    # the line. The lexicographic rule: job 2 (shared) as fast as it goes, 1; the others 5/3 - 1 = 2/3.
    s = _three(shared_id=2, a_id=1, b_id=0)
    assert s.speed == {2: 1.0, 1: pytest.approx(2 / 3, abs=1e-9), 0: pytest.approx(2 / 3, abs=1e-9)}
    assert s.gpu_util == pytest.approx(10 / 3)


# HiGHS option sets that take other paths to an optimum: presolve on, primal simplex, interior point (+ crossover)
OTHER_PATHS = [dict(presolve="on"), dict(simplex_strategy=4), dict(solver="ipm", presolve="on")]


def _tied_program(rng):
    """A random program with ties: a few job kinds, each repeated (alike jobs, equal to rounding), some scaled
    (proportional columns), on links that repeat."""
    kinds, m = rng.integers(1, 6), rng.integers(1, 7)
    util_k = rng.uniform(0.5, 5.0, kinds)
    a_k = rng.uniform(0.05, 0.6, (m, kinds)) * (rng.random((m, kinds)) < 0.7)
    a_k[rng.integers(0, m, kinds), np.arange(kinds)] += 0.1  # every kind on a link
    of = rng.integers(0, kinds, rng.integers(2, 14))
    scale = np.where(rng.random(len(of)) < 0.2, 2.0, 1.0)
    util, a = util_k[of] * scale, a_k[:, of] * scale
    util *= 1 + rng.choice([0.0, 1e-15, -1e-15], len(of))  # alike to rounding, not to the bit
    a = np.repeat(a, rng.integers(1, 4, m), axis=0)  # a rack's links to every spine
    return util, a * (rng.uniform(1.1, 2.5) / a.sum(axis=1).max())


def test_the_tie_break_makes_the_answer_the_same_on_every_solver_path():
    # 300 random programs with ties. SciPy's HiGHS (dual simplex) with presolve and without shows they have
    # several optima (another answer for most, the same objective); the tie-break's answer is the same bits with
    # presolve on, with the primal simplex and with the interior point as with the default path, at the optimum.
    from scipy.optimize import linprog

    from netlab.policies.joint.program import _highs_lp, _kept_rows, _solve_lp

    rng = np.random.default_rng(2026)
    other_optimum = 0
    for _ in range(300):
        util, a = _tied_program(rng)
        floor = min(0.05, 1.0 / a.sum(axis=1).max())
        bounds = [(floor, 1.0)] * len(util)
        ds = linprog(-util, A_ub=a, b_ub=np.ones(len(a)), bounds=bounds, method="highs-ds").x
        raw = linprog(-util, A_ub=a, b_ub=np.ones(len(a)), bounds=bounds, method="highs-ds",
                      options=dict(presolve=False)).x
        assert util @ ds == pytest.approx(util @ raw, rel=1e-9)
        other_optimum += not np.allclose(ds, raw, atol=1e-7)
        z = _solve_lp(util, a, 0.05)
        assert util @ z == pytest.approx(util @ ds, rel=1e-8) and (a @ z <= 1 + 1e-8).all()
        rows = a[_kept_rows(a)]
        for options in OTHER_PATHS:
            if len(rows) == 1:  # the greedy's answer; the solver's must be the same
                options = {}
            other = np.clip(np.round(_highs_lp(util, rows, floor, options), 9), floor, 1.0)
            assert np.array_equal(other, z), options
    assert other_optimum >= 100  # the programs do tie: without the tie-break the path would choose (215)


def test_the_one_link_greedy_gives_the_tie_break_s_answer():
    # One link with alike and proportional jobs: the greedy and the solver's three levels agree to the bit.
    from netlab.policies.joint.program import _highs_lp, _one_link

    rng = np.random.default_rng(5)
    for _ in range(100):
        kinds = rng.integers(1, 4)
        of = rng.integers(0, kinds, rng.integers(2, 10))
        scale = np.where(rng.random(len(of)) < 0.3, 2.0, 1.0)
        util, a = rng.uniform(0.5, 5.0, kinds)[of] * scale, rng.uniform(0.05, 0.6, kinds)[of] * scale
        a *= rng.uniform(1.1, 2.5) / a.sum()
        floor = min(0.05, 1.0 / a.sum())
        greedy = np.clip(np.round(_one_link(util, a, floor), 9), floor, 1.0)
        solver = np.clip(np.round(_highs_lp(util, a[None, :], floor), 9), floor, 1.0)
        assert np.array_equal(greedy, solver)


def test_links_that_repeat_or_that_another_covers_are_dropped():
    # Rows 0 and 2 are equal (the first kept); row 1 is covered by row 0 (<= everywhere); row 3 covers nothing
    # and is covered by nothing; row 4 is covered by row 3.
    from netlab.policies.joint.program import _kept_rows

    a = np.array([[0.5, 0.4, 0.0], [0.5, 0.1, 0.0], [0.5, 0.4, 0.0], [0.0, 0.4, 0.9], [0.0, 0.0, 0.9]])
    assert _kept_rows(a).tolist() == [True, False, False, True, False]


def test_a_program_s_jobs_are_the_greatest_job_id_first():
    from netlab.policies.joint.program import programs

    jobs = [jj(2, 1.0, 1.0, 8), jj(9, 1.0, 1.0, 8), jj(5, 1.0, 1.0, 8)]
    (prog,) = programs(jobs, np.array([10.0]))
    assert prog.members.tolist() == [1, 2, 0]


def test_the_kept_link_shares_give_programs_bits_as_jobs_come_and_go():
    # LinkShares keeps a[e, j] as jobs are added and removed; its programs must be programs()' to the bit
    # (members, rows, shares, utilisation), in the caller's order, through 400 random starts and ends, with
    # shares that sum to the threshold in different orders (thirds and tenths of a link).
    from netlab.policies.joint.program import programs
    from netlab.policies.joint.shares import LinkShares

    rng = np.random.default_rng(3)
    cap = np.array([10.0, 10.0, 25.0, 40.0, 10.0, 100.0, 10.0, 10.0])
    shares, running, next_id = LinkShares(cap, slots=2), {}, 0
    for step in range(400):
        if running and rng.random() < 0.45:
            gone = int(rng.choice(list(running)))
            del running[gone]
            shares.remove(gone)
        else:
            links = np.sort(rng.choice(len(cap), rng.integers(1, 4), replace=False))
            gbit = cap[links] * rng.choice([1 / 3, 0.1, 0.25, rng.uniform(0.05, 0.9)], len(links))
            job = JointJob(next_id, rng.uniform(0.5, 4.0), 1.0, links, gbit)
            running[next_id] = job
            shares.add(job)
            next_id += 1
        order = list(running.values())
        rng.shuffle(order)
        want, got = programs(order, cap), shares.programs(order)
        assert len(want) == len(got)
        for w, g in zip(want, got):
            assert np.array_equal(w.members, g.members) and np.array_equal(w.a, g.a)
            assert np.array_equal(w.util, g.util)
    assert shares.a.shape[1] >= 8  # it grew from 2 columns


def test_a_load_at_the_threshold_is_summed_in_the_caller_s_order():
    # Three jobs on one 1 Gbit/s link, shares x, y, z (Gbit in a 1 s iteration) summing to the threshold
    # 1 + 1e-9 give (x + y) + z above it but (z + y) + x not (found by a search over rounding). Kept in slots
    # x, y, z, asked in the order z, y, x: programs() sums in that order, so the link does not bind, and
    # LinkShares must say the same.
    from netlab.policies.joint.program import BINDS, programs
    from netlab.policies.joint.shares import LinkShares

    x, y, z = 0.3547846749285818, 0.20791468550554815, 0.4373006405658703
    assert (x + y) + z > BINDS >= (z + y) + x
    jobs = [JointJob(i, 1.0, 1.0, np.array([0]), np.array([v])) for i, v in enumerate((x, y, z))]
    shares = LinkShares(np.array([1.0]))
    for j in jobs:
        shares.add(j)
    assert programs(jobs[::-1], np.array([1.0])) == [] and shares.programs(jobs[::-1]) == []
    (prog,) = shares.programs(jobs)  # in the kept order it binds, for both
    assert prog.members.tolist() == [2, 1, 0] and len(programs(jobs, np.array([1.0]))) == 1


def test_the_compiled_simplex_two_links_sharing_a_job():
    # max 3 z0 + z1 + 2 z2, 0.8 z0 + 0.8 z1 <= 1, 0.8 z1 + 0.8 z2 <= 1, 0.05 <= z <= 1. z1 costs a unit of z0 on
    # one link and of z2 on the other for a third of their worth: z0 = z2 = 1, z1 takes what is left, 0.25.
    from netlab.policies.joint.simplex import lexicographic

    z, ok = lexicographic(np.array([3.0, 1.0, 2.0]), np.array([[0.8, 0.8, 0.0], [0.0, 0.8, 0.8]]), 0.05, 1e-9)
    assert ok and np.allclose(z, [1.0, 0.25, 1.0], atol=1e-12)


def test_the_compiled_simplex_breaks_ties_as_the_stated_levels():
    from netlab.policies.joint.simplex import lexicographic

    # level 2: alike jobs on a link given twice, z0 + z1 = 1.25 at every optimum; rank weights 1 and 1/2 favour
    # the first (the greatest job id): z0 = 1, z1 = 0.25
    z, ok = lexicographic(np.array([1.0, 1.0]), np.array([[0.8, 0.8], [0.8, 0.8]]), 0.05, 1e-9)
    assert ok and np.allclose(z, [1.0, 0.25], atol=1e-12)
    # level 2 against the first vertex found: util / a = 2 both, the larger util (z1) enters first and fills the
    # link (z = 0.05, 0.975: optimal); rank weight / a, 1 / 0.5 against 0.5 / 1, moves it to z0 = 1, z1 = 0.5
    z, ok = lexicographic(np.array([1.0, 2.0]), np.array([[0.5, 1.0], [0.5, 1.0]]), 0.05, 1e-9)
    assert ok and np.allclose(z, [1.0, 0.5], atol=1e-12)
    # level 3: util / a and rank weight / a both equal (2 / 0.8 = 1 / 0.4, 1 / 0.8 = 0.5 / 0.4): the first as
    # fast as it goes, z0 = 1, then 0.4 z1 <= 0.2: z1 = 0.5
    z, ok = lexicographic(np.array([2.0, 1.0]), np.array([[0.8, 0.4], [0.8, 0.4]]), 0.05, 1e-9)
    assert ok and np.allclose(z, [1.0, 0.5], atol=1e-12)


def test_the_compiled_simplex_gives_highs_s_bits_on_random_tied_programs():
    # The tie-break's answer is one point: the compiled levels and HiGHS's reach it to the same bits once rounded.
    from netlab.policies.joint.program import TIE_TOL, _highs_lp, _kept_rows
    from netlab.policies.joint.simplex import lexicographic

    rng = np.random.default_rng(13)
    for _ in range(300):
        util, a = _tied_program(rng)
        floor = min(0.05, 1.0 / a.sum(axis=1).max())
        rows = a[_kept_rows(a)]
        z, ok = lexicographic(util, rows, floor, TIE_TOL)
        assert ok
        assert np.array_equal(np.clip(np.round(z, 9), floor, 1.0),
                              np.clip(np.round(_highs_lp(util, rows, floor), 9), floor, 1.0))


def test_a_program_the_compiled_simplex_does_not_finish_goes_to_highs(monkeypatch):
    from netlab.policies.joint import program
    from netlab.policies.joint.simplex import lexicographic

    util, a = np.array([3.0, 1.0, 2.0]), np.array([[0.8, 0.8, 0.0], [0.0, 0.8, 0.8]])
    assert not lexicographic(util, a, 0.05, 1e-9, 0)[1]  # no pivot allowed: not finished
    monkeypatch.setattr(program, "lexicographic", lambda *args: (np.zeros(3), False))
    assert np.array_equal(program._solve_lp(util, a, 0.05), [1.0, 0.25, 1.0])


def test_a_speed_on_a_rounding_half_step_is_left_to_highs(monkeypatch):
    # full Philly's one program where the two solvers rounded apart: 0.4552329535 at the vertex, the simplex
    # 0.45523295350000897 (rounds to ...354), HiGHS 0.45523295349997006 (rounds to ...353). Within 1e-11 of a
    # half step of 1e-9: HiGHS answers; 0.455232953 (on a step) and 0.45523295352 (2e-11 off the half) do not.
    from netlab.policies.joint import program

    assert program._near_half_step(np.array([1.0, 0.45523295350000897]))
    assert program._near_half_step(np.array([0.45523295349997006]))
    assert not program._near_half_step(np.array([0.455232953, 0.05, 1.0]))
    assert not program._near_half_step(np.array([0.45523295352]))
    util, a = np.array([3.0, 1.0, 2.0]), np.array([[0.8, 0.8, 0.0], [0.0, 0.8, 0.8]])
    monkeypatch.setattr(program, "lexicographic", lambda *args: (np.array([1.0, 0.45523295350000897, 1.0]), True))
    monkeypatch.setattr(program, "_highs_lp", lambda *args: np.array([1.0, 0.45523295349997006, 1.0]))
    assert np.array_equal(program._solve_lp(util, a, 0.05), [1.0, 0.455232953, 1.0])


def test_the_running_jobs_with_traffic_read_from_the_log_are_those_a_scan_finds_in_its_order():
    # The policy keeps the running jobs with traffic from the view's log of starts and stops. A (traffic), B (one
    # host: no demand) and C (traffic) run; then A stops, D starts, A starts again (a new demand): the running
    # order is B, C, D, A, so the table must be C, D, A (A at its last entry, with its new demand). A stop of B
    # alone changes nothing the policy reads.
    from types import SimpleNamespace as NS

    from netlab.sched import RunningJobs

    def job(traffic):
        return NS(demand=NS(flow_bytes=1e6) if traffic else None)

    def scan(running):
        return [(jid, js.demand) for jid, js in running.items() if js.demand is not None and js.demand.flow_bytes]

    policy = NETWORK_POLICIES.create("joint")
    running = RunningJobs()
    view = NS(running=running, changes=running.changes)
    a, b, c = job(True), job(False), job(True)
    running[0], running[1], running[2] = a, b, c
    assert policy._running_traffic(view) == [None]  # the first call: no mark yet, a scan
    assert list(policy._traffic.items()) == [(0, a.demand), (2, c.demand)]
    assert policy._running_traffic(view) is None  # nothing logged since
    del running[0]
    d, a2 = job(True), job(True)
    running[3] = d
    running[0] = a2
    assert policy._running_traffic(view) == [3, 0]
    assert list(policy._traffic.items()) == scan(running) == [(2, c.demand), (3, d.demand), (0, a2.demand)]
    del running[1]
    assert policy._running_traffic(view) is None
    assert list(policy._traffic.items()) == scan(running)
