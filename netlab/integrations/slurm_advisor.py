"""A placement advisor for Slurm: netlab's placement policies choose the nodes, ``sbatch --nodelist`` carries it out.

Why: Slurm's own topology/tree plugin only prefers the lowest switch that
holds a job; it does not weigh link loads or the job's traffic. An operator
can let a netlab policy (``topo-bestfit``, ``consolidated``, ...) choose and
keep Slurm as the mechanism that runs the jobs.

One pass (:meth:`SlurmAdvisor.advise`; :meth:`SlurmAdvisor.plan` is the same pass without submitting):

1. the cluster's state from Slurm itself: ``sinfo --json`` (each node's GPUs,
   ``gres``, and GPUs in use, ``gres_used``; a node not idle/mixed/allocated
   has none free) and ``squeue --json`` (jobs; a job this advisor submitted
   that Slurm has not started yet still holds the GPUs planned for it, so two
   passes never hand out the same GPUs);
2. a :class:`~netlab.sched.ClusterView` of netlab's topology with those free
   GPUs (nodes are matched by name; nodes Slurm has but the topology lacks
   are not used). Jobs Slurm runs for others are seen only as GPUs in use:
   their traffic is unknown, so the view carries no link loads;
3. netlab's one scheduling pass (:class:`~netlab.sched.Scheduler`, the
   simulator's and the testbed's): the waiting jobs in the ordering policy's
   order (``fifo`` stops at the first that does not fit), each placed by the
   placement policy on what is left and checked against the free GPUs.
   Slurm is the mechanism (:class:`SbatchMechanism`); it answers that it
   cannot preempt (the advisor submits, it does not requeue), so no pass
   here preempts;
4. each placed job is submitted as the pass places it (:func:`sbatch_argv`,
   an argv list, never a shell string): ``--nodes=k --nodelist=<the hosts>``,
   ``--gpus-per-node=g`` when every host takes the same number, else
   ``--gpus=<total>`` (Slurm cannot say different counts per node in one job;
   it then splits the total over exactly these nodes, maybe not as planned:
   the next pass reads the split Slurm made), ``--ntasks-per-node=1`` and
   ``--wrap`` with the command, each word quoted (:func:`shlex.join`):
   sbatch runs the wrap through ``/bin/sh``, which gives the job back exactly
   the words, with no word split, expanded or run.

:func:`replay` drives this over a trace in (scaled) time, and
:func:`compare_placements` sets Slurm's record (``sacct``) beside the plan.
"""

from __future__ import annotations

import json
import re
import shlex
import subprocess
import time
from dataclasses import dataclass, field
from typing import Callable

import numpy as np
import pandas as pd

from ..hostlist import compress, expand
from ..network.model import LiveNetwork
from ..policies import ORDERING, PLACEMENT
from ..sched import ClusterView, JobState, Mechanism, Placement, RunningJobs, Scheduler
from ..topology import check_name
from ..workload.job import Job, isolated_iter_s, jobs_from_frame
from ..workload.zoo import ModelZoo

#: a Slurm cluster's network as policies see it: real links; jobs start when Slurm starts them (no phase)
SLURM_NETWORK = LiveNetwork("slurm")

#: node states (sinfo, lower case, flags such as ``+drain`` count against) in which a node takes jobs
USABLE = {"idle", "mixed", "allocated"}
ACTIVE = {"PENDING", "CONFIGURING", "RUNNING", "COMPLETING", "SUSPENDED", "REQUEUED", "RESIZING"}
_GRES = re.compile(r"gpu(?::[A-Za-z0-9_.-]+)?:(\d+)")


class SlurmCommands:
    """Slurm's client commands on a real cluster (the environment's ``SLURM_CONF``); argv lists only."""

    def run(self, argv: list[str], timeout_s: float = 60.0, check: bool = True) -> subprocess.CompletedProcess:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout_s, stdin=subprocess.DEVNULL)
        if check and done.returncode != 0:
            raise RuntimeError(f"{' '.join(argv)} exited {done.returncode}: {(done.stderr or done.stdout).strip()}")
        return done


def gres_gpus(text: str) -> int:
    """GPUs in a gres string: ``gpu:4``, ``gpu:a100:4(S:0)``, ``gpu:2(IDX:0-1),shard:0`` -> 4, 4, 2; none -> 0."""
    return sum(int(m.group(1)) for m in _GRES.finditer(text or ""))


def read_nodes(slurm) -> pd.DataFrame:
    """One row per Slurm node: ``node``, ``state``, ``gpus``, ``gpus_used`` (``sinfo --json``)."""
    nodes = json.loads(slurm.run(["sinfo", "--json"]).stdout).get("nodes", [])
    rows = {}
    for n in nodes:
        flags = [f.lower() for f in n.get("state_flags", [])]
        state = str(n.get("state", "")).lower() + "".join(f"+{f}" for f in flags)
        rows[n["name"]] = dict(node=n["name"], state=state, gpus=gres_gpus(n.get("gres", "")),
                               gpus_used=gres_gpus(n.get("gres_used", "")))
    return pd.DataFrame(list(rows.values()), columns=["node", "state", "gpus", "gpus_used"])


def read_jobs(slurm) -> pd.DataFrame:
    """One row per job Slurm lists: ``job_id``, ``name``, ``state``, ``nodes`` (list), ``gpus_per_node`` (list)."""
    jobs = json.loads(slurm.run(["squeue", "--json"]).stdout).get("jobs", [])
    rows = []
    for j in jobs:
        nodes = expand(j.get("nodes") or "")
        detail = [gres_gpus(d) for d in j.get("gres_detail", [])]
        rows.append(dict(job_id=str(j["job_id"]), name=j.get("name", ""), state=j.get("job_state", ""),
                         nodes=nodes, gpus_per_node=detail if len(detail) == len(nodes) else []))
    return pd.DataFrame(rows, columns=["job_id", "name", "state", "nodes", "gpus_per_node"])


def sbatch_argv(name: str, hosts: list[str], gpus: list[int], command: list[str],
                output: str = "/dev/null") -> list[str]:
    """The ``sbatch`` argv that runs ``command`` (an argv list) on exactly ``hosts`` with ``gpus`` GPUs on each.

    sbatch runs ``--wrap`` through ``/bin/sh``; the words are quoted (:func:`shlex.join`), so the job gets
    each word of ``command`` as one argument, spaces and shell metacharacters included, and nothing in them runs.
    """
    check_name(name, "sbatch job name")
    for h in hosts:
        check_name(h, "sbatch node")
    if len(hosts) != len(gpus) or not hosts:
        raise ValueError(f"job {name}: {len(hosts)} hosts but {len(gpus)} GPU counts")
    per_node = [f"--gpus-per-node={gpus[0]}"] if len(set(gpus)) == 1 else [f"--gpus={sum(gpus)}"]
    return ["sbatch", "--parsable", f"--job-name={name}", f"--nodes={len(hosts)}",
            f"--nodelist={compress(hosts)}", *per_node, "--ntasks-per-node=1", f"--output={output}",
            "--wrap", shlex.join(command)]


@dataclass
class Planned:
    job: Job
    hosts: list[str]
    gpus: list[int]
    planned_s: float  # when the advisor placed it, seconds since the replay began
    slurm_id: str = ""
    free_before: dict[str, int] = field(default_factory=dict)  # free GPUs per host the policy saw
    slurm_split: dict[str, int] = field(default_factory=dict)  # GPUs per node Slurm gave it (seen while running)
    state: str = "SUBMITTED"  # the last state squeue showed


@dataclass
class SlurmAdvisor:
    """Place waiting jobs with a netlab policy on the free GPUs Slurm reports, and submit them."""

    slurm: object  # anything with run(argv, timeout_s=, check=) -> CompletedProcess: SlurmCommands, LocalSlurm
    topology: object
    placement: str = "topo-bestfit"
    ordering: str = "fifo"
    zoo: ModelZoo = field(default_factory=ModelZoo.default)
    submitted: dict[str, Planned] = field(default_factory=dict)  # Slurm job id -> plan

    def __post_init__(self):
        self.order = ORDERING.create(self.ordering)
        self.policy = PLACEMENT.create(self.placement)
        rng = np.random.default_rng(0)
        self.order.reset(rng)
        self.policy.reset(rng)

    def free_gpus(self) -> np.ndarray:
        """Free GPUs per topology host, from Slurm (see the module docstring, step 1)."""
        topo = self.topology
        nodes = read_nodes(self.slurm).set_index("node")
        free = np.zeros(topo.n_hosts, dtype=np.int64)
        for i, h in enumerate(topo.hosts):
            if h.name in nodes.index:
                row = nodes.loc[h.name]
                if row.state.split("+")[0] in USABLE and not any(f in row.state for f in ("drain", "down", "fail")):
                    free[i] = max(0, min(int(row.gpus), h.gpus) - int(row.gpus_used))
        jobs = self.observe()
        waiting = jobs[(jobs.state == "PENDING") & jobs.job_id.isin(list(self.submitted))]
        for jid in waiting.job_id:  # ours, not started yet: their GPUs are spoken for
            p = self.submitted[jid]
            for h, g in zip(p.hosts, p.gpus):
                free[topo.host_index[h]] -= g
        return np.maximum(free, 0)

    def observe(self) -> pd.DataFrame:
        """``squeue`` now; notes each submitted job's state and, while it runs, the GPUs per node Slurm gave it
        (``gres_detail``: Slurm shows the split only while a job runs)."""
        jobs = read_jobs(self.slurm)
        for r in jobs[jobs.job_id.isin(list(self.submitted))].itertuples():
            plan = self.submitted[r.job_id]
            plan.state = r.state
            if r.state == "RUNNING" and r.gpus_per_node:
                plan.slurm_split = dict(zip(r.nodes, r.gpus_per_node))
        return jobs

    def active(self) -> int:
        """Submitted jobs not yet finished, as of the last :meth:`observe`."""
        return sum(p.state in ACTIVE or p.state == "SUBMITTED" for p in self.submitted.values())

    def plan(self, waiting: list[JobState], now: float) -> list[tuple[JobState, Placement, np.ndarray]]:
        """(job, placement, free GPUs per host it was chosen from) for the waiting jobs that fit now, in the
        ordering policy's order (step 3): the pass of :meth:`advise`, submitting nothing."""
        return self._pass(waiting, now, None).decisions

    def advise(self, waiting: list[JobState], now: float, command: Callable[[JobState], list[str]],
               output: str = "/dev/null", planned_s: float | None = None) -> list["Planned"]:
        """One pass (steps 1-4) at ``now`` (the ordering's clock): place the waiting jobs that fit and ``sbatch``
        each as it is placed, running ``command(job)`` (an argv list). Returns the plans of the jobs submitted,
        in submission order; ``planned_s`` (default ``now``) is recorded as each plan's time."""
        def submit(js: JobState, p: Placement, free: np.ndarray) -> "Planned":
            return self.submit_command(js, p, command(js), now if planned_s is None else planned_s, output, free)

        return self._pass(waiting, now, submit).planned

    def _pass(self, waiting: list[JobState], now: float, submit) -> "SbatchMechanism":
        mech = SbatchMechanism(self, self.free_gpus(), submit)
        scheduler = mech.scheduler = Scheduler(self.order, self.policy, None, mech)
        for js in waiting:
            scheduler.add(js, now)
        scheduler.schedule(now)
        return mech

    def submit(self, js: JobState, p: Placement, seconds: float, now: float, output: str = "/dev/null",
               free: np.ndarray | None = None) -> Planned:
        """``sbatch`` the job: ``sleep`` for its (scaled) run time on the planned hosts."""
        return self.submit_command(js, p, ["sleep", f"{seconds:.3f}"], now, output, free)

    def submit_command(self, js: JobState, p: Placement, command: list[str], now: float, output: str = "/dev/null",
                       free: np.ndarray | None = None) -> Planned:
        """``sbatch`` the job on the planned hosts, running ``command`` (an argv list)."""
        hosts = [self.topology.hosts[h].name for h in p.hosts]
        name = f"netlab-{js.job_id}"
        argv = sbatch_argv(name, hosts, list(p.gpus), command, output)
        out = self.slurm.run(argv).stdout.strip()
        seen = {} if free is None else {h.name: int(f) for h, f in zip(self.topology.hosts, free)}
        plan = Planned(js.job, hosts, list(p.gpus), now, out.split(";")[0], seen)
        self.submitted[plan.slurm_id] = plan
        return plan


class SbatchMechanism(Mechanism):
    """Slurm as the mechanism of one advisor pass: the free GPUs Slurm reported, a start is an ``sbatch``.

    ``submit(job, placement, free GPUs before it)`` submits and returns its :class:`Planned`; None only
    records the decisions (:meth:`SlurmAdvisor.plan`).
    """

    can_preempt = False  # the advisor submits jobs; it does not requeue the ones Slurm runs

    def __init__(self, advisor: SlurmAdvisor, free_gpus: np.ndarray, submit=None):
        self.advisor, self.submit = advisor, submit
        self.running = RunningJobs()  # none: what Slurm runs is seen only as GPUs in use
        self.free_gpus = free_gpus
        self.free_total = int(free_gpus.sum())
        self.scheduler: Scheduler | None = None
        self.decisions: list[tuple[JobState, Placement, np.ndarray]] = []
        self.planned: list[Planned] = []

    def view(self, now: float) -> ClusterView:
        adv = self.advisor
        return ClusterView(adv.topology, self.free_gpus, self.running, now, None, self.scheduler.waiting(), adv.zoo,
                           SLURM_NETWORK)

    def start(self, js: JobState, p: Placement, now: float) -> None:
        before = self.free_gpus.copy()
        self.free_gpus[list(p.hosts)] -= p.gpus
        self.free_total -= js.gpus
        self.decisions.append((js, p, before))
        if self.submit is not None:
            self.planned.append(self.submit(js, p, before))

    def wake_at(self, t: float, fn, *args) -> None:
        """Nothing to arm: the caller runs a pass on its own schedule (``replay``: every ``poll_s``)."""


def sleep_trace(jobs: int = 8, seed: int = 0, gpus_per_host: int = 4, max_hosts: int = 4, gap_s: float = 0.7,
                duration_s: tuple[float, float] = (1.0, 3.0), model: str = "resnet50") -> pd.DataFrame:
    """A small seeded trace of sleep jobs for a real Slurm (netlab's trace schema): each job needs 1 to
    ``max_hosts`` hosts' worth of GPUs (k hosts: between (k-1) x gpus_per_host + 1 and k x gpus_per_host GPUs),
    arrivals ``gap_s`` apart on average (exponential), run times uniform in ``duration_s``."""
    from ..traces.schema import finish

    rng = np.random.default_rng(seed)
    hosts = rng.integers(1, max_hosts + 1, size=jobs)
    gpus = (hosts - 1) * gpus_per_host + rng.integers(1, gpus_per_host + 1, size=jobs)
    df = pd.DataFrame({"job_id": [f"s{i}" for i in range(jobs)],
                       "submit_s": np.concatenate([[0.0], np.cumsum(rng.exponential(gap_s, size=jobs - 1))]),
                       "gpus": gpus, "model": model,
                       "duration_s": np.round(rng.uniform(*duration_s, size=jobs), 1)})
    return finish(df, "sleep", "<sleep_trace>")


def replay(slurm, topology, trace: pd.DataFrame, placement: str = "topo-bestfit", ordering: str = "fifo",
           time_scale: float = 1.0, poll_s: float = 0.25, timeout_s: float = 600.0,
           output: str = "/dev/null") -> list[Planned]:
    """Run a trace's jobs through Slurm: each arrives at ``submit_s * time_scale`` seconds, waits until the
    advisor places it, runs ``sleep duration_s * time_scale``; returns when Slurm has finished them all, with
    the plans (Slurm's job ids, the split Slurm made while each ran)."""
    if time_scale <= 0:
        raise ValueError(f"time_scale must be > 0, got {time_scale}")
    adv = SlurmAdvisor(slurm, topology, placement, ordering)
    jobs = jobs_from_frame(trace, topology, adv.zoo)
    duration = dict(zip(range(len(trace)), trace["duration_s"].to_numpy(float)))
    states = [JobState(j, isolated_iter_s(adv.zoo[j.model], j.pattern, j.gpus, topology)) for j in jobs]
    arrivals = sorted(states, key=lambda s: (s.submit_s, s.job_id))
    waiting: list[JobState] = []

    def sleep(js: JobState) -> list[str]:
        return ["sleep", f"{max(duration[js.job_id] * time_scale, 0.001):.3f}"]

    t0 = time.monotonic()
    while arrivals or waiting or adv.active():
        now = (time.monotonic() - t0) / time_scale
        if now * time_scale > timeout_s:
            raise TimeoutError(f"replay: {len(waiting) + len(arrivals)} jobs not placed, {adv.active()} not finished "
                               f"within {timeout_s:.0f} s")
        while arrivals and arrivals[0].submit_s <= now:
            js = arrivals.pop(0)
            js.status = "waiting"
            waiting.append(js)
        # a pass on every poll, also with nothing waiting: it reads squeue, which is how active() sees jobs end
        placed = {p.job.job_id for p in adv.advise(waiting, now, sleep, output, planned_s=now * time_scale)}
        waiting = [js for js in waiting if js.job_id not in placed]
        time.sleep(poll_s)
    return list(adv.submitted.values())


SACCT_FORMAT = "JobID,JobName,Submit,Start,End,State,AllocTRES,NodeList"
def read_sacct_records(slurm, ids: list[str], timeout_s: float = 30.0) -> dict[str, dict]:
    """JobID -> sacct's fields for these jobs, once every one is recorded as finished with as many nodes in
    NodeList as NNodes says. slurmctld sends job records to slurmdbd asynchronously: a read right after a
    job ends can find the record not yet complete (seen: a 2-node job listed on its batch host only)."""
    argv = ["sacct", "--allusers", "--parsable2", "--allocations", f"--jobs={','.join(ids)}",
            f"--format={SACCT_FORMAT},NNodes"]
    t0 = time.monotonic()
    while True:
        lines = [line.split("|") for line in slurm.run(argv).stdout.splitlines() if line.strip()]
        record: dict[str, dict] = {}
        for r in lines[1:]:  # with --jobs, sacct 22.05 lists steps (1.batch) despite --allocations
            rec = dict(zip(lines[0], r))
            if "." not in rec["JobID"]:
                record.setdefault(rec["JobID"], rec)
        settled = all(i in record and record[i]["State"] not in ACTIVE and record[i]["NNodes"].isdigit()
                      and len(expand(record[i]["NodeList"])) == int(record[i]["NNodes"]) for i in ids)
        if settled or time.monotonic() - t0 > timeout_s:
            return record
        time.sleep(0.5)


def compare_placements(slurm, plans: list[Planned]) -> pd.DataFrame:
    """Slurm's record of each planned job beside the plan: one row per job with ``planned_nodes``,
    ``slurm_nodes``, ``same_nodes``, ``planned_gpus``, ``slurm_gpus``, ``same_gpus``, the GPUs per node
    (``planned_split``, ``slurm_split`` as seen while the job ran, ``same_split``: None if the job ran
    between two looks) and Slurm's wait after
    submission (``slurm_wait_s``, whole seconds). Reads ``sacct --parsable2 --allocations`` for the job ids."""
    from ..traces.sacct import TIME, gpus_from_tres, parse_tres

    record = read_sacct_records(slurm, [p.slurm_id for p in plans])
    out = []
    for p in plans:
        r = record.get(p.slurm_id, {})
        nodes = expand(r.get("NodeList", "")) if r.get("NodeList", "None assigned") != "None assigned" else []
        gpus = gpus_from_tres(parse_tres(r.get("AllocTRES", ""))) if r else 0
        submit, start = (pd.to_datetime(r.get(k), format=TIME, errors="coerce")
                         for k in ("Submit", "Start"))
        split = p.slurm_split
        out.append(dict(job=p.job.job_id, slurm_id=p.slurm_id, gpus=p.job.gpus, planned_nodes=",".join(p.hosts),
                        slurm_nodes=",".join(nodes), same_nodes=sorted(nodes) == sorted(p.hosts),
                        planned_gpus=sum(p.gpus), slurm_gpus=gpus, same_gpus=gpus == sum(p.gpus),
                        planned_split=dict(zip(p.hosts, p.gpus)), slurm_split=split,
                        same_split=(split == dict(zip(p.hosts, p.gpus))) if split else None,
                        state=r.get("State", "missing"), slurm_wait_s=(start - submit).total_seconds()))
    return pd.DataFrame(out)
