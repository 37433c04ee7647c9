"""netlab's answers for a referee scenario: every network model, asked the same question as ns-3.

Each job becomes the :class:`~netlab.network.model.CommDemand` the simulator
would build for it (:func:`netlab.network.demand.build_demand`, same routes),
with two things the packet level has and a flow model does not, both known
before anything runs and the same for every model:

* bytes on the wire: the gradient times the transport's framing
  (:data:`netlab.validate.scenario.WIRE_OVERHEAD`, by arithmetic);
* per-step latency: a ring step of ``c`` bytes takes ``c / bottleneck rate``
  plus the store-and-forward of one frame on every other link of the path,
  the propagation delays and a constant per transport
  (:data:`STEP_LATENCY_S`, fitted on jobs *alone* in the referee, never on
  contended ones: ``benchmarks/bench_referee.py`` reports the fit and its
  residuals). It is added to the job's serial intra-host time, so a model
  sees it as communication time that does not load the network.

With both, every model's answer for a job alone is the referee's (within the
alone residuals the benchmark reports): what is left between them is how the
network is shared.

Every model answers with its ``solve``, as the simulator asks it. A model
that simulates time (``tcp``: ``simulate_starts``) answers a second time
(``tcp-fluid``): it runs the scenario from its start offsets, as the referee
does, and both runs are read by one rule, :func:`steady_iter_s` (the fidelity
benchmark's: the mean period inside the window where every job is past its
warm-up).
"""

from __future__ import annotations

import time
from dataclasses import replace

import numpy as np
import pandas as pd

from .scenario import FRAME_BYTES, RefereeJob, RefereeScenario

#: Per ring step, beyond the bottleneck's serialisation, store-and-forward and propagation: what the
#: referee adds on a lone job whose chunk ends in a partial TCP segment (measured on 2-rank rings alone,
#: ``benchmarks/bench_referee.py``'s alone rows; whole segments add nothing)
PARTIAL_SEGMENT_S = {"reno": 64e-6, "cubic": 64e-6, "dctcp": 64e-6, "dcqcn": 0.0}
TCP_SEGMENT = 1448

#: the models scored besides every registered network model: ``tcp`` with ``alpha = 0`` (per-connection
#: sharing among communicating flows, not weighted by bytes)
VARIANTS = {"tcp-alpha0": ("tcp", {"alpha": 0.0})}
#: suffix of a time-simulating model's second answer: its fluid run of the scenario from the start offsets
FLUID = "-fluid"


def model_specs() -> dict[str, tuple[str, dict, str]]:
    """Name -> (registered network model, constructor arguments, how it is asked) for every model to ask.

    ``solve``: the answer the simulator uses (``NetworkModel.solve``; for ``tcp``, the mean field on components
    over ``max_exact_jobs`` jobs). A model that simulates time is asked a second way, ``fluid`` (name suffix
    :data:`FLUID`): its ``simulate_starts`` from the scenario's start offsets, read by :func:`steady_iter_s`, as
    netlab predicts a testbed scenario (:func:`netlab.testbed.scenarios.predict_on`).
    """
    from ..network.model import NETWORKS

    base = {name: (name, {}) for name in NETWORKS.names()}
    base.update({k: v for k, v in VARIANTS.items() if v[0] in base})
    specs = {}
    for name, (network, kwargs) in base.items():
        specs[name] = (network, kwargs, "solve")
        if hasattr(NETWORKS.get(network), "simulate_starts"):
            specs[name + FLUID] = (network, kwargs, "fluid")
    return specs


# ----------------------------------------------------------------------------- a job alone
def _paths(sc: RefereeScenario, job: RefereeJob) -> list[np.ndarray]:
    topo = sc.topology
    idx = [topo.host_index[h] for h in job.hosts]
    return [topo.flow_links(a, b, key=job.job_id * 1024 + n)[0]
            for n, (a, b) in enumerate(zip(idx, idx[1:] + idx[:1]))]


def step_latency_s(sc: RefereeScenario, job: RefereeJob) -> float:
    """One ring step's fixed cost alone: the slowest flow's frame store-and-forward on every link but its
    bottleneck, its propagation, and the transport's constant."""
    cap = sc.topology.link_capacity_gbps * 1e9
    frame_bits = FRAME_BYTES * 8
    worst = 0.0
    for links in _paths(sc, job):
        t = frame_bits / cap[links]
        worst = max(worst, float(t.sum() - t.max()) + len(links) * sc.delay_s)
    partial = round(job.chunk_bytes) % TCP_SEGMENT != 0
    return worst + (PARTIAL_SEGMENT_S[sc.transport.name] if partial else 0.0)


def _latency_s(sc: RefereeScenario, job: RefereeJob) -> float:
    return job.steps * step_latency_s(sc, job)


def demand(sc: RefereeScenario, job: RefereeJob, with_phase: bool = True):
    """The job's CommDemand as netlab builds it, its bytes on the wire and its per-step latency included."""
    from ..network.demand import build_demand
    from ..workload.zoo import JobModel

    topo = sc.topology
    model = JobModel(f"job{job.job_id}", job.compute_s, job.grad_bytes * sc.transport.wire_overhead,
                     overlap=job.overlap)
    hosts = [topo.host_index[h] for h in job.hosts]
    d, _ = build_demand(topo, model, job.pattern, job.job_id, hosts, list(job.gpus))
    d = replace(d, serial_intra_s=d.serial_intra_s + _latency_s(sc, job))
    iso = d.iter_s(d.iso_rate_gbps)
    return replace(d, iso_iter_s=iso, phase=(job.offset_s / iso) % 1.0 if with_phase and iso > 0 else 0.0)


def alone_comm_s(sc: RefereeScenario, job: RefereeJob) -> float:
    """Communication seconds of the job alone (network at its isolated rate, intra-host phase, latency)."""
    d = demand(sc, job, with_phase=False)
    return d.net_s(d.iso_rate_gbps) + d.serial_intra_s


def alone_iter_s(sc: RefereeScenario) -> dict[int, float]:
    """Every job's iteration alone (netlab's rule, with the referee's latency and framing)."""
    return {j.job_id: float(demand(sc, j, with_phase=False).iso_iter_s) for j in sc.jobs}


# ----------------------------------------------------------------------------- the steady window
def starts_frame(starts: dict, compute_s: dict) -> pd.DataFrame:
    """Iteration starts per job as the testbed's raw-log columns (rank 0), so one rule reads both sides."""
    frames = []
    for jid, s in starts.items():
        s = np.asarray(s, dtype=float)
        k = np.arange(len(s) - 1)
        frames.append(pd.DataFrame(dict(job_id=int(jid), rank=0, iter=k, compute_start=s[:-1],
                                        allreduce_start=s[:-1] + compute_s[jid], allreduce_end=s[1:])))
    return pd.concat(frames, ignore_index=True)


def steady_iter_s(starts: dict, compute_s: dict, warmup: int) -> dict[int, float]:
    """Per job, the mean period over the common steady window (:func:`netlab.congestion.fidelity.steady_iterations`)."""
    from ..congestion.fidelity import steady_iterations

    short = [j for j, s in starts.items() if len(s) < warmup + 3]
    if short:
        raise ValueError(f"jobs {short} have fewer than warmup + 3 = {warmup + 3} iteration starts")
    st = steady_iterations(starts_frame(starts, compute_s), warmup=warmup)
    return {int(r.job_id): float(r.iter_s) for r in st.itertuples()}


# ----------------------------------------------------------------------------- every model
def predict(sc: RefereeScenario, network: str, kwargs: dict | None = None, how: str = "solve") -> dict[int, float]:
    """``network`` (a registered model, with ``kwargs``)'s iteration seconds per job of ``sc``, by its ``solve``
    or (``how="fluid"``) by simulating the scenario from its start offsets (:func:`model_specs`)."""
    from ..network.model import NETWORKS

    net = NETWORKS.create(network, **(kwargs or {}))
    demands = [demand(sc, j) for j in sc.jobs]
    cap = sc.topology.link_capacity_gbps
    if how == "fluid":
        starts = net.simulate_starts(demands, cap, {j.job_id: j.offset_s for j in sc.jobs},
                                     {j.job_id: j.iterations for j in sc.jobs})
        return steady_iter_s(starts, {j.job_id: j.compute_s for j in sc.jobs}, sc.warmup)
    if how != "solve":
        raise ValueError(f"how must be 'solve' or 'fluid', not {how!r}")
    sol = net.solve(demands, cap)
    return {j.job_id: float(sol.iter_s[j.job_id]) for j in sc.jobs}


def predict_beatdown(sc: RefereeScenario, network: str, beta: float, kwargs: dict | None = None) -> dict[int, float]:
    """``network``'s iteration seconds per job of ``sc`` with DCTCP's multi-bottleneck beat-down at exponent ``beta``
    (the model's own ``beatdown_beta``: two solves, :mod:`netlab.network.tcp.beatdown`), every ring flow on
    netlab's route (the demand's ``flow_paths``)."""
    return predict(sc, network, {**(kwargs or {}), "beatdown_beta": beta})


def predict_all(sc: RefereeScenario, specs: dict | None = None) -> pd.DataFrame:
    """One row per (model, job): ``iter_s``, and per model the CPU seconds its prediction took (``cpu_s``)."""
    rows = []
    for name, (network, kwargs, how) in (specs or model_specs()).items():
        t0 = time.process_time()
        got = predict(sc, network, kwargs, how)
        cpu = time.process_time() - t0
        rows += [dict(model=name, job_id=jid, iter_s=it, cpu_s=cpu) for jid, it in got.items()]
    return pd.DataFrame(rows)
