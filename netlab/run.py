"""One simulation from names: its parameters (:class:`RunParams`) and :func:`run_one`.

``netlab simulate``, :func:`netlab.experiments.run` and :func:`~netlab.experiments.compare`
and every sweep cell (:mod:`netlab.sweep.cell`) run a simulation the same way:
the topology from its spec (with ``oversub`` applied and ``background``
traffic taken off its fabric links), the trace read once and cut to
``max_jobs`` once, its rows bound to jobs on that topology, then the
simulator with the ordering, placement and preemption policies and a
:class:`~netlab.sim.SimConfig` made of the same parameters.

:class:`RunParams` is a :class:`~netlab.errors.Schema`: every field is checked
when the parameters are built, with the rule its type says once here (or in
:mod:`netlab.sim.config` for the simulator's own fields), whoever builds them:
the command line, a notebook, a sweep cell (:class:`netlab.sweep.grid.CellParams`
uses the same types). The per-job table keeps the job's hosts as
``placement``; :func:`tag_jobs` adds a run's parameters beside it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import PurePath
from typing import Annotated, Any

from pydantic import BeforeValidator, Field, StrictBool
from pydantic_core import PydanticCustomError

from .errors import Float, Int, InputError, registered
from .sim.config import Seed, SimConfig

#: the cluster a run gets unless it names one: a 128-GPU leaf-spine at 4:1 (100 Gbit/s hosts, 2 spines)
DEFAULT_TOPOLOGY = "leafspine,racks=4,hosts_per_rack=4,gpus_per_host=8,oversub=4"
DEFAULT_TRACE = "philly-sample"


def _ordering():
    from .policies import ORDERING

    return ORDERING


def _placement():
    from .policies import PLACEMENT

    return PLACEMENT


def _preemption():
    from .policies import PREEMPTION

    return PREEMPTION


def _netpolicy():
    from .policies import NETWORK_POLICIES

    return NETWORK_POLICIES


def _migration():
    from .policies import MIGRATION

    return MIGRATION


def _compression():
    from .workload.compression import COMPRESSIONS

    return COMPRESSIONS


def _text(value):
    """Text (a path is its text) that is not blank."""
    if isinstance(value, PurePath):
        value = str(value)
    if not isinstance(value, str):
        raise PydanticCustomError("string_type", "is not text")
    if not value.strip():
        raise ValueError("is empty")
    return value


def _is_frame(value) -> bool:
    return hasattr(value, "itertuples") and hasattr(value, "columns")


def _trace_or_frame(value):
    return value if _is_frame(value) else _text(value)


def _topology_or_object(value):
    from .topology import Topology

    return value if isinstance(value, Topology) else _text(value)


#: a trace: a registered name, a spec string (``synthetic,jobs=200``) or a file path
TraceText = Annotated[str, BeforeValidator(_text), Field(description="a trace name, spec string or file path")]
#: a topology: a spec string (``leafspine,racks=4``), a YAML file or a Crux topo.csv
TopologyText = Annotated[str, BeforeValidator(_text), Field(description="a topology spec string or file path")]
#: in Python also a trace DataFrame and a Topology
Trace = Annotated[Any, BeforeValidator(_trace_or_frame),
                  Field(description="a trace name, spec string or file path, or a trace DataFrame")]
TopologyRef = Annotated[Any, BeforeValidator(_topology_or_object),
                        Field(description="a topology spec string or file path, or a Topology")]
MaxJobs = Annotated[Int(ge=1) | None, Field(description="an integer >= 1, or null for every job")]
Oversub = Annotated[Float(gt=0) | None, Field(description="a finite number > 0, or null for the topology's own")]
Policy = registered(_ordering)
Placement = registered(_placement, nullable=True)
Preemption = registered(_preemption, nullable=True)
#: per-job priority class, weight, rate cap and paths (:mod:`netlab.policies.network`); none: every job alike
NetPolicy = registered(_netpolicy)
#: moving running jobs whose slowdown stays high (:mod:`netlab.policies.migration`); none: jobs stay put
Migration = registered(_migration)
#: gradient compression for every job of 2 or more GPUs (:mod:`netlab.workload.compression`); null: none
Compression = registered(_compression, nullable=True)
#: share of every switch-to-switch link taken by steady background traffic that does not back off
Background = Float(ge=0, lt=1, what="a finite number >= 0 and < 1 (a share of each link)")
#: every job submitted at t = 0 (their order kept by job id): a batch-submission makespan experiment
Batch = Annotated[StrictBool, Field(description="true or false")]


class RunParams(SimConfig):
    """One simulation from names: the workload, the cluster, the policies and the simulator's settings.

    ``seed`` seeds the policies' random streams and, unless ``workload_seed`` is
    given, the trace's too (the model draw, synthetic arrivals).
    """

    trace: Trace = DEFAULT_TRACE
    topology: TopologyRef = DEFAULT_TOPOLOGY
    max_jobs: MaxJobs = None
    oversub: Oversub = None
    policy: Policy = "fifo"
    placement: Placement = None
    preemption: Preemption = None
    netpolicy: NetPolicy = "none"
    migration: Migration = "none"
    compression: Compression = None
    background: Background = 0.0
    batch: Batch = False
    workload_seed: Seed | None = None

    def sim_config(self) -> SimConfig:
        """The simulator's settings among these parameters (checked already)."""
        return SimConfig.model_construct(**{k: getattr(self, k) for k in SimConfig.model_fields})


def topology_spec(topology: str, oversub: float | None):
    """The topology spec ``topology`` with ``oversub=`` set (when given)."""
    from .spec import Spec

    if oversub is None:
        return topology
    if not isinstance(topology, str):
        raise InputError(f"field 'oversub': applies to a topology spec string, not to a {type(topology).__name__}")
    spec = Spec.parse(str(topology))
    return str(Spec(spec.kind, {**spec.params, "oversub": oversub}))


def load_frame(trace: str, seed: int, max_jobs: int | None, trace_dir=None, cluster_gpus: int | None = None):
    """A trace DataFrame by :func:`netlab.traces.load_trace` (which keeps the first ``max_jobs``); a trace spec
    that does not say its cluster is sized for ``cluster_gpus`` GPUs."""
    from .traces import load_trace

    return load_trace(trace, trace_dir=trace_dir, seed=seed, max_jobs=max_jobs, cluster_gpus=cluster_gpus)


def bind(params: RunParams, trace_dir=None, zoo=None, load: Callable = load_frame):
    """(topology, jobs, trace DataFrame) of a run: the trace read by ``load`` (a caller may cache it), sized for
    the topology's GPUs and cut to ``max_jobs`` once; a trace sized for a far different cluster draws a warning."""
    import warnings

    from .topology import load_topology
    from .traces.synthetic import fit_warning
    from .workload.job import jobs_from_frame

    topo = load_topology(topology_spec(params.topology, params.oversub))
    if params.background:  # steady traffic that does not back off occupies this share of every fabric link
        topo = topo.with_capacity({t: 1.0 - params.background for t in set(topo.link_tier) if t != "host"})
    seed = params.seed if params.workload_seed is None else params.workload_seed
    if _is_frame(params.trace):
        frame = params.trace if params.max_jobs is None else params.trace.iloc[:params.max_jobs]
    else:
        frame = load(params.trace, seed, params.max_jobs, trace_dir, topo.total_gpus)
    if (warning := fit_warning(frame, topo.total_gpus)) is not None:
        warnings.warn(warning, stacklevel=3)
    if params.batch:  # the same jobs, all submitted at once (their order kept by job id)
        frame = frame.assign(submit_s=0.0)
    return topo, jobs_from_frame(frame, topo, zoo), frame


def run_one(params: RunParams | Mapping, trace_dir=None, zoo=None, load: Callable = load_frame):
    """Run one simulation: a :class:`netlab.sim.SimResult` whose ``config`` also names the trace, ``max_jobs`` and
    the load the trace offers these GPUs (``offered_load``).

    ``params``: a :class:`RunParams` or a mapping of its fields (checked here);
    ``load(trace, seed, max_jobs, trace_dir, cluster_gpus)`` reads a named trace (the sweep's
    workers and :func:`netlab.experiments.compare` pass a cached one).
    """
    from .sim import Simulator
    from .traces.synthetic import offered_load

    p = params if isinstance(params, RunParams) else RunParams.parse(params)
    topo, jobs, frame = bind(p, trace_dir, zoo, load)
    if p.compression is not None:  # the jobs of 2+ GPUs move to their compressed models, added to the zoo
        from .workload.compression import with_compression
        from .workload.zoo import ModelZoo

        jobs, zoo = with_compression(jobs, zoo or ModelZoo.default(), p.compression)
    result = Simulator(topo, jobs, p.policy, p.placement, p.preemption, p.sim_config(), zoo=zoo,
                       netpolicy=p.netpolicy, migration=p.migration).run()
    result.config["trace"] = "<DataFrame>" if _is_frame(p.trace) else p.trace
    result.config["max_jobs"] = p.max_jobs
    if p.compression is not None:
        result.config["compression"] = p.compression
    result.config["offered_load"] = offered_load(frame, topo.total_gpus)  # what the trace asks of these GPUs
    return result


def tag_jobs(jobs, tags: Mapping):
    """A run's per-job table with the run's parameters as columns. The job's own ``placement`` (its hosts) stays;
    a ``placement`` parameter (the policy) becomes ``placement_policy``."""
    tags = dict(tags)
    if "placement" in tags and "placement" in jobs.columns:
        tags["placement_policy"] = tags.pop("placement")
    return jobs.assign(**tags)
