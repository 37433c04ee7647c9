"""The controller end to end on the namespace testbed: deploy over SSH, shape, run gloo jobs, clean up.

One 4-host dumbbell testbed (module scope) carries these tests; each test
leaves it as it found it (the agents restore their shaping).
"""

import json
import time
from pathlib import Path

import pytest

from .conftest import needs_netadmin, needs_sshd, needs_torch

pytestmark = [needs_netadmin, needs_sshd]

REPO = Path(__file__).resolve().parents[2]
DUMBBELL = REPO / "testbed" / "topologies" / "dumbbell.yaml"


@pytest.fixture(scope="module")
def testbed():
    from netlab.testbed import NetnsTestbed
    from netlab.topology import load_topology

    with NetnsTestbed(load_topology(DUMBBELL)) as tb:
        yield tb


@pytest.fixture(scope="module")
def ctl(testbed):
    from netlab.testbed.controller import Controller

    with Controller(testbed, progress=False) as c:
        yield c


def htb_rate_mbit(testbed, host):
    """The link rate on a host's data interface: the rate of the HTB class right under the root (the
    testbed's link class, or the one class the agent's own shaping makes), read from the kernel."""
    from pyroute2 import IPRoute

    with IPRoute(netns=host.netns) as ipr:
        idx = ipr.link_lookup(ifname=host.ifname)[0]
        for c in ipr.get_classes(index=idx):
            if c.get_attr("TCA_KIND") == "htb" and c["parent"] == 0xFFFFFFFF:
                opts = c.get_attr("TCA_OPTIONS")
                return opts.get_attr("TCA_HTB_PARMS")["rate"] * 8 / 1e6
    return None


def test_deploy_checks_version_and_every_host_answers(ctl, testbed):
    assert set(ctl.agents) == {h.name for h in testbed.hosts}
    for name, agent in ctl.agents.items():
        assert agent.hello["version"] == ctl.version
        assert agent.hello["host"] == name
        assert "htb" in agent.hello["capabilities"]["qdiscs"]
    assert ctl.deploy_s is not None and ctl.deploy_s < 60


def test_agents_run_inside_their_host_namespaces(ctl, testbed):
    # Each agent's telemetry sees its own eth0 and no other host's: it lives in that host's namespace.
    samples = ctl.call_all("telemetry_sample")
    for name, sample in samples.items():
        assert "eth0" in sample["links"], name
        assert "mgmt0" in sample["links"], name


def test_unknown_host_key_is_refused_by_default(testbed, tmp_path, monkeypatch):
    from netlab.testbed.base import TestbedError
    from netlab.testbed.controller import Controller

    empty = tmp_path / "known_hosts"
    empty.write_text("")
    monkeypatch.setattr(testbed, "known_hosts", empty)
    with pytest.raises(TestbedError, match="deployment failed") as err:
        Controller(testbed, progress=False).deploy(hosts=[testbed.hosts[0].name])
    assert "known_hosts" in str(err.value) or "host key" in str(err.value).lower()


def test_shape_and_clear_through_the_controller(ctl, testbed):
    host = testbed.hosts[0]
    before = htb_rate_mbit(testbed, host)
    assert before == pytest.approx(200, rel=0.01)  # 100 Gbit x 0.002
    ctl.shape(host.name, kind="htb", rate_mbit=30)
    assert htb_rate_mbit(testbed, host) == pytest.approx(30, rel=0.01)
    ctl.clear(host.name)
    assert htb_rate_mbit(testbed, host) == pytest.approx(before, rel=0.01)


def test_invalid_shaping_spec_is_refused_and_nothing_changes(ctl, testbed):
    from netlab.testbed.agent_client import AgentError

    host = testbed.hosts[1]
    before = htb_rate_mbit(testbed, host)
    with pytest.raises(AgentError) as err:
        ctl.shape(host.name, kind="htb", rate_mbit=-5)
    assert err.value.field == "rate_mbit"
    assert htb_rate_mbit(testbed, host) == before


def test_background_traffic_crosses_the_bottleneck_at_its_rate(ctl, testbed, tmp_path):
    stats = lambda: testbed.link_stats().set_index(["src", "dst"]).loc[("swL", "swR")]  # noqa: E731
    before = stats()
    ctl.start_telemetry(interval_ms=100, hosts=["l0"])
    t0 = time.monotonic()
    flow = ctl.start_traffic("l0", "r0", duration_s=1.5, rate_mbit=40)
    deadline = t0 + 10
    while time.monotonic() < deadline and not ctl.agent("l0").events_of("traffic_exit"):
        time.sleep(0.1)
    ctl.stop_traffic(flow)
    ctl.stop_telemetry(hosts=["l0"])
    sent_mbit = (stats().bytes - before.bytes) * 8 / 1e6
    # 40 Mbit/s for 1.5 s through the 100 Mbit bottleneck: 60 Mbit of payload, plus headers and handshake.
    assert 50 < sent_mbit < 75, sent_mbit
    assert any(e["flow_id"] == flow and e["returncode"] == 0 for e in ctl.agent("l0").events_of("traffic_exit"))
    # Telemetry and logs land in parquet files.
    out = ctl.save(tmp_path / "tb")
    import pandas as pd

    tel = pd.read_parquet(out / "telemetry.parquet")
    assert {"host", "seq", "t", "ifname", "tx_bytes"} <= set(tel.columns) and (tel.host == "l0").all()
    eth0 = tel[tel.ifname == "eth0"].sort_values("seq")
    assert eth0.tx_bytes.iloc[-1] - eth0.tx_bytes.iloc[0] > 5e6


@needs_torch
def test_two_jobs_sharing_the_bottleneck_slow_each_other(ctl, testbed):
    from netlab.testbed.scenarios import Scenario, ScenarioJob, run_scenario

    # All links 100 Mbit; both jobs cross swL-swR. A 2-rank ring sends the whole gradient each way.
    rates = {(a, b): 100 for a, b, _, _ in testbed.topology.cables}
    # 20 iterations (about 3.4 s shared) and 10 s for the ranks to start: on a loaded 2-core machine a rank's
    # import can outlast a short start delay, and 6 iterations then barely overlapped (the jobs ran one
    # after the other and looked unslowed).
    j1 = ScenarioJob(1, ("l0", "r0"), 1_000_000, 0.0, iterations=20)
    j2 = ScenarioJob(2, ("l1", "r1"), 1_000_000, 0.0, iterations=20)
    alone = run_scenario(ctl, Scenario("alone", (j1,), rates, warmup=1), start_delay_s=10)
    shared = run_scenario(ctl, Scenario("shared", (j1, j2), rates, warmup=1), start_delay_s=10)
    # The library says when jobs meant to share the link did not run together (it used to report their
    # uncontended iterations as shared); a slowdown is only measured when they did.
    assert alone.overlapped.all() and shared.overlapped.all(), shared
    t_alone = float(alone.iter_s.iloc[0])
    # 1 MB at 100 Mbit x 0.955 goodput is about 84 ms; measured facts: 82-93 Mbit algbw.
    assert 0.07 < t_alone < 0.15
    slow = shared.iter_s / t_alone
    assert (slow > 1.5).all(), shared
    assert (slow < 2.6).all(), shared
    # The shaped rates came back after the scenario.
    rates_now = testbed.link_rates().set_index(["src", "dst"]).rate_mbit
    assert rates_now[("swL", "swR")] == pytest.approx(100.0)  # 50 Gbit x 0.002


@needs_torch
def test_live_cluster_runs_a_three_job_trace_under_fifo_and_consolidated(ctl, testbed, tmp_path):
    from netlab.testbed.cluster import TestbedCluster
    from netlab.workload.job import Job

    jobs = [Job(1, 0.0, 2, "resnet50", 4), Job(2, 0.5, 2, "vgg16", 3), Job(3, 1.0, 3, "resnet18", 3)]
    cluster = TestbedCluster(ctl, ordering="fifo", placement="consolidated", time_scale=0.2)
    res = cluster.run(jobs, timeout_s=240)
    t = res.jobs.set_index("job_id")
    assert list(t.index) == [1, 2, 3]
    assert t.end_s.notna().all() and (t.jct_s > 0).all()
    assert (t.start_s >= t.submit_s).all()
    # Jobs 1 and 2 fill the 4 one-GPU hosts; job 3 (3 GPUs) waits for both under FIFO.
    assert t.loc[3, "start_s"] >= max(t.loc[1, "end_s"], t.loc[2, "end_s"]) - 1e-6
    # Consolidated placement keeps a 2-GPU job in one rack when it can: job 1 on one side.
    assert t.loc[1, "racks"] == 1
    assert res.summary["finished"] == 3 and res.summary["placement"] == "consolidated"
    out = res.save(tmp_path / "run")
    summary = json.loads((out / "summary.json").read_text())
    assert summary["jobs"] == 3 and summary["network"] == "testbed"


@needs_torch
def test_live_cluster_runs_the_predictive_placement_too(ctl):
    """The congestion model's placement policy plugs into the live cluster like any other."""
    from netlab.testbed.cluster import TestbedCluster
    from netlab.workload.job import Job

    jobs = [Job(1, 0.0, 2, "vgg16", 3), Job(2, 0.0, 2, "vgg16", 3)]
    res = TestbedCluster(ctl, ordering="fifo", placement="predictive", time_scale=0.2).run(jobs, timeout_s=240)
    assert res.summary["finished"] == 2 and res.summary["placement"] == "predictive"
    hosts = [set(p.split(",")) for p in res.jobs.placement]
    assert hosts[0].isdisjoint(hosts[1])  # one-GPU hosts: the two jobs cannot share one


def rank_pids(agent, job_id):
    return [r["pid"] for r in agent.call("status")["jobs"] if r.get("job_id") == job_id]


@needs_torch
def test_agent_cleans_up_when_its_ssh_connection_drops():
    """Cut the controller's TCP connection mid-job (as a killed controller would): shaping and ranks go."""
    import socket

    from netlab.testbed import NetnsTestbed
    from netlab.testbed.controller import Controller, TrainSpec
    from netlab.topology import load_topology

    with NetnsTestbed(load_topology(DUMBBELL)) as testbed:
        _cut_and_check(testbed, socket, Controller, TrainSpec)


def _cut_and_check(testbed, socket, Controller, TrainSpec):

    host = testbed.host("l0")
    before = htb_rate_mbit(testbed, host)
    c = Controller(testbed, progress=False).deploy(hosts=["l0", "r0"])
    c.shape("l0", kind="htb", rate_mbit=20)
    c.start_job(TrainSpec(99, [("l0", 1), ("r0", 1)], grad_bytes=100_000, compute_ms=50, iterations=100000))
    pids = {h: rank_pids(c.agent(h), 99) for h in ("l0", "r0")}
    assert all(pids.values()), pids
    agent_pids = {h: c.agent(h).hello["pid"] for h in ("l0", "r0")}
    assert htb_rate_mbit(testbed, host) == pytest.approx(20, rel=0.01)
    for h in ("l0", "r0"):  # no shutdown message: the TCP connection just goes away
        c.agent(h).ssh.get_transport().sock.shutdown(socket.SHUT_RDWR)
    deadline = time.monotonic() + 20
    gone = lambda pid: not Path(f"/proc/{pid}").exists()  # noqa: E731
    everything = [p for ps in pids.values() for p in ps] + list(agent_pids.values())
    while time.monotonic() < deadline and not all(gone(p) for p in everything):
        time.sleep(0.1)
    assert all(gone(p) for p in everything), {p: gone(p) for p in everything}
    assert htb_rate_mbit(testbed, host) == pytest.approx(before, rel=0.01)
    c.agents.clear()


@needs_torch
def test_scenario_raw_logs_keep_every_rank_and_iteration(ctl, testbed):
    from netlab.testbed.scenarios import Scenario, ScenarioJob, run_scenario_logs, split_logs, summarise_logs

    sc = Scenario("raw", (ScenarioJob(1, ("l0", "r0"), 200_000, 5.0, iterations=4),
                          ScenarioJob(2, ("l1", "r1"), 200_000, 5.0, iterations=3, offset_ms=10.0)), warmup=1)
    raw = run_scenario_logs(ctl, sc, start_delay_s=4)
    assert {"job_id", "testbed_job_id", "host", "rank", "iter", "compute_start", "allreduce_start", "allreduce_end",
            "start_at"} <= set(raw.columns)
    # every rank of every job, every iteration, under the scenario's own job ids
    assert sorted(map(tuple, raw[["job_id", "rank", "iter"]].drop_duplicates().to_numpy().tolist())) == \
        [(1, r, i) for r in (0, 1) for i in range(4)] + [(2, r, i) for r in (0, 1) for i in range(3)]
    assert raw.testbed_job_id.nunique() == 2 and raw.start_at.nunique() == 1
    # one clock: timestamps are ordered within an iteration and after the common start
    assert (raw.compute_start <= raw.allreduce_start).all() and (raw.allreduce_start <= raw.allreduce_end).all()
    assert (raw.compute_start >= raw.start_at.iloc[0] - 0.05).all()
    # 4 and 3 short iterations may or may not overlap on a busy machine; either way the summary says which.
    import warnings

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        summary = summarise_logs(sc, split_logs(raw))
    assert summary.job_id.tolist() == [1, 2] and summary.iter_s.notna().all()
    warned = any("not a shared measurement" in str(w.message) for w in caught)
    assert warned == (not summary.overlapped.all()), (summary, [str(w.message) for w in caught])


@needs_torch
def test_a_dead_agent_fails_its_jobs_at_once_with_the_reason():
    """SIGKILL the sshd session that carries one agent mid-job: wait_job fails within seconds, saying why."""
    import os
    import signal

    import psutil

    from netlab.testbed import NetnsTestbed, TestbedError
    from netlab.testbed.controller import Controller, TrainSpec
    from netlab.testbed.ledger import Ledger
    from netlab.topology import load_topology

    with NetnsTestbed(load_topology(DUMBBELL)) as testbed:
        c = Controller(testbed, progress=False).deploy(hosts=["l0", "r0"])
        try:
            c.start_job(TrainSpec(5, [("l0", 1), ("r0", 1)], grad_bytes=100_000, compute_ms=50, iterations=100000))
            assert all(rank_pids(c.agent(h), 5) for h in ("l0", "r0"))
            # The session: the parent of the agent whose pid the controller recorded (its hello), and a child of
            # the sshd listener the testbed's ledger recorded for r0. Exactly that process, by pidfd.
            host = testbed.host("r0")
            listener = [r["pid"] for r in Ledger.load(testbed.info()["ledger"]).records
                        if r.get("role") == "sshd" and r.get("netns") == host.netns]
            agent_pid = c.agent("r0").hello["pid"]
            session = psutil.Process(agent_pid).parent()
            assert session.ppid() in listener and session.name() == "sshd", (session, listener)
            fd = os.pidfd_open(session.pid)
            try:
                assert psutil.Process(session.pid).create_time() == session.create_time()  # not a reused pid
                signal.pidfd_send_signal(fd, signal.SIGKILL)
            finally:
                os.close(fd)
            t0 = time.monotonic()
            with pytest.raises(TestbedError) as err:
                c.wait_job(5, timeout_s=30)
            waited = time.monotonic() - t0
            msg = str(err.value)
            assert waited < 10, f"the controller took {waited:.1f} s to notice: {msg}"
            assert "job 5 failed" in msg and "r0" in msg and "channel closed" in msg, msg
            assert not c.jobs[5].ok and c.jobs[5].failure
            # The agent saw its stdin close and took its rank with it.
            gone = lambda pid: not Path(f"/proc/{pid}").exists()  # noqa: E731
            deadline = time.monotonic() + 20
            while time.monotonic() < deadline and not gone(agent_pid):
                time.sleep(0.1)
            assert gone(agent_pid)
        finally:
            c.close()
