"""Running multi-host jobs' progress held in arrays (netlab.sim.held): the write-back by hand, bit for bit
against the simulator's Python write-back, and a held job's fields read back through JobState."""

import random

import numpy as np
import pytest

from netlab.sched import JobState
from netlab.sim.held import HELD, HeldProgress, advance_moved
from netlab.sim.simulator import Simulator
from netlab.workload.job import Job


def _job(job_id=0, gpus=4, **fields):
    js = JobState(Job(job_id, 0.0, gpus, "resnet50", 100), 2.0)
    js.row, js.status = job_id, "running"
    for k, v in fields.items():
        setattr(js, k, v)
    return js


def test_advance_moved_by_hand():
    p = HeldProgress(1)
    js = _job(remaining=10.0, iter_s=2.0, comm_s=0.5, last_update_s=1.0, progress_from_s=3.0, phase_blind=True)
    p.hold(js)
    times = np.empty(1)
    advance_moved(p.f, p.version, np.array([0]), np.array([4.0]), np.array([1.0]), np.array([0.0]), 7.0, times)
    # held 6 s on 4 GPUs; progress from 3.0: 4 s at 2 s an iteration, 1/4 of it communicating, phase-blind
    # then 8 iterations left at 4 s: done at 7 + 32
    assert times[0] == 39.0
    assert (js.remaining, js.attained_gpu_s, js.run_s, js.progress_s, js.comm_time_s, js.phase_blind_s) == \
        (8.0, 24.0, 6.0, 4.0, 1.0, 4.0)
    assert (js.iter_s, js.comm_s, js.phase_blind, js.last_update_s, js.version) == (4.0, 1.0, False, 7.0, 1)
    assert js.held_by is None and not p.held[0]


def _python_write_back(js, now, iter_s, comm_s, blind):
    """The simulator's Python write-back: Simulator.advance, the new times, _schedule_completion's time."""
    Simulator.advance(None, js, now)  # (reads only the job)
    js.iter_s, js.comm_s, js.phase_blind = iter_s, comm_s, blind
    js.version += 1
    return max(now, js.progress_from_s) + max(js.remaining, 0.0) * js.iter_s


@pytest.mark.parametrize("seed", range(5))
def test_advance_moved_is_the_python_write_back_bit_for_bit(seed):
    rng = random.Random(seed)
    n = 30
    p = HeldProgress(n)
    a = [_job(i, gpus=rng.choice([2, 8, 16]), remaining=rng.uniform(0, 1e4), iter_s=rng.uniform(0.01, 3),
              comm_s=rng.uniform(0, 1), last_update_s=rng.uniform(0, 100), progress_from_s=rng.uniform(0, 150),
              attained_gpu_s=rng.uniform(0, 1e5), phase_blind=rng.random() < 0.5) for i in range(n)]
    b = [_job(i, gpus=js.gpus, **{k: getattr(js, k) for k in HELD + ("progress_from_s",)}) for i, js in enumerate(a)]
    now = 100.0
    for step in range(4):
        rows = rng.sample(range(n), 12)
        it = [rng.uniform(0.01, 3) for _ in rows]
        cs = [rng.uniform(0, 1) for _ in rows]
        bl = [rng.random() < 0.5 for _ in rows]
        for r in rows:
            if a[r].held_by is None:
                p.hold(a[r])
        times = np.empty(len(rows))
        advance_moved(p.f, p.version, np.array(rows), np.array(it), np.array(cs), np.array(bl, dtype=float), now,
                      times)
        want = [_python_write_back(b[r], now, i, c, x) for r, i, c, x in zip(rows, it, cs, bl)]
        assert times.tolist() == want
        if step == 1:  # a reader looks at a few: they come back to their objects and are taken in again later
            assert [a[r].remaining for r in rows[:3]] == [b[r].remaining for r in rows[:3]]
        now += rng.uniform(0, 50)
    p.release_all(a)
    for x, y in zip(a, b):
        assert [getattr(x, k) for k in HELD] == [getattr(y, k) for k in HELD]


def test_a_held_job_reads_and_writes_as_before():
    p = HeldProgress(3)
    js = _job(2, remaining=5.5, iter_s=1.25, last_update_s=3.0, version=7, phase_blind=True)
    p.hold(js)
    assert js.held_by is p and p.held[2]
    assert js.attained_at(4.0) == 4.0  # running: 0 + 4 GPUs x (4.0 - 3.0), read through the store
    assert js.held_by is None and not p.held[2]  # every field back in the object
    assert (js.remaining, js.iter_s, js.version, js.phase_blind) == (5.5, 1.25, 7, True)
    js.version += 1  # written as usual once back
    assert js.version == 8
    with pytest.raises(AttributeError, match="no_such_field"):
        js.no_such_field
