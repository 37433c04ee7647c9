"""Arrivals armed one at a time (``KernelLoop._begin``): the same events in the same order, a shallow heap."""

from __future__ import annotations

import pandas as pd

from netlab.sim import SimConfig, Simulator
from netlab.sim.kernel import Kernel
from netlab.sim.loop import KernelLoop
from netlab.topology import load_topology
from netlab.traces import poisson_trace
from netlab.workload.job import jobs_from_frame


def test_reserved_sequence_numbers_order_events_as_if_armed_when_reserved():
    """Three events at t=5, priority 1: two armed later with numbers reserved first run before one armed at
    once after the reservation, in the reserved order; an earlier time still runs first."""
    kernel, seen = Kernel(), []
    first = kernel.reserve(2)  # 0 and 1
    kernel.at(5.0, 1, seen.append, "armed now (2)")
    kernel.at_reserved(5.0, 1, first + 1, seen.append, "reserved 1")
    kernel.at_reserved(5.0, 1, first, seen.append, "reserved 0")
    kernel.at(4.0, 1, seen.append, "earlier")
    kernel.run()
    assert first == 0
    assert seen == ["earlier", "reserved 0", "reserved 1", "armed now (2)"]


def _run(topo, jobs):
    return Simulator(topo, jobs, "tiresias", "consolidated", None, SimConfig(network="tcp")).run()


def test_arrivals_armed_one_at_a_time_give_the_same_run_as_armed_at_once(monkeypatch):
    """400 jobs on the tcp network: the job table is identical whether arrivals are armed lazily (arrivals in
    submit order) or all at once, as before; and the
    heap never holds more than one arrival."""
    topo = load_topology("leafspine,racks=4,hosts_per_rack=2,gpus_per_host=4,oversub=4")
    jobs = jobs_from_frame(poisson_trace(jobs=400, load=0.9, cluster_gpus=topo.total_gpus, seed=3, llm=0.2), topo)
    armed = []
    at_reserved = Kernel.at_reserved

    def spy(self, t, priority, seq, fn, *args):
        armed.append(sum(1 for e in self._heap if e[1] == Kernel.ARRIVE))
        at_reserved(self, t, priority, seq, fn, *args)

    monkeypatch.setattr(Kernel, "at_reserved", spy)
    lazy = _run(topo, jobs)
    assert len(armed) == len(jobs) and max(armed) == 0  # each arrival armed when none other is in the heap
    def eager(self, kernel, scheduler, arrivals):  # as before: every arrival armed at once, in submit order
        self.kernel, self.scheduler = kernel, scheduler
        self._pass_pending = self._round_due = False
        self._done, self._n_jobs = 0, len(arrivals)
        for js in arrivals:
            kernel.at(js.submit_s, Kernel.ARRIVE, self._arrive, js)
        assert not scheduler.ordering.round_s  # (tiresias has no lease rounds to arm)

    monkeypatch.setattr(KernelLoop, "_begin", eager)
    at_once = _run(topo, jobs)
    assert len(armed) == len(jobs)  # the lazy path was not taken
    pd.testing.assert_frame_equal(lazy.jobs, at_once.jobs, check_exact=True)
    assert (lazy.jobs.start_s > lazy.jobs.submit_s).any() and lazy.summary["preemptions"] > 0  # jobs queue
