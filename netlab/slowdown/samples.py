"""Training rows for the slowdown model: randomised co-locations solved by the network model.

Each row is one job in one placement under one interval of background state:
the raw features of :mod:`netlab.slowdown.features` (computed as if the job
were about to start, with every other job of its experiment already running),
the target ``slowdown`` (its iteration time with everyone running over its
isolated iteration time) and, optionally, ``congestion_next``. Rows of one
experiment share ``experiment_id``: they were measured together, so
cross-validation must keep them in one fold (:func:`~netlab.slowdown.models.grouped_cv`).

Columns: ``META`` + ``FEATURES.all`` + ``TARGETS``. ``source`` is ``"sim"``
or ``"testbed"``; testbed rows (:mod:`netlab.congestion.testbed_data`) use the
same columns, so the two concatenate into one frame.

Why here, below the policies: the ``predictive`` placement fits its default
model on these rows, and the rows need only the network model (exact max-min
iteration times), not the simulator. The placement styles come in as a
factory (``make_policy``, e.g. ``PLACEMENT.create``) so this module imports no
policy; :func:`netlab.congestion.simulator_dataset` passes the registry's.
"""

from __future__ import annotations

from typing import Callable

import numpy as np
import pandas as pd

from ..network.demand import build_demand
from ..network.model import NETWORKS, iteration_time
from ..sched import ClusterView, JobState, Placement
from ..workload.job import Job, isolated_iter_s
from ..workload.zoo import ModelZoo
from .features import FEATURES, TARGET, Background, feature_rows

META = ("source", "experiment_id", "job_id", "model", "pattern", "topology", "hosts")
TARGETS = (TARGET, "congestion_next")
COLUMNS = META + FEATURES.all + TARGETS

GPU_SIZES = (1, 2, 4, 8, 16, 32)
GPU_P = (0.1, 0.1, 0.2, 0.25, 0.2, 0.15)  # mostly multi-host-capable jobs: they are what the network affects
STYLES = ("consolidated", "topo-bestfit", "k8s-netoverhead", "random", "scatter")
PATTERN_P = {"ring": 0.8, "hierarchical": 0.1, "ps": 0.1}

#: ``make_policy(name)`` -> an object with ``reset(rng)`` and ``place(job_state, view)`` (a placement policy)
PolicyFactory = Callable[[str], object]


def scatter(free: np.ndarray, gpus: int, rng: np.random.Generator, max_per_host: int = 8) -> Placement | None:
    """Take ``gpus`` GPUs from random hosts, at most ``max_per_host`` from each; updates ``free`` in place.

    None (and ``free`` unchanged) when fewer GPUs are free than asked.
    """
    if free.sum() < gpus:
        return None
    hosts, taken, need = [], [], int(gpus)
    for h in rng.permutation(len(free)):
        if need == 0:
            break
        take = int(min(free[h], need, rng.integers(1, max_per_host + 1)))
        if take:
            free[h] -= take
            hosts.append(int(h))
            taken.append(take)
            need -= take
    if need:  # ran out of luck on the per-host caps: give them back and refuse
        free[hosts] += taken
        return None
    return Placement(tuple(hosts), tuple(taken))


def _topologies(topology) -> list:
    from ..topology import load_topology

    items = topology if isinstance(topology, (list, tuple)) else [topology]
    return [load_topology(t) if isinstance(t, str) else t for t in items]


def _place(style: str, js: JobState, topo, free: np.ndarray, rng: np.random.Generator, make_policy: PolicyFactory):
    """Place ``js`` with a named placement (or a random scatter) and take its GPUs from ``free``."""
    if style == "scatter":
        return scatter(free, js.gpus, rng, max_per_host=int(rng.integers(1, int(topo.host_gpus.max()) + 1)))
    policy = make_policy(style)
    policy.reset(rng)
    p = policy.place(js, ClusterView(topo, free, {}, 0.0))
    if p is not None:
        free[list(p.hosts)] -= np.asarray(p.gpus)
    return p


def experiment_rows(topo, rng: np.random.Generator, experiment_id: int, make_policy: PolicyFactory,
                    max_jobs: int = 16, prefill: tuple[float, float] = (0.0, 0.6), zoo: ModelZoo | None = None,
                    models=None) -> list[dict]:
    """One randomised co-location: a few jobs placed at random, one row per job.

    A random share of GPUs (``prefill``) is taken first by jobs without
    network traffic, so later placements fragment and span racks as on a
    busy cluster. Each job gets a random size, model, pattern and placement
    style (consolidated, topology-aware, Kubernetes, random, scattered).
    Exact iteration times come from the max-min ``fair`` network model with
    every job running; each job's features see the others as background,
    at the rates they get without it.
    """
    zoo = zoo or ModelZoo.default()
    # by default the data-parallel models: the zoo's LLM rows only make sense with their own '3d' pattern
    models = list(models or [n for n in zoo.names() if zoo[n].llm is None])
    free = topo.host_gpus.copy()
    free -= rng.binomial(free, rng.uniform(*prefill))
    placed = []
    for i in range(int(rng.integers(2, max_jobs + 1))):
        gpus = int(rng.choice(GPU_SIZES, p=GPU_P))
        if gpus > free.sum():
            continue
        model = str(rng.choice(models))
        pattern = str(rng.choice(list(PATTERN_P), p=list(PATTERN_P.values())))
        js = JobState(Job(i, 0.0, gpus, model, 1.0, pattern), isolated_iter_s(zoo[model], pattern, gpus, topo))
        p = _place(str(rng.choice(STYLES)), js, topo, free, rng, make_policy)
        if p is not None:
            placed.append((js, p))
    demands = [build_demand(topo, zoo[js.job.model], js.job.pattern, js.job_id, p.hosts, p.gpus, js.iso_iter_s)
               for js, p in placed]
    net = NETWORKS.create("fair")
    cap = topo.link_capacity_gbps
    full = net.solve([d for d, _ in demands if d is not None], cap)
    overload = np.zeros(topo.n_links)
    overload[full.links] = full.overload_gbps
    rows = []
    for (js, p), (d, intra_s) in zip(placed, demands):
        others = [o for o, _ in demands if o is not None and o.job_id != js.job_id]
        if d is None:  # one host: no network, nothing shared
            bg = Background(topo)
            iter_s = iteration_time(zoo[js.job.model].compute_s, intra_s, zoo[js.job.model].overlap)
            congestion = 0.0
        else:
            sol = net.solve(others, cap)
            load = np.zeros(topo.n_links)
            load[sol.links] = sol.load_gbps
            bg = Background(topo, others, [sol.rate_gbps[o.job_id] for o in others], load)
            iter_s = full.iter_s[js.job_id]
            congestion = float((overload[d.links] / cap[d.links]).max())
        row = feature_rows(bg, js, [p], zoo)[0]
        row.update(source="sim", experiment_id=int(experiment_id), job_id=js.job_id, model=js.job.model,
                   pattern=js.job.pattern, topology=topo.name,
                   hosts=",".join(f"{h}:{g}" for h, g in zip(p.hosts, p.gpus)),
                   slowdown=iter_s / js.iso_iter_s, congestion_next=congestion)
        rows.append(row)
    return rows


def simulator_dataset(topology, make_policy: PolicyFactory, n_experiments: int = 200, seed: int = 0,
                      max_jobs: int = 16, prefill: tuple[float, float] = (0.0, 0.6), zoo: ModelZoo | None = None,
                      models=None) -> pd.DataFrame:
    """``n_experiments`` randomised co-locations on ``topology`` (a Topology, a spec, or a list:
    one is drawn per experiment, e.g. several oversubscriptions), in the dataset schema.

    Every experiment has its own random stream spawned from ``seed``, so a
    dataset is reproducible and experiment k does not depend on n_experiments.
    """
    topos = _topologies(topology)
    rows = []
    for e, ss in enumerate(np.random.SeedSequence(seed).spawn(n_experiments)):
        rng = np.random.default_rng(ss)
        topo = topos[int(rng.integers(len(topos)))]
        rows.extend(experiment_rows(topo, rng, e, make_policy, max_jobs, prefill, zoo, models))
    return check_frame(pd.DataFrame(rows, columns=list(COLUMNS)))


def check_frame(df: pd.DataFrame) -> pd.DataFrame:
    """The frame if it has the dataset schema's columns, else a ValueError naming the missing ones."""
    missing = [c for c in ("source", "experiment_id") + FEATURES.all + (TARGET,) if c not in df.columns]
    if missing:
        raise ValueError(f"dataset lacks column(s) {missing} (FEATURES schema v{FEATURES.version}, "
                         f"hash {FEATURES.hash})")
    return df
