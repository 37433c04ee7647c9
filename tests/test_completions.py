"""The multi-host jobs' completion times behind a heap (netlab.sim.completions): the earliest time and the jobs
due, in the order a dict of job id -> time would iterate them."""

import math
import random

import pytest

from netlab.sim.completions import Completions


def test_first_and_due_follow_the_latest_times_in_dict_order():
    c = Completions()
    assert c.first() == math.inf and c.due(10.0) == []
    c.set(7, 5.0)
    c.set(3, 2.0)
    c.set(9, 5.0)
    assert c.first() == 2.0
    c.set(3, 6.0)  # moved later: its old entry is stale, it keeps its place (first given a time before 9)
    assert c.first() == 5.0
    c.set(7, 5.0)  # the same time again: still one job
    c.set(4, 1.0)
    c.pop(4)  # stopped: gone
    assert c.first() == 5.0 and len(c) == 3 and 4 not in c
    # by hand, dict order 7, 3, 9: due by 6 are 7 (5.0), 3 (6.0) and 9 (5.0), in that order
    assert c.due(6.0) == [7, 3, 9]
    assert c.first() == math.inf  # taken off the heap; their times stay until popped
    assert c.get(3) == 6.0
    c.keep(3)
    assert c.first() == 6.0


def test_a_job_given_a_time_again_after_pop_goes_to_the_end():
    c = Completions()
    c.set(1, 3.0)
    c.set(2, 3.0)
    c.pop(1)
    c.set(1, 3.0)  # as a dict: popped and inserted again, after 2
    assert c.due(3.0) == [2, 1]


@pytest.mark.parametrize("seed", range(20))
def test_matches_a_dict_scanned_for_the_minimum(seed):
    rng = random.Random(seed)
    c, d = Completions(), {}
    for _ in range(3000):
        r = rng.random()
        j = rng.randrange(40)
        if r < 0.6:
            t = float(rng.randrange(50))  # few distinct times: many ties
            c.set(j, t)
            d[j] = t
        elif r < 0.8:
            c.pop(j)
            d.pop(j, None)
        else:
            now = float(rng.randrange(50))
            want = [k for k, t in d.items() if t <= now]
            assert c.due(now) == want
            for k in want:  # the simulator completes them: they stop
                c.pop(k)
                del d[k]
        assert c.first() == min(d.values(), default=math.inf)
        assert len(c) == len(d)


def test_set_many_is_set_for_each_job_in_order():
    c = Completions()
    c.set(5, 4.0)
    c.set_many([8, 5, 2, 8], [3.0, 1.0, 3.0, 2.0])  # 8 twice: its last time holds; 5 keeps its place (first)
    assert c.first() == 1.0 and len(c) == 3 and c.get(8) == 2.0
    # by hand, dict order 5, 8, 2 with times 1.0, 2.0, 3.0: due by 2.5 are 5 and 8; by 3.0 then 2
    assert c.due(2.5) == [5, 8]
    assert c.due(3.0) == [2]
    c.set_many([], [])
    assert c.first() == math.inf
