"""The ``crux`` network policy: GPU intensity, the compression to 8 classes, path selection (hand-computed)."""

from __future__ import annotations

import numpy as np
import pytest

from netlab.policies import NETWORK_POLICIES, PlacementPolicy
from netlab.policies.network.crux import (PATH_MARGIN, _decide_slots, _Flows, _kept_classes, _pick_paths,
                                         compress, contention, gpu_intensity)
from netlab.policies.network.decided import DecidedTable
from netlab.sched import Placement, PolicyError
from netlab.sim import SimConfig, Simulator
from netlab.topology import load_topology
from netlab.workload.job import Job
from netlab.workload.zoo import JobModel, ModelZoo


def test_gpu_intensity_is_compute_over_the_busiest_links_time():
    # 4 GPUs x 0.5 s of compute; 1 GB a flow: 8 Gbit over 100 Gbit/s (one flow) = 0.08 s, two flows over 50 Gbit/s
    # = 0.32 s: the busiest link's 0.32 s -> 2 GPU-s / 0.32 s = 6.25
    cap = np.array([100.0, 50.0])
    assert gpu_intensity(4 * 0.5, 1e9, np.array([0, 1]), np.array([1.0, 2.0]), cap) == pytest.approx(6.25)


def test_compression_cuts_where_the_heaviest_contention_is():
    # jobs A, B, C in priority order (intensity 9, 4, 1); A and B share a link (weight 9: A's intensity),
    # B and C share one (weight 4). Two classes: {A}{B, C} leaves 4 inside, {A, B}{C} leaves 9, one class 13.
    w = np.array([[0, 9, 0], [0, 0, 4], [0, 0, 0]], dtype=float)
    assert compress(w, 2) == [0, 1, 1]
    assert compress(w, 3) == [0, 1, 2]
    assert compress(w, 1) == [0, 0, 0]
    assert compress(np.zeros((3, 3)), 8) == [0, 0, 0]  # no contention: one class is enough
    assert compress(np.zeros((0, 0)), 8) == []


def test_compression_to_eight_classes_of_ten_jobs_that_all_contend():
    # ten jobs, every pair sharing a link, intensities 10..1: edge (a, b) weighs 10 - a. Eight classes leave
    # two pairs inside; the lightest pairs are the lowest jobs' (weights 2 and 1), so the last four jobs pair up
    # as (6, 7) and (8, 9): inside weight 4 + 2 = 6 beats every other choice, e.g. (7, 8) and (8, 9) cannot both
    # pair. By hand: pairs (a, a+1) cost 10 - a; the two cheapest disjoint pairs are (8, 9) = 2 and (6, 7) = 4.
    n = 10
    inten = np.arange(n, 0, -1, dtype=float)
    w = np.triu(np.repeat(inten[:, None], n, axis=1), 1)
    assert compress(w, 8) == [0, 1, 2, 3, 4, 5, 6, 6, 7, 7]


def _flat(*flows):
    """``_pick_paths``' arrays for flows given as lists of paths (each a list of (link, seconds))."""
    n_paths = np.array([len(f) for f in flows])
    hops = np.array([len(f[0]) for f in flows])
    links = np.array([l for f in flows for path in f for l, _ in path])
    secs = np.array([t for f in flows for path in f for _, t in path], dtype=float)
    return n_paths, hops, links, secs


def test_contention_weighs_shared_links_by_the_higher_jobs_intensity():
    # three one-path flows, one per job, on links {0, 1}, {1, 2} and {3}: only jobs 0 and 1 share (link 1)
    flows = _flat([[(0, 1.0), (1, 1.0)]], [[(1, 1.0), (2, 1.0)]], [[(3, 1.0)]])
    picks, share = _pick_paths(*flows, np.full(3, -1), PATH_MARGIN, 4, np.arange(3), 3)
    assert picks.tolist() == [0, 0, 0]
    w = contention(share, [5.0, 3.0, 1.0])
    assert w.tolist() == [[0, 5, 0], [0, 0, 0], [0, 0, 0]]


def test_a_flow_keeps_its_path_unless_another_beats_it_by_the_margin():
    # flow 0 (first in priority) is on link 0 for 1.0 s; flow 1 can take link 0 or link 1 (the first link of each
    # path, the second is its own: 0.5 s there). On link 0 it would finish at 1.0 + 1.0 = 2.0 s, on link 1 at
    # 1.0 s (link 1 already carries 0.0); without a previous path it takes path 1
    base = [[(0, 1.0)]]
    alt = [[(0, 1.0), (2, 0.5)], [(1, 1.0), (3, 0.5)]]
    picks, _ = _pick_paths(*_flat(base, alt), np.array([-1, -1]), PATH_MARGIN, 4, np.array([0, 1]), 2)
    assert picks.tolist() == [0, 1]
    # previously on path 0: 2.0 s against 1.0 s is more than 5% worse, so it moves
    picks, _ = _pick_paths(*_flat(base, alt), np.array([-1, 0]), PATH_MARGIN, 4, np.array([0, 1]), 2)
    assert picks.tolist() == [0, 1]
    # with flow 0 at 0.04 s: path 0 finishes at 1.04 s, path 1 at 1.0 s: within 5%, the old path 0 is kept,
    # and a flow new to its paths takes the best (path 1)
    near = [[(0, 0.04)]]
    picks, _ = _pick_paths(*_flat(near, alt), np.array([-1, 0]), PATH_MARGIN, 4, np.array([0, 1]), 2)
    assert picks.tolist() == [0, 0]
    picks, _ = _pick_paths(*_flat(near, alt), np.array([-1, -1]), PATH_MARGIN, 4, np.array([0, 1]), 2)
    assert picks.tolist() == [0, 1]



def test_a_path_change_below_the_margin_is_not_made_and_one_above_it_is():
    # the flows of the test above, flow 0 on link 0 for x s; flow 1 previously on path 0, which finishes it at
    # 1.0 + x s against path 1's 1.0 s. It moves only if path 0 costs more than (1 + margin) x 1.0 s: with a
    # margin m, at x = m / 2 it stays, at x = 2 m it moves (m = PATH_MARGIN and 0.5: the rule, not its value)
    alt = [[(0, 1.0), (2, 0.5)], [(1, 1.0), (3, 0.5)]]
    for m in (PATH_MARGIN, 0.5):
        for x, pick in ((m / 2, 0), (2 * m, 1)):
            picks, _ = _pick_paths(*_flat([[(0, x)]], alt), np.array([-1, 0]), m, 4, np.array([0, 1]), 2)
            assert picks.tolist() == [0, pick], (m, x)
    with pytest.raises(ValueError, match="path_margin must be a fraction >= 0"):
        NETWORK_POLICIES.create("crux", path_margin=-0.1)


def test_a_job_alone_on_its_links_keeps_its_class_and_so_does_a_group_whose_order_holds():
    # three one-path jobs on links {0, 1}, {1, 2} and {3} (intensity 5, 3, 1): jobs 0 and 1 share link 1, job 2
    # shares none. The compression puts job 1 below job 0 (weight 5 inside one class) and job 2, which adds
    # no weight, with job 1 (ties: the earlier cut): classes 0, 1, 1; only jobs 0 and 1 share
    t, slots, args = _slots([[[(0, 1.0), (1, 1.0)]]], [[[(1, 1.0), (2, 1.0)]]], [[[(3, 1.0)]]],
                            intensity=[5.0, 3.0, 1.0])
    _, classes, share = _decide_slots(slots, *args, PATH_MARGIN, 4, 8, 0)
    assert classes.tolist() == [0, 1, 1] and np.argwhere(share).tolist() == [[0, 1]]
    # job 2 alone had class 0: it keeps it. Jobs 0 and 1 had 2 and 5: job 0 first, as in the new 0 and 1, so
    # they keep 2 and 5 (the same rates); had they 5 and 2 (or 3 and 3: a tie), the order changed and both take
    # the compression's 0 and 1
    assert _kept_classes(classes, np.array([2, 5, 0]), share).tolist() == [2, 5, 0]
    assert _kept_classes(classes, np.array([5, 2, 0]), share).tolist() == [0, 1, 0]
    assert _kept_classes(classes, np.array([3, 3, 0]), share).tolist() == [0, 1, 0]
    # a job new to the decision (-1) takes the compression's class, and so does its group
    assert _kept_classes(classes, np.array([2, -1, -1]), share).tolist() == [0, 1, 1]
    # no classes wanted (crux-paths): no graph, every job alone, every class 0
    _, classes, share = _decide_slots(slots, *args, PATH_MARGIN, 4, 0, 0)
    assert classes.tolist() == [0, 0, 0] and share.shape == (0, 0)
    assert _kept_classes(classes, np.array([0, 0, -1]), share).tolist() == [0, 0, 0]


def test_groups_are_whole_components_of_shared_links():
    # four jobs in a chain 0-1, 1-2 (jobs 0 and 2 share nothing) and job 3 alone. New classes 0, 1, 2, 3;
    # old 1, 4, 6, 0 order the chain's pairs as the new do (0 before 1, 1 before 2): all kept. Old 1, 4, 3, 0:
    # the pair (1, 2) flips, so the whole chain (jobs 0 to 2) takes the new classes; job 3 keeps its 0
    share = np.zeros((4, 4), dtype=bool)
    share[0, 1] = share[1, 2] = True
    new = np.array([0, 1, 2, 3])
    assert _kept_classes(new, np.array([1, 4, 6, 0]), share).tolist() == [1, 4, 6, 0]
    assert _kept_classes(new, np.array([1, 4, 3, 0]), share).tolist() == [0, 1, 2, 0]


def test_a_group_keeps_classes_the_new_ones_beat_by_less_than_the_class_margin():
    # jobs 0, 1, 2 (intensity 5, 3, 2) in a chain: 0-1 and 1-2 share links (0 and 2 share nothing). New classes
    # 0, 1, 1 leave the pair (1, 2) inside a class: weight 3 (job 1's intensity). Old classes 0, 0, 1 leave the
    # pair (0, 1) inside: weight 5. At margin 1 the old ones are kept (5 <= 3 x 2); at 0.5 they are not
    # (5 > 3 x 1.5), nor at 0 (5 > 3)
    share = np.zeros((3, 3), dtype=bool)
    share[0, 1] = share[1, 2] = True
    new, old, w = np.array([0, 1, 1]), np.array([0, 0, 1]), [5.0, 3.0, 2.0]
    assert _kept_classes(new, old, share, w, 1.0).tolist() == [0, 0, 1]
    assert _kept_classes(new, old, share, w, 0.5).tolist() == [0, 1, 1]
    assert _kept_classes(new, old, share, w, 0.0).tolist() == [0, 1, 1]
    # old classes that serve job 1 before job 0 (an inversion: the order really changed) are never kept, though
    # they leave less inside (weight 3) than the new ones
    assert _kept_classes(new, np.array([1, 0, 1]), share, w, 10.0).tolist() == [0, 1, 1]
    # old classes that leave no more weight inside than the new ones are kept at margin 0: 2, 3, 3 (weight 3)
    assert _kept_classes(new, np.array([2, 3, 3]), share, w, 0.0).tolist() == [2, 3, 3]
    # a job new to the decision still takes the compression's classes, and so does its group
    assert _kept_classes(new, np.array([0, 0, -1]), share, w, 10.0).tolist() == [0, 1, 1]


def test_class_margin_is_checked():
    with pytest.raises(ValueError, match="class_margin must be a fraction >= 0"):
        NETWORK_POLICIES.create("crux", class_margin=-0.1)


def _slots(*jobs, intensity, picks=None):
    """Jobs given as lists of flows (each as ``_flat`` takes it) in the slots of a ``DecidedTable`` (with their
    ``intensity`` and, if given, their ``picks`` per job): the table, the slots and ``_decide_slots``' arrays."""
    t = DecidedTable()
    slots = np.array([t.add(_flows(*flows), i) for flows, i in zip(jobs, intensity)])
    for s, p in zip(slots, picks or []):
        t.picks_of(s)[:] = p
    return t, slots, t.arrays()


def test_jobs_in_table_slots_decide_as_the_flat_flows_do():
    # the margin example above, as two jobs of one flow each (in table slots: n_paths, hops, links job after job).
    # Flow 1 alone on its path 1 (links 1, 3): no link shared, one class; kept on path 0 (within the margin of
    # 1.04 s against 1.0 s) it shares link 0 with job 0, whose intensity (3) weighs the edge: two classes leave
    # nothing inside, job 0 first
    base, near = [[(0, 1.0)]], [[(0, 0.04)]]
    alt = [[(0, 1.0), (2, 0.5)], [(1, 1.0), (3, 0.5)]]
    t, slots, args = _slots([base], [alt], intensity=[3.0, 1.0])
    moved, classes, _ = _decide_slots(slots, *args, PATH_MARGIN, 4, 8, 0)
    assert [t.picks_of(s).tolist() for s in slots] == [[0], [1]] and classes.tolist() == [0, 0]
    t, slots, args = _slots([near], [alt], intensity=[3.0, 1.0], picks=[[-1], [0]])
    moved, classes, _ = _decide_slots(slots, *args, PATH_MARGIN, 4, 8, 0)
    assert [t.picks_of(s).tolist() for s in slots] == [[0], [0]] and classes.tolist() == [0, 1]
    assert moved.tolist() == [True, False]  # job 0 from no path (-1) to path 0; job 1 kept its path 0
    # a job of two flows (the base flow, then the alternatives) keeps its flows together: the same picks as flat
    t, slots, args = _slots([base, alt], intensity=[3.0])
    _, classes, _ = _decide_slots(slots, *args, PATH_MARGIN, 4, 8, 0)
    flat, _ = _pick_paths(*_flat(base, alt), np.array([-1, -1]), PATH_MARGIN, 4, np.array([0, 0]), 0)
    assert t.picks_of(slots[0]).tolist() == flat.tolist() == [0, 1] and classes.tolist() == [0]


def _flows(*flows):
    """A ``_Flows`` for a job given as lists of flows (each as ``_flat`` takes it)."""
    n, h, links, secs = _flat(*flows)
    return _Flows(n, h, links, secs, np.concatenate([n, h, links]))


def test_table_slots_keep_their_picks_and_are_written_from_the_position_asked():
    # the margin example of test_jobs_in_table_slots_decide_as_the_flat_flows_do, its two jobs. Decided
    # afresh in the order (job 0, job 1) with no picks yet: job 1 takes path 1 (1.0 s against 2.0 s), both move
    # (from -1), no link shared: one class. Its picks stay in the table: decided again with job 0 now at 0.04 s
    # (near), job 1 keeps path 1 (it is the best); fitted in with an infinite margin and only the second job's
    # picks written (write_from 1), the first keeps its table picks whatever it would pick
    base, near = [[(0, 1.0)]], [[(0, 0.04)]]
    alt = [[(0, 1.0), (2, 0.5)], [(1, 1.0), (3, 0.5)]]
    t = DecidedTable(slots=1, pool=2)  # grown and rebuilt on the way
    s0, s1 = t.add(_flows(base), 3.0), t.add(_flows(alt), 1.0)
    assert t.picks_of(s0).tolist() == [-1] and t.cls[s1] == -1
    args = t.arrays()
    moved, classes, _ = _decide_slots(np.array([s0, s1]), *args, PATH_MARGIN, 4, 8, 0)
    assert [t.picks_of(s0).tolist(), t.picks_of(s1).tolist()] == [[0], [1]]
    assert moved.tolist() == [True, True] and classes.tolist() == [0, 0]
    # a third job (near, on link 0 only) in a new slot; the table is rebuilt around the live slots
    t.remove(s0)
    s2 = t.add(_flows(near), 3.0)
    t.picks_of(s2)[:] = 0
    big = t.add(_flows(alt, alt, alt), 0.5)  # the pools are full: rebuilt from the live slots, picks kept
    assert [t.picks_of(s).tolist() for s in (s1, s2, big)] == [[1], [0], [-1, -1, -1]]
    # job 0's region dropped: slot by slot, s2 (job 0's slot again: 1 + 1 + 1 link) from 0, s1 (1 + 1 + 2 x 2
    # links) from 3, the new job from 9 (before the rebuild s2 sat at 9, after job 0 and s1)
    assert (s2, s1) == (s0, 1) and [t.pk_off[s] for s in (s2, s1, big)] == [0, 3, 9]
    t.remove(big)
    args = t.arrays()
    moved, _, _ = _decide_slots(np.array([s2, s1]), *args, PATH_MARGIN, 4, 8, 0)
    assert t.picks_of(s1).tolist() == [1] and moved.tolist() == [False, False]
    # job 1 set back on path 0 (1.04 s behind near against 1.0 s on path 1) and decided with no margin: it
    # moves to path 1, but with nothing written from position 2 on its table pick stays 0; written from 1: 1
    t.picks_of(s1)[:] = 0
    moved, _, _ = _decide_slots(np.array([s2, s1]), *args, 0.0, 4, 0, 2)
    assert t.picks_of(s1).tolist() == [0] and moved.tolist() == [False, True]
    moved, _, _ = _decide_slots(np.array([s2, s1]), *args, 0.0, 4, 0, 1)
    assert t.picks_of(s1).tolist() == [1] and moved.tolist() == [False, True]


# Two racks of two one-GPU hosts, two spines, hash ECMP: 50 Gbit/s per ToR-spine link (see test_netpolicy.py).
TOPO = load_topology("leafspine,racks=2,hosts_per_rack=2,gpus_per_host=1,oversub=2,spines=2,ecmp=hash")
HOSTS = {0: (0, 2), 1: (1, 3)}


class Fixed(PlacementPolicy):
    name = "fixed"

    def place(self, job, view):
        return Placement(HOSTS[job.job_id], (1, 1))


def crux_run(netpolicy: str, compute_s: dict[int, float], network: str = "fair"):
    zoo = ModelZoo({f"m{j}": JobModel(f"m{j}", c, 6.25e9) for j, c in compute_s.items()})
    jobs = [Job(j, 0.0, 2, f"m{j}", 10.0) for j in compute_s]
    policy = NETWORK_POLICIES.create(netpolicy)
    seen = []
    inner = policy.allocate
    policy.allocate = lambda view: seen.append(inner(view)) or seen[-1]
    res = Simulator(TOPO, jobs, "fifo", Fixed(), None, SimConfig(network=network), zoo=zoo, netpolicy=policy).run()
    return res, seen


def test_path_selection_puts_the_lower_intensity_job_off_the_higher_ones_spine():
    # Job 1 computes 2 s an iteration, job 0 1 s: same traffic, so job 1 is the more GPU-intensive and picks
    # first (path 0 for both its flows, nothing placed yet); job 0 finds spine 0's uplinks 1 s busy and takes
    # path 1. Apart, each runs alone on its spine: 50 Gbit/s, 1 s of communication.
    res, seen = crux_run("crux-paths", {0: 1.0, 1: 2.0})
    first = seen[0]
    assert first[1].paths == (0, 0) and first[0].paths == (1, 1)
    assert first[0].priority == first[1].priority == 0
    jct = res.jobs.sort_values("job_id").jct_s.tolist()
    assert jct == pytest.approx([10 * (1.0 + 1.0), 10 * (2.0 + 1.0)], rel=1e-9)


def test_jobs_that_must_share_get_two_classes_the_more_intensive_first():
    # One spine: the two jobs cannot be separated and share the ToR-spine links (2 x 100 / 2 = 100 Gbit/s). Job 1
    # (2 s of compute) is the more intensive: class 0; job 0 class 1. Under fair, class 0 is filled first: job 1
    # alone at 100 Gbit/s, 0.5 s of communication, 2.5 s an iteration, so it loads the link 100 x 0.5 / 2.5 = 20
    # Gbit/s on average; class 1 gets the other 80: job 0 communicates 0.625 s, 1.625 s an iteration. Ten
    # iterations: 16.25 s and 25 s. Without classes (crux-paths) they share 50 Gbit/s each: job 0 2 s an
    # iteration, ends at 20 s; job 1 3 s, 20/3 iterations by then, 10/3 more alone at 2.5 s: 28 1/3 s.
    one_spine = load_topology("leafspine,racks=2,hosts_per_rack=2,gpus_per_host=1,oversub=2,spines=1,ecmp=hash")
    jobs = [Job(0, 0.0, 2, "m0", 10.0), Job(1, 0.0, 2, "m1", 10.0)]
    zoo = ModelZoo({"m0": JobModel("m0", 1.0, 6.25e9), "m1": JobModel("m1", 2.0, 6.25e9)})
    out = {}
    for name in ("crux", "crux-paths"):
        policy = NETWORK_POLICIES.create(name)
        seen = []
        inner = policy.allocate
        policy.allocate = lambda view, inner=inner, seen=seen: seen.append(inner(view)) or seen[-1]
        res = Simulator(one_spine, jobs, "fifo", Fixed(), None, SimConfig(network="fair"), zoo=zoo,
                        netpolicy=policy).run()
        out[name] = (seen[0], res.jobs.sort_values("job_id").jct_s.tolist())
    first, jct = out["crux"]
    assert first[1].priority == 0 and first[0].priority == 1
    assert jct == pytest.approx([16.25, 25.0], rel=1e-9)
    first, jct = out["crux-paths"]
    assert first[1].priority == first[0].priority == 0
    assert jct == pytest.approx([20.0, 20.0 + 10 / 3 * 2.5], rel=1e-9)
    # phase honours no class: crux is refused there, naming the model, the job and the kind
    with pytest.raises(PolicyError, match=r"network model 'phase' cannot honour a per-job priority allocation "
                                          r"\(job 0\)"):
        Simulator(one_spine, jobs, "fifo", Fixed(), None, SimConfig(network="phase"), zoo=zoo, netpolicy="crux").run()


def test_crux_on_the_ideal_network_has_nothing_to_allocate():
    res, seen = crux_run("crux", {0: 1.0, 1: 2.0}, network="ideal")
    assert seen and all(d == {} for d in seen)


def test_the_crux_topology_split_into_aggregation_planes_keeps_capacity_and_offers_equal_cost_paths(tmp_path):
    from netlab.topology.builders import crux

    csv = tmp_path / "topo.csv"
    csv.write_text("ip,DSW,PSW,ASW\na,G,P1,S1\nb,G,P1,S1\nc,G,P2,S1\nd,G,P2,S1\n")
    one, two = crux(path=csv), crux(path=csv, aggs=2, ecmp="hash")
    assert len(one.paths(0, 2)) == 1 and len(two.paths(0, 1)) == 1  # same ToR: one path either way
    assert len(two.paths(0, 2)) == 4  # up through either of P1's two switches, down through either of P2's
    for tier in ("tor-agg", "agg-core"):  # each ToR: 2 hosts x 200 = 400 Gbit/s up, split over the two planes
        assert sorted(two.link_capacity_gbps[two.link_tier == tier]) == [200.0] * 8
        assert sorted(one.link_capacity_gbps[one.link_tier == tier]) == [400.0] * 4
    assert "aggs" not in one.params and two.params["aggs"] == 2


def test_a_job_started_between_redecisions_is_fitted_in_and_the_running_one_keeps_its_path():
    # Three hosts per rack, two spines. Job 0 (1 s compute) starts alone at t=0: path 0. Job 1 (2 s compute, the
    # more intensive) starts at t=1. Decided afresh (redecide_s=0), job 1 picks first (path 0) and job 0 moves to
    # path 1; fitted in (redecide_s=300), job 0 keeps path 0 and job 1 takes path 1, where nothing runs; both in
    # class 0 either way (apart, they share no link), job 1 the class of the job above it when fitted in (none: 0).
    topo = load_topology("leafspine,racks=2,hosts_per_rack=3,gpus_per_host=1,oversub=2,spines=2,ecmp=hash")
    hosts = {0: (0, 3), 1: (1, 4)}

    class Pinned(PlacementPolicy):
        name = "pinned"

        def place(self, job, view):
            return Placement(hosts[job.job_id], (1, 1))

    zoo = ModelZoo({"m0": JobModel("m0", 1.0, 6.25e9), "m1": JobModel("m1", 2.0, 6.25e9)})
    jobs = [Job(0, 0.0, 2, "m0", 20.0), Job(1, 1.0, 2, "m1", 10.0)]
    for redecide_s, job0_after in ((0.0, (1, 1)), (300.0, (0, 0))):
        policy = NETWORK_POLICIES.create("crux", redecide_s=redecide_s)
        seen = []
        inner = policy.allocate
        policy.allocate = lambda view, inner=inner, seen=seen: seen.append(inner(view)) or seen[-1]
        Simulator(topo, jobs, "fifo", Pinned(), None, SimConfig(network="fair"), zoo=zoo, netpolicy=policy).run()
        assert seen[0][0].paths == (0, 0)
        both = next(d for d in seen if len(d) == 2)
        assert both[0].paths == job0_after and both[1].paths != both[0].paths
        assert both[0].priority == both[1].priority == 0
    with pytest.raises(ValueError, match="redecide_s must be a number of seconds >= 0"):
        NETWORK_POLICIES.create("crux", redecide_s=-1)


def test_a_starting_job_joins_the_network_once_on_the_path_and_class_crux_gives_it():
    # The two jobs of test_path_selection...: job 1 (the more intensive) takes path 0 for both its flows, job 0
    # path 1. Each starts, is decided in the same pass and joins the network model once, on those links (never
    # first on the fabric's hash and then moved); each leaves once, when it ends. Then the one-spine pair of
    # test_jobs_that_must_share...: job 0 joins in class 1 at once (no later change of class).
    from netlab.network.model import make_network

    def counted(topo, netpolicy, compute_s):
        model = make_network(None, "fair", {})
        calls = []
        join, leave, change = model.join, model.leave, model.change
        model.join = lambda jid, d, now: calls.append(("join", jid, now, set(d.links.tolist()), d.priority)) \
            or join(jid, d, now)
        model.leave = lambda jid, now: calls.append(("leave", jid, now)) or leave(jid, now)
        model.change = lambda jid, now, **kw: calls.append(("change", jid, now)) or change(jid, now, **kw)
        zoo = ModelZoo({f"m{j}": JobModel(f"m{j}", c, 6.25e9) for j, c in compute_s.items()})
        jobs = [Job(j, 0.0, 2, f"m{j}", 10.0) for j in compute_s]
        res = Simulator(topo, jobs, "fifo", Fixed(), None, SimConfig(network="fair"), zoo=zoo, network=model,
                        netpolicy=netpolicy).run()
        return res, calls

    res, calls = counted(TOPO, "crux-paths", {0: 1.0, 1: 2.0})
    on_path = {j: {lk for s, d in ((HOSTS[j][0], HOSTS[j][1]), (HOSTS[j][1], HOSTS[j][0]))
                   for lk in TOPO.paths(s, d)[p]} for j, p in ((0, 1), (1, 0))}
    joins = {c[1]: c for c in calls if c[0] == "join"}
    assert sorted(c[:3] for c in calls) == [("join", 0, 0.0), ("join", 1, 0.0), ("leave", 0, 20.0), ("leave", 1, 30.0)]
    assert joins[0][3] == on_path[0] and joins[1][3] == on_path[1]
    assert res.jobs.sort_values("job_id").jct_s.tolist() == pytest.approx([20.0, 30.0], rel=1e-9)

    one_spine = load_topology("leafspine,racks=2,hosts_per_rack=2,gpus_per_host=1,oversub=2,spines=1,ecmp=hash")
    res, calls = counted(one_spine, "crux", {0: 1.0, 1: 2.0})
    assert sorted(c[:3] for c in calls if c[0] != "leave") == [("join", 0, 0.0), ("join", 1, 0.0)]
    assert {c[1]: c[4] for c in calls if c[0] == "join"} == {0: 1, 1: 0}
    assert res.jobs.sort_values("job_id").jct_s.tolist() == pytest.approx([16.25, 25.0], rel=1e-9)


def test_a_chosen_route_is_the_chosen_paths_links_weighted_and_asked_again_gives_the_same():
    # two spines: hosts 0 and 3 are in different racks, so each direction has two paths (one per spine). Flow 0
    # (0 -> 3, weight 1) on path 1 and flow 1 (3 -> 0, weight 0.5) on path 0: the route is the union of the two
    # paths' links, 1 on flow 0's and 0.5 on flow 1's (no link in common: opposite directions)
    topo = load_topology("leafspine,racks=2,hosts_per_rack=3,gpus_per_host=1,oversub=2,spines=2,ecmp=hash")
    up, down = topo.paths(0, 3), topo.paths(3, 0)
    assert len(up) == len(down) == 2
    links, weights = topo.route(np.array([[0, 3], [3, 0]]), paths=(1, 0), flow_weights=(1.0, 0.5))
    expect = {**{lk: 1.0 for lk in up[1]}, **{lk: 0.5 for lk in down[0]}}
    assert dict(zip(links.tolist(), weights.tolist())) == expect
    again = topo.route(np.array([[0, 3], [3, 0]]), paths=(1, 0), flow_weights=(1.0, 0.5))
    assert again[0].tolist() == links.tolist() and again[1].tolist() == weights.tolist()
    # one choice for all flows; an index past the paths wraps around (path 3 of 2 is path 1)
    links, weights = topo.route(((0, 3),), paths=(3,))
    assert links.tolist() == sorted(up[1]) and weights.tolist() == [1.0] * len(up[1])


def test_fitting_in_keeps_a_running_jobs_picks_unless_a_path_costs_nothing():
    # fitted in (an infinite margin, picks written from position 2): a flow with a previous path keeps it unless
    # some path costs nothing (the margin's test prev_cost <= best * inf fails only at best == 0). Job 0 (1.0 s
    # on path 0, 2.0 s on path 1, previously on 1) keeps path 1: link 1 carries 2.0 s. Job 1 (0.0 s on path 0,
    # 0.5 s on path 1, previously on 1) has a path costing nothing (link 0 is empty): it moves to path 0 (the
    # move is reported, its table pick is not written). Job 2 (new, 1.5 s on either) takes link 0: 1.5 s
    # against 2.0 + 1.5 = 3.5 s. Only job 0's slot has every second above zero: its paths are not priced
    t = DecidedTable()
    s0 = t.add(_flows([[(0, 1.0)], [(1, 2.0)]]), 3.0)
    s1 = t.add(_flows([[(0, 0.0)], [(1, 0.5)]]), 2.0)
    s2 = t.add(_flows([[(0, 1.5)], [(1, 1.5)]]), 1.0)
    t.picks_of(s0)[:] = 1
    t.picks_of(s1)[:] = 1
    assert t.positive[[s0, s1, s2]].tolist() == [True, False, True]
    moved, classes, _ = _decide_slots(np.array([s0, s1, s2]), *t.arrays(), np.inf, 2, 0, 2)
    assert moved.tolist() == [False, True, True] and classes.tolist() == [0, 0, 0]
    assert [t.picks_of(s).tolist() for s in (s0, s1, s2)] == [[1], [1], [0]]
