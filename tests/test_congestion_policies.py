"""The predictive and oracle placements: exact scores, agreement, and runs in the simulator."""

from __future__ import annotations

import numpy as np
import pytest

from netlab.congestion import simulator_dataset
from netlab.slowdown.models import make_model, save_model
from netlab.network.demand import build_demand
from netlab.network.model import NETWORKS
from netlab.policies import PLACEMENT
from netlab.sched import ClusterView, JobState
from netlab.sim import simulate
from netlab.sim.fixtures import fair_view
from netlab.slowdown.samples import scatter
from netlab.topology import load_topology
from netlab.workload.job import Job, isolated_iter_s
from netlab.workload.zoo import ModelZoo

TOPO = "leafspine,racks=4,hosts_per_rack=2,gpus_per_host=4,oversub=4,spines=2"
ZOO = ModelZoo.default()


@pytest.fixture(scope="module")
def topo():
    return load_topology(TOPO)


@pytest.fixture(scope="module")
def analytic(topo):
    df = simulator_dataset(topo, n_experiments=30, seed=1)
    return make_model("analytic", fit_scale=False).fit(df, df.slowdown)


def js_for(topo, job_id, gpus, model):
    return JobState(Job(job_id, 0.0, gpus, model, 100), isolated_iter_s(ZOO[model], "ring", gpus, topo))


def busy_view(topo, seed):
    """A fragmented cluster: scattered running jobs with their exact fair-share rates and loads."""
    rng = np.random.default_rng(seed)
    free = topo.host_gpus.copy()
    running = {}
    for i in range(int(rng.integers(3, 7))):
        model = str(rng.choice(["vgg16", "bert-base", "resnet50", "gpt2"]))
        js = js_for(topo, 100 + i, int(rng.choice([2, 3, 4])), model)
        js.placement = scatter(free, js.gpus, rng, max_per_host=2)
        if js.placement is not None:
            running[js.job_id] = js
    return fair_view(topo, running, free, ZOO)


def exact_slowdown(view, job, p):
    d, _ = build_demand(view.topology, ZOO[job.job.model], "ring", job.job_id, p.hosts, p.gpus, job.iso_iter_s)
    others = [js.demand for js in view.running.values() if js.demand is not None]
    return NETWORKS.create("fair").solve(others + [d], view.topology.link_capacity_gbps).iter_s[job.job_id] / job.iso_iter_s


@pytest.mark.parametrize("seed", range(6))
def test_oracle_scores_are_exact_and_predictive_analytic_agrees(topo, analytic, seed):
    view = busy_view(topo, seed)
    job = js_for(topo, 1, 6, "vgg16")  # more than a host: it must use the network
    oracle = PLACEMENT.create("oracle", tie_tol=0.0)
    oracle.reset(np.random.default_rng(seed))
    cands = oracle.candidates(job, view)
    assert 2 <= len(cands) <= 8 and all(p.n_gpus == 6 for p in cands)
    exact = oracle.score(job, cands, view)
    # The oracle solves only the candidate's component of shared links: same answer as the whole network.
    np.testing.assert_allclose(exact, [exact_slowdown(view, job, p) for p in cands], rtol=1e-9)
    choice = oracle.place(job, view)
    assert choice in cands and exact[cands.index(choice)] == pytest.approx(exact.min())
    predictive = PLACEMENT.create("predictive", model=analytic, tie_tol=0.0)
    predicted = predictive.score(job, cands, view)
    assert np.median(np.abs(predicted - exact) / exact) < 1e-6  # the max-min share formula is exact here
    assert exact[int(np.argmin(predicted))] == pytest.approx(exact.min(), rel=1e-3)


def test_single_host_jobs_skip_scoring(topo):
    view = busy_view(topo, 0)
    free = view.free_gpus
    job = js_for(topo, 1, 1, "vgg16")
    for name in ("predictive", "oracle"):
        p = PLACEMENT.create(name).place(job, view)
        assert len(p.hosts) == 1 and free[p.hosts[0]] >= 1
        assert p == PLACEMENT.create("consolidated").place(job, view)
    too_big = js_for(topo, 2, int(free.sum()) + 1, "vgg16")
    assert PLACEMENT.create("oracle").place(too_big, view) is None


def tiny_trace(topo, n=24, seed=5):
    rng = np.random.default_rng(seed)
    jobs, t = [], 0.0
    for i in range(n):
        t += float(rng.exponential(30.0))
        gpus = int(rng.choice([1, 2, 4, 6, 8]))
        model = str(rng.choice(["vgg16", "bert-base", "resnet50", "gpt2"]))
        it = float(rng.uniform(200, 1500)) / isolated_iter_s(ZOO[model], "ring", gpus, topo)
        jobs.append(Job(i, t, gpus, model, it))
    return jobs


@pytest.mark.parametrize("placement, kw", [("oracle", {}), ("oracle", {"single_host": False}),
                                           ("predictive", {"single_host": False}), ("predictive", {})])
def test_placements_run_in_the_simulator(topo, analytic, tmp_path, placement, kw):
    jobs = tiny_trace(topo)
    if placement == "predictive":  # a model given by path, as on the testbed
        kw = dict(kw, model=str(save_model(analytic, tmp_path / "m.pkl")))
    policy = PLACEMENT.create(placement, **kw)
    res = simulate(topo, jobs, "fifo", policy, network="fair", seed=0)  # the simulator rejects invalid placements
    assert res.summary["finished"] == len(jobs)
    assert (res.jobs.end_s >= res.jobs.start_s).all()


def test_predictive_without_a_model_fits_a_default_once(topo):
    jobs = tiny_trace(topo, n=10)
    policy = PLACEMENT.create("predictive", single_host=False)
    res = simulate(topo, jobs, "fifo", policy, network="fair", seed=0)
    assert res.summary["finished"] == len(jobs)
    model = policy._model
    assert model is not None and hasattr(model, "predict")
    assert PLACEMENT.create("predictive").fitted_model(ClusterView(topo, topo.host_gpus.copy(), {}, 0.0)) is model


def test_predictive_with_the_fluid_model_runs_in_the_simulator(topo):
    """The fluid-residual model scores candidates through the same features (the fluid simulation included)."""
    df = simulator_dataset(topo, n_experiments=30, seed=1)
    model = make_model("fluid", n_estimators=50).fit(df, df.slowdown)
    view = busy_view(topo, 0)
    job = js_for(topo, 1, 6, "vgg16")
    policy = PLACEMENT.create("predictive", model=model, tie_tol=0.0)
    cands = policy.candidates(job, view)
    scores = policy.score(job, cands, view)
    assert scores.shape == (len(cands),) and np.isfinite(scores).all() and (scores > 0).all()
    res = simulate(topo, tiny_trace(topo, n=10), "fifo", PLACEMENT.create("predictive", model=model, single_host=False),
                   network="fair", seed=0)
    assert res.summary["finished"] == 10
