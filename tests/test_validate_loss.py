"""Per-job loss counters of the ns-3 referee (drops, ECN marks, retransmits, RTOs per job) and records made
before them. The referee tests need Debian's libns3-dev, pkg-config, g++ and nlohmann-json3-dev (.ci/run installs
them; skipped with the reason otherwise); the record tests need nothing."""

import json
from pathlib import Path

import pandas as pd
import pytest

from netlab.validate.families import generate
from netlab.validate.referee import referee_unavailable, run_referee
from netlab.validate.runs import SAME_TIMES_SOURCES, RunStore, measure, record_job_loss, referee_source_hash
from netlab.validate.sanity import dumbbell, replicate, ring_alone
from netlab.validate.scenario import REGIMES, RefereeJob, RefereeScenario, Transport

WHY = referee_unavailable()
needs_ns3 = pytest.mark.skipif(WHY is not None, reason=f"ns-3 referee unavailable: {WHY}")
RUNS = Path(__file__).resolve().parents[1] / "benchmarks" / "results" / "referee_runs"
COUNTERS = {"drops", "ack_drops", "ecn_marks", "retransmits", "retransmitted_bytes", "rtos", "fast_recoveries",
            "cnps", "nacks", "rate_timeouts"}


def overloaded(transport: Transport, jobs: int = 4) -> RefereeScenario:
    """``jobs`` 2-rank jobs across one 100 Mbit/s cable, 1 MB all-reduces back to back (1 ms of compute): each
    direction of the bottleneck is offered ``jobs`` x 200 Mbit/s while every job communicates."""
    js = tuple(RefereeJob(i + 1, (f"a{i}", f"b{i}"), (1, 1), 1_000_000, 0.001, offset_s=0.0005 * i, iterations=6)
               for i in range(jobs))
    return RefereeScenario("overloaded", dumbbell(jobs), js, transport, warmup=2)


def sums_match(res) -> None:
    """Every packet in these fabrics belongs to a job's flow: the jobs' drops and marks add up to the run's."""
    assert set(res.job_loss) == set(res.starts)
    assert all(set(v) == COUNTERS for v in res.job_loss.values())
    assert sum(v["drops"] + v["ack_drops"] for v in res.job_loss.values()) == res.stats["drops"]
    assert sum(v["ecn_marks"] for v in res.job_loss.values()) == res.stats["ecn_marks"]
    assert sum(v["rtos"] for v in res.job_loss.values()) == res.stats["rtos"]
    assert sum(v["fast_recoveries"] for v in res.job_loss.values()) == res.stats["fast_recoveries"]
    assert res.stats["unattributed_drops"] == 0 and res.stats["unattributed_marks"] == 0


@needs_ns3
def test_a_deep_buffer_job_alone_loses_nothing():
    res = run_referee(ring_alone(2, transport=Transport("reno", 1000)), timeout_s=600)
    sums_match(res)
    assert res.job_loss[1] == dict.fromkeys(COUNTERS, 0)  # no drop, no retransmit (the handshake is not one)


@needs_ns3
def test_a_shallow_overloaded_bottleneck_drops_and_retransmits_per_job():
    res = run_referee(overloaded(Transport("reno", 100)), timeout_s=600)
    sums_match(res)
    for jid, loss in res.job_loss.items():
        # four senders at twice the bottleneck's rate into 100 packets: every job loses data and sends it again
        assert loss["drops"] > 0, (jid, loss)
        # every data packet lost is sent again (a lost resend once more): at least as many resends as drops
        assert loss["retransmits"] >= loss["drops"] and loss["retransmitted_bytes"] >= loss["retransmits"]
        assert loss["fast_recoveries"] + loss["rtos"] > 0
        assert loss["ecn_marks"] == 0 and loss["cnps"] == 0  # Reno over drop-tail: no marking
    # two such jobs behind 1000 packets: their ring steps (1 MB / 2 per flow, 346 segments, two flows each way)
    # fit in the queue, nothing is lost
    deep = run_referee(overloaded(Transport("reno", 1000), jobs=2), timeout_s=600)
    sums_match(deep)
    assert all(v["drops"] == 0 and v["retransmits"] == 0 for v in deep.job_loss.values())


@needs_ns3
def test_dctcp_marks_are_counted_per_job():
    res = run_referee(overloaded(Transport("dctcp", 1000)), timeout_s=600)
    sums_match(res)
    assert all(v["ecn_marks"] > 0 for v in res.job_loss.values())
    assert res.stats["drops"] == 0  # marked at 20 packets, far below the 1000-packet limit


@needs_ns3
def test_the_referee_reproduces_records_of_the_sources_it_accepts(tmp_path):
    """A source in SAME_TIMES_SOURCES only added counters: its committed records' times are measured again to
    the bit (the cheapest cached calibration run of each such source; skipped if none is committed)."""
    checked = 0
    for source in SAME_TIMES_SOURCES:
        recs = [json.loads(p.read_text()) for p in RUNS.glob("*.json")]
        recs = [r for r in recs if r.get("referee_source") == source and r["meta"].get("family")
                and r["transport"]["name"] == "reno" and r["transport"]["switch_queue_packets"] == 100]
        if not recs:
            continue
        old = min(recs, key=lambda r: r["ns3_cpu_s"] + r["alone_cpu_s"])
        regime = "reno-shallow"
        sc = generate(old["meta"]["family"], old["meta"]["seed"], REGIMES[regime])
        if "-replicate" in old["name"]:  # another draw of the scenario (sanity.replicate)
            sc = replicate(sc, int(old["name"].rsplit("-replicate", 1)[1]))
        assert sc.key() == old["key"]
        new = measure(sc, timeout_s=600)
        assert new["ref_iter_s"] == old["ref_iter_s"] and new["ref_alone_s"] == old["ref_alone_s"]
        assert new["iterations_run"] == old["iterations_run"]
        assert {k: v for k, v in new["stats"].items() if k in old["stats"] and k != "wall_s"} == \
            {k: v for k, v in old["stats"].items() if k != "wall_s"}
        assert sum(v["drops"] + v["ack_drops"] for v in new["job_loss"].values()) == new["stats"]["drops"]
        checked += 1
    if not checked:
        pytest.skip("no committed record of an accepted earlier referee source")


def test_records_without_per_job_counters_stay_readable_as_unknown(tmp_path):
    sc = generate("2tier", 4, REGIMES["reno-shallow"])
    store = RunStore(tmp_path)
    source = next(iter(SAME_TIMES_SOURCES))
    old = dict(version=1, key=sc.key(), referee_source=source, ref_iter_s={"1": 0.1}, ref_alone_s={"1": 0.05})
    store.path(sc).write_text(json.dumps(old))
    assert store.get(sc) == old  # its times are still the current referee's
    assert record_job_loss(old) is None  # unknown, not zero
    assert store.get(sc, need_job_loss=True) is None  # measured again when the counters are needed
    new = dict(old, referee_source=referee_source_hash(), job_loss={"1": dict.fromkeys(COUNTERS, 0)})
    store.path(sc).write_text(json.dumps(new))
    assert store.get(sc, need_job_loss=True) == new and record_job_loss(new) == {1: dict.fromkeys(COUNTERS, 0)}
    store.path(sc).write_text(json.dumps(dict(old, referee_source="0" * 16)))
    assert store.get(sc) is None  # another source, not known to measure the same times


def test_committed_records_are_of_accepted_sources():
    """Every committed run was made by the current referee or one that measures the same times."""
    if not RUNS.exists():
        pytest.skip(f"{RUNS} not found")
    sources = {json.loads(p.read_text()).get("referee_source") for p in RUNS.glob("*.json")}
    assert sources <= {referee_source_hash(), *SAME_TIMES_SOURCES}


def test_loss_rows_and_summary_by_hand():
    from netlab.validate.loss import job_loss_rows, loss_summary

    sc = overloaded(Transport("reno", 100), jobs=3)  # three 2-rank jobs across one cable: all contended

    def counters(drops, rtos):
        return dict(dict.fromkeys(COUNTERS, 0), drops=drops, retransmits=drops, rtos=rtos)

    rec = dict(ref_iter_s={"1": 0.2, "2": 0.3, "3": 0.1}, ref_alone_s={"1": 0.1, "2": 0.1, "3": 0.1},
               iterations_run={"1": 10, "2": 20, "3": 40},
               job_loss={"1": counters(10, 5), "2": counters(40, 2), "3": counters(0, 0)})
    errors = pd.DataFrame(dict(job_id=[1, 2, 3], signed=[-0.3, -0.1, 0.02]))
    rows = job_loss_rows(sc, rec, errors)
    assert list(rows.rtos_per_iter) == [0.5, 0.1, 0.0] and list(rows.drops_per_iter) == [1.0, 2.0, 0.0]
    assert list(rows.ref_slowdown) == pytest.approx([2.0, 3.0, 1.0]) and rows.contended.all()
    s = loss_summary(rows, unknown_scenarios=2)
    assert (s["jobs"], s["contended"], s["contended_with_rto"], s["contended_with_drops"]) == (3, 3, 2, 2)
    assert s["share_contended_with_rto"] == pytest.approx(2 / 3)
    assert s["median_drops_per_iter"] == 1.0 and s["median_drops_per_contended_job"] == 10
    assert s["scenarios_without_counters"] == 2 and s["scenarios"] == 1
    # more timeouts per iteration, more underestimated: a perfect negative rank correlation
    assert s["spearman_rtos_vs_signed_error"] == pytest.approx(-1.0)
    assert s["spearman_rtos_vs_abs_error"] == pytest.approx(1.0)
    assert s["median_signed_error_with_rto"] == pytest.approx(-0.2)
    assert s["median_signed_error_without_rto"] == pytest.approx(0.02)
    assert job_loss_rows(sc, {k: v for k, v in rec.items() if k != "job_loss"}) is None  # unknown, not zero
    assert loss_summary(pd.DataFrame(), unknown_scenarios=3) == dict(scenarios=0, scenarios_without_counters=3)
