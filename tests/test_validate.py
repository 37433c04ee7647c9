"""The referee's Python side, checked by hand without ns-3: scenarios, the C++ program's input, its output,
the steady window, the comparison's arithmetic, the families' determinism and halves, scenario files."""

import json
import os
import zlib

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

from netlab.cli import app
from netlab.topology import load_topology
from netlab.validate.compare import compare_jobs, contended_jobs, error_summary
from netlab.validate.families import FAMILIES, family_seeds, generate, half
from netlab.validate.predict import alone_comm_s, alone_iter_s, predict_all, steady_iter_s
from netlab.validate.referee import RefereeError, alone_periods, read_output, RefereeResult
from netlab.validate.runs import RunStore, record_times
from netlab.validate.scenario import (RefereeJob, RefereeScenario, ScenarioError, Transport, load_scenario,
                                      referee_input, save_scenario, scenario_doc)

FRAME_200M_US = 1502 * 8 / 200e6 * 1e6  # 60.08 us
FRAME_100M_US = 1502 * 8 / 100e6 * 1e6


@pytest.fixture
def dumbbell():
    # l0, l1 on swL; r0, r1 on swR; hosts 200 Mbit/s, swL-swR 100 Mbit/s
    return load_topology("dumbbell,hosts_per_side=2,gpus_per_host=1,host_gbps=0.2,bottleneck_gbps=0.1")


def two_jobs(topo, **kw):
    jobs = (RefereeJob(1, ("l0", "r0"), (1, 1), 375_000, 0.02, iterations=12),
            RefereeJob(2, ("l1", "r1"), (1, 1), 1_500_000, 0.03, offset_s=0.005, iterations=8))
    return RefereeScenario("two", topo, jobs, **kw)


def test_input_of_a_two_job_dumbbell(dumbbell):
    doc = referee_input(two_jobs(dumbbell, jitter=0.0))
    assert {n["name"]: n["host"] for n in doc["nodes"]} == {"l0": True, "l1": True, "r0": True, "r1": True,
                                                           "swL": False, "swR": False}
    rates = {(l["a"], l["b"]): l["rate_bps"] for l in doc["links"]}
    assert rates == {("l0", "swL"): 2e8, ("l1", "swL"): 2e8, ("r0", "swR"): 2e8, ("r1", "swR"): 2e8,
                     ("swL", "swR"): 1e8}
    assert {l["delay_s"] for l in doc["links"]} == {2e-6}
    j1, j2 = doc["jobs"]
    assert j1["paths"] == [["l0", "swL", "swR", "r0"], ["r0", "swR", "swL", "l0"]]
    assert j2["paths"] == [["l1", "swL", "swR", "r1"], ["r1", "swR", "swL", "l1"]]
    # a 2-rank ring: 2 steps of half the gradient each way
    assert (j1["steps"], j1["chunk_bytes"], j2["chunk_bytes"]) == (2, 187_500, 750_000)
    assert (j1["hidden_s"], j1["intra_s"], j2["offset_s"], j2["iterations"]) == (0.0, 0.0, 0.005, 8)
    assert doc["transport"]["name"] == "reno" and doc["transport"]["switch_queue_packets"] == 1000
    assert doc["sequential"] is False


def test_alone_model_and_overlap_by_hand(dumbbell):
    job = RefereeJob(1, ("l0", "r0"), (1, 1), 375_000, 0.05, overlap=0.5)
    sc = RefereeScenario("ov", dumbbell, (job,))
    # bytes: 375 kB x 1502/1448 over 100 Mbit/s; per step: the other links' frames (2 x 60.08 us), 3 cables of
    # 2 us, and 64 us because 187,500 bytes end in a partial segment; 2 steps
    step_us = 2 * FRAME_200M_US + 3 * 2 + 64
    comm = 375_000 * 1502 / 1448 * 8 / 100e6 + 2 * step_us * 1e-6
    assert alone_comm_s(sc, job) == pytest.approx(comm, rel=1e-9)
    assert referee_input(sc)["jobs"][0]["hidden_s"] == pytest.approx(0.5 * comm, rel=1e-9)
    # iteration alone = compute + comm - overlap x min(compute, comm)
    assert alone_iter_s(sc)[1] == pytest.approx(0.05 + comm - 0.5 * comm, rel=1e-9)


def test_hierarchical_job_input():
    topo = load_topology("leafspine,racks=2,hosts_per_rack=2,gpus_per_host=4,host_gbps=0.2,oversub=1,spines=1,"
                         "intra_gbps=1.2,ecmp=hash")
    job = RefereeJob(7, ("r0h0", "r1h0", "r1h1"), (4, 4, 4), 1_200_000, 0.01, pattern="hierarchical")
    j = referee_input(RefereeScenario("h", topo, (job,)))["jobs"][0]
    # a ring over the 3 hosts: 2(3-1) steps of S/3; reduce-scatter + all-gather inside a 4-GPU host: 2(4-1)/4 S
    assert (j["steps"], j["chunk_bytes"]) == (4, 400_000)
    assert j["intra_s"] == pytest.approx(1.5 * 1_200_000 * 8 / 1.2e9)
    flat = RefereeJob(7, ("r0h0", "r1h0", "r1h1"), (4, 4, 4), 1_200_000, 0.01, pattern="ring")
    assert (flat.steps, flat.chunk_bytes) == (22, 100_000)  # 12 ranks


def test_hash_ecmp_paths_follow_netlabs_rule():
    topo = load_topology("leafspine,racks=2,hosts_per_rack=2,gpus_per_host=1,host_gbps=0.2,oversub=1,spines=2,"
                         "ecmp=hash")
    spines = set()
    for jid in range(1, 9):
        job = RefereeJob(jid, ("r0h0", "r1h0"), (1, 1), 100_000, 0.01)
        paths = referee_input(RefereeScenario("e", topo, (job,)))["jobs"][0]["paths"]
        for n, (a, b) in enumerate(((0, 2), (2, 0))):
            # Topology's documented hash: CRC32 of "src|dst|key", key = job * 1024 + flow; paths in sorted order
            spine = f"spine{zlib.crc32(f'{a}|{b}|{jid * 1024 + n}'.encode()) % 2}"
            assert paths[n][2] == spine
            spines.add(spine)
    assert spines == {"spine0", "spine1"}


def test_split_ecmp_and_bad_jobs_are_refused(dumbbell):
    split = load_topology("leafspine,racks=2,hosts_per_rack=2,gpus_per_host=1,spines=2,ecmp=split")
    with pytest.raises(ScenarioError, match="ecmp=hash"):
        RefereeScenario("s", split, (RefereeJob(1, ("r0h0", "r1h0"), (1, 1), 1e5, 0.01),))
    with pytest.raises(ScenarioError, match="unknown host 'zz'"):
        RefereeScenario("s", dumbbell, (RefereeJob(1, ("l0", "zz"), (1, 1), 1e5, 0.01),))
    with pytest.raises(ScenarioError, match="has 1 GPUs, 2 placed"):
        RefereeScenario("s", dumbbell, (RefereeJob(1, ("l0", "r0"), (2, 1), 1e5, 0.01),))
    with pytest.raises(ScenarioError, match="'job_id' 1 used twice"):
        RefereeScenario("s", dumbbell, (RefereeJob(1, ("l0", "r0"), (1, 1), 1e5, 0.01),
                                        RefereeJob(1, ("l1", "r1"), (1, 1), 1e5, 0.01)))
    with pytest.raises(ScenarioError, match="transport: field 'name'"):
        Transport("bbr")


def test_output_reader(tmp_path):
    doc = dict(version=1, completed=True, sim_s=1.5,
               jobs=[dict(id=3, starts=[0.0, 0.1, 0.2]), dict(id=4, starts=[0.05])],
               stats=dict(drops=2, ecn_marks=0, rtos=1, link_packets=10, wall_s=0.3),
               drops_marks_by_link=[["a", "b", 2, 0]])
    path = tmp_path / "out.json"
    path.write_text(json.dumps(doc))
    r = read_output(path)
    assert set(r.starts) == {3, 4} and r.starts[3].tolist() == [0.0, 0.1, 0.2]
    assert (r.stats["drops"], r.stats["rtos"], r.sim_s, r.completed, r.wall_s) == (2, 1, 1.5, True, 0.3)
    path.write_text('{"jobs": []}')
    with pytest.raises(RefereeError, match="not a referee output"):
        read_output(path)


def test_alone_periods_and_the_steady_window():
    starts = {1: np.arange(7) * 0.1, 2: 0.3 + np.arange(7) * 0.2}
    assert alone_periods(RefereeResult(starts, {}, 1.0, True)) == pytest.approx({1: 0.1, 2: 0.2})
    # two jobs together: job 1 every 0.1 s from 0, job 2 every 0.05 s from 0.01 (jittered a little at first)
    s1 = np.arange(20) * 0.1
    s2 = 0.01 + np.arange(40) * 0.05
    s2[:3] += [0.0, 0.004, -0.003]
    got = steady_iter_s({1: s1, 2: s2}, {1: 0.05, 2: 0.02}, warmup=3)
    assert got == pytest.approx({1: 0.1, 2: 0.05})
    with pytest.raises(ValueError, match="fewer than warmup"):
        steady_iter_s({1: s1[:4]}, {1: 0.05}, warmup=3)


def test_comparison_arithmetic(dumbbell):
    sc = two_jobs(dumbbell)
    alone = alone_iter_s(sc)
    preds = pd.DataFrame([dict(model="m", job_id=1, iter_s=1.5 * alone[1], cpu_s=0.01),
                          dict(model="m", job_id=2, iter_s=3.0 * alone[2], cpu_s=0.01)])
    rows = compare_jobs(sc, {1: 0.16, 2: 0.9}, {1: 0.1, 2: 0.3}, preds).set_index("job_id")
    # job 1: the model's slowdown 1.5 on the referee's 0.1 s alone is 0.15 s against 0.16 s: -6.25%
    assert rows.loc[1, "pred_s"] == pytest.approx(0.15) and rows.loc[1, "signed"] == pytest.approx(-0.0625)
    assert rows.loc[1, "signed_raw"] == pytest.approx(1.5 * alone[1] / 0.16 - 1)
    # job 2: slowdown 3 on 0.3 s = 0.9 s, exact; the referee slows it 3x: heavy
    assert rows.loc[2, "ape"] == pytest.approx(0.0, abs=1e-12)
    assert rows.loc[2, "heavy"] and not rows.loc[1, "heavy"] and rows.loc[1, "contended"]
    summary = error_summary(rows.reset_index())["m"]
    assert summary["n_contended"] == 2 and summary["n_heavy"] == 1
    assert summary["median_ape"] == pytest.approx(0.03125) and summary["max_ape"] == pytest.approx(0.0625)
    assert summary["heavy_median_signed"] == pytest.approx(0.0, abs=1e-12)


def test_contention_is_a_shared_directed_link(dumbbell):
    jobs = (RefereeJob(1, ("l0", "r0"), (1, 1), 1e5, 0.01), RefereeJob(2, ("l1", "r1"), (1, 1), 1e5, 0.01))
    assert contended_jobs(RefereeScenario("c", dumbbell, jobs)) == {1: True, 2: True}
    topo = load_topology("leafspine,racks=2,hosts_per_rack=2,gpus_per_host=1,spines=1,ecmp=hash")
    inside = (RefereeJob(1, ("r0h0", "r0h1"), (1, 1), 1e5, 0.01), RefereeJob(2, ("r1h0", "r1h1"), (1, 1), 1e5, 0.01))
    assert contended_jobs(RefereeScenario("c", topo, inside)) == {1: False, 2: False}


def test_every_model_answers_and_agrees_alone(dumbbell):
    job = RefereeJob(1, ("l0", "r0"), (1, 1), 375_000, 0.02, iterations=10)
    sc = RefereeScenario("alone", dumbbell, (job,), jitter=0.0)
    p = predict_all(sc)
    assert {"ideal", "fair", "phase", "tcp", "tcp-alpha0", "tcp-fluid", "tcp-alpha0-fluid"} <= set(p.model)
    # alone, every model is netlab's alone rule (tcp to within its own 1.25% compute jitter)
    assert np.allclose(p.iter_s, alone_iter_s(sc)[1], rtol=0.01)


def test_families_are_deterministic_and_split_by_seed():
    a, b = generate("2tier", 5), generate("2tier", 5)
    assert scenario_doc(a) == scenario_doc(b) and a.key() == b.key()
    assert generate("2tier", 7).key() != a.key()
    assert generate("2tier", 5, Transport("dctcp")).key() != a.key()
    assert (half(0), half(1), half(6), half(7)) == ("calibration", "scoring", "calibration", "scoring")
    assert family_seeds("2tier", 3, "scoring") == [1, 3, 5]
    assert family_seeds("2tier", 3, "calibration") == [0, 2, 4]
    assert a.meta["half"] == "scoring" and generate("2tier", 4).meta["half"] == "calibration"


def test_extra_scoring_seed_draws_a_64_rank_job():
    """3tier's extra scoring seed is in the scoring half, draws the family's largest job (64 ranks) and comes after
    the first seeds; a family without extras scores its first seeds only."""
    from netlab.validate.families import EXTRA_SCORING_SEEDS, scoring_seeds

    assert scoring_seeds("3tier", 4) == [1, 3, 5, 7, 207] and scoring_seeds("2tier", 2) == [1, 3]
    for family, seeds in EXTRA_SCORING_SEEDS.items():
        for s in seeds:
            assert half(s) == "scoring"
    assert max(sum(j.gpus) for j in generate("3tier", 207).jobs) == FAMILIES["3tier"].ranks[1] == 64


@pytest.mark.parametrize("name", list(FAMILIES))
def test_family_scenarios_have_their_shape(name):
    fam = FAMILIES[name]
    sc = generate(name, 3)
    assert fam.jobs[0] <= len(sc.jobs) <= fam.jobs[1]
    assert sc.topology.ecmp == "hash" and sc.meta["oversub"] in fam.oversub
    tiers = set(sc.topology.link_tier)
    assert ("spine-core" in tiers) == (fam.tiers == 3)
    chunks = np.array([j.chunk_bytes for j in sc.jobs])
    assert np.all(chunks % 1448 == 0) and chunks.min() >= fam.min_chunk_packets * 1448
    assert chunks.max() / chunks.min() <= fam.grad_spread * 1.3
    assert all(fam.ranks[0] <= j.ranks <= fam.ranks[1] or j.ranks == len(j.hosts) for j in sc.jobs)
    assert all(j.pattern == fam.pattern and j.gpus[0] <= fam.gpus_per_host for j in sc.jobs)
    assert all(fam.overlap[0] <= j.overlap <= fam.overlap[1] for j in sc.jobs)
    # equal duration: the slowest job runs `iterations`, the others as long
    alone = alone_iter_s(sc)
    slowest = max(alone, key=alone.get)
    assert {j.job_id: j.iterations for j in sc.jobs}[slowest] == fam.iterations
    longest = alone[slowest] * fam.iterations
    assert all(j.iterations * alone[j.job_id] >= longest - 1e-9 for j in sc.jobs)
    assert max(alone.values()) / min(alone.values()) <= fam.period_spread * 1.01
    hosts = [h for j in sc.jobs for h in j.hosts]
    assert len(hosts) == len(set(hosts))  # one job per host


def test_scenario_files_round_trip_and_errors(dumbbell, tmp_path):
    sc = two_jobs(dumbbell, transport=Transport("dctcp", 100, 10))
    path = save_scenario(sc, tmp_path / "s.json")
    back = load_scenario(path)
    assert scenario_doc(back) == scenario_doc(sc) and back.key() == sc.key()
    doc = json.loads(path.read_text())
    doc["jobs"][1]["compute_s"] = -1
    path.write_text(json.dumps(doc))
    with pytest.raises(ScenarioError, match=r"s\.json: jobs\[1\]: field 'compute_s' must be >= 0"):
        load_scenario(path)
    doc["jobs"][1]["compute_s"] = 0.01
    doc["transport"]["name"] = "bbr"
    path.write_text(json.dumps(doc))
    with pytest.raises(ScenarioError, match="transport: field 'name'.*'reno'"):
        load_scenario(path)
    path.write_text("{\n  'not json'")
    with pytest.raises(ScenarioError, match="line 2: not valid JSON"):
        load_scenario(path)
    spec = {"name": "x", "topology": "dumbbell,hosts_per_side=1,ecmp=hash", "jobs": [
        {"job_id": 1, "hosts": ["l0", "r0"], "grad_bytes": 1e5, "compute_s": 0.01}]}
    path.write_text(json.dumps(spec))
    assert load_scenario(path).jobs[0].gpus == (1, 1)


def test_run_store_keeps_records_by_key(dumbbell, tmp_path):
    sc = two_jobs(dumbbell)
    store = RunStore(tmp_path)
    assert store.get(sc) is None
    from netlab.validate.runs import referee_source_hash

    rec = dict(version=1, key=sc.key(), referee_source=referee_source_hash(), ref_iter_s={"1": 0.2, "2": 0.3},
               ref_alone_s={"1": 0.1, "2": 0.2})
    store.put(sc, rec)
    assert record_times(store.get(sc)) == ({1: 0.2, 2: 0.3}, {1: 0.1, 2: 0.2})
    assert store.get(sc.with_transport(Transport("cubic"))) is None  # another scenario, another key
    store.put(sc, dict(rec, referee_source="0" * 16))
    assert store.get(sc) is None  # made by another referee source
    store.path(sc).write_text("{broken")
    assert store.get(sc) is None


def test_validate_command_refuses_bad_input(tmp_path):
    runner = CliRunner()
    result = runner.invoke(app, ["validate", "nofamily:3"])
    assert result.exit_code == 2 and "not a scenario file" in result.output
    result = runner.invoke(app, ["validate", "2tier:1", "--against", "omnet"])
    assert result.exit_code == 2 and "--against 'omnet'" in result.output
    result = runner.invoke(app, ["validate", "2tier:1", "--regime", "bbr"])
    assert result.exit_code == 2 and "--regime 'bbr'" in result.output


def test_ring_alone_crosses_the_bottleneck_once_each_way():
    from netlab.validate.sanity import ring_alone

    for n, hosts in ((4, ("a0", "a1", "b0", "b1")), (3, ("a0", "a1", "b0"))):
        sc = ring_alone(n)
        assert sc.jobs[0].hosts == hosts
        paths = referee_input(sc)["jobs"][0]["paths"]
        crossing = [(p[0][0], p[-1][0]) for p in paths if "tora" in p and "torb" in p]
        assert sorted(crossing) == [("a", "b"), ("b", "a")]  # one flow each way
    with pytest.raises(ValueError, match="at least 2"):
        ring_alone(1)


def test_the_testbeds_scenarios_as_referee_scenarios():
    from pathlib import Path

    from netlab.congestion.fidelity import scenarios_from_runs
    from netlab.validate.sanity import testbed_scenarios

    root = Path(__file__).resolve().parents[1]
    runs_path = root / "benchmarks" / "results" / "fidelity_runs.parquet"
    if not runs_path.exists():
        pytest.skip(f"{runs_path} not in this checkout")
    runs = pd.read_parquet(runs_path)
    topo = load_topology(root / "testbed" / "topologies" / "leafspine-2rack.yaml")
    scenarios, measured = testbed_scenarios(runs, topo, iterations=60, warmup=10)
    names = {name for name, _ in scenarios_from_runs(runs)}
    assert {sc.name for sc in scenarios} == names
    # the links ran at 200 Mbit/s (hosts) and 100 Mbit/s (rack uplinks, the fidelity scenarios' setting)
    assert sorted(set(scenarios[0].topology.link_capacity_gbps)) == [0.1, 0.2]
    for sc in scenarios:
        most = max(j.iterations for j in sc.jobs)
        assert most == 60 and sc.warmup == 10
    # the testbed's steady iteration per run and job, with contention from its own rule
    assert measured.iter_s.between(0.03, 0.5).all() and measured.contended.any() and not measured.contended.all()


def test_stale_referee_folders_of_dead_processes_are_swept(tmp_path, monkeypatch):
    import subprocess
    import sys

    from netlab.validate import referee

    monkeypatch.setattr(referee.tempfile, "gettempdir", lambda: str(tmp_path))
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True,
                          text=True, check=True)
    gone = tmp_path / f"netlab-referee-{int(dead.stdout)}-abc"
    alive = tmp_path / f"netlab-referee-{os.getppid()}-def"  # our parent: alive
    other = tmp_path / "netlab-referee-xyz"  # no process id in its name: not ours to judge
    for folder in (gone, alive, other):
        folder.mkdir()
        (folder / "scenario.json").write_text("{}")
    assert referee.sweep_stale_folders() == [gone]
    assert not gone.exists() and alive.exists() and other.exists()

