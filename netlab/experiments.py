"""Experiments as library calls that return DataFrames (notebooks stay thin).

:func:`run` is one simulation from names (trace, topology, policies);
:func:`compare` runs several policy combinations on the same jobs and returns
a long-form per-job table and a one-row-per-run summary, both tidy for
seaborn.
"""

from __future__ import annotations

import itertools
import warnings
from dataclasses import dataclass

import pandas as pd

from .network.model import DEFAULT_NETWORK, ideal_networks
from .sim import SimConfig, SimResult, Simulator
from .topology import load_topology
from .workload.job import jobs_from_frame
from .workload.zoo import ModelZoo

DEMO_TOPOLOGY = "leafspine,racks=4,hosts_per_rack=4,gpus_per_host=8,host_gbps=100,oversub=4,spines=2"
DEMO_POLICIES = (("fifo", "consolidated"), ("fifo", "random"), ("sjf", "consolidated"),
                 ("tiresias", "consolidated"), ("tiresias", "random"), ("themis", "consolidated"))


def load_jobs(trace, topology, max_jobs: int | None = None, seed: int = 0, trace_dir=None, zoo: ModelZoo | None = None):
    """Trace (name, spec, path or DataFrame) -> (Topology, jobs, trace DataFrame)."""
    from .traces import load_trace

    from .traces.synthetic import fit_warning

    topo = load_topology(topology)
    df = trace if isinstance(trace, pd.DataFrame) else load_trace(trace, trace_dir=trace_dir, seed=seed,
                                                                  max_jobs=max_jobs, cluster_gpus=topo.total_gpus)
    if (warning := fit_warning(df, topo.total_gpus)) is not None:
        warnings.warn(warning, stacklevel=2)
    if max_jobs is not None:
        df = df.iloc[:max_jobs]
    return topo, jobs_from_frame(df, topo, zoo), df


def run(trace="philly-sample", topology=DEMO_TOPOLOGY, policy="fifo", placement=None, network=DEFAULT_NETWORK,
        seed: int = 0, max_jobs: int | None = None, trace_dir=None, progress=False, netpolicy: str = "none",
        **config) -> SimResult:
    """One simulation from names; ``config`` fills :class:`netlab.sim.SimConfig`."""
    from .traces.synthetic import offered_load

    topo, jobs, df = load_jobs(trace, topology, max_jobs=max_jobs, seed=seed, trace_dir=trace_dir)
    cfg = SimConfig(network=network, seed=seed, progress=progress, **config)
    result = Simulator(topo, jobs, policy, placement, None, cfg, netpolicy=netpolicy).run()
    result.config["trace"] = trace if isinstance(trace, str) else "<DataFrame>"
    result.config["max_jobs"] = max_jobs
    result.config["offered_load"] = offered_load(df, topo.total_gpus)  # what the trace asks of these GPUs
    return result


@dataclass
class Comparison:
    jobs: pd.DataFrame  # one row per job per run, with the run's parameters as columns
    summary: pd.DataFrame  # one row per run
    links: pd.DataFrame  # per-link segments per run


def compare(trace="philly-sample", topology=DEMO_TOPOLOGY, policies=DEMO_POLICIES, networks=(DEFAULT_NETWORK,),
            seeds=(0,), max_jobs: int | None = None, trace_dir=None, progress=True) -> Comparison:
    """Run every (policy, placement) x network x seed on the same trace and topology."""
    from .progress import tqdm

    cells = list(itertools.product(policies, networks, seeds))
    jobs, rows, links = [], [], []
    bindings = {}
    for (policy, placement), network, seed in tqdm(cells, desc="runs", disable=not progress):
        if seed not in bindings:
            bindings[seed] = load_jobs(trace, topology, max_jobs=max_jobs, seed=seed, trace_dir=trace_dir)
        topo, job_list, _ = bindings[seed]
        res = Simulator(topo, job_list, policy, placement, None, SimConfig(network=network, seed=seed)).run()
        label = f"{policy}+{placement}"
        tags = dict(policy=policy, placement=placement, network=network, seed=seed, label=label)
        jobs.append(res.jobs.assign(**tags))
        links.append(res.links.assign(**tags))
        rows.append({**tags, **{k: v for k, v in res.summary.items() if not isinstance(v, dict)}})
    summary = pd.DataFrame(rows)
    ideal = summary[summary.network.isin(ideal_networks())].set_index(["label", "seed"]).avg_jct_s
    if len(ideal):
        summary["jct_vs_ideal"] = [r.avg_jct_s / ideal.get((r.label, r.seed), float("nan")) for r in summary.itertuples()]
    return Comparison(pd.concat(jobs, ignore_index=True), summary, pd.concat(links, ignore_index=True))
