"""Checks shared by the backend tests (netns and Mininet): machine snapshots, cleanliness, a controller child.

Every cleanliness check compares against a snapshot taken first (other
testbeds may be up); namespaces and routes are matched by the testbed's id and
metric, processes by recorded pid + start time and by namespace inode.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from netlab.testbed import ssh_connect
from netlab.testbed.ledger import Ledger, netns_inode, pids_in_netns, proc_start_time

REPO = Path(__file__).resolve().parents[2]
DUMBBELL = REPO / "testbed" / "topologies" / "dumbbell.yaml"
needs_iperf3 = pytest.mark.skipif(shutil.which("iperf3") is None, reason="needs iperf3 (apt-get install iperf3)")


def run(*argv: str) -> str:
    return subprocess.run(list(argv), capture_output=True, text=True, check=True).stdout


def snapshot() -> dict:
    return {
        "netns": {line.split()[0] for line in run("ip", "netns", "list").splitlines() if line.strip()},
        "links": {line.split(":")[1].strip().split("@")[0] for line in run("ip", "-o", "link").splitlines()},
        "routes": set(run("ip", "-4", "route", "show", "table", "all").splitlines()),
    }


def _others(tid: str, names) -> set:
    """What other testbeds (running in parallel, other ids) made meanwhile: not ours to judge."""
    return {n for n in names if re.match(r"nl[0-9a-f]{4}", n) and not n.startswith(f"nl{tid}")}


def assert_clean(before: dict, tid: str, inodes: list[int], pids: list[tuple[int, int]],
                 root_links: bool = False) -> None:
    """Nothing of testbed ``tid`` is left. ``root_links``: the backend also made root-namespace links
    (Mininet), so only ours must be gone and other testbeds' changes meanwhile are tolerated; otherwise
    the root link list and routing tables must be exactly as before."""
    after = snapshot()
    ours = {n for n in after["netns"] if n.startswith(f"nl{tid}-")}
    assert not ours, f"namespaces left behind: {ours}"
    if root_links:
        assert not {n for n in after["links"] if n.startswith(f"nl{tid}")}, "root bridges/veths left behind"
        changed = (after["links"] ^ before["links"]) - _others(tid, after["links"] ^ before["links"])
        assert not changed, f"root links changed: {changed}"
    else:
        assert after["links"] == before["links"], f"root links changed: {after['links'] ^ before['links']}"
    metric = f"metric {1000 + int(tid, 16)}"
    assert not [r for r in after["routes"] if metric in r], "blackhole routes left behind"
    # Another testbed brought up meanwhile (other work shares the machine) adds its own guard routes, with
    # its own metric; ours are checked just above.
    new = {r for r in after["routes"] - before["routes"]
           if not (r.startswith("blackhole 10.7") and re.search(r"metric \d+", r))}
    assert new == set(), f"new routes: {new}"
    # A destroyed namespace's inode number can be reused by a new namespace (other testbeds run in
    # parallel); a process holding one of *our* namespaces keeps its inode from being reused.
    reused = {netns_inode(n) for n in after["netns"] if not n.startswith(f"nl{tid}-")}
    left = {pid: ino for pid, ino in pids_in_netns(inodes).items() if ino not in reused}
    assert not left, f"processes still in testbed namespaces: {left}"
    for pid, start in pids:
        assert proc_start_time(pid) != start, f"recorded process {pid} still alive"


def tb_inodes(tb) -> list[int]:
    return [netns_inode(n) for n in tb.info()["namespaces"]]


def wait_until(pred, timeout_s: float, what: str):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = pred()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError(f"timed out after {timeout_s} s waiting for {what}")


def connect(tb, host):
    return ssh_connect(host.ssh_addr, host.ssh_port, host.user, tb.client_key, tb.known_hosts,
                       sock=tb.open_socket(host))


def iperf_mbit(tb, src, dst, duration_s=3) -> float:
    """TCP goodput src -> dst (iperf3, first second omitted for slow start)."""
    server = tb.spawn(dst, ["iperf3", "-s", "-1", "-B", dst.data_addr], stdout=subprocess.DEVNULL,
                      stderr=subprocess.DEVNULL)
    # Listening? (read the server's own view of its namespace's TCP table: port 5201 = 0x1451, state 0A)
    wait_until(lambda: ":1451 00000000:0000 0A" in Path(f"/proc/{server.pid}/net/tcp").read_text(), 5.0,
               "iperf3 to listen")
    client = tb.spawn(src, ["iperf3", "-c", dst.data_addr, "-t", str(duration_s), "-O", "1", "-J"],
                      stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    out, err = client.communicate(timeout=duration_s + 15)
    server.wait(timeout=5)
    assert client.returncode == 0, err
    return json.loads(out)["end"]["sum_received"]["bits_per_second"] / 1e6


# A controller in a child process: brings a testbed up (an SSH connection open, a spawned sleeper),
# prints what it made, then waits to be killed. argv: backend, topology, "guard" to list the guardian's
# pid among the recorded processes (it must be gone too) or "no-guard".
CHILD = textwrap.dedent("""
    import json, sys, time
    from netlab.testbed import make_testbed, ssh_connect
    from netlab.testbed.ledger import netns_inode, Ledger
    tb = make_testbed(sys.argv[1], sys.argv[2]).up()
    h = tb.hosts[0]
    client = ssh_connect(h.ssh_addr, h.ssh_port, h.user, tb.client_key, tb.known_hosts, sock=tb.open_socket(h))
    p = tb.spawn(tb.hosts[1], ["sleep", "60"])
    led = Ledger.load(tb.info()["ledger"])
    procs = [(r["pid"], r["start"]) for r in led.records
             if r["kind"] == "process" and (sys.argv[3] == "guard" or r.get("role") != "guard")]
    print(json.dumps({"tid": tb.tid, "inodes": [netns_inode(n) for n in tb.info()["namespaces"]],
                      "procs": procs, "workdir": str(tb.workdir), "ledger": tb.info()["ledger"],
                      "guard": [r["pid"] for r in led.records if r.get("role") == "guard"][0]}), flush=True)
    time.sleep(60)
""")


def start_child(backend: str, topology=DUMBBELL, guard_recorded: bool = True):
    env = dict(os.environ, PYTHONPATH=str(REPO))
    proc = subprocess.Popen([sys.executable, "-c", CHILD, backend, str(topology),
                             "guard" if guard_recorded else "no-guard"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    line = proc.stdout.readline()
    if not line:
        proc.kill()
        pytest.fail(f"child failed to bring up a testbed: {proc.stderr.read()[-2000:]}")
    return proc, json.loads(line)


def clean_now(before, state, root_links: bool = False) -> str:
    """'' when clean, else what is still there."""
    try:
        assert_clean(before, state["tid"], state["inodes"], [tuple(p) for p in state["procs"]], root_links)
    except AssertionError as exc:
        return str(exc)
    return f"workdir {state['workdir']} still exists" if Path(state["workdir"]).exists() else ""


def recorded_procs(ledger_path) -> list[tuple[int, int]]:
    """(pid, start time) of every process a testbed's ledger recorded, its guardian left out."""
    return [(r["pid"], r["start"]) for r in Ledger.load(ledger_path).records
            if r["kind"] == "process" and r.get("role") != "guard"]


def check_exception_inside_with_cleans_up(tb, root_links: bool = False) -> None:
    """An exception raised inside ``with tb:`` (a process spawned meanwhile) still takes everything down."""
    before = snapshot()
    with pytest.raises(RuntimeError, match="boom"):
        with tb:
            inodes = tb_inodes(tb)
            tb.spawn(tb.hosts[2], ["sleep", "60"])
            pids = recorded_procs(tb.info()["ledger"])
            assert len(pids) >= 1
            raise RuntimeError("boom")
    assert_clean(before, tb.tid, inodes, pids, root_links)


def check_guardian_cleans_up_after_sigkill(backend: str, timeout_s: float, root_links: bool = False,
                                           guard_recorded: bool = True) -> dict:
    """A controller child brings a ``backend`` testbed up and is SIGKILLed: its guardian removes everything
    the child recorded within ``timeout_s``, then exits. Returns the child's state (what it had made)."""
    before = snapshot()
    proc, state = start_child(backend, guard_recorded=guard_recorded)
    made = snapshot()
    assert f"nl{state['tid']}-h1" in made["netns"]
    if root_links:  # the backend's own links in the root namespace (Mininet's bridges) are there too
        assert any(n.startswith(f"nl{state['tid']}") for n in made["links"]), made["links"]
    proc.kill()
    proc.wait()
    deadline, why = time.monotonic() + timeout_s, "?"
    while time.monotonic() < deadline and (why := clean_now(before, state, root_links)):
        time.sleep(0.05)
    log = Path(state["workdir"], "guard.log")
    assert not why, f"guardian did not clean up: {why}; guard.log: {log.read_text() if log.exists() else '-'}"
    wait_until(lambda: proc_start_time(state["guard"]) is None, 5.0, "the guardian to exit")
    return state


def check_sigterm_cleans_up(backend: str, timeout_s: float, root_links: bool = False,
                            guard_recorded: bool = True) -> None:
    """A controller child is sent SIGTERM: its handler removes everything, then the default action ends it."""
    before = snapshot()
    proc, state = start_child(backend, guard_recorded=guard_recorded)
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=timeout_s) == -signal.SIGTERM
    assert clean_now(before, state, root_links) == "", "SIGTERM handler did not clean up"


def qdisc_lines(netns, ifname: str) -> list[str]:
    """``tc -s qdisc show dev ifname`` in a namespace (None: the root namespace), as the kernel reports it."""
    argv = ["tc", "-s", "qdisc", "show", "dev", ifname]
    return run(*(["ip", "netns", "exec", netns, *argv] if isinstance(netns, str) else argv)).splitlines()


def check_byte_limited_queue(tb, queue_bytes: int, overload_mbit: float = 150.0, duration_s: float = 3.0) -> dict:
    """The dumbbell ``tb`` was brought up with ``queue_bytes``: every shaped link has a bfifo of that limit
    under its HTB class, and UDP at ``overload_mbit`` over the 100 Mbit bottleneck (l0 -> r0) keeps that
    queue full (backlog sampled by ``link_stats``, never above the limit) and drops what does not fit.

    The default queue (a pfifo of 100 packets, up to ~150 kB) or a bfifo without its limit (the
    kernel's default: txqueuelen x MTU = 1.5 MB) would let the backlog grow far past a 15 kB limit."""
    htb_class = tb.htb_class
    for link in tb.link_rates().itertuples():
        lines = qdisc_lines(link.netns, link.ifname)
        want = f"qdisc bfifo 10: parent {htb_class} limit {queue_bytes}b"
        assert any(line.strip().startswith(want) for line in lines), (link.src, link.dst, lines)
    l0, r0 = tb.host("l0"), tb.host("r0")
    before = tb.link_stats().set_index(["src", "dst"]).loc[("swL", "swR")]
    server = tb.spawn(r0, ["iperf3", "-s", "-1", "-B", r0.data_addr], stdout=subprocess.DEVNULL,
                      stderr=subprocess.DEVNULL)
    wait_until(lambda: ":1451 00000000:0000 0A" in Path(f"/proc/{server.pid}/net/tcp").read_text(), 5.0,
               "iperf3 to listen")
    client = tb.spawn(l0, ["iperf3", "-c", r0.data_addr, "-u", "-b", f"{overload_mbit:g}M", "-l", "1400",
                           "-t", str(duration_s), "-J"], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    backlog = []
    try:
        t_end = time.monotonic() + duration_s + 15
        while client.poll() is None and time.monotonic() < t_end:
            backlog.append(int(tb.link_stats().set_index(["src", "dst"]).loc[("swL", "swR"), "backlog"]))
            time.sleep(0.05)
        out, err = client.communicate(timeout=15)
    finally:
        for p in (client, server):
            if p.poll() is None:
                p.kill()
            p.wait(timeout=5)
    assert client.returncode == 0, err
    after = tb.link_stats().set_index(["src", "dst"]).loc[("swL", "swR")]
    got = dict(backlog=backlog, drops=int(after.drops - before.drops), packets=int(after.packets - before.packets),
               lost_percent=float(json.loads(out)["end"]["sum"]["lost_percent"]))  # as the receiver counted
    assert len(got["backlog"]) >= 10, got  # sampled all along the overload
    assert max(got["backlog"]) <= queue_bytes  # never above the limit (a pfifo of 100 packets reaches ~150 kB)
    assert max(got["backlog"]) >= queue_bytes - 2 * 1514  # the queue did fill up to about its limit
    # 150 Mbit offered, 100 Mbit leaves: about a third of the packets are refused at the bottleneck.
    assert 0.15 < got["drops"] / (got["drops"] + got["packets"]) < 0.5, got
    return got


def check_bottleneck_shaping(tb) -> None:
    """The dumbbell ``tb`` shapes its bottleneck (swL -> swR, 100 Mbit) and its host links (200 Mbit): TCP
    from l0 to r0 reaches the bottleneck's rate through its HTB class, and ``set_link_rate`` moves that rate
    (the links are put back as they were, whatever happens)."""
    rates = tb.link_rates().set_index(["src", "dst"])
    assert rates.loc[("swL", "swR"), "rate_mbit"] == pytest.approx(100.0)
    assert rates.loc[("l0", "swL"), "rate_mbit"] == pytest.approx(200.0)
    l0, r0 = tb.host("l0"), tb.host("r0")
    stats0 = tb.link_stats().set_index(["src", "dst"])
    got = iperf_mbit(tb, l0, r0)
    assert got == pytest.approx(100 * 0.955, rel=0.10)
    stats1 = tb.link_stats().set_index(["src", "dst"])
    sent = stats1["bytes"] - stats0["bytes"]
    assert sent[("swL", "swR")] > 30e6 / 8  # the bottleneck's HTB class carried the transfer ...
    assert sent[("swR", "swL")] < sent[("swL", "swR")] / 10  # ... in that direction (the reverse: ACKs)
    assert stats1.loc[("swL", "swR"), "overlimits"] > stats0.loc[("swL", "swR"), "overlimits"]
    try:
        for u, v in (("l0", "swL"), ("swR", "r0")):
            tb.set_link_rate(u, v, 1000)  # take the host links out of the way
        tb.set_link_rate("swL", "swR", 200)
        assert tb.link_rates().set_index(["src", "dst"]).loc[("swL", "swR"), "rate_mbit"] == 200
        got2 = iperf_mbit(tb, l0, r0)
    finally:
        tb.set_link_rate("swL", "swR", 100)
        for u, v in (("l0", "swL"), ("swR", "r0")):
            tb.set_link_rate(u, v, 200)
    assert got2 == pytest.approx(200 * 0.955, rel=0.10)
