"""The one scheduling pass (netlab.sched.Scheduler) on its own, against a recording mechanism.

Every expectation is worked out by hand from the rules in the pass's docstring: strict order stops at the
first job that cannot start, backfill walks past it, preemption takes the worst-ranked running job, and a
placement that does not fit the free GPUs is refused with an error naming the placement policy.
"""

from __future__ import annotations

import numpy as np
import pytest

from netlab.policies import ORDERING, PLACEMENT, PREEMPTION
from netlab.policies.base import OrderingPolicy, PlacementPolicy
from netlab.sched import ClusterView, JobState, Mechanism, Placement, PolicyError, Scheduler
from netlab.topology import load_topology
from netlab.workload.job import Job

TOPO = load_topology("leafspine,racks=1,hosts_per_rack=2,gpus_per_host=4")  # hosts 0 and 1, 4 GPUs each


class Recorder(Mechanism):
    """Carries decisions out on a GPU count only and records them; time is whatever the test says."""

    def __init__(self, can_preempt: bool = True):
        self.can_preempt = can_preempt
        self.free_gpus = TOPO.host_gpus.copy()
        self.free_total = int(self.free_gpus.sum())
        self.running: dict[int, JobState] = {}
        self.starts: list[tuple[int, tuple, tuple]] = []
        self.preempted: list[int] = []
        self.timers: list[tuple] = []
        self.scheduler: Scheduler | None = None

    def view(self, now):
        return ClusterView(TOPO, self.free_gpus, self.running, now, None, self.scheduler.waiting())

    def start(self, js, p, now):
        for h, g in zip(p.hosts, p.gpus):
            self.free_gpus[h] -= g
        self.free_total -= js.gpus
        js.status, js.placement, js.last_start_s = "running", p, now
        self.running[js.job_id] = js
        self.starts.append((js.job_id, p.hosts, p.gpus))

    def preempt(self, js, now):
        for h, g in zip(js.placement.hosts, js.placement.gpus):
            self.free_gpus[h] += g
        self.free_total += js.gpus
        del self.running[js.job_id]
        js.status = "waiting"
        self.preempted.append(js.job_id)

    def wake_at(self, t, fn, *args):
        self.timers.append((t, fn, args))


def job(i: int, gpus: int, submit_s: float | None = None) -> JobState:
    return JobState(Job(i, float(i) if submit_s is None else submit_s, gpus, "resnet50", 100.0), 1.0)


def scheduler(ordering, placement="first-fit", preemption=None, can_preempt=True, backfill=None):
    mech = Recorder(can_preempt)
    make = lambda reg, x: reg.create(x) if isinstance(x, str) else x  # noqa: E731
    s = mech.scheduler = Scheduler(make(ORDERING, ordering), make(PLACEMENT, placement),
                                   None if preemption is None else make(PREEMPTION, preemption), mech, backfill)
    s.reset(0)
    return s, mech


def run_first(s, mech, js, placement):
    """Put ``js`` on ``placement`` as a pass would, before the test's pass."""
    s.add(js, 0.0)
    s._start(js, placement, 0.0)
    s._dequeue((js.key, js.job_id))


@pytest.mark.parametrize("ordering, started", [("fifo", [0]), ("fjf", [0, 2])])
def test_strict_fifo_blocks_behind_the_head_and_fjf_backfills(ordering, started):
    # 8 free GPUs; in submit order A needs 6, B 4, C 2. A starts (2 left). B does not fit:
    # strict fifo stops there, so C waits although it fits; fjf walks past B and starts C.
    s, mech = scheduler(ordering)
    for js in (job(0, 6), job(1, 4), job(2, 2)):
        s.add(js, 0.0)
    assert s.schedule(0.0) is False
    assert [j for j, _, _ in mech.starts] == started
    assert mech.free_total == 8 - 6 - (2 if ordering == "fjf" else 0)
    assert s.n_waiting == 3 - len(started)
    assert [j for _, j in s.waiting_order()] == [j for j in (0, 1, 2) if j not in started]


@pytest.mark.parametrize("ordering, started", [("fifo", []), ("fjf", [2])])
def test_a_head_job_too_big_for_the_free_gpus_blocks_fifo_and_is_backfilled_past(ordering, started):
    # Job 9 holds host 0 (4 GPUs). Waiting: 5 GPUs (more than the 4 free), then 2. Under fifo nothing starts;
    # under fjf the 2-GPU job starts on host 1.
    s, mech = scheduler(ordering)
    run_first(s, mech, job(9, 4, submit_s=-1.0), Placement((0,), (4,)))
    s.add(job(1, 5), 0.0)
    s.add(job(2, 2), 0.0)
    s.schedule(1.0)
    assert [(j, h, g) for j, h, g in mech.starts[1:]] == [(j, (1,), (2,)) for j in started]


def test_jobs_of_every_size_start_in_key_order():
    # The pass merges per-size queues: the start order must be the key order over all sizes.
    s, mech = scheduler("fifo")
    sizes = [1, 2, 1, 2, 1, 1]  # 8 GPUs in all: every job fits
    for i, g in enumerate(sizes):
        s.add(job(i, g), 0.0)
    s.schedule(0.0)
    assert [j for j, _, _ in mech.starts] == [0, 1, 2, 3, 4, 5]
    # first-fit fills host 0 (1 + 2 + 1 GPUs), then host 1 (2 + 1 + 1)
    assert [h for _, h, _ in mech.starts] == [(0,), (0,), (0,), (1,), (1,), (1,)]


class NewestFirst(OrderingPolicy):
    """Preemptive: the latest submission ranks best."""

    name = "newest-first"
    preemptive = True

    def key(self, job, now):
        return (-job.submit_s, job.job_id)


def test_preemption_takes_the_worst_ranked_running_job():
    # Host 0 only matters: hosts 0 and 1 full. Running X (submitted 0, 4 GPUs on host 0) and Y (submitted 1,
    # 4 GPUs on host 1). Z (submitted 2, 4 GPUs) ranks best; the worst-ranked runner is X, the oldest.
    s, mech = scheduler(NewestFirst(), preemption="priority")
    x, y, z = job(0, 4), job(1, 4), job(2, 4)
    run_first(s, mech, x, Placement((0,), (4,)))
    run_first(s, mech, y, Placement((1,), (4,)))
    s.add(z, 2.0)
    assert s.schedule(2.0) is False  # no GPU left after Z: no second pass wanted
    assert mech.preempted == [0]
    assert mech.starts[-1] == (2, (0,), (4,))  # on the GPUs X freed
    assert x.status == "waiting" and [j for _, j in s.waiting_order()] == [0]
    assert [j for _, j in s.run_order] == [2, 1]  # best first: Z, then Y


def test_no_preemption_where_the_mechanism_cannot_preempt():
    # The same situation; the mechanism answers can_preempt = False: nothing is displaced, Z waits.
    s, mech = scheduler(NewestFirst(), preemption="priority", can_preempt=False)
    run_first(s, mech, job(0, 4), Placement((0,), (4,)))
    run_first(s, mech, job(1, 4), Placement((1,), (4,)))
    s.add(job(2, 4), 2.0)
    s.schedule(2.0)
    assert mech.preempted == [] and len(mech.starts) == 2 and s.n_waiting == 1


def test_preemption_leaving_gpus_free_asks_for_another_pass():
    # X (4 GPUs) is displaced for Z (2 GPUs): 2 GPUs stay free, so the pass asks to look again this instant
    # (X waits again and may fit what is left).
    s, mech = scheduler(NewestFirst(), preemption="priority")
    run_first(s, mech, job(0, 4), Placement((0,), (4,)))
    run_first(s, mech, job(1, 4), Placement((1,), (4,)))
    s.add(job(2, 2), 2.0)
    assert s.schedule(2.0) is True
    assert mech.preempted == [0] and mech.free_total == 2


class Greedy(PlacementPolicy):
    """Returns whatever the test tells it to (a wrong placement)."""

    name = "greedy-test"

    def __init__(self, placement):
        self.placement = placement

    def place(self, job, view):
        return self.placement


# (GPUs the job needs, placements already running, the wrong placement, what the error says)
WRONG = [
    (4, [((0,), (2,))], Placement((0,), (4,)), "asks 4 GPUs on host 0, which has 2 free"),
    (2, [((0,), (2,)), ((1,), (4,))], Placement((0, 1), (1, 1)), "asks 1 GPUs on host 1, which has 0 free"),
    (4, [], Placement((0, 0), (2, 2)), "does not give exactly 4 GPUs on distinct hosts"),
    (4, [], Placement((0,), (3,)), "does not give exactly 4 GPUs"),
    (4, [], Placement((0, 1), (4, 0)), "asks 0 GPUs on host 1"),
    (4, [], Placement((7,), (4,)), "names host 7, the cluster has hosts 0..1"),
    (4, [], Placement((-1,), (4,)), "names host -1"),
]


@pytest.mark.parametrize("gpus, held, placement, says", WRONG)
def test_the_placement_check_refuses_a_wrong_placement_naming_the_policy(gpus, held, placement, says):
    s, mech = scheduler("fifo", placement=Greedy(placement))
    for i, (hosts, counts) in enumerate(held):
        run_first(s, mech, job(10 + i, sum(counts), submit_s=-1.0), Placement(hosts, counts))
    s.add(job(0, gpus), 0.0)
    before = mech.free_gpus.copy()
    with pytest.raises(PolicyError, match=f"^greedy-test: .*{says}"):
        s.schedule(0.0)
    assert np.array_equal(mech.free_gpus, before) and len(mech.starts) == len(held)  # nothing half-applied


class Later(PlacementPolicy):
    """Declines and asks to be asked again at t = 30."""

    name = "later"

    def place(self, job, view):
        return None

    def retry_at(self, job, view):
        return 30.0


def test_a_declined_job_wakes_the_mechanism_at_the_retry_time_once():
    s, mech = scheduler("fjf", placement=Later())
    s.add(job(0, 1), 0.0)
    s.add(job(1, 1), 0.0)
    s.schedule(0.0)
    assert [t for t, _, _ in mech.timers] == [30.0]  # both declined, one wake-up
    t, fn, args = mech.timers[0]
    assert fn(t, *args) is True  # the timer asks for a pass


class Demoting(OrderingPolicy):
    """Non-preemptive; a running job's key moves at start + 10."""

    name = "demoting"

    def key(self, job, now):
        return (1 if job.status == "running" and now >= job.last_start_s + 10 else 0, job.job_id)

    def next_key_change(self, job, now):
        return job.last_start_s + 10 if now < job.last_start_s + 10 else None


def test_a_running_jobs_key_change_is_a_timer_that_re_ranks_it():
    s, mech = scheduler(Demoting())
    s.add(job(0, 1), 0.0)
    s.schedule(0.0)
    assert list(s.run_order) == [((0, 0), 0)]
    [(t, fn, args)] = mech.timers
    assert t == 10.0
    assert fn(10.0, *args) is False  # re-ranked; nobody waits, so no pass
    assert list(s.run_order) == [((1, 0), 0)]
    assert len(mech.timers) == 1  # no further change announced
    assert np.array_equal(mech.free_gpus, [3, 4])


class Offered(PlacementPolicy):
    """First fit on the free GPUs, recording every job it is offered (the pass must offer the same jobs)."""

    name = "offered"

    def __init__(self):
        self.offered: list[int] = []

    def place(self, job, view):
        self.offered.append(job.job_id)
        need, hosts, gpus = job.gpus, [], []
        for h, free in enumerate(view.free_gpus):
            if free > 0 and need > 0:
                take = min(int(free), need)
                hosts.append(h)
                gpus.append(take)
                need -= take
        return Placement(tuple(hosts), tuple(gpus)) if need == 0 else None


@pytest.mark.parametrize("seed", range(20))
def test_backfill_offers_and_starts_exactly_what_a_walk_over_every_waiting_job_would(seed):
    # The pass skips a size whose jobs no longer fit ("parks" it) instead of visiting each of them. Against
    # the plain rule: walk every waiting job in key order, offer it to the placement if it fits the free GPUs,
    # stop when none are free. Random sizes 1-8 on 8 GPUs, some already held.
    rng = np.random.default_rng(seed)
    sizes = rng.integers(1, 9, size=int(rng.integers(5, 30))).tolist()
    held = int(rng.integers(0, 8))
    placement = Offered()
    s, mech = scheduler("fjf", placement=placement)
    if held:
        run_first(s, mech, job(100, held, submit_s=-1.0), Placement((0,), (held,)) if held <= 4
                  else Placement((0, 1), (4, held - 4)))
    placement.offered.clear()
    jobs = [job(i, g) for i, g in enumerate(sizes)]
    for js in jobs:
        s.add(js, 0.0)
    order = [j for _, j in s.waiting_order()]
    s.schedule(0.0)
    free, offered, started = 8 - held, [], []
    for j in order:
        if free == 0:
            break
        if sizes[j] <= free:
            offered.append(j)
            started.append(j)
            free -= sizes[j]
    assert placement.offered == offered
    assert [j for j, _, _ in mech.starts[1 if held else 0:]] == started
    assert mech.free_total == free
