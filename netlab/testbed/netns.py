"""NetnsTestbed: a topology emulated with network namespaces on one Linux machine; its lifecycle.

Layout (:mod:`.plan`, docs/testbed-design.md): one namespace per host
(``nl{tid}-h{i}``), one namespace holding a Linux bridge per topology switch
(``nl{tid}-sw``) and a management namespace (``nl{tid}-mg``) with a bridge
that reaches every host's sshd, never shaped. Every directed topology link is
shaped with HTB (:mod:`.shaping`) on the egress of the veth end that sends in
that direction.

Why this shape: everything lives inside namespaces the testbed created, so no
testbed packet can touch the machine's own interfaces, and removing the
namespaces removes the network. This module carries the plan out and undoes
it: every resource is recorded in a :class:`~netlab.testbed.ledger.Ledger`
before it is created, a guardian process removes them if the controller dies,
and Ctrl-C / SIGTERM tear down too.
"""

from __future__ import annotations

import errno
import getpass
import ipaddress
import logging
import math
import os
import secrets
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict
from pathlib import Path

import pandas as pd

from ..topology import load_topology
from . import shaping
from . import sshd as sshd_mod
from .base import Testbed, TestbedError, TestbedHost
from .jobnet import Allocations, JobNetworks
from .ledger import NETNS_DIR, Ledger, netns_inode, proc_start_time
from .netlink import Netlink, on_netlink_thread
from .paths import host_file, require_remote_path
from .plan import DATA_IFNAME, Addressing, NetnsPlan, ShapedLink, VethPair, leaf_queue, plan_netns
from .routing import put_route
from .signals import TeardownOnSignal

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


def _new_tid() -> str:
    """4 hex chars not used by any existing namespace, so nothing of another testbed is touched."""
    existing = set(os.listdir(NETNS_DIR)) if os.path.isdir(NETNS_DIR) else set()
    for _ in range(100):
        tid = secrets.token_hex(2)
        if not any(n.startswith(f"nl{tid}-") for n in existing):
            return tid
    raise TestbedError("could not find a free testbed id")


class NetnsTestbed(Allocations, Testbed):
    """The default backend: namespaces, veth pairs, Linux bridges and HTB (see module doc); per-job network
    allocations through :class:`~netlab.testbed.jobnet.Allocations`."""

    def __init__(self, topology, rate_scale: float = 0.002, subnet: str = "10.77.0.0/16",
                 mgmt_subnet: str = "10.78.0.0/16", workdir=None, python: str = sys.executable,
                 ssh: bool = True, keep_workdir: bool = False, user: str | None = None,
                 tcp_sysctls: dict | None = None, queue_pkts: int | None = QUEUE_PKTS,
                 queue_bytes: int | None = None, gso_max_bytes: int | None = None):
        """``queue_pkts`` bounds each shaped link's queue in packets (a pfifo under its HTB class; None: the
        kernel's default); ``queue_bytes``, when given, bounds it in bytes instead (a bfifo: what a switch
        port's buffer is, and what makes a small queue drop under overload whatever the packet sizes).
        ``gso_max_bytes`` caps the GSO packets shaped interfaces send (None: the kernel's 64 KiB). HTB
        schedules whole packets, so a high-priority class waits for a low one's packet in flight: 64 KiB
        is 5 ms at 100 Mbit, which cost a prio-0 job 9% of its all-reduce time here, 16 KiB 4%."""
        self.topology = load_topology(topology)
        if not (isinstance(rate_scale, (int, float)) and math.isfinite(rate_scale) and rate_scale > 0):
            raise TestbedError(f"rate_scale must be a finite number > 0, got {rate_scale!r}")
        self.rate_scale = float(rate_scale)
        self.addressing = Addressing.parse(subnet, mgmt_subnet, self.topology.n_hosts, f"topology {self.topology.name}")
        self.controller_addr = self.addressing.controller_addr
        self.python, self.ssh, self.keep_workdir = python, ssh, keep_workdir
        self.tcp_sysctls = dict(TCP_SYSCTLS if tcp_sysctls is None else tcp_sysctls)
        self._queue = leaf_queue(queue_pkts, queue_bytes)
        self.queue_pkts, self.queue_bytes = queue_pkts, queue_bytes
        self.gso_max_bytes = gso_max_bytes
        self.tid = _new_tid()
        self.plan = self._make_plan()
        self.user = user or getpass.getuser()
        if workdir is not None:  # it becomes sshd_config lines, pip --target and the agents' --state-dir
            workdir = require_remote_path(str(Path(workdir).resolve()), f"testbed {self.tid}: workdir")
        self._workdir_arg = workdir
        self._if_index: dict[tuple[str, str], int] = {}  # shaped interface of each directed link, once up
        # each link's rate as set_link_rate last set it (the plan's rate until then; a second up() keeps it)
        self._rate_mbit = {(l.src, l.dst): l.rate_mbit for l in self.plan.links}
        self.hosts: list[TestbedHost] = []
        self.known_hosts = self.client_key = None
        self.workdir: Path | None = None
        self.timings: dict[str, float] = {}
        self._ledger: Ledger | None = None
        self._guard: subprocess.Popen | None = None
        self._procs: list[subprocess.Popen] = []
        # pyroute2's forked helpers inherit the handlers: only the controller itself, not mid-teardown, tears down
        self._signals = TeardownOnSignal(self.down, lambda: os.getpid() == self._owner_pid and not self._busy,
                                         TestbedError)
        self._busy = False
        self._step = ""
        self._owner_pid = os.getpid()
        self._netlink = Netlink(lambda: f"netlab-netlink-{self.tid}")
        self._jobnets = JobNetworks(self)

    # -- plan ----------------------------------------------------------------
    def _make_plan(self) -> NetnsPlan:
        """What this testbed creates, named after ``self.tid`` (a backend that wires its own links overrides it)."""
        return plan_netns(self.topology, self.tid, self.addressing, self.rate_scale, self._queue, self.tcp_sysctls,
                          self.gso_max_bytes)

    @property
    def ns_mgmt(self) -> str:
        return self.plan.namespaces.mgmt

    @property
    def ns_hosts(self) -> tuple[str, ...]:
        return self.plan.namespaces.hosts

    @property
    def htb_class(self) -> str:
        """The HTB class that holds each link's rate."""
        return self.plan.htb.default_class

    def _shaped(self, src: str, dst: str) -> ShapedLink:
        link = self.plan.link(src, dst)
        if link is None:
            valid = ", ".join(f"{l.src}->{l.dst}" for l in self.plan.links)
            raise TestbedError(f"testbed {self.tid}: no directed link {src!r}->{dst!r}; links: {valid}")
        return link

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
            self._signals.install()
            self._add_blackholes()
            self._create_namespaces()
            self._build_network()
            self.timings["network_s"] = time.monotonic() - t0
            self._build_hosts()
            self._set_sysctls()
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
                "namespaces": list(self.plan.namespaces.all)}
        self._ledger = Ledger(self.workdir / "ledger.json", meta=meta)
        if created:
            self._ledger.add("dir", path=str(self.workdir), tree=True)
        else:
            self._ledger.add("file", path=str(self._ledger.path))
        for sub in ("hosts", "ssh"):
            self._ledger.add("dir", path=str(self.workdir / sub), tree=True)
            (self.workdir / sub).mkdir(exist_ok=True)

    @on_netlink_thread
    def _add_blackholes(self) -> None:
        """Root-namespace blackholes: a stray connection to a testbed address fails here, never leaves."""
        from pyroute2 import NetlinkError

        self._step = "blackhole routes"
        ipr = self._handle(None)
        for r in self.plan.blackholes:  # our own metric: several testbeds may use the same subnets
            self._ledger.add("route", netns=r.netns, dst=r.dst, type=r.type, priority=r.priority)
            ipr.route("add", dst=r.dst, type=r.type, priority=r.priority)
            probe = str(ipaddress.IPv4Network(r.dst).network_address + 1)
            try:  # the kernel answers a lookup that hits a blackhole with EINVAL
                got = ipr.route("get", dst=probe)
            except NetlinkError as exc:
                if exc.code != errno.EINVAL:
                    raise
            else:
                raise TestbedError(f"root namespace routes {probe} via {got[0].get_attr('RTA_OIF')!r} "
                                   f"(a more specific route covers {r.dst}), not to our blackhole: pick another subnet")

    @on_netlink_thread
    def _create_namespaces(self) -> None:
        from pyroute2 import netns

        for name in self.plan.namespaces.all:
            self._step = f"namespace {name}"
            rec = self._ledger.add("netns", name=name, inode=None)
            try:
                netns.create(name)
            except FileExistsError:
                self._ledger.discard(rec)  # someone else's: never remove it
                raise
            self._ledger.update(rec, inode=netns_inode(name))

    def _handle(self, ns: str | None):
        """The cached netlink handle of a namespace (closed in down(): it keeps the namespace alive)."""
        return self._netlink.handle(ns)

    def _bridge(self, ns: str, name: str) -> int:
        ipr = self._handle(ns)
        self._ledger.add("bridge", netns=ns, ifname=name)
        ipr.link("add", ifname=name, kind="bridge")
        idx = ipr.link_lookup(ifname=name)[0]
        ipr.link("set", index=idx, state="up")
        return idx

    def _veth(self, v: VethPair, bridges: dict[tuple[str | None, str], int]) -> None:
        """A veth pair created in ``v.netns`` (recorded there); the peer goes straight into its namespace."""
        ipr = self._handle(v.netns)
        self._ledger.add("link", netns=v.netns, ifname=v.ifname)
        peer = {"ifname": v.peer_ifname} if v.peer_netns == v.netns else {"ifname": v.peer_ifname,
                                                                             "net_ns_fd": v.peer_netns}
        ipr.link("add", ifname=v.ifname, kind="veth", peer=peer)
        for ns, ifname, master in ((v.netns, v.ifname, v.master), (v.peer_netns, v.peer_ifname, v.peer_master)):
            end = self._handle(ns)
            idx = end.link_lookup(ifname=ifname)[0]
            if master is None:
                end.link("set", index=idx, state="up")
            else:
                end.link("set", index=idx, master=bridges[(ns, master)], state="up")

    @on_netlink_thread
    def _build_network(self) -> None:
        """Bridges, veth pairs, addresses, routes and shaping, in the plan's order."""
        plan = self.plan
        for ns in plan.namespaces.all:
            ipr = self._handle(ns)
            ipr.link("set", index=ipr.link_lookup(ifname="lo")[0], state="up")
        self._step = "bridges"
        bridges = {(b.netns, b.name): self._bridge(b.netns, b.name) for b in plan.bridges}
        for v in plan.veths:
            self._step = f"veth {v.ifname} ({v.netns}) - {v.peer_ifname} ({v.peer_netns})"
            self._veth(v, bridges)
        for a in plan.addresses:
            self._step = f"address {a.address} on {a.ifname} ({a.netns})"
            ipr = self._handle(a.netns)
            ipr.addr("add", index=ipr.link_lookup(ifname=a.ifname)[0], address=a.address, prefixlen=a.prefixlen)
        for r in plan.routes:
            self._step = f"route to {r.dst} in {r.netns}" + (f" (table {r.table})" if r.table != 254 else "")
            ipr = self._handle(r.netns)
            put_route(ipr, r, lambda name, ipr=ipr: ipr.link_lookup(ifname=name)[0])
        self._step = "shaping"
        for link in plan.links:
            ipr = self._handle(link.netns)
            idx = self._if_index[(link.src, link.dst)] = ipr.link_lookup(ifname=link.ifname)[0]
            if plan.gso_max_bytes is not None:
                ipr.link("set", index=idx, gso_max_size=plan.gso_max_bytes)
            shaping.shape(ipr, idx, plan.htb, self._rate_mbit[(link.src, link.dst)], plan.leaf_queue,
                          plan.quantum_bytes)
        if plan.htb.link_class is not None:
            self._jobnets.reapply()  # the allocation plan without jobs: every link's default leaf

    @property
    def leaf_queue(self) -> tuple[str, int] | None:
        """(qdisc kind, limit) under every HTB class: ("bfifo", bytes), ("pfifo", packets) or None (default)."""
        q = self.plan.leaf_queue
        return (q.kind, q.limit) if q is not None else None

    def _set_sysctls(self) -> None:
        """The plan's per-namespace sysctls, one ``sysctl`` per namespace (they vanish with it: nothing to undo)."""
        per_ns: dict[str, list[str]] = {}
        for c in self.plan.sysctls:
            per_ns.setdefault(c.netns, []).append(f"{c.key}={c.value}")
        for ns, kv in per_ns.items():
            self._step = f"sysctls in {ns}"
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
                                     data_addr=self.addressing.data_addr(i), ifname=DATA_IFNAME,
                                     ssh_addr=self.addressing.mgmt_addr(i), ssh_port=22,
                                     user=self.user, gpus=int(h.gpus), python=self.python, workdir=str(wd)))
        self.hosts = hosts

    @on_netlink_thread
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
            self._signals.restore()
            self._netlink.shutdown()
            self._jobnets.forget()
            self._ledger = None
            self.hosts = []
            self._busy = False
        self.timings["down_s"] = time.monotonic() - t0
        if not report.ok:
            raise TestbedError(f"testbed {self.tid}: teardown incomplete: " + "; ".join(report.failures))

    @on_netlink_thread
    def _teardown(self):
        self._netlink.close_handles()
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

    @on_netlink_thread
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

    @on_netlink_thread
    def set_link_rate(self, src: str, dst: str, rate_mbit: float) -> None:
        self._require_up()
        link = self._shaped(src, dst)
        if isinstance(rate_mbit, bool) or not isinstance(rate_mbit, (int, float)) or not math.isfinite(rate_mbit) \
                or rate_mbit <= 0:
            raise TestbedError(f"testbed {self.tid}: link {src}->{dst}: rate_mbit must be a finite number > 0, "
                               f"got {rate_mbit!r}")
        shaping.set_rate(self._handle(link.netns), self._if_index[(src, dst)], self.plan.htb, rate_mbit)
        self._rate_mbit[(src, dst)] = float(rate_mbit)
        if self.plan.htb.link_class is not None:
            self._jobnets.reapply()  # the leaves' ceilings follow the link's rate

    def link_rates(self) -> pd.DataFrame:
        rows = [{"link": l.link, "src": l.src, "dst": l.dst, "tier": l.tier, "rate_gbps": l.rate_gbps,
                 "rate_mbit": self._rate_mbit[(l.src, l.dst)], "netns": l.netns, "ifname": l.ifname}
                for l in self.plan.links]
        return pd.DataFrame(rows).sort_values("link", ignore_index=True)

    @on_netlink_thread
    def link_stats(self) -> pd.DataFrame:
        """HTB counters per directed link, summed over its leaf classes (drops count packets their queues
        refused); per job: :meth:`job_stats`."""
        self._require_up()
        rows = []
        for l in sorted(self.plan.links, key=lambda l: l.link):
            counters = shaping.class_counters(self._handle(l.netns), self._if_index[(l.src, l.dst)], self.plan.htb)
            rows.append({"link": l.link, "src": l.src, "dst": l.dst, "tier": l.tier, "netns": l.netns,
                         "ifname": l.ifname, "rate_mbit": self._rate_mbit[(l.src, l.dst)], **counters})
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
            "subnet": str(self.addressing.subnet), "mgmt_subnet": str(self.addressing.mgmt_subnet),
            "tcp_sysctls": dict(self.tcp_sysctls),
            "queue_pkts": self.queue_pkts, "queue_bytes": self.queue_bytes, "gso_max_bytes": self.gso_max_bytes,
            "leaf_queue": list(self.leaf_queue) if self.leaf_queue else None,
            "controller_addr": self.controller_addr, "up": self._ledger is not None,
            "workdir": str(self.workdir) if self.workdir else None,
            "ledger": str(self._ledger.path) if self._ledger else None,
            "namespaces": list(self.plan.namespaces.all),
            "hosts": [asdict(h) for h in self.hosts],
            "links": self.link_rates().to_dict("records"),
            "timings": dict(self.timings),
        }

