"""netlab_agent end to end: the agent runs from source inside a test namespace.

Two namespaces joined by a veth pair stand in for two testbed hosts; every
name carries a random suffix and the fixture removes exactly what it made.
No test connects from the root namespace to a test address: every socket
(iperf3, traffic generator, ranks) runs inside one of the two namespaces.
"""

from __future__ import annotations

import errno
import json
import os
import queue
import secrets
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from .conftest import needs_netadmin, needs_torch

pytestmark = needs_netadmin

REPO = Path(__file__).resolve().parents[2]
AGENT_SRC = REPO / "agent"
HEADER_EFFICIENCY = 0.955  # best TCP goodput / HTB rate (testbed-facts.md)


def _agent_version() -> str:
    ns: dict = {}
    exec((AGENT_SRC / "netlab_agent" / "__init__.py").read_text(), ns)
    return ns["__version__"]


def _proc_start_time(pid: int) -> int | None:
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = raw[raw.rindex(")") + 2:].split()
    return None if fields[0] in ("Z", "X") else int(fields[19])


def _in_ns(name: str):
    from pyroute2 import netns
    return lambda: netns.setns(name, flags=0)


class Pair:
    """Namespaces ``a`` and ``b`` joined by veth ``ifa`` <-> ``ifb``."""

    def __init__(self):
        from pyroute2 import IPRoute, netns
        sfx = secrets.token_hex(3)
        self.a, self.b = f"nlagt{sfx}a", f"nlagt{sfx}b"
        self.ifa, self.ifb = f"va{sfx}", f"vb{sfx}"
        net = 10 + int(sfx[:2], 16) % 200
        self.addr_a, self.addr_b = f"10.99.{net}.1", f"10.99.{net}.2"
        self.procs: list[subprocess.Popen] = []
        self.made: list[str] = []
        for name in (self.a, self.b):
            netns.create(name)
            self.made.append(name)
        with IPRoute(netns=self.a) as ip:
            ip.link("add", ifname=self.ifa, kind="veth", peer={"ifname": self.ifb, "net_ns_fd": self.b})
            idx = ip.link_lookup(ifname=self.ifa)[0]
            ip.addr("add", index=idx, address=self.addr_a, prefixlen=24)
            ip.link("set", index=idx, state="up")
            ip.link("set", index=ip.link_lookup(ifname="lo")[0], state="up")
        with IPRoute(netns=self.b) as ip:
            idx = ip.link_lookup(ifname=self.ifb)[0]
            ip.addr("add", index=idx, address=self.addr_b, prefixlen=24)
            ip.link("set", index=idx, state="up")
            ip.link("set", index=ip.link_lookup(ifname="lo")[0], state="up")

    def popen(self, ns: str, argv: list[str], **kw) -> subprocess.Popen:
        p = subprocess.Popen(argv, preexec_fn=_in_ns(ns), **kw)
        self.procs.append(p)
        return p

    def ipr(self, ns: str):
        from pyroute2 import IPRoute
        return IPRoute(netns=ns)

    def backend_htb(self, rate_mbit: float) -> None:
        """What NetnsTestbed puts on a host's eth0: HTB root 1:, default class 1:10."""
        with self.ipr(self.a) as ip:
            idx = ip.link_lookup(ifname=self.ifa)[0]
            ip.tc("add", "htb", index=idx, handle="1:", default=0x10)
            ip.tc("add-class", "htb", index=idx, handle="1:10", parent="1:",
                  rate=f"{int(rate_mbit)}mbit", ceil=f"{int(rate_mbit)}mbit")

    def tc_dump(self, ns: str | None = None, ifname: str | None = None) -> str:
        ns, ifname = ns or self.a, ifname or self.ifa
        out = []
        for what in ("qdisc", "class"):
            out.append(subprocess.run(["tc", what, "show", "dev", ifname], preexec_fn=_in_ns(ns),
                                      capture_output=True, text=True, check=True).stdout)
        return "".join(out)

    def root_and_class(self) -> tuple[str | None, dict | None]:
        """(root qdisc kind, {rate_bit, ceil_bit} of class 1:10 or None)."""
        with self.ipr(self.a) as ip:
            idx = ip.link_lookup(ifname=self.ifa)[0]
            roots = [q.get_attr("TCA_KIND") for q in ip.get_qdiscs(index=idx) if q["parent"] == 0xFFFFFFFF]
            cls = None
            for c in ip.get_classes(index=idx):
                if c["handle"] == 0x10010:
                    parms = c.get_attr("TCA_OPTIONS").get_attr("TCA_HTB_PARMS")
                    cls = {"rate_bit": parms["rate"] * 8, "ceil_bit": parms["ceil"] * 8}
        return (roots[0] if roots else None), cls

    def close(self) -> None:
        from pyroute2 import netns
        for p in self.procs:
            if p.poll() is None:
                p.kill()
            p.wait(timeout=10)
        for name in self.made:
            netns.remove(name)


class Agent:
    """An agent process from source, with a reader thread that sorts replies and events."""

    def __init__(self, pair: Pair, ns: str, state_dir: Path, extra_args: tuple[str, ...] = ()):
        env = dict(os.environ, PYTHONPATH=str(AGENT_SRC), PYTHONUNBUFFERED="1")
        self.stderr_path = state_dir.parent / f"{state_dir.name}-{ns}-{secrets.token_hex(2)}.stderr"
        self.proc = pair.popen(ns, [sys.executable, "-m", "netlab_agent", "--state-dir", str(state_dir),
                                    "--host", ns, *extra_args], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                               stderr=open(self.stderr_path, "wb"), env=env)
        self.replies: dict = {}
        self.events: "queue.Queue[dict]" = queue.Queue()
        self.cond = threading.Condition()
        self.next_id = 0
        threading.Thread(target=self._read, daemon=True).start()
        self.hello = self.event("hello", timeout=30)

    def _read(self) -> None:
        for line in self.proc.stdout:
            msg = json.loads(line)  # every stdout line must be one JSON object
            if "event" in msg:
                self.events.put(msg)
            else:
                with self.cond:
                    self.replies[msg["id"]] = msg
                    self.cond.notify_all()
        self.events.put({"event": "<eof>"})

    def stderr(self) -> str:
        return self.stderr_path.read_text()

    def request(self, cmd: str, timeout: float = 30, **args) -> dict:
        self.next_id += 1
        rid = self.next_id
        self.proc.stdin.write((json.dumps({"id": rid, "cmd": cmd, "args": args}) + "\n").encode())
        self.proc.stdin.flush()
        with self.cond:
            assert self.cond.wait_for(lambda: rid in self.replies, timeout), f"no reply to {cmd}: {self.stderr()}"
            return self.replies.pop(rid)

    def ok(self, cmd: str, timeout: float = 30, **args) -> dict:
        reply = self.request(cmd, timeout, **args)
        assert reply["ok"], (reply, self.stderr())
        return reply["result"]

    def event(self, name: str, timeout: float = 30, **match) -> dict:
        deadline = time.monotonic() + timeout
        while True:
            msg = self.events.get(timeout=max(0.01, deadline - time.monotonic()))
            if msg["event"] == name and all(msg.get(k) == v for k, v in match.items()):
                return msg
            assert msg["event"] != "<eof>", f"agent exited while waiting for {name}: {self.stderr()}"

    def drain(self) -> list[dict]:
        out = []
        while not self.events.empty():
            out.append(self.events.get())
        return out


@pytest.fixture
def pair():
    p = Pair()
    try:
        yield p
    finally:
        p.close()


@pytest.fixture
def agent_a(pair, tmp_path):
    agent = Agent(pair, pair.a, tmp_path / "state-a")
    yield agent
    if agent.proc.poll() is None:
        agent.proc.stdin.close()
        agent.proc.wait(timeout=20)


def _probe_kind(pair: Pair, kind: str) -> bool:
    """The test's own answer: can this kernel put ``kind`` on an interface?"""
    from pyroute2 import NetlinkError
    args = {"htb": {"handle": "1:", "default": 0x10}, "tbf": {"rate": "10mbit", "burst": 16000, "latency": 50},
            "netem": {"delay": 1000}, "fq_codel": {}, "red": {}}[kind]
    with pair.ipr(pair.b) as ip:
        idx = ip.link_lookup(ifname=pair.ifb)[0]
        try:
            ip.tc("add", kind, index=idx, **({} if kind == "htb" else {"root": True}), **args)
        except NetlinkError as exc:
            if exc.code in (errno.ENOENT, errno.EOPNOTSUPP):
                return False
        try:
            ip.tc("del", index=idx, root=True)
        except NetlinkError:
            pass
        return True


# ---- 1. handshake -------------------------------------------------------------------
def test_hello_reports_version_and_probed_qdiscs(pair, tmp_path):
    with pair.ipr(pair.a) as ip:
        links_before = sorted(m.get_attr("IFLA_IFNAME") for m in ip.get_links())
    agent = Agent(pair, pair.a, tmp_path / "st")
    hello = agent.hello
    assert hello["version"] == _agent_version()
    assert hello["pid"] == agent.proc.pid and hello["host"] == pair.a
    caps = hello["capabilities"]
    for kind in ("htb", "tbf", "netem", "fq_codel", "red"):
        assert (kind in caps["qdiscs"]) == _probe_kind(pair, kind), kind
    assert "htb" in caps["qdiscs"]
    assert caps["iperf3"] is (subprocess.run(["which", "iperf3"], capture_output=True).returncode == 0)
    assert agent.ok("hello")["version"] == hello["version"]
    with pair.ipr(pair.a) as ip:  # the probe's veth pair is gone again
        assert sorted(m.get_attr("IFLA_IFNAME") for m in ip.get_links()) == links_before
    agent.ok("shutdown")
    assert agent.event("bye")
    assert agent.proc.wait(timeout=10) == 0
    assert not (tmp_path / "st" / "state.json").exists()


# ---- 2. shaping holds the rate ----------------------------------------------------------
def test_htb_shape_limits_tcp_throughput(pair, agent_a):
    res = agent_a.ok("shape", ifname=pair.ifa, kind="htb", rate_mbit=100)
    assert res["applied"] == {"rate_mbit": 100, "ceil_mbit": 100}
    port = 5201
    server = pair.popen(pair.b, ["iperf3", "-s", "-1", "-B", pair.addr_b, "-p", str(port)],
                        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    for _ in range(50):
        client = subprocess.run(["iperf3", "-c", pair.addr_b, "-p", str(port), "-t", "2", "-J"],
                                preexec_fn=_in_ns(pair.a), capture_output=True, text=True, timeout=30)
        if client.returncode == 0:
            break
        time.sleep(0.1)
    assert client.returncode == 0, client.stdout[-500:]
    mbit = json.loads(client.stdout)["end"]["sum_received"]["bits_per_second"] / 1e6
    server.wait(timeout=10)
    assert abs(mbit - 100 * HEADER_EFFICIENCY) <= 0.10 * 100 * HEADER_EFFICIENCY, mbit


# ---- 3. invalid specs change nothing -----------------------------------------------------
@pytest.mark.parametrize("spec, err_type, field", [
    ({"kind": "htb", "rate_mbit": -5}, "SpecError", "rate_mbit"),
    ({"kind": "htb", "rate_mbit": 100, "rate_mibt": 5}, "SpecError", "rate_mibt"),
    ({"kind": "htb", "rate_mbit": "100"}, "SpecError", "rate_mbit"),
    ({"kind": "tbf", "rate_mbit": 100, "ceil_mbit": 200}, "SpecError", "ceil_mbit"),
    ({"kind": "wfq", "rate_mbit": 100}, "SpecError", "kind"),
    ({"kind": "htb", "rate_mbit": 100, "ifname": "nope0"}, "NotFound", "ifname"),
])
def test_invalid_spec_is_refused_and_changes_nothing(pair, agent_a, spec, err_type, field):
    pair.backend_htb(200)
    before = pair.tc_dump()
    reply = agent_a.request("shape", **{"ifname": pair.ifa, **spec})
    assert reply["ok"] is False
    assert reply["error"]["type"] == err_type and reply["error"]["field"] == field, reply
    assert pair.tc_dump() == before
    assert agent_a.ok("status")["shaping"] == {}
    # The loop survived: a valid request still works afterwards.
    assert agent_a.ok("shape", ifname=pair.ifa, kind="htb", rate_mbit=50)["kind"] == "htb"


# ---- 3b. names that become paths or arguments are checked -------------------------------------------
@pytest.mark.parametrize("cmd, args, field", [
    ("job_start", {"job_id": ".."}, "job_id"),
    ("job_start", {"job_id": "../../escape"}, "job_id"),
    ("job_start", {"job_id": 1, "ifname": "eth0 x"}, "ifname"),
    ("job_log", {"job_id": ".."}, "job_id"),
    ("job_stop", {"job_id": "."}, "job_id"),
    ("traffic_start", {"flow_id": "..", "role": "sink", "port": 5999}, "flow_id"),
    ("traffic_stop", {"flow_id": ".."}, "flow_id"),
    ("shape", {"ifname": "../lo", "kind": "htb", "rate_mbit": 10}, "ifname"),
])
def test_names_in_requests_match_the_strict_pattern(pair, agent_a, tmp_path, cmd, args, field):
    """Job ids, flow ids and interface names become file names and arguments: '..' never reaches a path."""
    if cmd == "job_start":
        args = {**dict(rank=0, world_size=2, master_addr=pair.addr_a, master_port=29999, backend="gloo",
                       ifname=pair.ifa, grad_bytes=4096, compute_ms=0, iterations=1), **args}
    if cmd == "traffic_start":
        args = {"addr": pair.addr_a, **args}
    state = tmp_path / "state-a"
    before = sorted(p.relative_to(state) for p in state.rglob("*") if p.name != "agent.log")
    reply = agent_a.request(cmd, **args)
    assert reply["ok"] is False, reply
    assert reply["error"]["type"] == "SpecError" and reply["error"]["field"] == field, reply
    pattern = "[A-Za-z0-9_.-]{1,15}" if field == "ifname" else "[A-Za-z0-9][A-Za-z0-9_.-]{0,63}"
    assert pattern in reply["error"]["message"], reply
    after = sorted(p.relative_to(state) for p in state.rglob("*") if p.name != "agent.log")
    assert after == before  # no job or flow directory, no rank started
    status = agent_a.ok("status")
    assert status["jobs"] == [] and status["traffic"] == []


# ---- 4. a kind the kernel lacks -----------------------------------------------------------
@pytest.mark.parametrize("kind, extra", [("netem", {"delay_ms": 10}), ("fq_codel", {"rate_mbit": 50})])
def test_missing_qdisc_is_qdisc_unavailable(pair, agent_a, kind, extra):
    if kind in agent_a.hello["capabilities"]["qdiscs"]:
        pytest.skip(f"this kernel has {kind}; the missing-qdisc path cannot be exercised")
    pair.backend_htb(200)
    before = pair.tc_dump()
    reply = agent_a.request("shape", ifname=pair.ifa, kind=kind, **extra)
    assert reply["ok"] is False and reply["error"]["type"] == "QdiscUnavailable", reply
    assert "lacks" in reply["error"]["message"] and kind in reply["error"]["message"]
    assert pair.tc_dump() == before


# ---- 5. clear brings the backend's HTB back --------------------------------------------------
def test_clear_restores_previous_htb_rate(pair, agent_a, tmp_path):
    pair.backend_htb(200)
    assert pair.root_and_class() == ("htb", {"rate_bit": 200_000_000, "ceil_bit": 200_000_000})
    agent_a.ok("shape", ifname=pair.ifa, kind="htb", rate_mbit=100)
    agent_a.ok("shape", ifname=pair.ifa, kind="htb", rate_mbit=100)  # idempotent
    assert pair.root_and_class() == ("htb", {"rate_bit": 100_000_000, "ceil_bit": 100_000_000})
    state = json.loads((tmp_path / "state-a" / "state.json").read_text())
    assert state["shaping"][pair.ifa]["kind"] == "htb"
    agent_a.ok("shape", ifname=pair.ifa, kind="tbf", rate_mbit=50)  # replace across kinds
    assert pair.root_and_class() == ("tbf", None)
    assert agent_a.ok("clear", ifname=pair.ifa)["restored"] == "htb"
    assert pair.root_and_class() == ("htb", {"rate_bit": 200_000_000, "ceil_bit": 200_000_000})
    assert "default 0x10" in pair.tc_dump()
    assert agent_a.request("clear", ifname=pair.ifa)["error"]["type"] == "NotFound"


def test_clear_restores_tbf_and_kernel_default(pair, agent_a):
    with pair.ipr(pair.a) as ip:
        idx = ip.link_lookup(ifname=pair.ifa)[0]
        ip.tc("add", "tbf", index=idx, root=True, rate="30mbit", burst=20000, latency=40)
    before = pair.tc_dump()
    agent_a.ok("shape", ifname=pair.ifa, kind="htb", rate_mbit=100)
    assert pair.tc_dump() != before
    agent_a.ok("clear", ifname=pair.ifa)
    assert pair.tc_dump() == before
    # An interface with the kernel default goes back to the kernel default.
    before_b = pair.tc_dump(pair.a, "lo")
    agent_a.ok("shape", ifname="lo", kind="tbf", rate_mbit=10)
    assert "tbf" in pair.tc_dump(pair.a, "lo")
    assert agent_a.ok("clear", ifname="lo")["restored"] == "kernel default"
    assert pair.tc_dump(pair.a, "lo") == before_b


# ---- 6. telemetry -----------------------------------------------------------------------------
def test_telemetry_stream_is_regular_and_counts_traffic(pair, agent_a):
    env = dict(os.environ, PYTHONPATH=str(AGENT_SRC))
    sink = pair.popen(pair.b, [sys.executable, "-m", "netlab_agent.traffic", "--role", "sink",
                               "--addr", pair.addr_b, "--port", "5301", "--duration-s", "3.5"],
                      stdout=subprocess.PIPE, env=env)
    agent_a.ok("shape", ifname=pair.ifa, kind="htb", rate_mbit=50)
    agent_a.ok("telemetry_start", interval_ms=100, ifnames=[pair.ifa])
    agent_a.ok("traffic_start", flow_id="bg", role="source", addr=pair.addr_b, port=5301,
               rate_mbit=20, duration_s=1.5)
    time.sleep(2.0)
    res = agent_a.ok("telemetry_stop")
    assert res["lost"] == 0
    assert 17 <= res["samples"] <= 23, res
    events = agent_a.drain()
    samples = [e for e in events if e["event"] == "telemetry"]
    assert [s["seq"] for s in samples] == list(range(res["samples"]))
    assert all(b["t"] > a["t"] for a, b in zip(samples, samples[1:]))
    first, last = samples[0]["sample"], samples[-1]["sample"]
    assert set(last["links"]) == {pair.ifa}
    sent = last["links"][pair.ifa]["tx_bytes"] - first["links"][pair.ifa]["tx_bytes"]
    assert 0.5 * 20e6 / 8 * 1.5 <= sent <= 1.5 * 20e6 / 8 * 1.5, sent  # paced at 20 of 50 Mbit
    cls = {(q["type"], q["handle"]): q for q in last["qdiscs"]}
    assert cls[("class", "1:10")]["bytes"] >= sent * 0.9
    assert last["tcp"]["OutSegs"] > first["tcp"]["OutSegs"]
    exits = [e for e in events if e["event"] == "traffic_exit"] or [agent_a.event("traffic_exit", timeout=10)]
    assert exits[0]["flow_id"] == "bg" and exits[0]["returncode"] == 0
    assert agent_a.request("traffic_stop", flow_id="nope")["error"]["type"] == "NotFound"
    sink.wait(timeout=15)
    assert json.loads(sink.stdout.read())["bytes"] >= sent * 0.9


# ---- 7. a real 2-rank gloo job ------------------------------------------------------------------
@needs_torch
def test_two_rank_gloo_job_runs_and_logs(pair, agent_a, tmp_path):
    agent_b = Agent(pair, pair.b, tmp_path / "state-b")
    port = 29500 + secrets.randbelow(1000)
    common = dict(job_id=7, world_size=2, master_addr=pair.addr_a, master_port=port, backend="gloo",
                  grad_bytes=1 << 20, compute_ms=20, iterations=3, offset_ms=0)
    agent_a.ok("job_start", rank=0, ifname=pair.ifa, **common)
    agent_b.ok("job_start", rank=1, ifname=pair.ifb, **common)
    for agent, rank in ((agent_a, 0), (agent_b, 1)):
        ev = agent.event("job_exit", timeout=60, job_id=7, rank=rank)
        assert ev["returncode"] == 0, (Path(tmp_path / f"state-{'ab'[rank]}/jobs/7/rank{rank}.out").read_text())
        records = agent.ok("job_log", job_id=7)["records"]
        assert [(r["job_id"], r["rank"], r["iter"]) for r in records] == [(7, rank, i) for i in range(3)]
        stamps = [t for r in records for t in (r["compute_start"], r["allreduce_start"], r["allreduce_end"])]
        assert stamps == sorted(stamps)
        assert all(r["allreduce_start"] - r["compute_start"] >= 0.019 for r in records)
    agent_b.ok("shutdown")
    assert agent_b.proc.wait(timeout=10) == 0


# ---- 8. losing the channel undoes everything ---------------------------------------------------------
def _start_blocked_rank(pair: Pair, agent: Agent) -> tuple[int, int]:
    """Rank 0 of a 2-rank job whose rank 1 never comes: it waits in rendezvous."""
    port = 30500 + secrets.randbelow(1000)
    pid = agent.ok("job_start", job_id="hang", rank=0, world_size=2, master_addr=pair.addr_a,
                   master_port=port, backend="gloo", ifname=pair.ifa, grad_bytes=4096,
                   compute_ms=0, iterations=1000)["pid"]
    start = _proc_start_time(pid)
    assert start is not None
    return pid, start


@needs_torch
@pytest.mark.parametrize("how", ["stdin_eof", "sigterm"])
def test_channel_loss_restores_shaping_and_stops_ranks(pair, agent_a, tmp_path, how):
    pair.backend_htb(200)
    agent_a.ok("shape", ifname=pair.ifa, kind="htb", rate_mbit=100)
    pid, start = _start_blocked_rank(pair, agent_a)
    agent_a.ok("telemetry_start", interval_ms=200)
    time.sleep(0.3)
    assert _proc_start_time(pid) == start
    if how == "stdin_eof":
        agent_a.proc.stdin.close()
    else:
        agent_a.proc.send_signal(signal.SIGTERM)
    assert agent_a.proc.wait(timeout=20) == 0
    assert _proc_start_time(pid) != start
    assert pair.root_and_class() == ("htb", {"rate_bit": 200_000_000, "ceil_bit": 200_000_000})
    assert not (tmp_path / "state-a" / "state.json").exists()
    assert agent_a.event("bye", timeout=5)


# ---- 9. a dead agent's leftovers are undone by the next one ---------------------------------------------
@needs_torch
def test_next_agent_undoes_stale_state(pair, agent_a, tmp_path):
    pair.backend_htb(200)
    agent_a.ok("shape", ifname=pair.ifa, kind="tbf", rate_mbit=100)
    pid, start = _start_blocked_rank(pair, agent_a)
    agent_a.proc.kill()
    agent_a.proc.wait(timeout=10)
    time.sleep(0.2)
    assert _proc_start_time(pid) == start  # the rank outlived its agent
    assert pair.root_and_class()[0] == "tbf"
    again = Agent(pair, pair.a, tmp_path / "state-a")
    stale = again.hello["stale_state"]
    assert stale["found"] and stale["restored"] == [pair.ifa] and stale["errors"] == []
    assert [k["pid"] for k in stale["killed"]] == [pid]
    assert _proc_start_time(pid) != start
    assert pair.root_and_class() == ("htb", {"rate_bit": 200_000_000, "ceil_bit": 200_000_000})
    # Only the new agent is recorded now.
    state = json.loads((tmp_path / "state-a" / "state.json").read_text())
    assert state["agent"]["pid"] == again.proc.pid and state["children"] == {} and state["shaping"] == {}
    again.ok("shutdown")
    assert again.proc.wait(timeout=10) == 0


def test_second_agent_on_a_live_state_dir_is_refused(pair, agent_a, tmp_path):
    env = dict(os.environ, PYTHONPATH=str(AGENT_SRC))
    p = pair.popen(pair.a, [sys.executable, "-m", "netlab_agent", "--state-dir", str(tmp_path / "state-a")],
                   stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    out, _ = p.communicate(timeout=20)
    assert p.returncode == 2
    msg = json.loads(out.splitlines()[0])
    assert msg["event"] == "fatal" and str(agent_a.proc.pid) in msg["error"]["message"]
    assert agent_a.ok("status")["jobs"] == []  # the first agent is untouched
