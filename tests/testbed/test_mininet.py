"""MininetTestbed: the netns contract on Mininet (LinuxBridge + TCLink), with exact teardown.

Cleanliness is checked against a snapshot taken first (other testbeds may be
up): this testbed's namespaces by name, its root-namespace bridges and veths
by the whole root link list, its routes by metric, its processes (Mininet
shells, sshd, spawned) by recorded pid + start time and by namespace inode.
"""

from __future__ import annotations

import errno
import logging
import os
import signal
import socket
import subprocess
import time
from pathlib import Path

import pytest

from netlab.testbed import TestbedError, make_testbed, ssh_connect
from netlab.testbed.ledger import Ledger, netns_inode, proc_start_time

from .backend_helpers import (DUMBBELL, assert_clean, check_bottleneck_shaping, check_byte_limited_queue,
                              check_exception_inside_with_cleans_up, check_guardian_cleans_up_after_sigkill,
                              check_sigterm_cleans_up, connect, needs_iperf3, recorded_procs, run, snapshot,
                              tb_inodes)
from .conftest import NETADMIN_REASON, needs_sshd, needs_torch

try:
    from netlab.testbed.mininet import MininetTestbed, mininet_missing
    MININET_REASON = mininet_missing()
except ImportError as exc:  # pragma: no cover - the module itself failed to import
    MININET_REASON = f"netlab.testbed.mininet not importable: {exc}"

pytestmark = [
    pytest.mark.skipif(MININET_REASON is not None, reason=f"mininet not usable here: {MININET_REASON}"),
    pytest.mark.skipif(NETADMIN_REASON is not None, reason=NETADMIN_REASON or ""),
]


@pytest.fixture(scope="module")
def tb4():
    """A 4-host dumbbell (host links 200 Mbit, bottleneck 100 Mbit) shared by the read-mostly tests."""
    with MininetTestbed(DUMBBELL) as tb:
        yield tb


# -- loading, registry -------------------------------------------------------------------------
def test_registered_and_lazy_name():
    import netlab.testbed as tbpkg

    tb = make_testbed("mininet", DUMBBELL)  # built, not up: creates nothing
    assert isinstance(tb, tbpkg.MininetTestbed) and tb.info()["backend"] == "mininet" and not tb.info()["up"]
    assert "mininet" in tbpkg.TESTBEDS.names()
    # Importing mininet must not leave its logger class installed for everyone else's loggers.
    assert type(logging.getLogger("netlab.test.after-mininet")).__name__ != "MininetLogger"


def test_missing_mininet_says_how_to_get_it(monkeypatch):
    import netlab.testbed.mininet as mod

    def no_mininet():
        raise ImportError("No module named 'mininet'")

    monkeypatch.setattr(mod, "_mn", None)
    monkeypatch.setattr(mod, "_import_mininet", no_mininet)
    with pytest.raises(TestbedError, match=r"apt-get install mininet.*pip install mininet==2\.3\.0\.dev6"):
        MininetTestbed(DUMBBELL)
    real_which = mod.shutil.which
    monkeypatch.setattr(mod.shutil, "which", lambda name: None if name == "mnexec" else real_which(name))
    with pytest.raises(TestbedError, match=r"missing programs: mnexec \(Debian package mininet\)"):
        MininetTestbed(DUMBBELL)


def test_switch_cycle_is_refused_before_anything_is_created():
    before = snapshot()
    with pytest.raises(TestbedError, match="cycle"):
        MininetTestbed("leafspine,racks=2,hosts_per_rack=1,spines=2")
    assert snapshot()["netns"] == before["netns"] and snapshot()["links"] == before["links"]


# -- lifecycle ---------------------------------------------------------------------------------
@needs_sshd
def test_up_down_leaves_nothing_behind():
    before = snapshot()
    handler_before = signal.getsignal(signal.SIGTERM)
    tb = MininetTestbed(DUMBBELL)
    tb.up()
    inodes = tb_inodes(tb)
    workdir = Path(tb.workdir)
    assert {f"nl{tb.tid}-h{i}" for i in range(1, 5)} | {f"nl{tb.tid}-mg"} <= snapshot()["netns"]
    bridges = {n for n in snapshot()["links"] if n.startswith(f"nl{tb.tid}")}
    assert {f"nl{tb.tid}s0", f"nl{tb.tid}s1", f"nl{tb.tid}m"} <= bridges  # Mininet's root-namespace bridges
    client = connect(tb, tb.hosts[0])  # an sshd per-connection child and a socket in the mgmt namespace
    sleeper = tb.spawn(tb.hosts[1], ["sleep", "60"])
    pids = recorded_procs(tb.info()["ledger"])
    shells = [r for r in Ledger.load(tb.info()["ledger"]).records if r.get("role") == "mnshell"]
    assert len(shells) == 4 + 1 + 3  # 4 hosts, the management node, 3 bridges
    assert all(proc_start_time(r["pid"]) == r["start"] for r in shells)
    assert signal.getsignal(signal.SIGTERM) is not handler_before
    tb.down()
    tb.down()  # idempotent
    client.close()
    assert signal.getsignal(signal.SIGTERM) is handler_before
    assert_clean(before, tb.tid, inodes, pids, root_links=True)
    assert not workdir.exists()
    assert sleeper.poll() is not None


@needs_sshd
def test_exception_inside_with_cleans_up():
    check_exception_inside_with_cleans_up(MininetTestbed(DUMBBELL), root_links=True)


def test_failed_bring_up_removes_what_was_created(monkeypatch):
    def broken(self):
        raise OSError("tc exploded (simulated)")

    monkeypatch.setattr(MininetTestbed, "_check_shaping", broken)
    before = snapshot()
    tb = MininetTestbed(DUMBBELL, ssh=False)
    with pytest.raises(TestbedError, match=r"bring-up failed at step 'shaping check': OSError: tc exploded"):
        tb.up()
    assert_clean(before, tb.tid, [], [], root_links=True)
    assert not Path(tb.workdir).exists()


@needs_sshd
def test_sigkilled_controller_is_cleaned_up_by_guardian():
    check_guardian_cleans_up_after_sigkill("mininet", timeout_s=15.0, root_links=True, guard_recorded=False)


@needs_sshd
def test_sigterm_runs_cleanup_then_the_default_action():
    check_sigterm_cleans_up("mininet", timeout_s=15.0, root_links=True, guard_recorded=False)


# -- isolation ---------------------------------------------------------------------------------
@needs_sshd
def test_root_namespace_cannot_reach_testbed_addresses(tb4):
    """Blackholes: a connect from the root namespace fails in the route lookup, no packet is built."""
    metric = f"metric {1000 + int(tb4.tid, 16)}"
    routes = run("ip", "-4", "route", "show", "table", "main").splitlines()
    for net in ("10.77.0.0/16", "10.78.0.0/16"):
        assert any(r.startswith(f"blackhole {net}") and metric in r for r in routes), routes
    got = subprocess.run(["ip", "route", "get", tb4.hosts[0].data_addr], capture_output=True, text=True)
    assert got.returncode != 0 and "Invalid argument" in got.stderr
    for h in tb4.hosts:
        for addr in (h.data_addr, h.ssh_addr, tb4.controller_addr):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.setblocking(False)
            t0 = time.monotonic()
            rc = s.connect_ex((addr, 22))
            s.close()
            assert rc in (errno.EINVAL, errno.ENETUNREACH, errno.EHOSTUNREACH), errno.errorcode.get(rc, rc)
            assert time.monotonic() - t0 < 0.05
    # Mininet's root-namespace bridges carry no address, so the root namespace has no route into them.
    bridges = [b for b in tb4.info()["bridges"].values()]
    addrs = run("ip", "-o", "-4", "addr")
    assert not any(f" {b} " in addrs for b in bridges)


# -- SSH ---------------------------------------------------------------------------------------
@needs_sshd
def test_ssh_via_management_namespace_with_verified_host_key(tb4):
    h = tb4.hosts[2]
    client = connect(tb4, h)
    try:
        _, out, _ = client.exec_command("echo $SSH_CONNECTION; ip -o -4 addr; readlink /proc/self/ns/net")
        text = out.read().decode()
    finally:
        client.close()
    # The connection came from the management node's address, which exists only in its namespace.
    assert text.split()[0] == tb4.controller_addr
    assert f"inet {h.data_addr}/16" in text and " eth0 " in text and f"inet {h.ssh_addr}/16" in text
    assert f"net:[{netns_inode(h.netns)}]" in text
    # open_socket's socket lives in the management namespace: the bind-mounted Mininet node's namespace.
    sock = tb4.open_socket(h)
    try:
        assert sock.getsockname()[0] == tb4.controller_addr
    finally:
        sock.close()
    mg = [r for r in Ledger.load(tb4.info()["ledger"]).records if r.get("node") == "mg"][0]
    assert os.readlink(f"/proc/{mg['pid']}/ns/net") == f"net:[{netns_inode(tb4.ns_mgmt)}]"


@needs_sshd
def test_unknown_or_wrong_host_key_is_refused(tb4, tmp_path):
    h = tb4.hosts[0]
    empty = tmp_path / "known_hosts"
    empty.write_text("")
    with pytest.raises(TestbedError) as err:
        ssh_connect(h.ssh_addr, 22, h.user, tb4.client_key, empty, sock=tb4.open_socket(h))
    assert h.ssh_addr in str(err.value) and str(empty) in str(err.value)
    other = tmp_path / "other_known_hosts"
    other.write_text(tb4.known_hosts.read_text().splitlines()[1].replace(tb4.hosts[1].ssh_addr, h.ssh_addr) + "\n")
    with pytest.raises(TestbedError, match="does not match"):
        ssh_connect(h.ssh_addr, 22, h.user, tb4.client_key, other, sock=tb4.open_socket(h))


# -- shaping -----------------------------------------------------------------------------------
@needs_iperf3
def test_bottleneck_shaping_and_set_link_rate(tb4):
    # Mininet's switch-side veths are in the root namespace
    assert not isinstance(tb4.link_rates().set_index(["src", "dst"]).loc[("swL", "swR"), "netns"], str)
    check_bottleneck_shaping(tb4)


@needs_iperf3
def test_byte_limited_queue_holds_its_limit_and_drops_under_overload():
    """``queue_bytes`` through Mininet: the same bfifo under each of Mininet's HTB classes (5:1)."""
    q = 15140
    before = snapshot()
    with MininetTestbed(DUMBBELL, ssh=False, queue_bytes=q) as tb:
        assert tb.info()["leaf_queue"] == ["bfifo", q]
        check_byte_limited_queue(tb, q)
        inodes = tb_inodes(tb)
    assert_clean(before, tb.tid, inodes, [], root_links=True)


def test_bad_set_link_rate_arguments(tb4):
    with pytest.raises(TestbedError, match=r"no directed link 'l0'->'r0'.*l0->swL"):
        tb4.set_link_rate("l0", "r0", 100)
    for bad in (0, -5, float("nan"), "100", None, True):
        with pytest.raises(TestbedError, match="rate_mbit must be a finite number > 0"):
            tb4.set_link_rate("swL", "swR", bad)
    with pytest.raises(TestbedError, match="argv must be a non-empty list"):
        tb4.spawn(tb4.hosts[0], "sleep 1")


# -- the controller, unchanged, on this backend ----------------------------------------------
@needs_sshd
@needs_torch
def test_controller_deploys_agents_and_runs_a_two_rank_gloo_job(tb4):
    from netlab.testbed.controller import Controller, TrainSpec

    with Controller(tb4, progress=False) as ctl:
        assert set(ctl.agents) == {h.name for h in tb4.hosts}
        samples = ctl.call_all("telemetry_sample")
        assert all({"eth0", "mgmt0"} <= set(s["links"]) for s in samples.values())
        ctl.start_job(TrainSpec(1, [("l0", 1), ("r0", 1)], grad_bytes=1_000_000, compute_ms=10, iterations=5))
        job = ctl.wait_job(1, timeout_s=90)
        assert job.ok and job.exits == {0: 0, 1: 0}
        df = ctl.job_log(1)
    assert sorted(df["rank"].unique()) == [0, 1] and len(df) == 10
    # 1 MB each way through the 100 Mbit bottleneck: about 84 ms at 0.955 x the rate, not sub-ms.
    assert df["allreduce_s"].iloc[2:].median() > 0.05, df


# -- timings ----------------------------------------------------------------------------------
@needs_sshd
def test_eight_host_bring_up_and_teardown_leave_nothing(capsys):
    """Eight Mininet hosts with sshd come up and go down cleanly; the times are bench_testbed's figure."""
    before = snapshot()
    tb = MininetTestbed("dumbbell,hosts_per_side=4")
    t0 = time.monotonic()
    tb.up()
    up_s = time.monotonic() - t0
    inodes = tb_inodes(tb)
    pids = recorded_procs(tb.info()["ledger"])
    t1 = time.monotonic()
    tb.down()
    down_s = time.monotonic() - t1
    with capsys.disabled():
        print(f"\nmininet, 8 hosts with sshd: up {up_s:.2f} s ({tb.timings}), down {down_s:.3f} s")
    assert_clean(before, tb.tid, inodes, pids, root_links=True)
