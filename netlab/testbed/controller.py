"""The controller: deploy agents to every host, then shape, measure and run jobs.

One :class:`Controller` drives any :class:`~netlab.testbed.base.Testbed`
(namespaces, Mininet or a physical lab): it only needs each host's SSH
address, a socket to reach it (:meth:`Testbed.open_socket`), the SSH
identity and the known_hosts file. Results come back as pandas DataFrames.

>>> with NetnsTestbed(topo) as tb, Controller(tb).deploy() as ctl:   # doctest: +SKIP
...     ctl.start_telemetry(interval_ms=100)
...     job = ctl.start_job(TrainSpec(1, [("h1", 1), ("h3", 1)], grad_bytes=4_000_000, compute_ms=50, iterations=5))
...     ctl.wait_job(1)
...     ctl.job_log(1)
"""

from __future__ import annotations

import logging
import shlex
import threading
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from ..sched.allocation import NetAllocation
from .agent_client import AgentClient, AgentError
from .base import Testbed, TestbedError, TestbedHost
from .deploy import agent_wheel, install_agent, wheel_version
from .jobnet import JobNetwork
from .ssh import ssh_connect

log = logging.getLogger(__name__)
#: seconds between heartbeats, both ways (see netlab.testbed.agent_client)
HEARTBEAT_S = 1.0


@dataclass(frozen=True)
class TrainSpec:
    """One distributed training job on the testbed: ranks per host, and what an iteration does.

    ``grad_bytes`` is what each iteration all-reduces (already scaled to the
    testbed's link rates); ``compute_ms`` is the emulated (CPU hosts) or real
    (GPU hosts) compute phase before it; ``offset_ms`` delays the first
    iteration (a CASSINI time shift); ``overlap`` (0..1) hides that share of
    ``min(compute, all-reduce)``: the all-reduce starts after ``1 - overlap`` of
    the compute and the iteration lasts as netlab's iteration-time rule says.
    """

    job_id: int
    ranks: list[tuple[str, int]]  # (host name, ranks on it); rank 0 is on the first host
    grad_bytes: int
    compute_ms: float
    iterations: int
    offset_ms: float = 0.0
    backend: str = "auto"
    start_at: float | None = None  # unix time all ranks wait for after rendezvous
    master_port: int | None = None
    nccl_ib_disable: bool = True
    allocation: NetAllocation | None = None  # its network share (per-job classes, routes); None: the default class
    overlap: float = 0.0  # the model's compute/communication overlap (the zoo's)

    @property
    def world_size(self) -> int:
        return sum(n for _, n in self.ranks)


@dataclass
class RunningJob:
    spec: TrainSpec
    ranks: list[tuple[str, int]]  # (host, rank)
    exits: dict[int, int] = field(default_factory=dict)  # rank -> returncode
    started_s: float = 0.0
    done: threading.Event = field(default_factory=threading.Event)
    failure: str | None = None  # why the job ended without every rank's exit (an agent's channel closed)
    net: JobNetwork | None = None  # its network allocation on the testbed, while it runs
    net_stats: pd.DataFrame | None = None  # its classes' counters per link when it ended (an allocated job)

    @property
    def ok(self) -> bool:
        return self.done.is_set() and self.failure is None and all(rc == 0 for rc in self.exits.values())


class Controller:
    """Agents on every host of ``testbed``; a context manager that shuts them down on exit."""

    def __init__(self, testbed: Testbed, wheel=None, install: str = "target", auto_add_host_keys: bool = False,
                 progress: bool | None = None, hello_timeout_s: float = 60.0, max_workers: int = 8,
                 dead_after_s: float = 10.0, controller_timeout_s: float = 60.0, rank_silence_s: float = 15.0):
        """``dead_after_s``: an agent silent this long (no heartbeat, stopped or its host hung) is declared dead
        and its jobs fail; ``controller_timeout_s``: an agent that hears nothing from this controller for this
        long stops and undoes everything; ``rank_silence_s``: an agent kills a training rank whose heartbeats
        stop this long (its job fails with the reason). 0 turns a check off."""
        self.testbed = testbed
        self.dead_after_s, self.controller_timeout_s = dead_after_s, controller_timeout_s
        self.rank_silence_s = rank_silence_s
        self.wheel = agent_wheel(wheel)
        self.version = wheel_version(self.wheel)
        self.install, self.auto_add = install, auto_add_host_keys
        self.progress, self.hello_timeout_s, self.max_workers = progress, hello_timeout_s, max_workers
        self.agents: dict[str, AgentClient] = {}
        self.hosts: dict[str, TestbedHost] = {h.name: h for h in testbed.hosts}
        self.jobs: dict[int, RunningJob] = {}
        self._ports = iter(range(29500, 29500 + 20000))
        self._job_ids = iter(range(1, 10**9))
        self._flows: dict[str, tuple[str, str]] = {}
        self._nets: dict[int, JobNetwork] = {}  # allocations without a job (allocate)
        self._lock = threading.Lock()
        self.deploy_s: float | None = None
        self.on_job_done = None  # called with the job id when its last rank exits (from a reader thread)

    # ------------------------------------------------------------ deployment
    def deploy(self, hosts: list[str] | None = None) -> "Controller":
        """Install and start the agent on every host in parallel (a progress bar shows hosts done)."""
        from ..progress import tqdm

        names = hosts or list(self.hosts)
        t0 = time.perf_counter()
        errors = []
        with ThreadPoolExecutor(max_workers=min(self.max_workers, len(names)) or 1) as pool, \
                tqdm(total=len(names), desc="deploy agents", unit="host", disable=self.progress is False,
                     leave=False) as bar:
            futures = {pool.submit(self._deploy_one, self.hosts[n]): n for n in names}
            for fut in as_completed(futures):
                try:
                    self.agents[futures[fut]] = fut.result()
                except Exception as exc:  # noqa: BLE001 - collect every host's failure
                    errors.append(f"{futures[fut]}: {exc}")
                bar.update(1)
        self.deploy_s = time.perf_counter() - t0
        if errors:
            self.close()
            raise TestbedError("agent deployment failed on " + "; ".join(sorted(errors)))
        return self

    def _deploy_one(self, host: TestbedHost) -> AgentClient:
        sock = self.testbed.open_socket(host)
        ssh = ssh_connect(host.ssh_addr, host.ssh_port, host.user, self.testbed.client_key, self.testbed.known_hosts,
                          sock=sock, auto_add=self.auto_add)
        try:
            prefix, workdir = install_agent(ssh, host, self.wheel, self.install)
            argv = prefix + ["-m", "netlab_agent", "--state-dir", f"{workdir}/agent-state", "--host", host.name,
                             "--heartbeat-s", repr(HEARTBEAT_S),
                             "--controller-timeout-s", repr(float(self.controller_timeout_s)),
                             "--rank-silence-s", repr(float(self.rank_silence_s))]
            chan = ssh.get_transport().open_session()
            chan.exec_command(shlex.join(argv))
            agent = AgentClient(host.name, chan, ssh, on_event=self._on_event, on_close=self._on_agent_closed,
                                heartbeat_s=HEARTBEAT_S, dead_after_s=self.dead_after_s)
            hello = agent.wait_hello(self.hello_timeout_s)
        except Exception:
            ssh.close()
            raise
        if hello.get("version") != self.version:
            agent.close()
            raise TestbedError(f"{host.name}: agent version {hello.get('version')!r} does not match the deployed "
                               f"wheel {self.version!r}")
        return agent

    def __enter__(self) -> "Controller":
        if not self.agents:
            self.deploy()
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        """Shut every agent down (each restores its shaping and stops its ranks) in parallel."""
        agents, self.agents = dict(self.agents), {}
        if not agents:
            return
        with ThreadPoolExecutor(max_workers=len(agents)) as pool:
            list(pool.map(lambda a: a.close(), agents.values()))

    def agent(self, host: str) -> AgentClient:
        try:
            return self.agents[host]
        except KeyError:
            raise TestbedError(f"no agent on {host!r}; hosts with agents: {sorted(self.agents)}") from None

    def call_all(self, cmd: str, hosts: list[str] | None = None, **args) -> dict[str, object]:
        """Send one command to several agents at once; results by host."""
        futs = {h: self.agent(h).submit(cmd, **args) for h in (hosts or list(self.agents))}
        return {h: f.result(timeout=60) for h, f in futs.items()}

    # ------------------------------------------------------------ shaping
    def shape(self, host: str, ifname: str | None = None, **spec) -> dict:
        """Shape a host interface (default: its data-plane interface) through its agent."""
        return self.agent(host).call("shape", ifname=ifname or self.hosts[host].ifname, **spec)

    def clear(self, host: str, ifname: str | None = None) -> dict:
        return self.agent(host).call("clear", ifname=ifname or self.hosts[host].ifname)

    # ------------------------------------------------------------ telemetry
    def start_telemetry(self, interval_ms: float = 100.0, hosts: list[str] | None = None) -> None:
        self.call_all("telemetry_start", hosts, interval_ms=interval_ms)

    def stop_telemetry(self, hosts: list[str] | None = None) -> pd.DataFrame:
        """Stop sampling; per host: samples taken and deadlines missed (``lost``)."""
        res = self.call_all("telemetry_stop", hosts)
        return pd.DataFrame([{"host": h, **r} for h, r in res.items()])

    def telemetry(self) -> pd.DataFrame:
        """Interface counters per host, interface and sample (TCP counters joined per sample)."""
        rows = []
        for agent in self.agents.values():
            for ev in agent.events_of("telemetry"):
                s = ev.get("sample", {})
                tcp = {f"tcp_{k}": v for k, v in (s.get("tcp") or {}).items()}
                for ifname, c in (s.get("links") or {}).items():
                    rows.append({"host": agent.host, "seq": ev.get("seq"), "t": ev.get("t"), "ifname": ifname,
                                 **c, **tcp})
        return pd.DataFrame(rows)

    def qdisc_telemetry(self) -> pd.DataFrame:
        """Qdisc and class statistics per host and sample."""
        rows = []
        for agent in self.agents.values():
            for ev in agent.events_of("telemetry"):
                for q in (ev.get("sample") or {}).get("qdiscs") or []:
                    rows.append({"host": agent.host, "seq": ev.get("seq"), "t": ev.get("t"), **q})
        return pd.DataFrame(rows)

    # ------------------------------------------------------------ background traffic
    def start_traffic(self, src: str, dst: str, duration_s: float, rate_mbit: float | None = None,
                      port: int | None = None, net: int | None = None) -> str:
        """A bounded TCP flow from ``src`` to ``dst`` over the data plane (a sink on dst, a source on src).

        The flow ends by itself after ``duration_s`` (the agents also stop it
        on ``stop_traffic`` or when they shut down). ``net``: the key of an
        allocation (:meth:`allocate`, or a running job's id) whose hosts include
        both: the flow then runs between its addresses, in its classes. Returns
        the flow id.
        """
        port = port or next(self._ports)
        flow = f"bg{port}"
        addr = self.hosts[dst].data_addr
        if net is not None:
            alloc = self._nets.get(net) or (self.jobs[net].net if net in self.jobs else None)
            if alloc is None or src not in alloc.addresses or dst not in alloc.addresses:
                raise TestbedError(f"no network allocation {net} holding both {src} and {dst}")
            addr = alloc.addresses[dst]
        self.agent(dst).call("traffic_start", flow_id=flow, role="sink", addr=addr, port=port)
        args = dict(flow_id=flow, role="source", addr=addr, port=port, duration_s=duration_s)
        if rate_mbit is not None:
            args["rate_mbit"] = rate_mbit
        try:
            self.agent(src).call("traffic_start", **args)
        except AgentError:
            self.agent(dst).call("traffic_stop", flow_id=flow)
            raise
        self._flows[flow] = (src, dst)
        return flow

    def stop_traffic(self, flow: str) -> None:
        for host in self._flows.pop(flow, ()):
            try:
                self.agent(host).call("traffic_stop", flow_id=flow)
            except AgentError as exc:
                if exc.type != "NotFound":
                    raise

    # ------------------------------------------------------------ jobs
    def _on_event(self, ev: dict) -> None:
        if ev.get("event") not in ("job_exit", "rank_hung"):
            return
        job = self.jobs.get(ev.get("job_id"))
        if job is None:
            return
        reason = ev.get("reason")  # the agent ends the rank (it went silent): the job fails now
        with self._lock:
            if ev["event"] == "job_exit":
                job.exits[int(ev.get("rank", -1))] = int(ev.get("returncode", -1))
            finished = (len(job.exits) >= len(job.ranks) or reason is not None) and not job.done.is_set()
            if reason is not None and job.failure is None and not job.done.is_set():
                job.failure = f"on {ev.get('host')}: {reason}"
        if finished:
            self._release(job)
            job.done.set()
        if reason is not None and finished:  # its other ranks wait in an all-reduce that cannot complete
            threading.Thread(target=self.stop_job, args=(job.spec.job_id,), name=f"stop-job-{job.spec.job_id}",
                             daemon=True).start()
        if finished and self.on_job_done is not None:
            self.on_job_done(job.spec.job_id)

    def _on_agent_closed(self, host: str, reason: str) -> None:
        """An agent's channel closed: its unfinished jobs fail now (their exits can no longer arrive)."""
        failed = []
        with self._lock:
            for job in self.jobs.values():
                lost = sorted(r for h, r in job.ranks if h == host and r not in job.exits)
                if lost and not job.done.is_set():
                    job.failure = f"ranks {lost} on {host} were lost: {reason}"
                    failed.append(job.spec.job_id)
        for job_id in failed:
            self._release(self.jobs[job_id])
            self.jobs[job_id].done.set()
            log.error("job %s failed: agent on %s is gone: %s", job_id, host, reason)
            if self.on_job_done is not None:
                self.on_job_done(job_id)

    def new_job_id(self) -> int:
        """A job id not used on this controller yet (agents keep finished jobs' logs by id)."""
        while True:
            job_id = next(self._job_ids)
            if job_id not in self.jobs:
                return job_id

    def start_job(self, spec: TrainSpec) -> RunningJob:
        """Start every rank of ``spec`` (rank 0 on the first host, which is also the rendezvous)."""
        if spec.job_id in self.jobs:
            raise TestbedError(f"job id {spec.job_id} was already used on this controller (its logs stay "
                               f"readable); take a fresh one from new_job_id()")
        if spec.world_size < 1:
            raise TestbedError(f"job {spec.job_id}: no ranks")
        master = self.hosts[spec.ranks[0][0]]
        port = spec.master_port or next(self._ports)
        ranks, rank = [], 0
        for host, n in spec.ranks:
            for _ in range(n):
                ranks.append((host, rank))
                rank += 1
        job = RunningJob(spec, ranks, started_s=time.time())
        self.jobs[spec.job_id] = job
        master_addr, ifname = master.data_addr, {h: self.hosts[h].ifname for h, _ in spec.ranks}
        if spec.allocation is not None:  # its own addresses; its ranks bind them through the label
            job.net = self.testbed.allocate(spec.job_id, list(dict.fromkeys(h for h, _ in spec.ranks)),
                                            spec.allocation)
            master_addr, ifname = job.net.addresses[master.name], dict.fromkeys(ifname, job.net.label)
        futs = []
        for host, r in ranks:
            futs.append(self.agent(host).submit(
                "job_start", job_id=spec.job_id, rank=r, world_size=spec.world_size, master_addr=master_addr,
                master_port=port, backend=spec.backend, ifname=ifname[host], nccl_ib_disable=spec.nccl_ib_disable,
                grad_bytes=int(spec.grad_bytes), compute_ms=float(spec.compute_ms), iterations=int(spec.iterations),
                offset_ms=float(spec.offset_ms), start_at=spec.start_at,
                **({"overlap": float(spec.overlap)} if spec.overlap else {})))
        errors = []
        for f in futs:
            try:
                f.result(timeout=60)
            except AgentError as exc:
                errors.append(str(exc))
        if errors:
            self.stop_job(spec.job_id)
            raise TestbedError(f"job {spec.job_id} did not start: " + "; ".join(errors))
        return job

    def set_allocation(self, job_id: int, allocation: NetAllocation) -> None:
        """Change a running job's network allocation in place (its classes, quanta, ceilings and path rules;
        its addresses stay). A job started without one keeps sharing the default class."""
        job = self.jobs.get(job_id)
        if job is None or job.net is None or job.done.is_set():
            raise TestbedError(f"job {job_id} is not a running job with a network allocation")
        self.testbed.allocate(job_id, list(job.net.addresses), allocation)

    def _release(self, job: RunningJob) -> None:
        """The job ended: keep its classes' final counters, then remove its allocation."""
        with self._lock:  # the last exit and stop_job may both get here
            net, job.net = job.net, None
        if net is None:
            return
        try:
            stats = self.testbed.job_stats()
            job.net_stats = stats[stats.job == job.spec.job_id].reset_index(drop=True)
            self.testbed.release(job.spec.job_id)
        except TestbedError as exc:
            log.warning("releasing job %s's network allocation: %s", job.spec.job_id, exc)

    def allocate(self, key: int, hosts: list[str], allocation: NetAllocation) -> JobNetwork:
        """A network allocation not tied to a training job (e.g. for :meth:`start_traffic` flows), under
        ``key`` (an id no job of this controller uses); changed by calling again, removed by :meth:`release`."""
        if key in self.jobs:
            raise TestbedError(f"{key} is a job id of this controller; give the flows another key")
        self._nets[key] = self.testbed.allocate(key, hosts, allocation)
        return self._nets[key]

    def release(self, key: int) -> None:
        if self._nets.pop(key, None) is not None:
            self.testbed.release(key)

    def wait_job(self, job_id: int, timeout_s: float = 600.0) -> RunningJob:
        job = self.jobs[job_id]
        if not job.done.wait(timeout_s):
            raise TestbedError(f"job {job_id} did not finish within {timeout_s:.0f} s (exits so far: {job.exits})")
        if job.failure is not None:
            raise TestbedError(f"job {job_id} failed: {job.failure} (rank exit codes so far: {job.exits})")
        if not job.ok:
            tails = {h: list(self.agents[h].stderr)[-3:] for h in {h for h, _ in job.ranks} if h in self.agents}
            raise TestbedError(f"job {job_id} failed: rank exit codes {job.exits}; agent stderr: {tails}")
        return job

    def stop_job(self, job_id: int) -> None:
        job = self.jobs.get(job_id)
        if job is None:
            return
        for host in {h for h, _ in job.ranks}:
            try:
                self.agent(host).call("job_stop", job_id=job_id)
            except (AgentError, TestbedError) as exc:
                log.warning("stopping job %s on %s: %s", job_id, host, exc)
        self._release(job)

    def job_log(self, job_id: int) -> pd.DataFrame:
        """Per-iteration timestamps of every rank (compute start, all-reduce start and end), plus durations."""
        job = self.jobs[job_id]
        rows = []
        for host in sorted({h for h, _ in job.ranks}):
            for rec in self.agent(host).call("job_log", job_id=job_id).get("records", []):
                rows.append({"host": host, **rec})
        df = pd.DataFrame(rows)
        if len(df):
            df = df.sort_values(["rank", "iter"]).reset_index(drop=True)
            df["compute_s"] = df.allreduce_start - df.compute_start
            df["allreduce_s"] = df.allreduce_end - df.allreduce_start
            df["iter_s"] = df.groupby("rank").compute_start.diff().shift(-1)
        return df

    def save(self, out_dir) -> Path:
        """Telemetry and every job's log as parquet, written atomically."""
        from ..fileio import atomic_write

        out = Path(out_dir)
        out.mkdir(parents=True, exist_ok=True)
        frames = {"telemetry": self.telemetry(), "qdiscs": self.qdisc_telemetry()}
        logs = [self.job_log(j) for j in self.jobs]
        frames["iterations"] = pd.concat(logs, ignore_index=True) if logs else pd.DataFrame()
        for name, df in frames.items():
            atomic_write(out / f"{name}.parquet", lambda p, df=df: df.to_parquet(p, index=False))
        return out
