"""NetnsTestbed: a topology emulated with network namespaces on one Linux machine.

Layout (docs/testbed-design.md): one namespace per host (``nl{tid}-h{i}``),
one namespace holding a Linux bridge per topology switch (``nl{tid}-sw``) and
a management namespace (``nl{tid}-mg``) with a bridge that reaches every
host's sshd, never shaped. Every directed topology link is shaped with HTB on
the egress of the veth end that sends in that direction.

Why this shape: everything lives inside namespaces the testbed created, so no
testbed packet can touch the machine's own interfaces, and removing the
namespaces removes the network. Every resource is recorded in a
:class:`~netlab.testbed.ledger.Ledger` first, and a guardian process removes
them if the controller dies.
"""

from __future__ import annotations

import errno
import functools
import getpass
import ipaddress
import logging
import math
import os
import secrets
import signal
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path

import networkx as nx
import pandas as pd

from ..topology import Topology, load_topology
from . import sshd as sshd_mod
from .base import Testbed, TestbedError, TestbedHost
from .ledger import NETNS_DIR, Ledger, netns_inode, proc_start_time
from .paths import host_file, require_remote_path

log = logging.getLogger(__name__)

# TCP settings of every host namespace. Measured here (2 ranks, gloo, 16 MB, 100 Mbit HTB): the
# default bbr reached 0.87-0.90 of the shaped rate, reno 0.95-0.955 (the header limit); collectives
# idle between steps, and slow start after each idle period costs a few percent more.
TCP_SYSCTLS = {"net.ipv4.tcp_congestion_control": "reno", "net.ipv4.tcp_slow_start_after_idle": "0"}
# Packets each shaped link may queue (a pfifo under the HTB class; None: the kernel's default of
# txqueuelen = 1000). A data-centre switch port buffers well under a millisecond at line rate; 1000
# packets at a scaled 50 Mbit is 240 ms, which inflates small all-reduces far beyond what the link
# rate explains. 100 packets (24 ms at 50 Mbit) is still many times the namespaces' bandwidth-delay product.
QUEUE_PKTS = 100
# The smallest byte limit a shaped link's queue may have: one full-size Ethernet frame (1500 + 14 header
# bytes). A bfifo below that refuses every full-size packet, which is a broken link, not a small buffer.
MIN_QUEUE_BYTES = 1514
MAX_HOSTS = 253      # host i gets <subnet>.i; .254 is the controller on the management bridge


@dataclass
class _LinkPlan:
    """Where one directed topology link is shaped."""

    link: int
    src: str
    dst: str
    tier: str
    rate_gbps: float
    netns: str
    ifname: str
    rate_mbit: float = 0.0
    index: int = 0


def check_layout(topo: Topology) -> None:
    """Refuse what Linux bridges cannot emulate, before anything is created.

    Hosts must hang off exactly one switch (one data interface) and the switch
    graph must be loop free: bridges run no spanning tree, so a cycle would
    loop broadcast frames forever.
    """
    for h in topo.hosts:
        nbrs = list(topo.graph.neighbors(h.name))
        if len(nbrs) != 1 or nbrs[0] not in topo.switches:
            raise TestbedError(f"topology {topo.name}: host {h.name} must have exactly one cable, to a switch "
                               f"(has {nbrs}); the netns testbed gives each host one data interface")
    sw = topo.graph.subgraph(topo.switches)
    try:
        cycle = nx.find_cycle(sw)
    except nx.NetworkXNoCycle:
        return
    path = " - ".join([u for u, _ in cycle] + [cycle[0][0]])
    raise TestbedError(f"topology {topo.name}: switch graph has a cycle ({path}); Linux bridges without "
                       "STP need a loop-free switch graph (e.g. leafspine with spines=1)")


def _new_tid() -> str:
    """4 hex chars not used by any existing namespace, so nothing of another testbed is touched."""
    existing = set(os.listdir(NETNS_DIR)) if os.path.isdir(NETNS_DIR) else set()
    for _ in range(100):
        tid = secrets.token_hex(2)
        if not any(n.startswith(f"nl{tid}-") for n in existing):
            return tid
    raise TestbedError("could not find a free testbed id")


def _netlink(method):
    """Run ``method`` on the testbed's own netlink thread.

    Why: pyroute2's synchronous API drives an asyncio loop of its own, which
    fails inside a thread that already runs one (a Jupyter kernel); and a
    cached IPRoute handle must stay on the loop that made it. Signal handlers,
    by contrast, can only be set from the main thread, so they stay there.
    """

    @functools.wraps(method)
    def run(self, *args, **kwargs):
        if threading.get_ident() == self._nl_ident:
            return method(self, *args, **kwargs)
        if self._nl_pool is None:
            self._nl_pool = ThreadPoolExecutor(1, thread_name_prefix=f"netlab-netlink-{self.tid}",
                                               initializer=self._mark_netlink_thread)
        return self._nl_pool.submit(method, self, *args, **kwargs).result()

    return run


class NetnsTestbed(Testbed):
    """The default backend: namespaces, veth pairs, Linux bridges and HTB (see module doc)."""

    # Where each link's rate lives: the HTB root and the default class every packet goes to
    # (a subclass that lets another tool build the links, like Mininet, names its own).
    htb_root, htb_class, htb_class_id = "1:", "1:10", 0x10010

    def __init__(self, topology, rate_scale: float = 0.002, subnet: str = "10.77.0.0/16",
                 mgmt_subnet: str = "10.78.0.0/16", workdir=None, python: str = sys.executable,
                 ssh: bool = True, keep_workdir: bool = False, user: str | None = None,
                 tcp_sysctls: dict | None = None, queue_pkts: int | None = QUEUE_PKTS,
                 queue_bytes: int | None = None):
        """``queue_pkts`` bounds each shaped link's queue in packets (a pfifo under its HTB class; None: the
        kernel's default); ``queue_bytes``, when given, bounds it in bytes instead (a bfifo: what a switch
        port's buffer is, and what makes a small queue drop under overload whatever the packet sizes)."""
        self.topology = load_topology(topology)
        if not (isinstance(rate_scale, (int, float)) and math.isfinite(rate_scale) and rate_scale > 0):
            raise TestbedError(f"rate_scale must be a finite number > 0, got {rate_scale!r}")
        self.rate_scale = float(rate_scale)
        try:
            self.subnet = ipaddress.IPv4Network(subnet)
            self.mgmt_subnet = ipaddress.IPv4Network(mgmt_subnet)
        except ValueError as exc:
            raise TestbedError(f"bad subnet: {exc}") from None
        if self.subnet.overlaps(self.mgmt_subnet):
            raise TestbedError(f"subnet {subnet} and mgmt_subnet {mgmt_subnet} overlap")
        n = self.topology.n_hosts
        if n > MAX_HOSTS or n + 1 >= self.subnet.num_addresses or 255 >= self.mgmt_subnet.num_addresses:
            raise TestbedError(f"topology {self.topology.name}: {n} hosts do not fit ({MAX_HOSTS} max, "
                               f"subnets {self.subnet} / {self.mgmt_subnet} need room for .1-.254)")
        check_layout(self.topology)
        self.tid = _new_tid()
        self.python, self.ssh, self.keep_workdir = python, ssh, keep_workdir
        self.tcp_sysctls = dict(TCP_SYSCTLS if tcp_sysctls is None else tcp_sysctls)
        if queue_pkts is not None and (isinstance(queue_pkts, bool) or not isinstance(queue_pkts, int) or queue_pkts < 1):
            raise TestbedError(f"queue_pkts must be a positive integer or None, got {queue_pkts!r}")
        if queue_bytes is not None and (isinstance(queue_bytes, bool) or not isinstance(queue_bytes, int)
                                        or queue_bytes < MIN_QUEUE_BYTES):
            raise TestbedError(f"queue_bytes must be an integer >= {MIN_QUEUE_BYTES} (one full-size Ethernet "
                               f"frame) or None, got {queue_bytes!r}")
        self.queue_pkts, self.queue_bytes = queue_pkts, queue_bytes
        self.user = user or getpass.getuser()
        if workdir is not None:  # it becomes sshd_config lines, pip --target and the agents' --state-dir
            workdir = require_remote_path(str(Path(workdir).resolve()), f"testbed {self.tid}: workdir")
        self._workdir_arg = workdir
        self.ns_switch, self.ns_mgmt = f"nl{self.tid}-sw", f"nl{self.tid}-mg"
        self.ns_hosts = [f"nl{self.tid}-h{i + 1}" for i in range(n)]
        self.controller_addr = str(self.mgmt_subnet.network_address + 254)
        self._links = self._plan_links()
        self.hosts: list[TestbedHost] = []
        self.known_hosts = self.client_key = None
        self.workdir: Path | None = None
        self.timings: dict[str, float] = {}
        self._ledger: Ledger | None = None
        self._guard: subprocess.Popen | None = None
        self._ipr: dict = {}
        self._procs: list[subprocess.Popen] = []
        self._handlers: dict = {}
        self._busy = False
        self._step = ""
        self._owner_pid = os.getpid()
        self._nl_pool: ThreadPoolExecutor | None = None
        self._nl_ident: int | None = None

    def _mark_netlink_thread(self) -> None:
        self._nl_ident = threading.get_ident()

    # -- plan ----------------------------------------------------------------
    def _plan_links(self) -> dict[tuple[str, str], _LinkPlan]:
        """Which veth end shapes each directed link (names are short: IFNAMSIZ is 16)."""
        topo, plans = self.topology, {}
        self._bridges = {s: f"br{j}" for j, s in enumerate(topo.switches)}
        self._isl: list[tuple[str, str, str, str]] = []  # (switch a, switch b, veth on a, veth on b)
        for l in range(topo.n_links):
            u, v = topo.link_src[l], topo.link_dst[l]
            if u in topo.host_index:
                ns, ifname = self.ns_hosts[topo.host_index[u]], "eth0"
            elif v in topo.host_index:
                ns, ifname = self.ns_switch, f"h{topo.host_index[v] + 1}"
            else:
                k, forward = l // 2, l % 2 == 0  # cable k; links 2k (a->b) and 2k+1 (b->a)
                ns, ifname = self.ns_switch, f"x{k}{'a' if forward else 'b'}"
                if forward:
                    self._isl.append((u, v, ifname, f"x{k}b"))
            gbps = float(topo.link_capacity_gbps[l])
            plans[(u, v)] = _LinkPlan(l, u, v, str(topo.link_tier[l]), gbps, ns, ifname,
                                      gbps * 1000 * self.rate_scale)
        return plans

    # -- bring-up ------------------------------------------------------------
    def up(self) -> "NetnsTestbed":
        if self._ledger is not None:
            return self
        self._owner_pid = os.getpid()
        t0 = time.monotonic()
        try:
            self._setup_workdir()
            self._step = "guardian"
            from .guard import start_guard  # lazily: `python -m netlab.testbed.guard` imports this package

            self._guard = start_guard(self._ledger.path, self.workdir / "guard.log")
            self._ledger.add("process", role="guard", pid=self._guard.pid, start=proc_start_time(self._guard.pid))
            self._install_signal_handlers()
            self._add_blackholes()
            self._create_namespaces()
            self._build_network()
            self.timings["network_s"] = time.monotonic() - t0
            self._build_hosts()
            self._tune_tcp()
            if self.ssh:
                self._start_sshd()
        except BaseException as exc:
            step = self._step
            try:
                self.down()
            except TestbedError as down_exc:
                log.error("cleanup after failed bring-up: %s", down_exc)
            if isinstance(exc, (KeyboardInterrupt, SystemExit)):
                raise
            raise TestbedError(f"testbed {self.tid}: bring-up failed at step {step!r}: "
                               f"{type(exc).__name__}: {exc}") from exc
        self.timings["up_s"] = time.monotonic() - t0
        return self

    def _setup_workdir(self) -> None:
        self._step = "workdir"
        if self._workdir_arg is None:
            self.workdir = Path(tempfile.mkdtemp(prefix=f"netlab-tb-{self.tid}-"))
            created = True
        else:
            self.workdir = Path(self._workdir_arg).resolve()
            created = not self.workdir.exists()
            self.workdir.mkdir(parents=True, exist_ok=True)
        meta = {"tid": self.tid, "controller_pid": os.getpid(), "created": time.time(),
                "namespaces": [self.ns_switch, self.ns_mgmt, *self.ns_hosts]}
        self._ledger = Ledger(self.workdir / "ledger.json", meta=meta)
        if created:
            self._ledger.add("dir", path=str(self.workdir), tree=True)
        else:
            self._ledger.add("file", path=str(self._ledger.path))
        for sub in ("hosts", "ssh"):
            self._ledger.add("dir", path=str(self.workdir / sub), tree=True)
            (self.workdir / sub).mkdir(exist_ok=True)

    @_netlink
    def _add_blackholes(self) -> None:
        """Root-namespace blackholes: a stray connection to a testbed address fails here, never leaves."""
        from pyroute2 import NetlinkError

        self._step = "blackhole routes"
        prio = 1000 + int(self.tid, 16)  # our own metric: several testbeds may use the same subnets
        ipr = self._handle(None)
        for net in (self.subnet, self.mgmt_subnet):
            self._ledger.add("route", netns=None, dst=str(net), type="blackhole", priority=prio)
            ipr.route("add", dst=str(net), type="blackhole", priority=prio)
            probe = str(net.network_address + 1)
            try:  # the kernel answers a lookup that hits a blackhole with EINVAL
                got = ipr.route("get", dst=probe)
            except NetlinkError as exc:
                if exc.code != errno.EINVAL:
                    raise
            else:
                raise TestbedError(f"root namespace routes {probe} via {got[0].get_attr('RTA_OIF')!r} "
                                   f"(a more specific route covers {net}), not to our blackhole: pick another subnet")

    @_netlink
    def _create_namespaces(self) -> None:
        from pyroute2 import netns

        for name in (self.ns_switch, self.ns_mgmt, *self.ns_hosts):
            self._step = f"namespace {name}"
            rec = self._ledger.add("netns", name=name, inode=None)
            try:
                netns.create(name)
            except FileExistsError:
                self._ledger.discard(rec)  # someone else's: never remove it
                raise
            self._ledger.update(rec, inode=netns_inode(name))

    def _handle(self, ns: str | None):
        """A cached netlink handle for a namespace (closed in down(): it keeps the namespace alive)."""
        if ns not in self._ipr:
            from pyroute2 import IPRoute

            self._ipr[ns] = IPRoute() if ns is None else IPRoute(netns=ns, flags=0)
        return self._ipr[ns]

    def _veth(self, ns: str, ifname: str, peer_ns: str | None, peer_ifname: str, master: int) -> None:
        """A veth pair created in ``ns``; the peer goes straight into ``peer_ns`` (recorded on our side)."""
        ipr = self._handle(ns)
        self._ledger.add("link", netns=ns, ifname=ifname)
        peer = {"ifname": peer_ifname} if peer_ns is None else {"ifname": peer_ifname, "net_ns_fd": peer_ns}
        ipr.link("add", ifname=ifname, kind="veth", peer=peer)
        idx = ipr.link_lookup(ifname=ifname)[0]
        ipr.link("set", index=idx, master=master, state="up")

    def _bridge(self, ns: str, name: str) -> int:
        ipr = self._handle(ns)
        self._ledger.add("bridge", netns=ns, ifname=name)
        ipr.link("add", ifname=name, kind="bridge")
        idx = ipr.link_lookup(ifname=name)[0]
        ipr.link("set", index=idx, state="up")
        return idx

    @_netlink
    def _build_network(self) -> None:
        for ns in (self.ns_switch, self.ns_mgmt, *self.ns_hosts):
            ipr = self._handle(ns)
            ipr.link("set", index=ipr.link_lookup(ifname="lo")[0], state="up")
        self._step = "bridges"
        br_idx = {s: self._bridge(self.ns_switch, b) for s, b in self._bridges.items()}
        mg_br = self._bridge(self.ns_mgmt, "mgbr")
        mg = self._handle(self.ns_mgmt)
        mg.addr("add", index=mg_br, address=self.controller_addr, prefixlen=self.mgmt_subnet.prefixlen)
        topo = self.topology
        for i, h in enumerate(topo.hosts):
            self._step = f"host {h.name} interfaces"
            ns = self.ns_hosts[i]
            sw = next(iter(topo.graph.neighbors(h.name)))
            self._veth(self.ns_switch, f"h{i + 1}", ns, "eth0", br_idx[sw])
            self._veth(self.ns_mgmt, f"m{i + 1}", ns, "mgmt0", mg_br)
            hipr = self._handle(ns)
            for ifname, net in (("eth0", self.subnet), ("mgmt0", self.mgmt_subnet)):
                idx = hipr.link_lookup(ifname=ifname)[0]
                hipr.addr("add", index=idx, address=str(net.network_address + i + 1), prefixlen=net.prefixlen)
                hipr.link("set", index=idx, state="up")
        for a, b, if_a, if_b in self._isl:
            self._step = f"inter-switch link {a}-{b}"
            self._veth(self.ns_switch, if_a, None, if_b, br_idx[a])
            sw = self._handle(self.ns_switch)
            sw.link("set", index=sw.link_lookup(ifname=if_b)[0], master=br_idx[b], state="up")
        self._step = "shaping"
        for plan in self._links.values():
            ipr = self._handle(plan.netns)
            plan.index = ipr.link_lookup(ifname=plan.ifname)[0]
            ipr.tc("add", "htb", index=plan.index, handle="1:", default=0x10)
            ipr.tc("add-class", "htb", index=plan.index, handle="1:10", parent="1:",
                   rate=_rate(plan.rate_mbit), ceil=_rate(plan.rate_mbit))
            self._add_leaf_queue(ipr, plan.index)

    @property
    def leaf_queue(self) -> tuple[str, int] | None:
        """(qdisc kind, limit) under every HTB class: ("bfifo", bytes), ("pfifo", packets) or None (default)."""
        if self.queue_bytes is not None:
            return "bfifo", self.queue_bytes
        return ("pfifo", self.queue_pkts) if self.queue_pkts else None

    def _add_leaf_queue(self, ipr, index: int) -> None:
        """The bounded queue under the HTB class of one shaped interface (both backends use this)."""
        if self.leaf_queue is None:
            return
        kind, limit = self.leaf_queue
        if kind == "bfifo":
            _register_bfifo()
        ipr.tc("add", kind, index=index, handle="10:", parent=self.htb_class, limit=limit)

    def _tune_tcp(self) -> None:
        """Per-namespace TCP sysctls (they vanish with the namespace: nothing to undo)."""
        if not self.tcp_sysctls:
            return
        self._step = "tcp sysctls"
        kv = [f"{k}={v}" for k, v in self.tcp_sysctls.items()]
        for ns in self.ns_hosts:
            proc = subprocess.run(["ip", "netns", "exec", ns, "sysctl", "-qw", *kv], capture_output=True, text=True)
            if proc.returncode != 0:
                raise TestbedError(f"setting {kv} in {ns} failed: {proc.stderr.strip()}")

    def _build_hosts(self) -> None:
        self._step = "host records"
        hosts = []
        require_remote_path(str(self.workdir), f"testbed {self.tid}: workdir")
        for i, h in enumerate(self.topology.hosts):
            wd = host_file(self.workdir / "hosts", h.name)  # a checked name, never a path
            wd.mkdir(exist_ok=True)
            hosts.append(TestbedHost(name=h.name, index=i, netns=self.ns_hosts[i],
                                     data_addr=str(self.subnet.network_address + i + 1), ifname="eth0",
                                     ssh_addr=str(self.mgmt_subnet.network_address + i + 1), ssh_port=22,
                                     user=self.user, gpus=int(h.gpus), python=self.python, workdir=str(wd)))
        self.hosts = hosts

    @_netlink
    def _start_sshd(self) -> None:
        self._step = "ssh keys"
        t0 = time.monotonic()
        sshdir = self.workdir / "ssh"
        self.client_key, self.known_hosts = sshdir / "client_ed25519", sshdir / "known_hosts"
        specs = [(self.client_key, f"netlab-{self.tid}-controller")]
        host_key = {h.name: host_file(sshdir, h.name, "_host_ed25519") for h in self.hosts}
        specs += [(host_key[h.name], f"netlab-{self.tid}-{h.name}") for h in self.hosts]
        sshd_mod.make_keys(specs)
        auth = sshdir / "authorized_keys"
        auth.write_text(sshd_mod.public_key(self.client_key) + "\n")
        sshd_mod.write_known_hosts(self.known_hosts, [(h.ssh_addr, h.ssh_port, sshd_mod.public_key(host_key[h.name]))
                                                      for h in self.hosts])
        sshd_mod.ensure_privsep_dir()
        self.timings["ssh_keys_s"] = time.monotonic() - t0
        started = []
        for h in self.hosts:
            self._step = f"sshd on {h.name}"
            cfg = host_file(sshdir, h.name, "_sshd_config")
            sshd_mod.write_sshd_config(cfg, h.ssh_addr, h.ssh_port, host_key[h.name],
                                       host_file(sshdir, h.name, "_sshd.pid"), auth)
            logf = host_file(sshdir, h.name, "_sshd.log")
            proc = sshd_mod.start_sshd(cfg, h.netns, logf)
            self._procs.append(proc)
            self._ledger.add("process", role="sshd", pid=proc.pid, start=proc_start_time(proc.pid), netns=h.netns)
            started.append((h, proc, logf))
        for h, proc, logf in started:
            self._step = f"waiting for sshd on {h.name}"
            sshd_mod.wait_listening(lambda h=h: self._connect_mgmt(h, timeout_s=1.0), f"host {h.name}",
                                    proc=proc, log_path=logf)
        self.timings["sshd_s"] = time.monotonic() - t0

    # -- signals -------------------------------------------------------------
    def _install_signal_handlers(self) -> None:
        """Ctrl-C / kill tears the testbed down, then does what the previous handler would have done.

        A signal the process ignores stays ignored: a script started in the background (``nohup``,
        ``cmd &`` in a non-interactive shell) inherits SIG_IGN for SIGINT, and a Ctrl-C meant for the
        foreground job must not tear its testbed down.
        """
        if threading.current_thread() is not threading.main_thread():
            return
        for sig in (signal.SIGINT, signal.SIGTERM):
            prev = signal.getsignal(sig)
            if prev == signal.SIG_IGN:
                continue

            def handler(signum, frame, prev=prev):
                # pyroute2 forks helpers (no exec) that inherit this handler and get SIGTERM: only the
                # controller itself may tear down.
                if os.getpid() == self._owner_pid and not self._busy:
                    try:
                        self.down()
                    except TestbedError as exc:
                        log.error("%s", exc)
                if callable(prev):
                    prev(signum, frame)
                else:
                    signal.signal(signum, signal.SIG_DFL)
                    os.kill(os.getpid(), signum)

            signal.signal(sig, handler)
            self._handlers[sig] = (prev, handler)

    def _restore_signal_handlers(self) -> None:
        for sig, (prev, mine) in self._handlers.items():
            if signal.getsignal(sig) is mine:  # someone installed theirs after ours: leave the chain alone
                signal.signal(sig, prev)
        self._handlers = {}

    # -- teardown ------------------------------------------------------------
    def down(self) -> None:
        if self._ledger is None or self._busy or os.getpid() != self._owner_pid:
            return  # not up, already tearing down, or a forked child that must not touch the testbed
        self._busy = True
        t0 = time.monotonic()
        try:
            report = self._teardown()
            for proc in self._procs:
                try:
                    proc.wait(timeout=1.0)  # already killed: reap the zombies
                except subprocess.TimeoutExpired:
                    report.failures.append(f"process pid={proc.pid} still running after teardown")
            self._procs = []
            if self._guard is not None:
                from .guard import release_guard

                release_guard(self._guard)
                self._guard = None
        finally:
            self._restore_signal_handlers()
            if self._nl_pool is not None:
                self._nl_pool.shutdown(wait=False)
                self._nl_pool, self._nl_ident = None, None
            self._ledger = None
            self.hosts = []
            self._busy = False
        self.timings["down_s"] = time.monotonic() - t0
        if not report.ok:
            raise TestbedError(f"testbed {self.tid}: teardown incomplete: " + "; ".join(report.failures))

    @_netlink
    def _teardown(self):
        for ipr in self._ipr.values():
            ipr.close()
        self._ipr = {}
        return self._ledger.teardown(skip_roles={"guard"}, keep_files=self.keep_workdir)

    # -- operations ----------------------------------------------------------
    def _require_up(self) -> None:
        if self._ledger is None:
            raise TestbedError(f"testbed {self.tid} is not up (call up() or use it as a context manager)")

    def _own_host(self, host: TestbedHost) -> TestbedHost:
        self._require_up()
        if not isinstance(host, TestbedHost) or host not in self.hosts:
            raise TestbedError(f"{host!r} is not a host of testbed {self.tid}; hosts: "
                               f"{', '.join(h.name for h in self.hosts)}")
        return host

    @_netlink
    def _connect_mgmt(self, host: TestbedHost, timeout_s: float):
        from pyroute2 import netns

        sock = netns.create_socket(self.ns_mgmt, flags=0)  # flags=0: fail rather than create a namespace
        try:
            sock.settimeout(timeout_s)
            sock.connect((host.ssh_addr, host.ssh_port))
            sock.settimeout(None)
        except BaseException:
            sock.close()
            raise
        return sock

    def open_socket(self, host: TestbedHost, timeout_s: float = 10.0):
        """A TCP socket to the host's sshd, created inside the management namespace."""
        self._own_host(host)
        try:
            return self._connect_mgmt(host, timeout_s)
        except OSError as exc:
            raise TestbedError(f"testbed {self.tid}: cannot connect to {host.name} "
                               f"({host.ssh_addr}:{host.ssh_port}) from {self.ns_mgmt}: {exc}") from exc

    @_netlink
    def set_link_rate(self, src: str, dst: str, rate_mbit: float) -> None:
        self._require_up()
        plan = self._links.get((src, dst))
        if plan is None:
            valid = ", ".join(f"{u}->{v}" for u, v in self._links)
            raise TestbedError(f"testbed {self.tid}: no directed link {src!r}->{dst!r}; links: {valid}")
        if isinstance(rate_mbit, bool) or not isinstance(rate_mbit, (int, float)) or not math.isfinite(rate_mbit) \
                or rate_mbit <= 0:
            raise TestbedError(f"testbed {self.tid}: link {src}->{dst}: rate_mbit must be a finite number > 0, "
                               f"got {rate_mbit!r}")
        ipr = self._handle(plan.netns)
        ipr.tc("change-class", "htb", index=plan.index, handle=self.htb_class, parent=self.htb_root,
               rate=_rate(rate_mbit), ceil=_rate(rate_mbit))
        plan.rate_mbit = float(rate_mbit)

    def link_rates(self) -> pd.DataFrame:
        rows = [{"link": p.link, "src": p.src, "dst": p.dst, "tier": p.tier, "rate_gbps": p.rate_gbps,
                 "rate_mbit": p.rate_mbit, "netns": p.netns, "ifname": p.ifname} for p in self._links.values()]
        return pd.DataFrame(rows).sort_values("link", ignore_index=True)

    @_netlink
    def link_stats(self) -> pd.DataFrame:
        """HTB default-class counters per directed link (drops count packets the class queue refused)."""
        self._require_up()
        rows = []
        for p in sorted(self._links.values(), key=lambda p: p.link):
            stats = {}
            for msg in self._handle(p.netns).get_classes(index=p.index):
                if msg["handle"] == self.htb_class_id:
                    s2 = msg.get_attr("TCA_STATS2")
                    stats = {**(s2.get_attr("TCA_STATS_BASIC") or {}), **(s2.get_attr("TCA_STATS_QUEUE") or {})}
            rows.append({"link": p.link, "src": p.src, "dst": p.dst, "tier": p.tier, "netns": p.netns,
                         "ifname": p.ifname, "rate_mbit": p.rate_mbit,
                         **{k: int(stats.get(k, 0)) for k in ("bytes", "packets", "drops", "overlimits",
                                                              "backlog", "qlen")}})
        return pd.DataFrame(rows)

    def spawn(self, host: TestbedHost, argv: list[str], **popen_kw) -> subprocess.Popen:
        """Run ``argv`` inside the host's namespace; recorded (pid + start time) and killed on down()."""
        self._own_host(host)
        if isinstance(argv, (str, bytes)) or not argv:
            raise TestbedError(f"spawn on {host.name}: argv must be a non-empty list, got {argv!r}")
        if popen_kw.get("shell"):
            raise TestbedError(f"spawn on {host.name}: shell=True is not allowed; pass an argv list")
        user_pre = popen_kw.pop("preexec_fn", None)

        def enter(ns=host.netns):
            from pyroute2 import netns

            netns.setns(ns, flags=0)
            if user_pre is not None:
                user_pre()

        proc = subprocess.Popen([str(a) for a in argv], preexec_fn=enter, **popen_kw)
        self._procs.append(proc)
        self._ledger.add("process", role="client", pid=proc.pid, start=proc_start_time(proc.pid), netns=host.netns)
        return proc

    def info(self) -> dict:
        return {
            "backend": "netns", "tid": self.tid, "rate_scale": self.rate_scale, "topology": self.topology.name,
            "subnet": str(self.subnet), "mgmt_subnet": str(self.mgmt_subnet), "tcp_sysctls": dict(self.tcp_sysctls),
            "queue_pkts": self.queue_pkts, "queue_bytes": self.queue_bytes,
            "leaf_queue": list(self.leaf_queue) if self.leaf_queue else None,
            "controller_addr": self.controller_addr, "up": self._ledger is not None,
            "workdir": str(self.workdir) if self.workdir else None,
            "ledger": str(self._ledger.path) if self._ledger else None,
            "namespaces": [self.ns_switch, self.ns_mgmt, *self.ns_hosts],
            "hosts": [asdict(h) for h in self.hosts],
            "links": self.link_rates().to_dict("records"),
            "timings": dict(self.timings),
        }


def _register_bfifo() -> None:
    """Teach pyroute2 the bfifo qdisc: it (0.9) has no bfifo plugin, and for a kind it does not know it sends
    no options (the kernel's default limit) and forces the parent to the root (EEXIST under HTB). bfifo
    takes the same option as pfifo (``struct tc_fifo_qopt { __u32 limit; }``, counted in bytes instead of
    packets), so pfifo's encoder is the right one; ``setdefault`` leaves a future pyroute2's own in place.
    Read back (``tc -s qdisc``): ``qdisc bfifo 10: parent 1:10 limit <bytes>b``."""
    from pyroute2.netlink.rtnl import tcmsg
    from pyroute2.netlink.rtnl.tcmsg import sched_pfifo

    tcmsg.plugins.setdefault("bfifo", sched_pfifo)


def _rate(rate_mbit: float) -> str:
    """HTB rate string in kbit (whole kbit: the kernel's unit is bytes/s anyway)."""
    return f"{max(1, round(rate_mbit * 1000))}kbit"
