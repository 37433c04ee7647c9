"""The view's log of starts and stops (``ClusterView.changes``): what a policy that keeps state across calls reads
instead of comparing every running job with what it saw last time (``netlab.sched.state.RunningChanges``).

Hand-computed: which job ids each call of a network policy finds logged since its last call, through a start,
an end, a preemption and a migration in the simulator; a policy that rebuilds the running set from the log
alone finds it equal to the view's at every call; ``crux`` decides the same with the log as by comparing the
whole running set.
"""

from __future__ import annotations

import copy
import pickle

import numpy as np
import pytest

from netlab.policies import MIGRATION, NETWORK_POLICIES, NetworkPolicy, PlacementPolicy
from netlab.sched import ClusterView, Mechanism, NetAllocation, Placement, RunningChanges, RunningJobs
from netlab.sched.state import UNTRACKED
from netlab.sim import SimConfig, Simulator
from netlab.topology import load_topology
from netlab.workload.job import Job
from netlab.workload.zoo import JobModel, ModelZoo


def test_the_log_lists_every_start_and_stop_since_a_mark_and_cannot_tell_across_tables():
    running = RunningJobs()
    log = running.changes
    assert log.since(None) is None  # no mark yet: cannot tell
    mark = log.mark()
    running[3] = "a"
    running[5] = "b"
    del running[3]
    assert log.since(mark) == [3, 5, 3]
    later = log.mark()
    assert log.since(later) == []
    assert running.pop(5) == "b" and running.pop(7, None) is None  # only a job that ran is logged
    assert log.since(later) == [5] and dict(running) == {}
    assert RunningJobs().changes.since(later) is None  # a mark of another table
    for mutate in (lambda: running.update({1: "c"}), running.clear, lambda: running.setdefault(1, "c"),
                   running.popitem):
        with pytest.raises(TypeError, match="one job at a time"):
            mutate()
    running[9] = "d"
    for copied in (copy.deepcopy(running), pickle.loads(pickle.dumps(running))):  # the jobs and the log go along
        assert type(copied) is RunningJobs and dict(copied) == {9: "d"}
        assert copied.changes.since((copied.changes, 0)) == [3, 5, 3, 5, 9]


def test_a_mark_older_than_what_the_log_keeps_cannot_tell(monkeypatch):
    monkeypatch.setattr(RunningChanges, "KEEP", 2)
    running = RunningJobs()
    log = running.changes
    old = log.mark()
    for j in range(4):  # 4 entries: kept (at most 2 x KEEP)
        running[j] = j
    assert log.since(old) == [0, 1, 2, 3]
    recent = log.mark()
    running[4] = 4  # the 5th: the 2 oldest are dropped
    assert log.since(old) is None
    assert log.since(recent) == [4]
    running[5] = 5
    assert log.since(recent) == [4, 5]


def test_a_view_hands_out_its_running_tables_log_or_untracked():
    topo = load_topology("leafspine,racks=2,hosts_per_rack=2,gpus_per_host=1,oversub=2")
    running = RunningJobs()
    view = ClusterView(topo, topo.host_gpus.copy(), running, 0.0)
    assert view.changes is running.changes
    plain = ClusterView(topo, topo.host_gpus.copy(), {}, 0.0)
    assert plain.changes is UNTRACKED and plain.changes.since(plain.changes.mark()) is None
    assert view.with_freed([]).changes is UNTRACKED  # a what-if view: its running table is not the mechanism's


class Logged(NetworkPolicy):
    """Records, per call, the ids logged since its last call, and rebuilds the running jobs' placements from the
    log alone (checked against the view's running table at every call)."""

    name = "logged"

    def __init__(self):
        self.calls, self.mark, self.placed = [], None, {}

    def allocate(self, view):
        ids = view.changes.since(self.mark)
        self.mark = view.changes.mark()
        if ids is None:  # the first call: nothing logged before it is known
            ids = list(view.running)
        for jid in ids:
            js = view.running.get(jid)
            if js is None:
                self.placed.pop(jid, None)
            else:
                self.placed[jid] = js.placement
        assert self.placed == {jid: js.placement for jid, js in view.running.items()}
        self.calls.append((round(view.now, 6), ids))
        return {}


# Two racks of two one-GPU hosts; a model of 1 s compute and no traffic worth counting (1 byte), ten iterations:
# a job runs 10 s (communication ~0), whatever its placement.
TOPO = "leafspine,racks=2,hosts_per_rack=2,gpus_per_host=1,oversub=2"
QUIET = ModelZoo({"m": JobModel("m", 1.0, 1.0)})


def test_a_policy_reads_starts_ends_and_a_preemption_from_the_log():
    # Shortest remaining time first. Job 0 (2 GPUs, 10 s) starts at 0. Job 1 (4 GPUs, 3 s) arrives at 4, when job
    # 0 has 6 s left: it ranks first and preempts it, logged [0 (stopped), 1 (started)]. At 7 job 1 ends and job 0
    # starts again in the same pass (its restart costs the model's checkpoint and restore, so it ends later):
    # [1, 0]. Then job 0 ends: [0].
    jobs = [Job(0, 0.0, 2, "m", 10.0), Job(1, 4.0, 4, "m", 3.0)]
    policy = Logged()
    res = Simulator(load_topology(TOPO), jobs, "srtf", "consolidated", "priority",
                    SimConfig(network="fair"), zoo=QUIET, netpolicy=policy).run()
    assert res.jobs.set_index("job_id").preemptions.tolist() == [1, 0]
    assert [ids for _, ids in policy.calls] == [[0], [0, 1], [1, 0], [0]]
    assert [t for t, _ in policy.calls][:3] == pytest.approx([0.0, 4.0, 7.0], abs=1e-3)


class Crossed(PlacementPolicy):
    """Job 0 on hosts 0 and 3, job 1 on hosts 1 and 4: both across the uplinks (test_migrate.py's)."""

    name = "crossed"

    def place(self, job, view):
        return Placement((0, 3), (1, 1)) if job.job_id == 0 else Placement((1, 4), (1, 1))


def test_a_migration_is_logged_as_the_jobs_stop_and_its_start_elsewhere():
    # test_migrate.py's case: both jobs start at 0; at 30 s job 0 moves (logged [0, 0]: its stop, its start on
    # the new hosts), then job 1 ends at 90 s and job 0 at 95 s.
    zoo = ModelZoo({"m": JobModel("m", compute_s=1.0, grad_bytes=12.5e9, params_m=250.0)})
    jobs = [Job(0, 0.0, 2, "m", 40), Job(1, 0.0, 2, "m", 40)]
    policy = Logged()
    migration = MIGRATION.create("migrate", threshold=1.2, hold_s=20.0, margin=0.1, period_s=10.0)
    res = Simulator(load_topology("leafspine,racks=2,hosts_per_rack=3,gpus_per_host=1,oversub=3"), jobs, "fifo",
                    Crossed(), zoo=zoo, config=SimConfig(network="fair", storage_gbps=24.0, launch_s=3.0),
                    netpolicy=policy, migration=migration).run()
    assert res.jobs.set_index("job_id").migrations.tolist() == [1, 0]
    assert policy.calls == [(0.0, [0, 1]), (30.0, [0, 0]), (90.0, [1]), (95.0, [0])]


def _crux_decisions(untracked: bool):
    """Every answer of ``crux`` (redecided at every change) on 150 jobs with preemptions, with the view's log or
    with it hidden (``UNTRACKED``: crux compares every running and decided job)."""
    rng = np.random.default_rng(7)
    models = ["resnet50", "vgg16", "bert-base", "resnet18"]
    jobs = [Job(i, float(t), int(rng.choice([1, 2, 4, 8, 16])), models[i % 4], float(rng.integers(200, 3000)))
            for i, t in enumerate(np.cumsum(rng.exponential(60, 150)))]
    topo = load_topology("leafspine,racks=4,hosts_per_rack=4,gpus_per_host=4,oversub=4,spines=2,ecmp=hash")
    policy = NETWORK_POLICIES.create("crux", redecide_s=0.0)
    inner, seen = policy.allocate, []

    def allocate(view):
        if untracked:
            view.changes = UNTRACKED
        out = inner(view)
        seen.append(sorted((j, a.priority, a.paths) for j, a in out.items()))
        return out

    policy.allocate = allocate
    res = Simulator(topo, jobs, "tiresias", "random", "priority", SimConfig(network="tcp", seed=1),
                    netpolicy=policy).run()
    return seen, res


def test_crux_decides_the_same_from_the_log_as_from_the_whole_running_set():
    logged, res = _crux_decisions(untracked=False)
    compared, res2 = _crux_decisions(untracked=True)
    assert res.jobs.preemptions.sum() > 0 and len(logged) > 50  # preemptions and many calls
    assert sum(len(d) > 1 for d in logged) > 20  # calls with several network jobs
    assert logged == compared
    assert res.jobs.equals(res2.jobs)


class Handed(Mechanism):
    """Four one-GPU hosts; records what the scheduler hands to :meth:`allocate`."""

    def __init__(self):
        self.topology = load_topology(TOPO)
        self.free_gpus = self.topology.host_gpus.copy()
        self.free_total = int(self.free_gpus.sum())
        self.running = RunningJobs()
        self.handed = []

    def view(self, now):
        return ClusterView(self.topology, self.free_gpus, self.running, now)

    def start(self, js, p, now):
        self.free_gpus[list(p.hosts)] -= p.gpus
        self.free_total -= js.gpus
        js.placement, js.status = p, "running"
        self.running[js.job_id] = js

    def allocate(self, allocations, now):
        self.handed.append(list(allocations.items()))
        for jid, alloc in allocations.items():
            self.running[jid].allocation = alloc

    def wake_at(self, t, fn, *args):
        pass


class Scripted(NetworkPolicy):
    """Answers each call with the next of ``answers``."""

    name = "scripted"

    def __init__(self, answers):
        self.answers = list(answers)

    def allocate(self, view):
        return self.answers.pop(0)


def test_the_jobs_a_policy_leaves_out_go_back_to_the_default_in_the_running_order_once():
    from netlab.policies import ORDERING, PLACEMENT
    from netlab.sched import DEFAULT_ALLOCATION, JobState, Scheduler

    a, b = NetAllocation(priority=1), NetAllocation(priority=2)
    policy = Scripted([{2: a, 0: b, 1: a}, {1: a}, {1: a}, {}, {}, {0: a}, {}])
    mech = Handed()
    s = Scheduler(ORDERING.create("fifo"), PLACEMENT.create("first-fit"), None, mech, network=policy)
    submit = {0: 0.5, 1: 1.0, 2: 0.0}  # job 2 first: the running order is 2, 0, 1
    states = [JobState(Job(j, submit[j], 1, "resnet50", 10.0), 1.0) for j in range(3)]
    for js in states:
        s.add(js, 1.0)
    s.schedule(1.0)
    assert list(mech.running) == [2, 0, 1]
    for _ in range(5):
        s.allocate(1.0)
    d = DEFAULT_ALLOCATION
    assert mech.handed == [
        [(2, a), (0, b), (1, a)],  # as the policy gave them
        [(2, d), (0, d)],  # jobs 0 and 2 left out: back to the default, in the running order; job 1 holds a
        [],  # they have it already: not handed again (nor job 1 its a)
        [(1, d)],
        [],
    ]
    s.allocate(1.0)  # job 0 gets a class again, then stops: a stopped job is never handed back
    s.stopped(states[0])
    del mech.running[0]
    s.allocate(1.0)
    assert mech.handed[-2:] == [[(0, a)], []]
    assert states[0].allocation is d
