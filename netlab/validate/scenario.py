"""What the packet-level referee runs: a fabric, jobs placed on its hosts, a transport.

A :class:`RefereeScenario` is everything ns-3 needs and nothing it must guess:
the netlab :class:`~netlab.topology.Topology` at the rates the packets see (its
cables' Gbit/s are real rates, scaled down so one scenario takes seconds of
one core), jobs with their hosts in ring order and GPUs per host, gradient
bytes, compute seconds, overlap, start offsets and iteration counts, and the
:class:`Transport` (congestion control, switch queue depth, ECN threshold).
The same object is what netlab's network models are asked about
(:mod:`netlab.validate.predict`), so both sides see one scenario.

:func:`referee_input` turns it into the JSON the C++ program reads
(``netlab/validate/ns3/referee.cc``): nodes, cables with rates and delays, and
per job its ring flows with the path each takes: netlab's own route
(``Topology.flow_links`` with the key :func:`netlab.network.demand.build_demand`
uses), so the referee and the models route every flow alike, ECMP per flow
included. A fabric whose ECMP splits flows over several paths (``ecmp=split``)
cannot be run packet by packet that way and is refused.

Scenario files (``netlab validate --against ns3 FILE``) are JSON:
:func:`save_scenario` writes them, :func:`load_scenario` reads them and
checks every field first (one :class:`ScenarioError` naming the file, field
and allowed values).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Literal, Optional, Union

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ..errors import Float, InputError, Int, Label, describe_errors, read_text
from ..topology import Host, Topology, TopologyError, load_topology
from ..topology import ExplicitDoc  # the topology YAML schema, reused for the explicit mapping form

TRANSPORTS = ("reno", "cubic", "dctcp", "dcqcn")
PATTERNS = ("ring", "hierarchical")
#: bytes on the wire per payload byte: a 1448-byte TCP segment (timestamps on) is a 1502-byte frame
#: (IP 20, TCP 32, PPP 2); the rate transport carries 1460 data bytes in one (its header 12, UDP 8)
WIRE_OVERHEAD = {"reno": 1502 / 1448, "cubic": 1502 / 1448, "dctcp": 1502 / 1448, "dcqcn": 1502 / 1460}
FRAME_BYTES = 1502
MAX_SCENARIO_BYTES = 16 * 2**20


class ScenarioError(InputError):
    """A referee scenario is invalid; the message names the file or field and what is allowed."""


@dataclass(frozen=True)
class Transport:
    """How packets are sent and queued (see ``netlab/validate/README.md`` for what each captures).

    ``switch_queue_packets``: every switch egress queue's limit (deep 1000, shallow 100 at the scaled
    rates); ``ecn_threshold_packets``: dctcp and dcqcn mark ECN-capable packets arriving to this many
    queued (DCTCP's step marking); ``min_rto_s``: TCP's minimum retransmission timeout (Linux: 200 ms).
    """

    name: str = "reno"
    switch_queue_packets: int = 1000
    ecn_threshold_packets: int = 20
    host_queue_packets: int = 10_000
    min_rto_s: float = 0.2

    def __post_init__(self):
        if self.name not in TRANSPORTS:
            raise ScenarioError(f"transport: field 'name' must be one of {TRANSPORTS}, got {self.name!r}")
        if not (1 <= self.ecn_threshold_packets < self.switch_queue_packets and self.host_queue_packets >= 1
                and self.min_rto_s > 0):
            raise ScenarioError("transport: need 1 <= ecn_threshold_packets < switch_queue_packets, "
                                "host_queue_packets >= 1 and min_rto_s > 0")

    @property
    def wire_overhead(self) -> float:
        return WIRE_OVERHEAD[self.name]


#: the transport regimes the benchmark scores, by name
REGIMES: dict[str, Transport] = {
    "reno-deep": Transport("reno", 1000),
    "reno-shallow": Transport("reno", 100),
    "cubic-deep": Transport("cubic", 1000),
    "dctcp": Transport("dctcp", 1000, 20),
    "dcqcn": Transport("dcqcn", 1000, 20),
}


@dataclass(frozen=True)
class RefereeJob:
    """One data-parallel job: ``gpus[i]`` ranks on ``hosts[i]``, hosts in ring order.

    ``pattern`` ``ring``: one ring over all ranks, 2(n-1) steps of ``grad_bytes / n`` on every host hop;
    ``hierarchical``: reduce inside each host, a ring over the k hosts (2(k-1) steps of ``grad_bytes / k``),
    broadcast inside (netlab's :mod:`netlab.workload.patterns`). ``overlap``: the share of min(compute,
    communication alone) that runs during compute (netlab's ``iteration_time`` rule).
    """

    job_id: int
    hosts: tuple[str, ...]
    gpus: tuple[int, ...]
    grad_bytes: float
    compute_s: float
    overlap: float = 0.0
    offset_s: float = 0.0
    iterations: int = 14
    pattern: str = "ring"

    @property
    def ranks(self) -> int:
        return int(sum(self.gpus))

    @property
    def steps(self) -> int:
        """Ring steps per all-reduce over the network."""
        k = len(self.hosts)
        return 2 * (self.ranks - 1) if self.pattern == "ring" else 2 * (k - 1)

    @property
    def chunk_bytes(self) -> float:
        """Bytes every host sends its ring successor per step."""
        return self.grad_bytes / (self.ranks if self.pattern == "ring" else len(self.hosts))


@dataclass(frozen=True)
class RefereeScenario:
    """A fabric, jobs on it and a transport; ``meta`` records how a family generated it (free-form)."""

    name: str
    topology: Topology
    jobs: tuple[RefereeJob, ...]
    transport: Transport = field(default_factory=Transport)
    delay_s: float = 2e-6  # propagation per cable
    jitter: float = 0.0125  # relative std of compute per iteration (one draw per job and iteration)
    warmup: int = 4  # iterations of each job left out before the steady window
    seed: int = 0
    meta: dict = field(default_factory=dict, compare=False)

    def __post_init__(self):
        check_scenario(self)

    def with_transport(self, transport: Transport) -> "RefereeScenario":
        return replace(self, transport=transport)

    def key(self) -> str:
        """A hash of everything the referee's answer depends on (cached results are looked up by it)."""
        doc = scenario_doc(self)
        doc.pop("meta", None)
        doc.pop("name", None)
        return hashlib.sha256(json.dumps(doc, sort_keys=True).encode()).hexdigest()[:16]


def check_scenario(sc: RefereeScenario) -> None:
    """One ScenarioError for the first thing the referee cannot run."""
    topo = sc.topology
    if not sc.jobs:
        raise ScenarioError(f"scenario {sc.name}: no jobs")
    if not (sc.delay_s >= 0 and sc.jitter >= 0 and sc.warmup >= 0):
        raise ScenarioError(f"scenario {sc.name}: need delay_s >= 0, jitter >= 0, warmup >= 0")
    used: dict[str, int] = {}
    ids = set()
    for i, j in enumerate(sc.jobs):
        where = f"scenario {sc.name}: jobs[{i}]"
        if j.job_id in ids:
            raise ScenarioError(f"{where}: field 'job_id' {j.job_id} used twice")
        ids.add(j.job_id)
        if len(j.hosts) < 2 or len(j.gpus) != len(j.hosts) or min(j.gpus) < 1:
            raise ScenarioError(f"{where}: need at least 2 hosts and one GPU count >= 1 per host")
        if j.pattern not in PATTERNS:
            raise ScenarioError(f"{where}: field 'pattern' must be one of {PATTERNS}, got {j.pattern!r}")
        if not (j.grad_bytes > 0 and j.compute_s >= 0 and 0 <= j.overlap <= 1 and j.offset_s >= 0
                and j.iterations > sc.warmup + 1):
            raise ScenarioError(f"{where}: need grad_bytes > 0, compute_s >= 0, 0 <= overlap <= 1, offset_s >= 0 "
                                f"and iterations > warmup + 1 ({sc.warmup + 1})")
        if j.chunk_bytes < 1:
            raise ScenarioError(f"{where}: grad_bytes {j.grad_bytes} gives under one byte per ring step")
        for h, g in zip(j.hosts, j.gpus):
            if h not in topo.host_index:
                raise ScenarioError(f"{where}: field 'hosts': unknown host {h!r} in topology {topo.name}")
            used[h] = used.get(h, 0) + g
            if used[h] > topo[h].gpus:
                raise ScenarioError(f"{where}: host {h} has {topo[h].gpus} GPUs, {used[h]} placed on it")
    # one flow, one path: the referee pins each flow to the route netlab gives it
    if topo.ecmp == "split":
        for j in sc.jobs:
            idx = [topo.host_index[h] for h in j.hosts]
            for a, b in zip(idx, idx[1:] + idx[:1]):
                if len(topo.paths(a, b)) > 1:
                    raise ScenarioError(
                        f"scenario {sc.name}: topology {topo.name} splits flows over equal-cost paths "
                        f"(ecmp=split, e.g. {topo.hosts[a].name} -> {topo.hosts[b].name}); the referee routes "
                        "each flow on one path: build it with ecmp=hash (per-flow ECMP)")


# ----------------------------------------------------------------------------- the referee's input
def flow_path(topo: Topology, job: RefereeJob, n: int) -> list[str]:
    """Node names along ring flow ``n`` of ``job`` (hosts[n] -> hosts[n+1]): netlab's route for it."""
    src = topo.host_index[job.hosts[n]]
    dst = topo.host_index[job.hosts[(n + 1) % len(job.hosts)]]
    links, _ = topo.flow_links(src, dst, key=job.job_id * 1024 + n)  # build_demand's key for flow n
    nodes = [topo.link_src[int(links[0])]]
    for link in links:
        nodes.append(topo.link_dst[int(link)])
    return nodes


def referee_input(sc: RefereeScenario, max_sim_s: float = 600.0, sequential: bool = False) -> dict:
    """The JSON document ``referee.cc`` reads (see its header comment); ``sequential``: jobs one at a time."""
    from ..network.demand import build_demand
    from ..workload.zoo import JobModel

    topo = sc.topology
    nodes = [{"name": h.name, "host": True} for h in topo.hosts]
    nodes += [{"name": s, "host": False} for s in topo.switches]
    links = [{"a": a, "b": b, "rate_bps": float(g) * 1e9, "delay_s": sc.delay_s} for a, b, g, _ in topo.cables]
    jobs = []
    for j in sc.jobs:
        hosts = [topo.host_index[h] for h in j.hosts]
        model = JobModel(f"job{j.job_id}", j.compute_s, j.grad_bytes)
        _, intra_s = build_demand(topo, model, j.pattern, j.job_id, hosts, list(j.gpus))
        jobs.append(dict(id=j.job_id, hosts=list(j.hosts), paths=[flow_path(topo, j, n) for n in range(len(j.hosts))],
                         steps=j.steps, chunk_bytes=max(1, int(round(j.chunk_bytes))), compute_s=j.compute_s,
                         hidden_s=hidden_s(sc, j), intra_s=intra_s, offset_s=j.offset_s, jitter=sc.jitter,
                         iterations=j.iterations))
    t = sc.transport
    transport = dict(name=t.name, switch_queue_packets=t.switch_queue_packets,
                     ecn_threshold_packets=t.ecn_threshold_packets, host_queue_packets=t.host_queue_packets,
                     min_rto_s=t.min_rto_s)
    return dict(version=1, seed=sc.seed, transport=transport, nodes=nodes, links=links, jobs=jobs,
                max_sim_s=max_sim_s, sequential=sequential)


def hidden_s(sc: RefereeScenario, job: RefereeJob) -> float:
    """Seconds of the job's communication that run during compute: ``overlap x min(compute, comm alone)``,
    communication alone as the calibrated alone model says (:func:`netlab.validate.predict.alone_comm_s`)."""
    if job.overlap <= 0:
        return 0.0
    from .predict import alone_comm_s

    return job.overlap * min(job.compute_s, alone_comm_s(sc, job))


# ----------------------------------------------------------------------------- scenario files
class JobDoc(BaseModel):
    model_config = ConfigDict(extra="forbid")
    job_id: Int(ge=0, le=2**40)
    hosts: list[Label] = Field(min_length=2, description="at least 2 host names, in ring order")
    gpus: Optional[list[Int(ge=1, le=1024)]] = Field(default=None, description="GPUs per host (default 1 each)")
    grad_bytes: Float(gt=0, le=1e13)
    compute_s: Float(ge=0, le=1e4)
    overlap: Float(ge=0, le=1) = 0.0
    offset_s: Float(ge=0, le=1e4) = 0.0
    iterations: Int(ge=2, le=100_000) = 14
    pattern: Literal["ring", "hierarchical"] = "ring"


class TransportDoc(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: Literal["reno", "cubic", "dctcp", "dcqcn"] = "reno"
    switch_queue_packets: Int(ge=2, le=10**7) = 1000
    ecn_threshold_packets: Int(ge=1, le=10**7) = 20
    host_queue_packets: Int(ge=1, le=10**8) = 10_000
    min_rto_s: Float(gt=0, le=60) = 0.2


class ScenarioDoc(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: Label = "scenario"
    topology: Union[Label, dict] = Field(description="a topology spec string (e.g. 'leafspine,racks=4,ecmp=hash') "
                                                     "or the explicit mapping (hosts, switches, links)")
    jobs: list[JobDoc] = Field(min_length=1, description="a list of at least one job")
    transport: TransportDoc = TransportDoc()
    delay_s: Float(ge=0, le=1) = 2e-6
    jitter: Float(ge=0, le=1) = 0.0125
    warmup: Int(ge=0, le=10_000) = 4
    seed: Int(ge=0, le=2**62) = 0
    meta: dict = {}


def _topology(value, where: str) -> Topology:
    if isinstance(value, str):
        try:
            return load_topology(value)
        except TopologyError as exc:
            raise ScenarioError(f"{where}: field 'topology': {exc}") from None
    try:
        doc = ExplicitDoc.model_validate(value)
    except ValidationError as exc:
        raise ScenarioError(f"{where}: field 'topology': " + describe_errors(exc, ExplicitDoc)) from None
    hosts = [Host(h.name, h.gpus, rack=h.rack, pod=h.pod, intra_gbps=h.intra_gbps) for h in doc.hosts]
    try:
        return Topology(doc.name or "scenario", hosts, {s.name: s.tier for s in doc.switches},
                        [(c.a, c.b, c.gbps, c.tier) for c in doc.links], ecmp=doc.ecmp)
    except TopologyError as exc:
        raise ScenarioError(f"{where}: field 'topology': {exc}") from None


def scenario_from_doc(doc: dict, where: str = "scenario") -> RefereeScenario:
    """A RefereeScenario from its JSON mapping; every problem is a ScenarioError naming ``where`` and the field."""
    try:
        d = ScenarioDoc.model_validate(doc)
    except ValidationError as exc:
        raise ScenarioError(f"{where}: " + describe_errors(exc, ScenarioDoc)) from None
    topo = _topology(d.topology, where)
    jobs = []
    for i, j in enumerate(d.jobs):
        gpus = tuple(j.gpus) if j.gpus is not None else (1,) * len(j.hosts)
        if len(gpus) != len(j.hosts):
            raise ScenarioError(f"{where}: jobs[{i}]: field 'gpus' has {len(gpus)} entries for {len(j.hosts)} hosts")
        jobs.append(RefereeJob(j.job_id, tuple(j.hosts), gpus, j.grad_bytes, j.compute_s, j.overlap, j.offset_s,
                               j.iterations, j.pattern))
    try:
        return RefereeScenario(d.name, topo, tuple(jobs), Transport(**d.transport.model_dump()), d.delay_s, d.jitter,
                               d.warmup, d.seed, dict(d.meta))
    except ScenarioError as exc:
        raise ScenarioError(f"{where}: {exc}") from None


def scenario_doc(sc: RefereeScenario) -> dict:
    """The JSON mapping of a scenario (the explicit topology form, so a file is self-contained)."""
    jobs = [dict(job_id=int(j.job_id), hosts=list(j.hosts), gpus=[int(g) for g in j.gpus],
                 grad_bytes=float(j.grad_bytes), compute_s=float(j.compute_s), overlap=float(j.overlap),
                 offset_s=float(j.offset_s), iterations=int(j.iterations), pattern=j.pattern) for j in sc.jobs]
    t = sc.transport
    transport = dict(name=t.name, switch_queue_packets=int(t.switch_queue_packets),
                     ecn_threshold_packets=int(t.ecn_threshold_packets), host_queue_packets=int(t.host_queue_packets),
                     min_rto_s=float(t.min_rto_s))
    return dict(name=sc.name, topology=sc.topology.to_dict(), jobs=jobs, transport=transport, delay_s=float(sc.delay_s),
                jitter=float(sc.jitter), warmup=int(sc.warmup), seed=int(sc.seed), meta=dict(sc.meta))


def save_scenario(sc: RefereeScenario, path) -> Path:
    from ..sim.metrics import write_json

    return write_json(path, scenario_doc(sc))


def load_scenario(path) -> RefereeScenario:
    """Read a scenario file written by :func:`save_scenario` (or by hand)."""
    path = Path(path)
    text = read_text(path, ScenarioError, MAX_SCENARIO_BYTES, what="referee scenario file")
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ScenarioError(f"{path}: line {exc.lineno}: not valid JSON: {exc.msg}") from None
    if not isinstance(doc, dict):
        raise ScenarioError(f"{path}: top level must be a mapping (name, topology, jobs, transport, ...)")
    return scenario_from_doc(doc, str(path))
