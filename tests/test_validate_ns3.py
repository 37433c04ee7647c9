"""The ns-3 referee itself on tiny scenarios (needs Debian's libns3-dev, pkg-config, g++ and nlohmann-json3-dev:
.ci/run installs them; skipped with the reason otherwise). The first test compiles the referee (about a minute)."""

import os
import tempfile

import pytest

from netlab.validate.predict import alone_iter_s, steady_iter_s
from netlab.validate.referee import RefereeError, alone_periods, referee_unavailable, run_referee
from netlab.validate.sanity import dumbbell, ring_alone
from netlab.validate.scenario import RefereeJob, RefereeScenario, Transport

WHY = referee_unavailable()
pytestmark = pytest.mark.skipif(WHY is not None, reason=f"ns-3 referee unavailable: {WHY}")

FRAME = 1502 / 1448  # bytes on the wire per TCP payload byte
BOTTLENECK_S = 375_000 * FRAME * 8 / 100e6  # a 2-rank ring's 375 kB through 100 Mbit/s: 31.12 ms


def leftovers() -> set[str]:
    """This process's referee folders: another engineer's or test run's live ns-3 run is not ours to count."""
    return {p for p in os.listdir(tempfile.gettempdir()) if p.startswith(f"netlab-referee-{os.getpid()}-")}


def test_a_ring_alone_matches_the_calibration_figure():
    before = leftovers()
    sc = ring_alone(2)  # 375 kB, 20 ms compute, across the 100 Mbit/s bottleneck
    res = run_referee(sc, timeout_s=600)
    it = steady_iter_s(res.starts, {1: 0.02}, sc.warmup)[1]
    # compute + the bytes at the bottleneck + 2 steps of (2 frames at 200 Mbit/s + 3 cables of 2 us + 64 us for
    # the partial last segment) = 51.50 ms; ns3-facts.md measured 51.62 ms, the testbed 51.24 ms
    step = 2 * 1502 * 8 / 200e6 + 3 * 2e-6 + 64e-6
    assert it == pytest.approx(0.02 + BOTTLENECK_S + 2 * step, rel=0.002)
    assert it == pytest.approx(alone_iter_s(sc)[1], rel=0.002)
    assert res.stats["drops"] == 0 and res.stats["rtos"] == 0
    assert leftovers() <= before  # the temporary folder is gone


@pytest.mark.parametrize("transport", [Transport("reno", 1000), Transport("dcqcn", 1000)], ids=["reno", "dcqcn"])
def test_two_jobs_share_the_bottleneck(transport):
    topo = dumbbell(2)
    jobs = (RefereeJob(1, ("a0", "b0"), (1, 1), 375_000, 0.02, iterations=14),
            RefereeJob(2, ("a1", "b1"), (1, 1), 375_000, 0.02, offset_s=0.004, iterations=14))
    sc = RefereeScenario("pair", topo, jobs, transport, warmup=4)
    res = run_referee(sc, timeout_s=600)
    it = steady_iter_s(res.starts, {1: 0.02, 2: 0.02}, sc.warmup)
    wire = 375_000 * sc.transport.wire_overhead * 8 / 100e6
    for jid in (1, 2):
        # each direction of the bottleneck carries both jobs' bytes every iteration: at least 2 x 31 ms; at
        # most that plus one job's compute and step latencies (fully serialised)
        assert 2 * wire <= it[jid] <= 2 * wire + 0.02 + 0.002
    assert res.stats["drops"] == 0
    if transport.name == "dcqcn":
        assert res.stats["cnps"] > 0 and res.stats["ecn_marks"] > 0  # the rate control reacted to marks
    alone = alone_periods(run_referee(sc, timeout_s=600, alone=True))
    assert alone[1] == pytest.approx(alone[2], rel=0.002)
    if transport.name == "dcqcn":
        # alone, DCQCN restarts every ring step at the host's line rate (twice the bottleneck's) after the idle
        # compute, is marked and cut, and recovers by timer: it leaves part of the bottleneck idle (about a
        # fifth here), but uses more than half of it
        assert 0.02 + wire < alone[1] < 0.02 + 2 * wire
    else:
        assert alone[1] < 0.02 + 1.05 * wire + 0.001  # alone, near line rate


def test_an_unfinished_run_is_an_error():
    job = RefereeJob(1, ("a0", "b0"), (1, 1), 375_000, 0.02, iterations=50)
    with pytest.raises(RefereeError, match="not every job finished"):
        run_referee(RefereeScenario("short", dumbbell(1), (job,)), timeout_s=600, max_sim_s=0.2)


def test_the_validate_command_prints_the_referee_beside_every_model(tmp_path):
    """``netlab validate --against ns3 FILE``: one tiny scenario (two 2-rank jobs across a 100 Mbit/s bottleneck)
    in ns-3, one row per job with the referee's time and one column per registered network model; the run is
    cached in --runs-dir."""
    from typer.testing import CliRunner

    from netlab.cli import app
    from netlab.network.model import NETWORKS
    from netlab.validate.scenario import save_scenario

    jobs = (RefereeJob(1, ("a0", "b0"), (1, 1), 150_000, 0.01, iterations=9),
            RefereeJob(2, ("a1", "b1"), (1, 1), 150_000, 0.01, offset_s=0.003, iterations=9))
    path = save_scenario(RefereeScenario("tiny", dumbbell(2), jobs, Transport("reno", 1000), warmup=3),
                         tmp_path / "tiny.json")
    runs = tmp_path / "runs"
    result = CliRunner().invoke(app, ["validate", "--against", "ns3", str(path), "--runs-dir", str(runs)])
    assert result.exit_code == 0, result.output
    out = result.output
    assert out.startswith("scenario tiny (reno, switch queues 1000 packets): 2 jobs, 2 contended")
    for name in NETWORKS.names():
        assert f"{name}_ms" in out and f"{name}_%" in out  # every registered model, side by side
    lines = out.splitlines()
    header = lines[lines.index(next(line for line in lines if line.lstrip().startswith("ranks")))].split()
    rows = {int(line.split()[0]): line.split() for line in lines if line.split()[:1] in (["1"], ["2"])}
    wire = 150_000 * FRAME * 8 / 100e6  # one job's bytes through one direction of the bottleneck: 12.4 ms
    for jid in (1, 2):
        ns3_ms = float(rows[jid][1 + header.index("ns3_ms")]) / 1e3
        alone_ms = float(rows[jid][1 + header.index("alone_ms")]) / 1e3
        # together: both jobs' bytes cross each direction every iteration, at most fully serialised
        assert 2 * wire <= ns3_ms <= 2 * wire + 0.01 + 0.002
        assert 0.01 + wire <= alone_ms < 0.01 + 1.05 * wire + 0.001
    assert len(list(runs.glob("*.json"))) == 1  # the referee's record, reused by the next call
