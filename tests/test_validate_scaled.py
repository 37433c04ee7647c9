"""Scaled referee scenarios (netlab/validate/scaled.py) and the timeout count's forms (netlab/validate/timeouts.py),
by hand."""

import math

import pandas as pd
import pytest

from netlab.validate import timeouts
from netlab.validate.sanity import ring_alone
from netlab.validate.scaled import scaled


def test_scaled_multiplies_bytes_compute_and_offsets():
    sc = ring_alone(4, grad_bytes=375_000, compute_s=0.02, iterations=12)  # warm-up 3
    big = scaled(sc, 10.0, keep=0.5, warmup=2, delay_s=1e-3)
    (j,), (b,) = sc.jobs, big.jobs
    assert b.grad_bytes == 3_750_000 and b.compute_s == pytest.approx(0.2) and b.chunk_bytes == 10 * j.chunk_bytes
    assert b.iterations == 6 and big.warmup == 2 and big.delay_s == 1e-3  # ceil(12 x 0.5); delay per cable
    assert big.name == "ring-4-alone-x10-d0.001" and big.meta["scaled"]["factor"] == 10.0
    assert scaled(sc, 10.0, keep=0.1).jobs[0].iterations == 5  # at least warm-up + 2 (3 + 2), not ceil(1.2)
    assert scaled(sc, 3.0).delay_s == sc.delay_s and scaled(sc, 3.0).key() != sc.key()
    with pytest.raises(ValueError):
        scaled(sc, 0.0)


ROWS = pd.DataFrame([  # two jobs: per_step_k1 is the analysis' count per ring step at rto_k 1
    dict(contended=True, steps=2, packets_per_step=10.0, iterations=10, rtos=1, per_step_k1=0.05),
    dict(contended=True, steps=4, packets_per_step=100.0, iterations=5, rtos=6, per_step_k1=0.5),
])


def test_counted_by_hand():
    # per packet, unbounded: 10 x 2 x 0.05 + 5 x 4 x 0.5 = 1 + 10 = 11; scale 0.5: 5.5
    assert timeouts.counted(ROWS, 1.0, 0.0, bounded=False) == pytest.approx(11.0)
    assert timeouts.counted(ROWS, 0.5, 0.0, bounded=False) == pytest.approx(5.5)
    # bounded: 20 (1 - e^-0.05) + 20 (1 - e^-0.5) = 0.975412 + 7.869387 = 8.844799
    assert timeouts.counted(ROWS) == pytest.approx(20 * (1 - math.exp(-0.05)) + 20 * (1 - math.exp(-0.5)))
    assert timeouts.counted(ROWS) == pytest.approx(8.844799, rel=1e-6)
    # ramp 100 packets: lam x 10 / 110 and x 100 / 200: 20 (1 - e^-(0.05 / 11)) + 20 (1 - e^-0.25) = 4.514
    want = 20 * (1 - math.exp(-0.05 / 11)) + 20 * (1 - math.exp(-0.25))
    assert timeouts.counted(ROWS, 1.0, 100.0) == pytest.approx(want) and want == pytest.approx(4.514, abs=1e-3)


def test_ramp_packets_for_meets_the_measured_count():
    ramp = timeouts.ramp_packets_for(ROWS)  # 7 measured, fewer than the bounded 8.84 at ramp 0
    assert ramp > 0 and timeouts.counted(ROWS, 1.0, ramp) == pytest.approx(7.0, rel=1e-9)
    assert timeouts.ramp_packets_for(ROWS.assign(rtos=[5, 6])) is None  # 11 measured: more than even ramp 0 counts


def test_k_eff_by_step_by_hand():
    out = timeouts.k_eff_by_step(ROWS, bins=(0, 50, 500))
    assert [b["packets_per_step"] for b in out] == [[0.0, 50.0], [50.0, 500.0]]
    assert out[0]["k_eff"] == pytest.approx(1.0) and out[1]["k_eff"] == pytest.approx(0.6)  # 1 / 1, 6 / 10
    assert out[1]["most_rtos_per_step"] == pytest.approx(6 / 20)


def test_the_timeout_count_runs_are_stored():
    # bench_regimes_fit.py --rto-scale reads them (regimes_fit.json rto_scale); a change to the families or the
    # referee that moves their keys must run them again
    from pathlib import Path

    from netlab.validate.runs import RunStore
    from netlab.validate.scaled import rto_runs

    store = RunStore(Path(__file__).resolve().parents[1] / "benchmarks" / "results" / "referee_runs")
    runs = list(rto_runs())
    assert [kw.get("rtt_us") for _, kw in runs] == [None, None, 5120.0, 1600.0, None]  # 2 x 4 cables x 0.64 / 0.2 ms
    for sc, _ in runs:
        rec = store.get(sc, need_job_loss=True)
        assert rec is not None and rec["meta"]["scaled"]["factor"] in (10.0, 30.0), sc.name


def test_count_rows_alone_by_hand():
    # a 2-rank ring of 375 kB: 2 steps of 187,500 bytes = 125 segments of 1,500 bytes, on the wire 1,502-byte frames
    # of 1,448 payload: 125 x 1502 / 1448 = 129.6616; alone no link is offered more than its capacity, so nothing binds
    # and the analysis counts no timeout
    rows = timeouts.count_rows(ring_alone(2, grad_bytes=375_000, compute_s=0.02, iterations=12))
    (r,) = rows.itertuples()
    assert r.steps == 2 and r.packets_per_step == pytest.approx(129.6616, abs=1e-4) and r.per_step_k1 == 0.0
    assert not r.contended and list(rows.columns) == ["scenario", "job_id", "contended", "steps", "packets_per_step",
                                                      "per_step_k1"]
