"""Experiments as library calls that return DataFrames (notebooks stay thin).

:func:`run` is one simulation from names (trace, topology, policies);
:func:`compare` runs several policy combinations on the same jobs and returns
a long-form per-job table and a one-row-per-run summary, both tidy for
seaborn.
"""

from __future__ import annotations

import functools
import itertools
from dataclasses import dataclass
from typing import TYPE_CHECKING

from .network.model import DEFAULT_NETWORK, ideal_networks
from .run import DEFAULT_TOPOLOGY, RunParams, load_frame, run_one, tag_jobs

if TYPE_CHECKING:
    import pandas as pd

    from .sim import SimResult

DEMO_TOPOLOGY = DEFAULT_TOPOLOGY
DEMO_POLICIES = (("fifo", "consolidated"), ("fifo", "random"), ("sjf", "consolidated"),
                 ("tiresias", "consolidated"), ("tiresias", "random"), ("themis", "consolidated"))


def run(trace="philly-sample", topology=DEMO_TOPOLOGY, policy="fifo", placement=None, network=DEFAULT_NETWORK,
        seed: int = 0, max_jobs: int | None = None, trace_dir=None, progress=False, **params) -> SimResult:
    """One simulation from names; ``params`` are further :class:`netlab.run.RunParams` fields (``checkpoint_s``,
    ``preemption``, ``oversub``, ``link_history``...)."""
    return run_one(RunParams(trace=trace, topology=topology, policy=policy, placement=placement, network=network,
                             seed=seed, max_jobs=max_jobs, progress=progress, **params), trace_dir=trace_dir)


@dataclass
class Comparison:
    jobs: "pd.DataFrame"  # one row per job per run, with the run's parameters as columns
    summary: "pd.DataFrame"  # one row per run
    links: "pd.DataFrame"  # per-link segments per run


def compare(trace="philly-sample", topology=DEMO_TOPOLOGY, policies=DEMO_POLICIES, networks=(DEFAULT_NETWORK,),
            seeds=(0,), max_jobs: int | None = None, trace_dir=None, progress=True) -> Comparison:
    """Run every (policy, placement) x network x seed on the same trace and topology (each seed's trace is read
    once). Per-job rows keep the job's hosts as ``placement`` and the placement policy as ``placement_policy``."""
    import pandas as pd

    from .progress import tqdm

    cells = list(itertools.product(policies, networks, seeds))
    jobs, rows, links = [], [], []
    load = functools.cache(load_frame)  # this call's cache: a trace file edited between calls is read again
    for (policy, placement), network, seed in tqdm(cells, desc="runs", disable=not progress):
        params = RunParams(trace=trace, topology=topology, policy=policy, placement=placement, network=network,
                           seed=seed, max_jobs=max_jobs)
        res = run_one(params, trace_dir=trace_dir, load=load)
        label = f"{policy}+{placement}"
        tags = dict(policy=policy, placement=placement, network=network, seed=seed, label=label)
        jobs.append(tag_jobs(res.jobs, tags))
        links.append(res.links.assign(**tags))
        rows.append({**tags, **{k: v for k, v in res.summary.items() if not isinstance(v, dict)}})
    summary = pd.DataFrame(rows)
    ideal = summary[summary.network.isin(ideal_networks())].set_index(["label", "seed"]).avg_jct_s
    if len(ideal):
        summary["jct_vs_ideal"] = [r.avg_jct_s / ideal.get((r.label, r.seed), float("nan"))
                                   for r in summary.itertuples()]
    return Comparison(pd.concat(jobs, ignore_index=True), summary, pd.concat(links, ignore_index=True))
