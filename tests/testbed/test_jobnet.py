"""Per-job network allocations on live namespace testbeds (root): applied, read back through pyroute2,
changed in place, removed exactly (also after SIGKILL), every byte of a job in its own class, and the routed
variant: multipath, path choice, nothing leaves the machine.

Traffic comes from the agent's own generator (``python -m netlab_agent.traffic``) run straight in the host
namespaces, and from gloo ranks through the controller. Rates are asserted only where the kernel enforces a
hard bound (a cap) or the margin is large (strict priority), so a busy machine does not fail them.
"""

from __future__ import annotations

import errno
import json
import os
import re
import signal
import socket
import subprocess
import sys
import textwrap
import time

import pytest

from netlab.sched import NetAllocation
from netlab.testbed import Ledger, TestbedError, make_testbed, shaping
from netlab.testbed.ledger import proc_start_time
from netlab.testbed.plan import LeafClass, U32Filter

from .backend_helpers import DUMBBELL, REPO, assert_clean, run, snapshot, tb_inodes, wait_until
from .conftest import needs_netadmin, needs_sshd, needs_torch

pytestmark = [needs_netadmin]

LEAFSPINE2 = "leafspine,racks=2,hosts_per_rack=2,spines=2,gpus_per_host=1,oversub=2"
Q = 1 << 16  # QUANTUM_BYTES: the testbeds here keep the kernel's GSO limit
AGENT_ENV = dict(os.environ, PYTHONPATH=os.pathsep.join([str(REPO / "agent"), str(REPO)]))


def _read(tb, src, dst):
    """(leaves, filters) on the interface that shapes src -> dst, read from the kernel."""
    from pyroute2 import IPRoute

    link = tb.plan.link(src, dst)
    with IPRoute(netns=link.netns, flags=0) as ipr:
        idx = ipr.link_lookup(ifname=link.ifname)[0]
        return shaping.read_leaves(ipr, idx, tb.plan.htb), shaping.read_filters(ipr, idx, tb.plan.htb)


def _labels(tb, host):
    """Labelled IPv4 addresses on a host's eth0 (its job addresses): address/len -> label."""
    out = {}
    for ln in run("ip", "-n", tb.host(host).netns, "-4", "-o", "addr", "show", "dev", "eth0").splitlines():
        m = re.search(r"inet (\S+) .*?\b(eth0:[A-Za-z0-9_.-]+)", ln)  # -o: "... scope global eth0:j1\ valid_lft"
        if m:
            out[m.group(1)] = m.group(2)
    return out


def flows(tb, pairs, duration_s=2.0, port0=5600):
    """Run the agent's traffic generator: a sink and a source per ``(src, dst, dst_addr, rate_mbit)``; returns
    the payload bytes each source sent."""
    sinks, sources = [], []
    for k, (src, dst, addr, rate) in enumerate(pairs):
        sinks.append(tb.spawn(tb.host(dst), [sys.executable, "-m", "netlab_agent.traffic", "--role", "sink",
                                             "--addr", addr, "--port", str(port0 + k), "--duration-s",
                                             str(duration_s + 4)], env=AGENT_ENV, stdout=subprocess.PIPE))
    for k, (src, dst, addr, rate) in enumerate(pairs):
        argv = [sys.executable, "-m", "netlab_agent.traffic", "--role", "source", "--addr", addr, "--port",
                str(port0 + k), "--duration-s", str(duration_s)] + (["--rate-mbit", str(rate)] if rate else [])
        sources.append(tb.spawn(tb.host(src), argv, env=AGENT_ENV, stdout=subprocess.PIPE, stderr=subprocess.PIPE))
    sent = []
    for p in sources:
        out, err = p.communicate(timeout=duration_s + 30)
        assert p.returncode == 0, err
        sent.append(json.loads(out)["bytes"])
    for p in sinks:
        p.communicate(timeout=duration_s + 30)
    return sent


def _class_bytes(tb, job, src, dst):
    s = tb.job_stats()
    row = s[(s.src == src) & (s.dst == dst) & (s.job == job)] if job is not None else \
        s[(s.src == src) & (s.dst == dst) & s.job.isna()]
    return int(row.bytes.iloc[0]) if len(row) else 0


# -- apply, read back, change, remove -----------------------------------------------------------------
def test_allocations_apply_read_back_change_in_place_and_release():
    before = snapshot()
    tb = make_testbed("netns", DUMBBELL, ssh=False)
    with tb:
        assert tb.allocation_mismatches() == []  # every link's default leaf, as the empty plan has it
        n7 = tb.allocate(7, ["l0", "r0"], NetAllocation(priority=1, weight=2.0))
        n9 = tb.allocate(9, ["l1", "r1"], NetAllocation(weight=0.5, rate_cap_gbps=12.5))
        assert (n7.slot, n7.label, n7.addresses) == (1, "eth0:j1", {"l0": "10.77.1.1", "r0": "10.77.3.1"})
        assert (n9.label, n9.addresses) == ("eth0:j2", {"l1": "10.77.2.2", "r1": "10.77.4.2"})
        assert tb.allocation_mismatches() == []
        # The kernel's bottleneck tree, by hand: weights 2, 0.5 and the default's 1 -> quanta Q * w / 0.5
        leaves, filters = _read(tb, "swL", "swR")
        assert {k: v[0] for k, v in leaves.items()} == {
            "1:10": LeafClass("1:10", 0, 2 * Q, 0.008, 100.0, "10:"),
            "1:101": LeafClass("1:101", 1, 4 * Q, 0.008, 100.0, "101:"),
            "1:102": LeafClass("1:102", 0, Q, 0.008, 100.0, "102:")}
        assert {v[1].kind for v in leaves.values()} == {"pfifo"}
        assert filters == {0x101: frozenset(U32Filter("1:101", o, a) for o in (12, 16)
                                            for a in ("10.77.1.1", "10.77.3.1")),
                           0x102: frozenset(U32Filter("1:102", o, a) for o in (12, 16)
                                            for a in ("10.77.2.2", "10.77.4.2"))}
        assert _read(tb, "l1", "swL")[0]["1:102"][0].ceil_mbit == 25.0  # the cap where job 9's flows enter
        assert _labels(tb, "l0") == {"10.77.1.1/32": "eth0:j1"}
        assert re.search(r"^10\.77\.3\.1 dev eth0 .*scope link src 10\.77\.1\.1 *$",
                         run("ip", "-n", tb.host("l0").netns, "route"), re.M)
        # the same allocation again writes nothing
        tb.allocate(9, ["l1", "r1"], NetAllocation(weight=0.5, rate_cap_gbps=12.5))
        assert tb.allocation_writes == 0
        # changed in place: job 9 to class 2, weight 1, no cap; its slot and addresses stay
        assert tb.allocate(9, ["l1", "r1"], NetAllocation(priority=2)) == n9
        assert tb.allocation_writes > 0 and tb.allocation_mismatches() == []
        leaves = _read(tb, "swL", "swR")[0]
        assert (leaves["1:102"][0].prio, leaves["1:102"][0].quantum, leaves["1:10"][0].quantum) == (2, Q, Q)
        assert _read(tb, "l1", "swL")[0]["1:102"][0].ceil_mbit == 200.0
        # a link's new rate carries into its leaves' ceilings
        tb.set_link_rate("swL", "swR", 40)
        assert {v[0].ceil_mbit for v in _read(tb, "swL", "swR")[0].values()} == {40.0}
        assert tb.allocation_mismatches() == []
        # a refused allocation changes nothing
        with pytest.raises(TestbedError, match="unknown hosts"):
            tb.allocate(11, ["l0", "nowhere"], NetAllocation())
        assert set(tb.allocations()) == {7, 9} and tb.allocation_mismatches() == []
        ledger = Ledger.load(tb.info()["ledger"])
        assert sorted(r["job"] for r in ledger.records if r["kind"] == "jobnet") == [7, 9]
        tb.release(7)
        tb.release(7)  # twice: nothing more to do
        leaves, filters = _read(tb, "swL", "swR")
        assert set(leaves) == {"1:10", "1:102"} and set(filters) == {0x102}
        assert set(_read(tb, "l0", "swL")[0]) == {"1:10"} and _labels(tb, "l0") == {}
        assert "10.77.3.1" not in run("ip", "-n", tb.host("l0").netns, "route")
        assert tb.allocation_mismatches() == []
        assert [r["job"] for r in Ledger.load(tb.info()["ledger"]).records if r["kind"] == "jobnet"] == [9]
        inodes = tb_inodes(tb)
    assert_clean(before, tb.tid, inodes, [])


def test_two_jobs_between_the_same_two_hosts_keep_every_byte_apart():
    """Two allocations on one host pair (l0 -> r0), two flows of the agent's generator at 20 and 40 Mbit:
    each job's classes carry its own flow and nothing of the other's, on every link of the path, and the
    default class sees no more than a few stray frames (ARP, neighbour discovery)."""
    tb = make_testbed("netns", DUMBBELL, ssh=False)
    with tb:
        a = tb.allocate(1, ["l0", "r0"], NetAllocation())
        b = tb.allocate(2, ["l0", "r0"], NetAllocation())
        default0 = {l: _class_bytes(tb, None, *l) for l in (("l0", "swL"), ("swL", "swR"), ("swR", "r0"))}
        sent = flows(tb, [("l0", "r0", a.addresses["r0"], 20), ("l0", "r0", b.addresses["r0"], 40)])
        for job, payload in ((1, sent[0]), (2, sent[1])):
            per_link = [_class_bytes(tb, job, *l) for l in default0]
            # headers (1.047 x) and the handshake on top of the payload; the same bytes on every link
            assert payload < per_link[0] < 1.08 * payload, (job, payload, per_link)
            assert max(per_link) - min(per_link) <= 0.001 * per_link[0], per_link
        assert 1.5 < sent[1] / sent[0] < 2.5  # the two flows were the two rates: not swapped or merged
        # the default class carries the links' control frames: ARP for the job addresses, and the IPv6 router
        # and neighbour solicitations and MLD reports of links just brought up (under 100 bytes each)
        stray = {l: _class_bytes(tb, None, *l) - b0 for l, b0 in default0.items()}
        assert all(v < 6000 for v in stray.values()), stray


def test_strict_priority_then_a_cap_changed_in_place():
    """Two unpaced flows over the 100 Mbit bottleneck: the class-0 flow takes nearly all of it; then the same
    job, changed in place to a 25 Mbit cap, stays under its cap while the other takes the rest."""
    tb = make_testbed("netns", DUMBBELL, ssh=False)
    with tb:
        hi = tb.allocate(1, ["l0", "r0"], NetAllocation(priority=0))
        lo = tb.allocate(2, ["l1", "r1"], NetAllocation(priority=1))
        pairs = [("l0", "r0", hi.addresses["r0"], None), ("l1", "r1", lo.addresses["r1"], None)]
        b0 = [_class_bytes(tb, j, "swL", "swR") for j in (1, 2)]
        flows(tb, pairs, duration_s=3.0)
        got = [_class_bytes(tb, j, "swL", "swR") - b for j, b in zip((1, 2), b0)]
        assert got[0] > 5 * got[1], got
        tb.allocate(1, ["l0", "r0"], NetAllocation(rate_cap_gbps=12.5))  # 25 Mbit at rate_scale 0.002
        tb.allocate(2, ["l1", "r1"], NetAllocation())
        assert tb.allocation_mismatches() == []
        b0 = [_class_bytes(tb, j, "swL", "swR") for j in (1, 2)]
        t0 = time.monotonic()
        flows(tb, pairs, duration_s=3.0, port0=5700)
        elapsed = time.monotonic() - t0
        got = [_class_bytes(tb, j, "swL", "swR") - b for j, b in zip((1, 2), b0)]
        assert got[0] * 8 / 1e6 < 25 * elapsed, (got, elapsed)  # never above the cap (HTB's ceiling is exact)
        assert got[1] > 2 * got[0], got


@needs_sshd
@needs_torch
def test_a_gloo_jobs_bytes_all_go_through_its_class_and_it_is_released_at_its_end():
    from netlab.testbed.controller import Controller, TrainSpec

    before = snapshot()
    with make_testbed("netns", DUMBBELL) as tb, Controller(tb, progress=False) as ctl:
        default0 = {l.link: _class_bytes(tb, None, l.src, l.dst) for l in tb.plan.links}
        spec = TrainSpec(ctl.new_job_id(), [("l0", 1), ("r0", 1)], grad_bytes=500_000, compute_ms=20,
                         iterations=30, backend="gloo", allocation=NetAllocation(weight=3.0))
        job = ctl.start_job(spec)
        assert job.net is not None and job.net.label == "eth0:j1"
        ctl.set_allocation(spec.job_id, NetAllocation(priority=3))  # in place, while its ranks start
        assert tb.allocation_mismatches() == []
        assert {v[0].prio for k, v in _read(tb, "swL", "swR")[0].items() if k != "1:10"} == {3}
        ctl.wait_job(spec.job_id, timeout_s=240)
        assert tb.allocations() == {} and tb.allocation_mismatches() == []  # released when its last rank exited
        stats = job.net_stats.set_index(["src", "dst"])
        # 30 all-reduces of 500 kB: each rank sends the gradient once per iteration, plus gloo's rendezvous
        # and headers; every link of the path saw them in the job's class
        for link in (("l0", "swL"), ("swL", "swR"), ("swR", "r0"), ("r0", "swR"), ("swR", "swL"), ("swL", "l0")):
            assert 30 * 500_000 < stats.loc[link, "bytes"] < 30 * 500_000 * 1.2, (link, stats.loc[link, "bytes"])
        stray = {l.link: _class_bytes(tb, None, l.src, l.dst) - default0[l.link] for l in tb.plan.links}
        assert all(v < 5000 for v in stray.values()), stray  # the job's packets never took the default class
        inodes = tb_inodes(tb)
    assert_clean(before, tb.tid, inodes, [])


# -- the routed variant ----------------------------------------------------------------------------------
CONNECT = textwrap.dedent("""
    import socket, sys
    n, addr = int(sys.argv[1]), sys.argv[2]
    socks = [socket.create_connection((addr, int(sys.argv[3])), timeout=5) for _ in range(n)]
    for s in socks:
        s.sendall(b"x" * int(sys.argv[4]))
    for s in socks:
        s.close()
""")
SINK = textwrap.dedent("""
    import socket, sys, selectors
    srv = socket.create_server((sys.argv[1], int(sys.argv[2])))
    print("listening", flush=True)
    srv.settimeout(20)
    conns, got = [], 0
    for _ in range(int(sys.argv[3])):
        c, _ = srv.accept()
        conns.append(c)
    for c in conns:
        while (d := c.recv(65536)):
            got += len(d)
    print(got, flush=True)
""")


def _send(tb, src, dst, addr, n, nbytes, port):
    sink = tb.spawn(tb.host(dst), [sys.executable, "-c", SINK, addr, str(port), str(n)], stdout=subprocess.PIPE,
                    text=True)
    assert sink.stdout.readline().strip() == "listening"
    src_p = tb.spawn(tb.host(src), [sys.executable, "-c", CONNECT, str(n), addr, str(port), str(nbytes)],
                     stderr=subprocess.PIPE, text=True)
    _, err = src_p.communicate(timeout=60)
    assert src_p.returncode == 0, err
    out, _ = sink.communicate(timeout=60)
    assert int(out.strip()) == n * nbytes


def test_routed_testbed_routes_every_pair_and_hashes_flows_over_both_spines():
    before = snapshot()
    tb = make_testbed("routed", LEAFSPINE2, ssh=False)
    with tb:
        assert tb.info()["backend"] == "routed" and [r["switch"] for r in tb.info()["routers"]] == \
            ["spine0", "spine1", "tor0", "tor1"]
        for r in tb.plan.namespaces.routers:
            out = run("ip", "netns", "exec", r, "sysctl", "-n", "net.ipv4.ip_forward",
                      "net.ipv4.fib_multipath_hash_policy")
            assert out.split() == ["1", "1"], (r, out)
        assert "nexthop via 10.77.255.1 dev x2a weight 1 onlink" in run("ip", "-n", tb.plan.namespaces.routers[2],
                                                                       "route")
        for k, (a, b) in enumerate((("r0h0", "r1h1"), ("r1h1", "r0h0"), ("r0h0", "r0h1"), ("r1h0", "r0h1"))):
            _send(tb, a, b, tb.host(b).data_addr, 1, 1000, 6000 + k)
        up = lambda: {s: _class_bytes(tb, None, "tor0", s) for s in ("spine0", "spine1")}  # noqa: E731
        b0 = up()
        _send(tb, "r0h0", "r1h0", tb.host("r1h0").data_addr, 16, 200_000, 6100)  # 16 flows, L4-hashed
        grew = {s: v - b0[s] for s, v in up().items()}
        assert min(grew.values()) > 200_000, grew  # both spines carried whole flows (all on one: p = 2^-15)
        assert sum(grew.values()) > 16 * 200_000
        inodes = tb_inodes(tb)
    assert_clean(before, tb.tid, inodes, [])


def test_path_choice_pins_a_jobs_flows_and_moves_them_in_place():
    tb = make_testbed("routed", LEAFSPINE2, ssh=False)
    with tb:
        net = tb.allocate(1, ["r0h0", "r1h0"], NetAllocation(paths=(1,)))
        assert tb.allocation_mismatches() == []
        rules = run("ip", "-n", tb.plan.namespaces.routers[2], "rule")
        assert "10001:\tfrom 10.77.1.1 to 10.77.3.1 lookup 1003" in rules
        spine = lambda s: _class_bytes(tb, 1, "tor0", s)  # noqa: E731
        for moved_to, paths, port in (("spine1", (1,), 6200), ("spine0", (0,), 6300)):
            if paths != (1,):
                assert tb.allocate(1, ["r0h0", "r1h0"], NetAllocation(paths=paths)) == net
                assert tb.allocation_mismatches() == []
            b0 = {s: spine(s) for s in ("spine0", "spine1")}
            _send(tb, "r0h0", "r1h0", net.addresses["r1h0"], 8, 250_000, port)  # 8 flows: none may stray
            grew = {s: spine(s) - b0[s] for s in b0}
            other = "spine0" if moved_to == "spine1" else "spine1"
            assert grew[moved_to] > 8 * 250_000 and grew[other] == 0, grew


def test_routed_traffic_never_leaves_the_machine():
    """Host, router and job addresses are all inside the blackholed data subnet: from the root namespace a
    connection fails at the route lookup. The routers have no interface but their loopback and veths to
    the testbed's own namespaces, and no route out."""
    tb = make_testbed("routed", LEAFSPINE2, ssh=False)
    with tb:
        net = tb.allocate(1, ["r0h0", "r1h0"], NetAllocation())
        addrs = [h.data_addr for h in tb.hosts] + [a for _, _, a in tb.plan.routed.routers] + \
            list(net.addresses.values())
        for addr in addrs:
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.setblocking(False)
            rc = s.connect_ex((addr, 22))
            s.close()
            assert rc in (errno.EINVAL, errno.ENETUNREACH, errno.EHOSTUNREACH), (addr, errno.errorcode.get(rc, rc))
        ours = {(v.netns, v.ifname) for v in tb.plan.veths} | {(v.peer_netns, v.peer_ifname) for v in tb.plan.veths}
        for r in tb.plan.namespaces.routers:
            names = {ln.split(":")[1].strip().split("@")[0] for ln in run("ip", "-n", r, "-o", "link").splitlines()}
            assert names - {"lo"} <= {i for ns, i in ours if ns == r}, (r, names)
            main = run("ip", "-n", r, "route", "show", "table", "main")
            assert "default" not in main and all(ln.startswith("10.77.") for ln in main.splitlines() if ln[0] != "\t")


# -- nothing left: SIGKILL, the ledger --------------------------------------------------------------------
CHILD = textwrap.dedent("""
    import json, sys, time
    from netlab.sched import NetAllocation
    from netlab.testbed import make_testbed, Ledger
    from netlab.testbed.ledger import netns_inode
    tb = make_testbed(sys.argv[1], sys.argv[2], ssh=False).up()
    h = [x.name for x in tb.hosts]
    tb.allocate(1, [h[0], h[2]], NetAllocation(priority=2, paths=(0,)))
    tb.allocate(2, [h[1], h[3]], NetAllocation(weight=2.0, rate_cap_gbps=10.0))
    led = Ledger.load(tb.info()["ledger"])
    print(json.dumps({"tid": tb.tid, "inodes": [netns_inode(n) for n in tb.info()["namespaces"]],
                      "jobnets": sum(r["kind"] == "jobnet" for r in led.records), "workdir": str(tb.workdir),
                      "guard": [r["pid"] for r in led.records if r.get("role") == "guard"][0]}), flush=True)
    time.sleep(60)
""")


@pytest.mark.parametrize("backend,topology", [("netns", str(DUMBBELL)), ("routed", LEAFSPINE2)])
def test_sigkilled_controller_with_allocations_leaves_nothing(backend, topology):
    before = snapshot()
    proc = subprocess.Popen([sys.executable, "-c", CHILD, backend, topology], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=dict(os.environ, PYTHONPATH=str(REPO)))
    line = proc.stdout.readline()
    if not line:
        proc.kill()
        pytest.fail(f"child failed: {proc.stderr.read()[-2000:]}")
    state = json.loads(line)
    assert state["jobnets"] == 2
    proc.send_signal(signal.SIGKILL)
    proc.wait()

    def clean():
        try:
            assert_clean(before, state["tid"], state["inodes"], [])
        except AssertionError:
            return False
        return not os.path.exists(state["workdir"])

    wait_until(clean, 15.0, "the guardian to remove the testbed and its allocations")
    wait_until(lambda: proc_start_time(state["guard"]) is None, 5.0, "the guardian to exit")


def test_ledger_removes_jobnet_items_outside_its_namespaces_and_leaves_its_own_to_them(tmp_path):
    """A jobnet record's items in a namespace the ledger does not own are removed one by one (filters before
    the classes they point to); in a namespace it owns they go with the namespace."""
    from pyroute2 import IPRoute, netns

    from netlab.testbed.ledger import netns_inode
    from netlab.testbed.plan import HtbLayout

    ns = f"netlab-jobnet-test-{os.getpid()}"
    htb = HtbLayout()
    netns.create(ns)
    try:
        with IPRoute(netns=ns, flags=0) as ipr:
            ipr.link("add", ifname="eth0", kind="veth", peer={"ifname": "peer0"})
            idx = ipr.link_lookup(ifname="eth0")[0]
            ipr.link("set", index=idx, state="up")
            ipr.addr("add", index=idx, address="10.99.0.1", prefixlen=16)
            ipr.addr("add", index=idx, address="10.99.1.5", prefixlen=32, label="eth0:j5")
            ipr.route("add", dst="10.99.2.5/32", oif=idx, prefsrc="10.99.1.5", scope=253)
            ipr.rule("add", src="10.99.1.5", src_len=32, dst="10.99.2.5", dst_len=32, table=1002, priority=10005)
            shaping.shape(ipr, idx, htb, 100.0, None)
            leaf = LeafClass("1:105", 1, Q, 0.008, 100.0, "105:")
            shaping.ensure_leaf(ipr, idx, htb, leaf, None, {})
            shaping.ensure_filters(ipr, idx, htb, 0x105, frozenset({U32Filter("1:105", 12, "10.99.1.5")}), {})
            assert set(shaping.read_leaves(ipr, idx, htb)) == {"1:10", "1:105"}
        items = [{"what": "filter", "netns": ns, "ifname": "eth0", "pref": 0x105},
                 {"what": "class", "netns": ns, "ifname": "eth0", "classid": "1:105"},
                 {"what": "rule", "netns": ns, "src": "10.99.1.5", "dst": "10.99.2.5", "table": 1002,
                  "priority": 10005},
                 {"what": "route", "netns": ns, "dst": "10.99.2.5/32"},
                 {"what": "addr", "netns": ns, "ifname": "eth0", "address": "10.99.1.5"}]
        led = Ledger(tmp_path / "ledger.json", [{"kind": "jobnet", "job": 5, "items": items}])
        report = led.teardown()
        assert report.ok and "jobnet job=5" in report.removed, report
        with IPRoute(netns=ns, flags=0) as ipr:
            idx = ipr.link_lookup(ifname="eth0")[0]
            assert set(shaping.read_leaves(ipr, idx, htb)) == {"1:10"}
            assert shaping.read_filters(ipr, idx, htb) == {}
            assert [a.get_attr("IFA_ADDRESS") for a in ipr.get_addr(index=idx, family=2)] == ["10.99.0.1"]
        assert "10.99.2.5" not in run("ip", "-n", ns, "route") and "10005" not in run("ip", "-n", ns, "rule")
        assert Ledger(tmp_path / "again.json", [{"kind": "jobnet", "job": 5, "items": items}]).teardown().ok
        # the same record beside its namespace's: nothing is removed item by item, the namespace takes it all
        own = Ledger(tmp_path / "own.json", [{"kind": "netns", "name": ns, "inode": netns_inode(ns)},
                                             {"kind": "jobnet", "job": 5, "items": items}])
        report = own.teardown()
        assert report.ok and "jobnet job=5 (with its namespaces)" in report.removed, report
        assert netns_inode(ns) is None
    finally:
        if netns_inode(ns) is not None:
            netns.remove(ns)
