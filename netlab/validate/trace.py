"""Reading a traced referee run: how each ring flow and each switch queue fared inside the steady window.

Why: a job's steady iteration time says *that* the referee and a model disagree, not where. A traced run
(:func:`netlab.validate.referee.run_referee` with ``trace_bin_s``) records, per ring flow, when every ring step
was sent and when it arrived whole, and per switch egress queue its bytes, arrivals, queue lengths and ECN
marks per time bin. Read together with the flows' paths, they say on which link a job's steps wait, and
against which flows. The first such reading (2tier-overlap seed 18 under DCTCP, at 8:1, issue 26) found
what per-job features had not: the flows that cross two marking queues (an uplink and a downlink) take
their ring steps several times slower than the flows that cross one of them, so their jobs are slowed more
than a model whose flow takes the smaller of its links' shares predicts, and the others less.

Tracing moves no packet: a traced run's iteration starts are the untraced run's to the bit
(``tests/test_validate_trace.py``).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from .scenario import RefereeScenario, flow_path


def steady_window(starts: dict, warmup: int) -> tuple[float, float]:
    """(start, end) seconds of the window where every job is past its ``warmup`` iterations and none has
    stopped: the latest ``warmup``-th iteration start to the earliest last start."""
    return (max(float(np.asarray(s)[warmup]) for s in starts.values()),
            min(float(np.asarray(s)[-1]) for s in starts.values()))


def _window_sum(series, bin_s: float, window: tuple[float, float]) -> float:
    """Sum of a per-bin series over the bins inside ``window`` (whole bins: from the one holding its start)."""
    a = np.asarray(series, dtype=float)
    b0, b1 = int(window[0] / bin_s), int(window[1] / bin_s)
    return float(a[b0:b1].sum())


def queue_rows(trace: dict, window: tuple[float, float]) -> pd.DataFrame:
    """Per switch egress queue (``link`` "from->to") over ``window``: the share of its rate it sent
    (``util``), the mean queue length its arrivals found (packets, themselves included: ``queued_mean``) and
    the share of its arrivals it marked (``mark_frac``)."""
    bin_s, span = float(trace["bin_s"]), window[1] - window[0]
    b0, b1 = int(window[0] / bin_s), int(window[1] / bin_s)
    rows = []
    for q in trace["queues"]:
        arrivals = _window_sum(q["arrivals"], bin_s, window)
        rows.append(dict(link=f"{q['from']}->{q['to']}",
                         util=_window_sum(q["bytes"], bin_s, window) * 8 / (q["rate_bps"] * (b1 - b0) * bin_s)
                         if span > 0 else 0.0,
                         queued_mean=_window_sum(q["queued_sum"], bin_s, window) / arrivals if arrivals else 0.0,
                         mark_frac=_window_sum(q["marks"], bin_s, window) / arrivals if arrivals else 0.0))
    return pd.DataFrame(rows, columns=["link", "util", "queued_mean", "mark_frac"])


def flow_rows(sc: RefereeScenario, trace: dict, window: tuple[float, float], marking: float = 0.1) -> pd.DataFrame:
    """Per ring flow (``job``, sending ``rank``): its ring steps sent and arrived whole inside ``window``
    (``steps``), their mean and median time from sent to arrived over the time the step's bytes take alone at
    its host link's rate (``step_x``, ``step_median_x``), and the switch queues on its path: how many mark at least
    ``marking`` of their arrivals (``marking_queues``), the sum of their mark fractions (``mark_sum``) and
    those queues by name."""
    from .predict import _paths

    queues = queue_rows(trace, window).set_index("link")
    jobs = {j.job_id: j for j in sc.jobs}
    cap_bps = sc.topology.link_capacity_gbps * 1e9
    rows = []
    for f in trace["flows"]:
        job = jobs[int(f["job"])]
        path = flow_path(sc.topology, job, int(f["rank"]))
        links = [f"{a}->{b}" for a, b in zip(path, path[1:]) if f"{a}->{b}" in queues.index]
        sent, got = np.asarray(f["step_sent_s"], dtype=float), np.asarray(f["step_received_s"], dtype=float)
        n = min(len(sent), len(got))
        inside = (sent[:n] >= window[0]) & (got[:n] <= window[1])
        took = (got[:n] - sent[:n])[inside]
        alone = job.chunk_bytes * sc.transport.wire_overhead * 8 / float(cap_bps[_paths(sc, job)[int(f["rank"])][0]])
        marks = queues.loc[links, "mark_frac"] if links else pd.Series(dtype=float)
        hot = [x for x in links if queues.at[x, "mark_frac"] >= marking]
        rows.append(dict(job=job.job_id, rank=int(f["rank"]), steps=int(inside.sum()),
                         step_x=float(took.mean() / alone) if len(took) else float("nan"),
                         step_median_x=float(np.median(took) / alone) if len(took) else float("nan"),
                         marking_queues=len(hot), mark_sum=float(marks.sum()), queues=",".join(hot)))
    return pd.DataFrame(rows)
