"""The scheduling loop on the event kernel, shared by the simulator and the live testbed.

The recipe (events of one instant run before the scheduling pass of that
instant, :class:`~netlab.sim.kernel.Kernel`'s priorities):

1. ``arrive``: a job joins the waiting queue (:meth:`Scheduler.add <netlab.sched.Scheduler.add>`);
2. ``complete``: the mechanism releases a finished job and calls :meth:`KernelLoop._finished`;
3. timers the pass asked for (a placement's retry, a running job's key change) and lease rounds;
4. ``settle``, once per instant at which anything happened: the scheduling pass
   (:meth:`Scheduler.schedule <netlab.sched.Scheduler.schedule>`); if the running set changed, the
   network policy's allocations (:meth:`Scheduler.allocate <netlab.sched.Scheduler.allocate>`); then the
   mechanism's own follow-up (:meth:`KernelLoop._after_pass`: the simulator re-solves the network).

The simulator runs this loop on simulated time; the testbed on wall time
(:class:`~netlab.sim.kernel.RealtimeClock`), where completions arrive from
the agents' reader threads through :meth:`Kernel.post <netlab.sim.kernel.Kernel.post>`.
"""

from __future__ import annotations

from typing import Callable

from ..sched import JobState, Mechanism, Scheduler
from .kernel import Kernel


class KernelLoop(Mechanism):
    """Event plumbing around one :class:`~netlab.sched.Scheduler`; subclasses are the mechanisms."""

    kernel: Kernel
    scheduler: Scheduler

    def _begin(self, kernel: Kernel, scheduler: Scheduler, arrivals: list[JobState]) -> None:
        """Arm the arrivals (``arrivals`` in submit order) and the ordering's lease rounds.

        Arrivals in submit order are armed one at a time, each when the one before it arrives, with the sequence
        numbers they would have had armed all at once (:meth:`Kernel.reserve`): the events run in the same order,
        but the kernel's heap holds the running set's events and one arrival, not every job of the trace, so
        each event's push and pop walk a heap as deep as the running set, not the trace. Arrivals out of submit
        order are armed all at once.
        """
        self.kernel, self.scheduler = kernel, scheduler
        self._pass_pending = False
        self._round_due = False
        self._done, self._n_jobs = 0, len(arrivals)
        submits = [js.submit_s for js in arrivals]
        if all(a <= b for a, b in zip(submits, submits[1:])):
            self._arrivals, self._next_arrival = arrivals, 0
            self._arrival_seq = kernel.reserve(len(arrivals))
            self._arm_arrival()
        else:
            for js in arrivals:
                kernel.at(js.submit_s, Kernel.ARRIVE, self._arrive, js)
        round_s = scheduler.ordering.round_s
        if round_s:
            first = arrivals[0].submit_s if arrivals else 0.0
            kernel.at(first + round_s, Kernel.UPDATE, self._round)

    def _arm_arrival(self) -> None:
        """Arm the next arrival in submit order (if any), with its reserved sequence number."""
        i = self._next_arrival
        if i < len(self._arrivals):
            self._next_arrival = i + 1
            js = self._arrivals[i]
            self.kernel.at_reserved(js.submit_s, Kernel.ARRIVE, self._arrival_seq + i, self._arrive_armed, js)

    def _arrive_armed(self, js: JobState) -> None:
        self._arm_arrival()
        self._arrive(js)

    def _arrive(self, js: JobState) -> None:
        now = self.kernel.now
        js.status = "waiting"
        js.last_update_s = now
        self.scheduler.add(js, now)
        self._want_pass()

    def _finished(self) -> None:
        """A job ended (its mechanism released it and told the scheduler): look again this instant."""
        self._done += 1
        self._want_pass()

    def _round(self) -> None:
        self._round_due = True
        self._want_pass()
        if self._done < self._n_jobs:
            self.kernel.at(self.kernel.now + self.scheduler.ordering.round_s, Kernel.UPDATE, self._round)

    def _want_pass(self) -> None:
        if not self._pass_pending:
            self._pass_pending = True
            self.kernel.at(self.kernel.now, Kernel.SCHEDULE, self._settle)

    def _settle(self) -> None:
        self._pass_pending = False
        now = self.kernel.now
        sched = self.scheduler
        if sched.n_waiting:
            round_pass, self._round_due = self._round_due, False
            if sched.schedule(now, round_pass):
                self._want_pass()
        if sched.net_dirty and sched.network is not None:
            sched.allocate(now)
        self._after_pass(now)

    def _after_pass(self, now: float) -> None:
        """The mechanism's follow-up to a pass (nothing by default)."""

    # Mechanism: the pass's timers are kernel events.
    def wake_at(self, t: float, fn: Callable[..., bool], *args) -> None:
        self.kernel.at(t, Kernel.UPDATE, self._timer, fn, args)

    def _timer(self, fn: Callable[..., bool], args: tuple) -> None:
        if fn(self.kernel.now, *args):
            self._want_pass()
