"""A referee scenario with more packets per ring step: what the families cannot show about real rates.

Why: the families run at scaled-down rates (hosts at 200 Mbit/s) where a ring step is 4-40 TCP segments, but a
job at 100 Gbit/s moves thousands of packets per step. A term calibrated on the families (shallow Reno's timeout
tail, :mod:`netlab.network.tcp.rto`, whose count grows with a job's packets) is checked where it matters only by
running the same fabric and placements with ``factor`` times the gradient bytes, hence ``factor`` times the packets
per ring step. Compute and start offsets are multiplied alike, so every job keeps its communication share of the
iteration and its phase; the iteration counts may be cut (``keep``) since each iteration costs ``factor`` times the
packets. ``delay_s`` (per cable) raises the round trip so that a link's bandwidth-delay product in packets reaches
what a 100 Gbit/s link has at tens of microseconds (a few hundred packets), which the scaled-down rates otherwise
keep under one packet: the other thing that sets a flow's window beside the queue.
"""

from __future__ import annotations

import math
from dataclasses import replace

from .scenario import RefereeScenario


def scaled(sc: RefereeScenario, factor: float, keep: float = 1.0, warmup: int | None = None,
           delay_s: float | None = None) -> RefereeScenario:
    """``sc`` with ``factor`` x every job's gradient bytes, compute and offset, ``keep`` x its iterations (at least
    ``warmup + 2``; ``warmup`` None: the scenario's), and ``delay_s`` per cable if given (module doc)."""
    if not (factor > 0 and 0 < keep <= 1):
        raise ValueError(f"scaled: need factor > 0 and 0 < keep <= 1, got {factor}, {keep}")
    w = sc.warmup if warmup is None else int(warmup)
    jobs = tuple(replace(j, grad_bytes=j.grad_bytes * factor, compute_s=j.compute_s * factor,
                         offset_s=j.offset_s * factor, iterations=max(w + 2, int(math.ceil(j.iterations * keep))))
                 for j in sc.jobs)
    name = f"{sc.name}-x{factor:g}" + ("" if delay_s is None else f"-d{delay_s:g}")
    meta = dict(sc.meta, scaled=dict(factor=float(factor), keep=float(keep), warmup=w,
                                     delay_s=None if delay_s is None else float(delay_s)))
    return replace(sc, jobs=jobs, warmup=w, name=name, meta=meta,
                   **({} if delay_s is None else {"delay_s": float(delay_s)}))


#: (family, calibration seed, gradient factor, share of the iterations kept, warm-up, seconds of delay per cable or
#: None) of each scaled shallow-Reno run that checks the timeout count (``bench_regimes_fit.py --rto-scale``; kept by
#: ``bench_referee.py --prune``). 2tier-36: 10 jobs of 2-8 ranks at 4:1, 5-39 packets per ring step, 10 timeouts in
#: its first draw: among the cheapest calibration runs that time out (16 s of ns-3). The delayed runs put about 170
#: packets in flight on its 0.4 Gbit/s uplinks (5.1 ms round trip across racks: 4 cables each way x 0.64 ms), what a
#: 100 Gbit/s link holds at 20 us, and about 53 (0.2 ms per cable). 2tier-4: 9 jobs at 8:1, 6-31 packets per ring
#: step, the cheapest calibration run at 8:1 (5 s of ns-3)
RTO_RUNS = (("2tier", 36, 10.0, 1.0, 4, None), ("2tier", 36, 30.0, 0.5, 3, None),
            ("2tier", 36, 10.0, 1.0, 4, 0.00064), ("2tier", 36, 10.0, 1.0, 4, 0.0002), ("2tier", 4, 10.0, 1.0, 4, None))
#: cables a 2-tier fabric's cross-rack flow crosses each way: a delayed run's models are given ``rtt_us`` = 2 x this
#: x its delay per cable
CROSS_RACK_CABLES = 4


def rto_runs(runs=RTO_RUNS):
    """(scaled shallow-Reno scenario, the model arguments its round trip needs) for each of ``runs``."""
    from .families import generate
    from .scenario import REGIMES

    for family, seed, factor, keep, warmup, delay in runs:
        sc = scaled(generate(family, seed, REGIMES["reno-shallow"]), factor, keep, warmup, delay)
        yield sc, ({} if delay is None else dict(rtt_us=2 * CROSS_RACK_CABLES * delay * 1e6))
