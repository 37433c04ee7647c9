"""DCTCP's beat-down in the incremental re-solve (netlab.network.tcp.beatdown_resolve, ``beatdown_incremental``):
the same answers as the batch two solves, the untouched components left as they are, and what a simulation reads
of it."""

import numpy as np
import pytest

from incremental_helpers import joined
from netlab.network.model import NETWORKS, CommDemand
from netlab.network.tcp.beatdown import beatdown_weights
from netlab.network.tcp.beatdown_resolve import FlowPathTable
from netlab.network.tcp.params import REPORT_RTOL

GBIT_BYTES = 1.25e8  # 1 Gbit per flow per iteration: 1 s at 1 Gbit/s


def _demand(job_id, links, compute_s=0.0):
    links = np.array(links)
    return CommDemand(job_id, links, np.ones(len(links)), GBIT_BYTES, compute_s, iso_rate_gbps=1.0,
                      flow_paths=((links, np.ones(len(links))),))


def _three():
    # links 0 and 1 at 1 Gbit/s, link 2 at 10: job 1 crosses 0 and 1, job 2 link 0, job 3 link 1, job 4 link 2
    # alone; every job always communicating, 1 Gbit an iteration (test_tcp_beatdown's case)
    return [_demand(1, [0, 1]), _demand(2, [0]), _demand(3, [1]), _demand(4, [2])], np.array([1.0, 1.0, 10.0])


def test_the_incremental_model_gives_the_hand_computed_beat_down_and_re_solves_after_a_leave():
    demands, cap = _three()
    net = NETWORKS.create("dctcp", beatdown_incremental=True, beatdown_beta=3.0, cut_k=0.0)
    assert net.capabilities.incremental and net.capabilities.relinks  # the class's, untouched
    links = joined(net, cap, demands)
    moved = net.resolve(0.0)
    # job 1 weight 2 ** -3 against 1 on each link: 1/9 of a Gbit/s (9 s), jobs 2 and 3 8/9 (1.125 s); job 4 is
    # alone (its rate was known at its join)
    assert dict(zip(moved.job_id, moved.iter_s)) == pytest.approx({1: 9.0, 2: 1.125, 3: 1.125}, rel=1e-9)
    assert links.queue_frac[:2].min() > 0.0 and links.queue_frac[2] == 0.0
    links.jobs[demands[1].links] -= 1
    net.leave(2, 1.0)
    moved = net.resolve(1.0)
    # job 2 gone: job 1 crosses one marked link (link 1, with job 3): weight 1, half of it each (2 s)
    assert dict(zip(moved.job_id, moved.iter_s)) == pytest.approx({1: 2.0, 3: 2.0}, rel=1e-9)
    assert net.exact_solves == 2  # the second solves only (the first ones are counted nowhere)


def _random_cluster(rng, n_links, n_jobs):
    """Jobs of 1-3 flows, each over 1-3 random links (its flow paths), the demand's links and weights their sums;
    capacities 1-4 Gbit/s; compute 0-1 s; 1 Gbit a flow an iteration."""
    cap = rng.uniform(1.0, 4.0, n_links)
    out = []
    for j in range(n_jobs):
        paths = tuple((rng.choice(n_links, rng.integers(1, 4), replace=False), None) for _ in range(rng.integers(1, 4)))
        paths = tuple((np.sort(p), np.ones(len(p))) for p, _ in paths)
        ids, w = np.unique(np.concatenate([p for p, _ in paths]), return_counts=True)
        out.append(CommDemand(j, ids, w.astype(float), GBIT_BYTES, float(rng.uniform(0.0, 1.0)),
                              iso_rate_gbps=float((cap[ids] / w).min()), phase=float(rng.uniform()),
                              flow_paths=paths))
    return out, cap


def _first_resolve(net, cap, demands) -> dict:
    """Per job, its time after every demand joined and one re-solve (a job alone at its join: its time alone)."""
    joined(net, cap, demands)
    now = {d.job_id: d.iter_s(d.alone_rate_gbps) for d in demands}
    moved = net.resolve(0.0)
    now.update(zip(moved.job_id, moved.iter_s))
    return now


def test_on_exact_components_the_incremental_two_solves_equal_the_batch_two_solves():
    """Every component simulated exactly (``max_exact_jobs`` 100): the first re-solve gives each job the time the
    batch two solves give (fresh state), to 1e-9 (the component's entries come in the walk's order, the batch's
    in the demands' order, so sums may round apart)."""
    rng = np.random.default_rng(5)
    for _ in range(12):
        demands, cap = _random_cluster(rng, 10, 9)
        net = NETWORKS.create("dctcp", beatdown_incremental=True, beatdown_beta=4.0, max_exact_jobs=100)
        now = _first_resolve(net, cap, demands)
        assert now == pytest.approx(net.fresh().solve(demands, cap).iter_s, rel=1e-9, abs=0.0)
        assert net.exact_solves >= 1


def test_on_the_mean_field_the_two_solves_are_the_one_solve_re_solve_s_calls():
    """Every component on the mean field (``max_exact_jobs`` 1). The one-solve re-solve and the batch solve of the
    same jobs agree only to the mean field's tolerance (its fixed point stops there, and they sum in other orders):
    so the two solves are checked against the one-solve re-solve's own calls, bit for bit: a ``dctcp`` without the
    term re-solves the jobs, its links' marked fractions give the weights (the table's compiled rule),
    and a second one re-solves the jobs with those weights in their allocations. Against the batch two solves:
    to ``REPORT_RTOL``, also after jobs leave one by one (a job whose time moves less keeps it). With dctcp's rate
    cut: when the tails were added only to the jobs whose solved time moved, a job alone at its join whose link
    bound later at an unchanged solved time never got its cut, 4.3% short of the batch here (tails.py)."""
    from dataclasses import replace

    from netlab.network.tcp.beatdown import Reweighted

    rng = np.random.default_rng(11)
    for _ in range(12):
        demands, cap = _random_cluster(rng, 10, 9)
        net = NETWORKS.create("dctcp", beatdown_incremental=True, beatdown_beta=4.0, max_exact_jobs=1)
        now = _first_resolve(net, cap, demands)
        plain = NETWORKS.create("dctcp", beatdown_beta=0.0, max_exact_jobs=1)
        links = joined(plain, cap, demands)
        plain.resolve(0.0)
        table = FlowPathTable(len(cap))  # the compiled rule (numpy's sums in beatdown_weights round apart)
        for d in demands:
            table.put(d.job_id, d.flow_paths)
        ids = np.array([d.job_id for d in demands])
        w = dict(zip(ids.tolist(), table.weights(ids, np.arange(len(cap)), links.queue_frac, 4.0).tolist()))
        weighted = [d if w[d.job_id] == 1.0 else replace(d, allocation=Reweighted(None, w[d.job_id]))
                    for d in demands]
        assert now == _first_resolve(NETWORKS.create("dctcp", beatdown_beta=0.0, max_exact_jobs=1), cap,
                                     weighted)
        assert net.exact_solves == 0 and net.mean_field_solves == 1
        assert now == pytest.approx(net.fresh().solve(demands, cap).iter_s, rel=REPORT_RTOL, abs=0.0)
        left, fabric = list(demands), net._links
        for d in demands[:5]:
            left.remove(d)
            fabric.jobs[d.links] -= 1
            net.leave(d.job_id, 1.0)
            now.pop(d.job_id)
            moved = net.resolve(1.0)
            now.update(zip(moved.job_id, moved.iter_s))
            assert now == pytest.approx(net.fresh().solve(left, cap).iter_s, rel=2 * REPORT_RTOL, abs=0.0)


def test_a_change_leaves_another_component_as_it_was():
    # two components that share no link: jobs 1-3 on links 0-1 (the hand case), jobs 5 and 6 on link 3
    demands, cap = _three()
    demands += [_demand(5, [3]), _demand(6, [3])]
    cap = np.array([1.0, 1.0, 10.0, 1.0])
    net = NETWORKS.create("dctcp", beatdown_incremental=True, beatdown_beta=3.0, cut_k=0.0)
    links = joined(net, cap, demands)
    first = net.resolve(0.0)
    assert dict(zip(first.job_id, first.iter_s)) == pytest.approx({1: 9.0, 2: 1.125, 3: 1.125, 5: 2.0, 6: 2.0},
                                                                  rel=1e-9)
    links.jobs[demands[5].links] -= 1
    net.leave(6, 1.0)
    moved = net.resolve(1.0)
    assert moved.job_id == [5] and moved.iter_s == pytest.approx([1.0])  # job 5 alone now; 1-3 not re-solved


def test_the_table_s_weights_are_the_rule_s():
    """Rows put in any order, re-used, give a fresh table's weights bit for bit; the batch's (``beatdown_weights``,
    numpy's sums) to rounding, and so the one-flow rule (``flow_beatdown``: price, ratio; the highest-priced flow,
    the first of equal ones; near-ties aside)."""
    from netlab.network.tcp.beatdown import flow_beatdown

    rng = np.random.default_rng(3)
    for _ in range(200):
        n_links = 12
        marked = np.where(rng.uniform(size=n_links) < 0.5, rng.uniform(size=n_links), 0.0)
        flows = {}
        table = FlowPathTable(n_links)
        for row in rng.permutation(6).tolist() + [0, 1]:  # rows 0 and 1 put twice (their first flows left behind)
            paths = tuple((rng.choice(n_links, rng.integers(1, 9), replace=False),
                           rng.choice([1.0, 0.5, 0.25], 8)) for _ in range(rng.integers(0, 4)))
            flows[row] = paths = tuple((p, s[:len(p)]) for p, s in paths)
            table.put(row, paths)
        rows = np.arange(6)
        got = table.weights(rows, np.arange(n_links), marked, 4.0)
        fresh = FlowPathTable(n_links)
        for row in rows.tolist():
            fresh.put(row, flows[row])
        assert got.tolist() == fresh.weights(rows, np.arange(n_links), marked, 4.0).tolist()
        assert not table.marked.any()  # cleared after use
        assert got.tolist() == pytest.approx([beatdown_weights(flows, marked, 4.0)[r] for r in rows.tolist()],
                                             rel=1e-12)
        for r in rows.tolist():
            best = (0.0, 1.0)
            for p, s in flows[r]:
                price, ratio = flow_beatdown(p, marked, s)
                if price > best[0] * (1 + 1e-12):
                    best = (price, ratio)
            assert got[r] == pytest.approx(best[1] ** -4.0, rel=1e-9)


def test_the_flow_path_table_keeps_the_live_rows_through_compaction():
    table = FlowPathTable(4)
    one = ((np.array([0, 1]), np.ones(2)),)  # crosses links 0 and 1: ratio 2 when both are marked alike
    plain = ((np.array([2]), np.ones(1)),)
    for row in range(6000):  # a row re-used again and again, its old flows left behind, then compacted
        table.put(row % 3, one if row % 3 == 0 else plain)
    table.drop(2)
    marked = np.array([0.2, 0.2, 0.3, 0.0])
    assert table.n_entries < 5000  # compacted (each put of a live row left its old entries behind)
    assert table.weights(np.array([0, 1, 2]), np.arange(4), marked, 2.0).tolist() == [0.25, 1.0, 1.0]


@pytest.mark.parametrize("incremental", [True, False])
@pytest.mark.parametrize("max_exact, blind", [(8, False), (2, True)])
def test_the_beat_down_s_re_solves_report_the_mean_field_as_phase_blind(max_exact, blind, incremental):
    """The hand case's component has 3 contended jobs: simulated exactly (phase-aware) up to max_exact_jobs 8, by the
    random-phase mean field at 2 (phase-blind). The incremental re-solve says so as the one-solve one does; the
    batch way (the fabric's generic interface over the model's ``solve``) says it too, from the solve's own
    answer (``NetSolution.phase_blind``), where it said nothing (the simulator then counted it phase-aware)."""
    from netlab.network.model import GenericIncremental

    demands, cap = _three()
    model = NETWORKS.create("dctcp", beatdown_incremental=incremental, beatdown_beta=3.0, cut_k=0.0,
                            max_exact_jobs=max_exact)
    assert model.capabilities.incremental == incremental
    net = model if incremental else GenericIncremental(model)
    joined(net, cap, demands)
    moved = net.resolve(0.0)
    got = dict(zip(moved.job_id, [moved.phase_blind] * 4 if isinstance(moved.phase_blind, bool) else
                   moved.phase_blind))
    assert {j: got[j] for j in (1, 2, 3)} == {1: blind, 2: blind, 3: blind}
    assert got.get(4, False) is False  # alone, on no binding link (reported by the batch way only): phase-aware
