"""The referee's opt-in trace (per ring flow: steps sent and arrived, bytes per bin; per switch queue: bytes,
arrivals, queue lengths and marks per bin) and its reading (netlab.validate.trace). The referee test needs Debian's
libns3-dev, pkg-config, g++ and nlohmann-json3-dev (skipped with the reason otherwise); the others need nothing."""

import numpy as np
import pytest

from netlab.validate.referee import referee_unavailable, run_referee
from netlab.validate.sanity import ring_alone
from netlab.validate.scenario import Transport, flow_path
from netlab.validate.trace import flow_rows, queue_rows, steady_window

WHY = referee_unavailable()
needs_ns3 = pytest.mark.skipif(WHY is not None, reason=f"ns-3 referee unavailable: {WHY}")


@needs_ns3
def test_tracing_moves_no_packet_and_counts_every_step_and_byte():
    # a 2-rank ring alone across the dumbbell: 2 ring steps of 375 kB / 2 = 187,500 bytes per iteration and flow
    sc = ring_alone(2, transport=Transport("reno", 1000), iterations=5)
    plain = run_referee(sc, timeout_s=600)
    traced = run_referee(sc, timeout_s=600, trace_bin_s=0.001)
    assert plain.trace is None
    assert set(traced.starts) == set(plain.starts)
    assert all(np.array_equal(traced.starts[j], plain.starts[j]) for j in plain.starts)  # to the bit
    assert traced.stats["link_packets"] == plain.stats["link_packets"]
    tr, job = traced.trace, sc.jobs[0]
    assert tr["bin_s"] == 0.001 and len(tr["flows"]) == 2
    # 5 iterations x 2 steps sent on each flow, each sent before it arrived whole. The run stops as rank 0 starts
    # its 6th iteration, once flow 1 (into rank 0) has delivered its last step: all 5 x 2 x 187,500 bytes in order;
    # flow 0's last step may still be on its way (whole steps arrived: 9 or 10, bytes at least 9 steps')
    flow0, flow1 = sorted(tr["flows"], key=lambda f: f["rank"])
    for f in (flow0, flow1):
        assert len(f["step_sent_s"]) == 10
        assert all(r > s for s, r in zip(f["step_sent_s"], f["step_received_s"]))
    assert len(flow1["step_received_s"]) == 10
    assert sum(flow1["bytes_per_bin"]) == 5 * 2 * 187_500 == job.iterations * job.steps * job.chunk_bytes
    assert len(flow0["step_received_s"]) in (9, 10)
    assert 9 * 187_500 <= sum(flow0["bytes_per_bin"]) <= 10 * 187_500
    # the bottleneck's egress toward side b carries flow 0's data: 1,500-byte IP packets of 1,448 payload bytes
    # (187,500 = 129 x 1448 + 708: 130 packets a step, the last 760 bytes), 9 or 10 steps of it, and flow 1's ACKs
    # beside them (at most one a segment, 1,300 in all, each under 80 bytes)
    q = {(x["from"], x["to"]): x for x in tr["queues"]}
    assert ("a0", "tora") not in q  # host NICs are not traced
    step = 129 * 1500 + 760
    assert 9 * step <= sum(q[("tora", "torb")]["bytes"]) <= 10 * step + 1300 * 80
    assert sum(q[("tora", "torb")]["marks"]) == 0  # Reno: nothing marks
    assert len({len(v) for k, v in q[("tora", "torb")].items() if isinstance(v, list)}) == 1  # bins aligned


def test_queue_and_flow_rows_by_hand():
    sc = ring_alone(2, transport=Transport("dctcp", 1000))
    assert flow_path(sc.topology, sc.jobs[0], 0) == ["a0", "tora", "torb", "b0"]
    # bins of 10 ms; the window 20-60 ms covers bins 2, 3, 4, 5
    queue = dict(rate_bps=100e6, bytes=[0, 0, 250_000, 250_000, 125_000, 0, 9], arrivals=[0, 0, 10, 10, 20, 0, 1],
                 queued_sum=[0, 0, 100, 100, 100, 0, 5], queued_max=[0, 0, 30, 30, 10, 0, 5],
                 marks=[0, 0, 5, 5, 2, 0, 1])
    trace = dict(bin_s=0.01, queues=[dict(queue, **{"from": "tora", "to": "torb"}),
                                     dict(queue, **{"from": "torb", "to": "tora", "marks": [0] * 7})],
                 flows=[dict(job=1, rank=0, step_sent_s=[0.005, 0.021, 0.031, 0.061],
                             step_received_s=[0.019, 0.029, 0.049, 0.07], bytes_per_bin=[]),
                        dict(job=1, rank=1, step_sent_s=[0.021], step_received_s=[0.0299], bytes_per_bin=[])])
    assert steady_window({1: [0.0, 0.01, 0.02, 0.03], 2: [0.005, 0.015, 0.025, 0.06]}, 1) == (0.015, 0.03)
    rows = queue_rows(trace, (0.02, 0.06)).set_index("link")
    # 625,000 bytes in 40 ms at 100 Mbit/s (5 Mbit sent of 4 Mbit: 1.25, as the bins say); 40 arrivals found 300
    # queued in all, 12 of them marked
    assert rows.at["tora->torb", "util"] == pytest.approx(625_000 * 8 / (100e6 * 0.04))
    assert rows.at["tora->torb", "queued_mean"] == pytest.approx(300 / 40)
    assert rows.at["tora->torb", "mark_frac"] == pytest.approx(12 / 40)
    assert rows.at["torb->tora", "mark_frac"] == 0.0
    flows = flow_rows(sc, trace, (0.02, 0.06), marking=0.1).set_index("rank")
    # the chunk alone: 187,500 bytes x 1.0373 (framing) at the host's 200 Mbit/s = 7.78 ms; steps inside the
    # window: (21 -> 29 ms) and (31 -> 49 ms): 8 and 18 ms
    alone = 187_500 * sc.transport.wire_overhead * 8 / 200e6
    assert flows.at[0, "steps"] == 2
    assert flows.at[0, "step_x"] == pytest.approx((0.008 + 0.018) / 2 / alone)
    assert flows.at[0, "step_median_x"] == pytest.approx((0.008 + 0.018) / 2 / alone)
    assert flows.at[0, "marking_queues"] == 1 and flows.at[0, "queues"] == "tora->torb"
    assert flows.at[0, "mark_sum"] == pytest.approx(0.3)
    # flow 1 (b0 -> a0) crosses torb->tora, which marks nothing
    assert flows.at[1, "marking_queues"] == 0 and flows.at[1, "mark_sum"] == 0.0
    assert flows.at[1, "step_x"] == pytest.approx(0.0089 / alone)
