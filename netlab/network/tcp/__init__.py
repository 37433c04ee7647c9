"""``tcp``: TCP-like, work-conserving link sharing with per-job phase state carried across events.

Why: the testbed (HTB shaping, FIFO queues, TCP) does not share a link the
way ``fair`` assumes. Jobs alternate compute and all-reduce, so a link is
shared only while transfers overlap and a job that is computing leaves the
link to the others; and TCP over one FIFO queue divides the link by bytes in
flight, not equally: a long transfer keeps more of it than a short one. Time
shifts (CASSINI) matter only if jobs keep their relative phase from one
event to the next. This model simulates exactly that, as a fluid:

* every job repeats ``pre`` (the compute that does not overlap the
  all-reduce, plus the serial intra-host phase), then the all-reduce
  (``flow_bytes`` per flow), then waits for the overlapped compute, so that
  alone it runs at :meth:`CommDemand.iter_s` of its isolated rate;
* while transfers overlap, each link is shared by weighted max-min among the
  jobs *communicating* on it (progressive filling), weight proportional to
  the job's flow bytes (``alpha = 1``; ``alpha = 0`` is max-min): transfers
  that overlap progress at the same fraction of their size (``alpha < 0``, down
  to -1, favours short transfers, as rate-cut transports do);
* each job's rate is capped by its isolated rate (its path's own bottleneck
  and the pattern's cap), so only *binding* links, where every job sending
  at its isolated rate at once would exceed the capacity, couple jobs;
* a transfer already in flight holds more of the link than one that just
  joined (TCP: its window has grown with the bytes it has sent, a newcomer
  starts small): its weight is ``phi x (1 + lead x fraction sent)``,
  evaluated whenever a transfer starts or ends. Two jobs in step then push
  each other apart into taking turns, and a slightly faster job that catches
  up with a slower one is held back behind it, locking to its period: what
  the testbed's long runs show (``benchmarks/results/fidelity.json``;
  ``lead = 0`` is plain weighted sharing, under which offsets neither grow
  nor shrink and such jobs drift through each other);
* compute time jitters per iteration by ``jitter`` (relative standard
  deviation; a fixed table of normal draws keeps results deterministic), so
  unstable alignments (exactly in step) can drift apart as on real hosts;
* every running job keeps an *anchor*, the time one of its iterations
  started, and its period: at each re-solve its position inside its
  iteration is taken from there, the component is simulated forward from
  those positions for ``horizon`` iterations, the mean period after
  ``warmup`` becomes the job's iteration time, and the anchor moves to the
  last simulated iteration start. A shift set by a policy (``phase``)
  re-anchors the job; jobs on other links are not re-solved, so their
  relative phases persist.

Components with more than ``max_exact_jobs`` jobs, or whose simulation does
not finish within ``max_events``, are solved by a mean-field fixed point
instead (:func:`_mean_field`): each job, while communicating, meets the others
on every binding link with the probability that they communicate too (random
relative phases, the state jobs of unequal periods drift into), and the link
is filled to one level, a competitor held back elsewhere leaving its surplus
to the others (water-filling). On the full Philly trace nearly every re-solve
is of one component of ~110 jobs, about 40,000 times; simulating each for tens
of iterations would take minutes, the fixed point takes about 120
microseconds (a whole re-solve about 200). ``benchmarks/bench_mean_field.py``
measures how far the two are apart on the components Philly produces, and how
often the fixed point converges.

Queueing (ECN proxy): on each binding link a fluid queue grows at the rate
communicating jobs would send at their isolated rates beyond the capacity
(up to ``buffer_us`` of the link's rate) and drains at the unused capacity;
``queue_frac`` is the fraction of time it holds more than ``ecn_threshold_us``
worth of bytes, the time a DCTCP-style switch would mark. Today's
demand-above-capacity ``overload_gbps`` is reported beside it.

Modules, one idea each: :mod:`~.fluid` (the fluid simulation), :mod:`~.mean_field`
(the large-component solver), :mod:`~.cores` (opt-in, ``phase_cores``: the jobs one link limits inside a
large component, up to ``max_core_jobs``, simulated with phase after it, their periods kept while their inputs
stay), :mod:`~.core_fluid` (a core's fluid, compiled from set-up to periods), :mod:`~.components` (jobs alone, binding
components), :mod:`~.state` (phase state), :mod:`~.solve` (one solve, each
component its way), :mod:`~.incremental` (the simulator's re-solves),
:mod:`~.model` (:class:`TcpNetwork`), :mod:`~.scenarios` (testbed scenarios),
:mod:`~.goodput` (what a lossy binding link delivers: the transport variants'
loss term, which every solver reads as the link's capacity), :mod:`~.rto` (the expected
retransmission-timeout tail of a shallow drop-tail link, added to every answer after the solve), :mod:`~.ratecut`
(what DCTCP's window cuts cost a long ring step on a marking link, added likewise), :mod:`~.exposed` (what
such added communication costs the iteration: the part the overlapped compute cannot hide), :mod:`~.params`,
and :mod:`~.reference` (a plain-numpy restatement of the fluid for two or three
jobs, the referee the tests hold the compiled model to).
"""

from . import transports  # noqa: F401  (registers the transport variants)
from .model import TcpNetwork

__all__ = ["TcpNetwork"]
