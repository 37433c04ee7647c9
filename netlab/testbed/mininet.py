"""MininetTestbed: the same testbed contract, built with Mininet's Python API.

Layout: one Mininet ``Host`` per topology host (its own network namespace,
data interface ``eth0`` = ``<subnet>.{i}``, management interface ``mgmt0`` =
``<mgmt_subnet>.{i}``), one Mininet ``LinuxBridge`` per topology switch, a
management ``LinuxBridge`` and a management ``Host`` (``<mgmt_subnet>.254``)
whose namespace holds every socket the controller opens. Links are Mininet
``TCLink`` s with ``bw`` = topology rate x 1000 x ``rate_scale`` Mbit (HTB,
root ``5:``, default class ``5:1``; Mininet shapes each end of a veth on its
egress, so every directed link is shaped where it leaves). Management links
are plain, never shaped.

What differs from :class:`~netlab.testbed.netns.NetnsTestbed` (and why):

- Mininet puts its bridges and the switch-side veth ends in the *root*
  namespace; they are named ``nl{tid}s{j}`` / ``nl{tid}s{j}h{i}`` /
  ``nl{tid}s{j}x{k}a`` / ``nl{tid}m`` ... so nothing of another testbed is
  touched, and recorded in the ledger before they are created.
- Mininet hosts have unnamed namespaces (held by their ``mnexec`` shells).
  Each is bind-mounted to ``/run/netns/nl{tid}-h{i}`` (``nl{tid}-mg`` for the
  management node) right after its shell starts, after checking it is not
  the root namespace, and recorded: ``IPRoute(netns=...)``, ``spawn``, sshd
  and the ledger's find-processes-by-namespace-inode all work as on netns.
- Mininet's own cleanup (``mn -c``, ``mininet.clean.cleanup``) kills and
  deletes by name pattern: never called. Its shells are stopped by their own
  pid (SIGHUP to the process group they lead, as ``Node.terminate`` does);
  everything else goes through the ledger, exactly as on netns. Mininet's
  one-time ``fixLimits`` (machine-wide sysctls) is skipped.
- ``Mininet`` prints tc errors and carries on: every shaped interface is read
  back after bring-up and a missing or wrong HTB class is an error.

Mininet comes from the Debian package ``mininet`` (``mnexec``, and its Python
library for the system's ``python3``). In another interpreter either ``pip install
mininet==2.3.0.dev6`` or, without it, the Debian library is loaded from its
``dist-packages`` beside ``mnexec``'s prefix on its own (only that package, not
the rest of dist-packages; :func:`_distro_mininet`).
"""

from __future__ import annotations

import importlib
import importlib.util
import logging
import math
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
import types
from pathlib import Path

from . import shaping
from .base import TestbedError
from .ledger import netns_inode, proc_start_time
from .netlink import on_netlink_thread
from .netns import NetnsTestbed, _new_tid
from .plan import HtbLayout, Namespaces, NetnsPlan, blackhole_routes, check_layout, host_sysctls, shaped_links

log = logging.getLogger(__name__)

MININET_HTB = HtbLayout(root="5:", default_class="5:1", link_class=None)  # Mininet's TCIntf: root 5:0 htb default 1
IFNAMSIZ = 15
# Programs Mininet runs (it calls exit() when one is missing: checked first, with the package to install).
TOOLS = {"mnexec": "mininet", "ifconfig": "net-tools", "brctl": "bridge-utils", "tc": "iproute2", "ip": "iproute2"}
HOW_TO_GET = ("Debian: apt-get install mininet bridge-utils (provides mnexec and, for the system python3, the "
              "mininet library, which netlab also loads into other interpreters); or pip install "
              "mininet==2.3.0.dev6 in this environment (still needs Debian's mnexec)")

_mn_lock = threading.Lock()
_mn: types.SimpleNamespace | None = None
_capture = threading.local()


# -- loading Mininet ---------------------------------------------------------
class _CaptureFilter(logging.Filter):
    """Mininet prints warnings and tc errors to the terminal; while netlab drives it they go to our log."""

    def filter(self, record):
        buf = getattr(_capture, "lines", None)
        if buf is None:
            return True
        msg = record.getMessage().strip()
        if msg:
            buf.append(msg)
            log.debug("mininet: %s", msg)
        return False


def _distro_mininet() -> Path | None:
    """The distribution's mininet library, found from ``mnexec`` on PATH: Debian installs
    ``<prefix>/bin/mnexec`` with the library in ``<prefix>/lib/python3/dist-packages/mininet``."""
    mnexec = shutil.which("mnexec")
    if mnexec is None:
        return None
    return Path(mnexec).resolve().parent.parent / "lib" / "python3" / "dist-packages" / "mininet"


def _import_mininet():
    """``mininet`` from this interpreter, else Debian's library loaded as an isolated package."""
    if "mininet" in sys.modules or importlib.util.find_spec("mininet") is not None:
        return importlib.import_module("mininet")
    package = _distro_mininet()
    init = package / "__init__.py" if package is not None else None
    if init is None or not init.is_file():
        raise ImportError(f"no module named 'mininet' and no distribution copy beside mnexec ({init})")
    spec = importlib.util.spec_from_file_location("mininet", init, submodule_search_locations=[str(package)])
    module = importlib.util.module_from_spec(spec)
    sys.modules["mininet"] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        sys.modules.pop("mininet", None)
        raise
    return module


def load_mininet() -> types.SimpleNamespace:
    """The Mininet classes netlab uses; TestbedError saying how to get what is missing."""
    global _mn
    with _mn_lock:
        if _mn is not None:
            return _mn
        missing = [f"{tool} (Debian package {pkg})" for tool, pkg in TOOLS.items() if shutil.which(tool) is None]
        if missing:
            raise TestbedError(f"mininet testbed: missing programs: {', '.join(missing)}. {HOW_TO_GET}")
        # mininet.log calls logging.setLoggerClass(MininetLogger) on import: every logger created later in
        # this process would be Mininet's. Put the previous class back.
        logger_class = logging.getLoggerClass()
        try:
            pkg = _import_mininet()
            from mininet.link import Link, TCIntf, TCLink
            from mininet.log import lg
            from mininet.net import Mininet
            from mininet.node import Host
            from mininet.nodelib import LinuxBridge
            from mininet.topo import Topo
        except Exception as exc:  # noqa: BLE001 - ImportError, or a broken install
            raise TestbedError(f"mininet testbed: cannot import mininet ({type(exc).__name__}: {exc}). "
                               f"{HOW_TO_GET}") from None
        finally:
            logging.setLoggerClass(logger_class)
        if not any(isinstance(f, _CaptureFilter) for f in lg.filters):
            lg.addFilter(_CaptureFilter())
        version = getattr(sys.modules.get("mininet.net"), "VERSION", None) or getattr(pkg, "__version__", "?")
        _mn = types.SimpleNamespace(Mininet=Mininet, Topo=Topo, Host=Host, LinuxBridge=LinuxBridge, Link=Link,
                                    TCLink=TCLink, TCIntf=TCIntf, version=version, path=os.path.dirname(pkg.__file__))
        return _mn


def mininet_missing() -> str | None:
    """Why the Mininet testbed cannot run here (for test skips), or None."""
    try:
        load_mininet()
    except TestbedError as exc:
        return str(exc)
    return None


def _root_links() -> set[str]:
    try:
        return set(os.listdir("/sys/class/net"))
    except OSError:
        return set()


def _ns_link(pid: int) -> str | None:
    try:
        return os.readlink(f"/proc/{pid}/ns/net")
    except OSError:  # e.g. pid 1 of a sandbox is not ours to inspect
        return None


class MininetTestbed(NetnsTestbed):
    """A topology emulated by Mininet (LinuxBridge switches, TCLink/HTB links); same interface as netns."""

    backend = "mininet"

    def __init__(self, topology, rate_scale: float = 0.002, subnet: str = "10.77.0.0/16",
                 mgmt_subnet: str = "10.78.0.0/16", workdir=None, python: str = sys.executable,
                 ssh: bool = True, keep_workdir: bool = False, user: str | None = None, **netns_kw):
        """Same arguments as NetnsTestbed (extra keywords such as ``tcp_sysctls`` are passed on to it)."""
        self._mn = load_mininet()
        self._net = None
        self._nodes: list = []           # every Mininet node whose shell we started (hosts, mg, bridges)
        self._node_ns: dict[str, str] = {}
        self._root_peers: list[str] = []  # root-namespace veth ends that go away with a host namespace
        self._mn_messages: list[str] = []
        super().__init__(topology, rate_scale=rate_scale, subnet=subnet, mgmt_subnet=mgmt_subnet, workdir=workdir,
                         python=python, ssh=ssh, keep_workdir=keep_workdir, user=user, **netns_kw)
        if self.gso_max_bytes is not None:
            raise TestbedError("the mininet backend does not set gso_max_bytes (Mininet creates the interfaces)")
        # Our root-namespace interfaces are called nl{tid}...: the id must be free there too.
        for _ in range(100):
            if not any(n.startswith(f"nl{self.tid}") for n in _root_links()):
                break
            self.tid = _new_tid()
            self.plan = self._make_plan()
        else:
            raise TestbedError("could not find a free testbed id")

    # -- plan ----------------------------------------------------------------
    def _make_plan(self) -> NetnsPlan:
        """Namespaces (no switch namespace: Mininet's bridges live in the root namespace), addresses,
        blackholes, sysctls and shaped links as on netns, with Mininet's interface names; no bridges,
        veths or addresses (Mininet wires them from :meth:`_mininet_topo`).

        A LinuxBridge enslaves the interfaces whose name *contains* the bridge's
        name, so switch names have a fixed width and each switch-side interface
        starts with its switch's name.
        """
        topo, tid = self.topology, self.tid
        check_layout(topo)
        ns = Namespaces.named(tid, topo.n_hosts, switch=False)
        width = len(str(max(len(topo.switches) - 1, 0)))
        self._bridges = {s: f"nl{tid}s{j:0{width}d}" for j, s in enumerate(topo.switches)}
        self._mg_bridge = f"nl{tid}m"
        self._host_sw_if = {}  # host index -> switch-side interface
        self._isl = []  # (switch a, switch b, interface on a, interface on b)

        def place(l: int, u: str, v: str) -> tuple[str | None, str]:
            if u in topo.host_index:
                return ns.hosts[topo.host_index[u]], "eth0"
            if v in topo.host_index:
                i = topo.host_index[v]
                self._host_sw_if[i] = f"{self._bridges[u]}h{i + 1}"
                return None, self._host_sw_if[i]
            k, forward = l // 2, l % 2 == 0  # cable k; links 2k (a->b) and 2k+1 (b->a)
            ifname = f"{self._bridges[u]}x{k}{'a' if forward else 'b'}"
            if forward:
                self._isl.append((u, v, ifname, f"{self._bridges[v]}x{k}b"))
            return None, ifname

        links = shaped_links(topo, self.rate_scale, place)
        names = [*self._bridges.values(), self._mg_bridge, *(l.ifname for l in links)]
        long = [n for n in names if len(n) > IFNAMSIZ]
        if long:
            raise TestbedError(f"topology {topo.name}: interface names too long for Linux ({long[:3]}...): "
                               "too many switches or cables for the mininet testbed")
        return NetnsPlan(tid, ns, self.addressing, blackhole_routes(self.addressing, tid), links, MININET_HTB,
                         self._queue, host_sysctls(ns, self.tcp_sysctls))

    def _setup_workdir(self) -> None:
        super()._setup_workdir()
        self._ledger.meta.update(backend="mininet", mininet=self._mn.version)
        self._ledger.save()

    # -- bring-up ------------------------------------------------------------
    def up(self) -> "MininetTestbed":
        if os.geteuid() != 0:
            raise TestbedError("the mininet testbed needs root (CAP_NET_ADMIN, mount for /run/netns)")
        return super().up()

    def _create_namespaces(self) -> None:
        """Nothing to do: each Mininet host's shell makes its namespace (named in ``_attach_namespace``)."""

    def _node_classes(self):
        """Mininet node classes that report their shells to this testbed as soon as they exist."""
        mn, tb = self._mn, self

        class NetlabHost(mn.Host):
            def _popen(node, cmd, **params):  # noqa: N805 - Mininet's naming
                proc = super()._popen(cmd, **params)
                tb._record_shell(node, proc)
                return proc

            def startShell(node, *args, **kwargs):  # noqa: N802,N805
                super().startShell(*args, **kwargs)
                tb._attach_namespace(node)

        class NetlabBridge(mn.LinuxBridge):
            def _popen(node, cmd, **params):  # noqa: N805
                proc = super()._popen(cmd, **params)
                tb._record_shell(node, proc)
                return proc

        class ShapedIntf(mn.TCIntf):
            bwParamMax = 10 ** 7  # Mininet ignores (with a printed error) rates above 1000 Mbit by default

        class ShapedLink(mn.TCLink):
            def __init__(link, *args, **kwargs):  # noqa: N805
                kwargs.setdefault("cls1", ShapedIntf)
                kwargs.setdefault("cls2", ShapedIntf)
                super().__init__(*args, **kwargs)

        return NetlabHost, NetlabBridge, ShapedLink

    def _record_shell(self, node, proc) -> None:
        """Ledger record of a Mininet shell (mnexec ... bash) by pid and start time."""
        if self._ledger is None:
            return
        self._ledger.add("process", role="mnshell", pid=proc.pid, start=proc_start_time(proc.pid),
                         node=node.name, netns=self._node_ns.get(node.name))
        if node not in self._nodes:
            self._nodes.append(node)

    def _attach_namespace(self, node) -> None:
        """Bind-mount a Mininet host's namespace to /run/netns/<name> (recorded first)."""
        from pyroute2 import netns

        name = self._node_ns[node.name]
        self._step = f"namespace {name}"
        ns = _ns_link(node.pid)
        if ns is None or ns in (_ns_link(1), _ns_link(os.getpid())):
            # Never name the root namespace as a testbed namespace: teardown kills every process inside one.
            raise TestbedError(f"mininet node {node.name} (pid {node.pid}) is in the root namespace ({ns})")
        rec = self._ledger.add("netns", name=name, inode=None)
        try:
            netns.attach(name, node.pid)
        except FileExistsError:
            self._ledger.discard(rec)  # someone else's: never remove it
            raise
        inode = netns_inode(name)
        self._ledger.update(rec, inode=inode)
        if f"net:[{inode}]" != _ns_link(node.pid):
            raise TestbedError(f"/run/netns/{name} does not name the namespace of {node.name} (pid {node.pid})")
        self._step = "mininet build"

    def _mininet_topo(self, host_cls, bridge_cls, link_cls):
        """The netlab topology as a Mininet Topo, plus the management network."""
        mn, topo = self._mn, self.topology
        dplen, mplen = self.addressing.subnet.prefixlen, self.addressing.mgmt_subnet.prefixlen
        t = mn.Topo()
        # Explicit datapath ids: Mininet derives one from the digits in a name, and a tid may have none.
        for j, br in enumerate([*self._bridges.values(), self._mg_bridge]):
            t.addSwitch(br, cls=bridge_cls, dpid=f"{j + 1:016x}")
        for i, h in enumerate(topo.hosts):
            name = f"h{i + 1}"
            self._node_ns[name] = self.ns_hosts[i]
            t.addHost(name, cls=host_cls, ip=f"{self.addressing.data_addr(i)}/{dplen}")
        self._node_ns["mg"] = self.ns_mgmt
        t.addHost("mg", cls=host_cls, ip=f"{self.controller_addr}/{mplen}")
        for i, h in enumerate(topo.hosts):
            sw = next(iter(topo.graph.neighbors(h.name)))
            t.addLink(f"h{i + 1}", self._bridges[sw], port1=0, intfName1="eth0", intfName2=self._host_sw_if[i],
                      cls=link_cls, params1={"bw": self._rate_mbit[(h.name, sw)]},
                      params2={"bw": self._rate_mbit[(sw, h.name)]})
            t.addLink(f"h{i + 1}", self._mg_bridge, port1=1, intfName1="mgmt0", intfName2=f"{self._mg_bridge}h{i + 1}",
                      cls=mn.Link, params1={"ip": f"{self.addressing.mgmt_addr(i)}/{mplen}"})
        t.addLink("mg", self._mg_bridge, intfName1="mgmt0", intfName2=f"{self._mg_bridge}c", cls=mn.Link)
        for a, b, if_a, if_b in self._isl:
            t.addLink(self._bridges[a], self._bridges[b], intfName1=if_a, intfName2=if_b, cls=link_cls,
                      params1={"bw": self._rate_mbit[(a, b)]}, params2={"bw": self._rate_mbit[(b, a)]})
        return t

    def _record_interfaces(self) -> None:
        """Record every interface before Mininet creates it (removing what does not exist is a no-op).

        A host's veth pairs are created inside the host namespace and vanish with it (one kernel batch),
        so they are recorded there; the management node's and the inter-switch veths and the bridges
        live in (or reach into) the root namespace and are removed there by name.
        """
        add = self._ledger.add
        for br in (*self._bridges.values(), self._mg_bridge):
            add("bridge", netns=None, ifname=br)
        self._root_peers = []
        for i in range(self.topology.n_hosts):
            for ifname, peer in (("eth0", self._host_sw_if[i]), ("mgmt0", f"{self._mg_bridge}h{i + 1}")):
                add("link", netns=self.ns_hosts[i], ifname=ifname, peer=peer)
                self._root_peers.append(peer)
        # The management namespace can outlive teardown while a controller socket is still open in it.
        add("link", netns=None, ifname=f"{self._mg_bridge}c")
        for _, _, if_a, _ in self._isl:
            add("link", netns=None, ifname=if_a)

    def _build_network(self) -> None:
        mn = self._mn
        self._step = "mininet topology"
        host_cls, bridge_cls, link_cls = self._node_classes()
        mtopo = self._mininet_topo(host_cls, bridge_cls, link_cls)
        self._record_interfaces()
        # Mininet.init() raises machine-wide sysctls (fixLimits) once per process: netlab changes nothing
        # outside what its ledger records, so that step is skipped (root was checked in up()).
        mn.Mininet.inited = True
        self._mn_messages = []
        _capture.lines = self._mn_messages
        try:
            self._step = "mininet build"
            self._net = mn.Mininet(mtopo, switch=bridge_cls, host=host_cls, controller=None, link=link_cls,
                                   build=False, ipBase=str(self.addressing.subnet), autoSetMacs=False,
                                   waitConnected=False)
            self._net.build()
            self._step = "mininet start (bridges)"
            self._net.start()
        finally:
            _capture.lines = None
        self._step = "shaping check"
        self._check_shaping()
        if self.leaf_queue:
            self._step = "queue limits"
            self._add_queues()

    @on_netlink_thread
    def _add_queues(self) -> None:
        """The same bounded queue under every HTB class as NetnsTestbed (pfifo of ``queue_pkts`` packets, or a
        bfifo of ``queue_bytes`` bytes; see netns.QUEUE_PKTS)."""
        plan = self.plan
        for l in plan.links:
            shaping.add_queue(self._handle(l.netns), self._if_index[(l.src, l.dst)], plan.htb, plan.leaf_queue)

    @on_netlink_thread
    def _check_shaping(self) -> None:
        """Mininet only prints tc errors: read every shaped interface back from the kernel."""
        bad = []
        for l in self.plan.links:
            ipr = self._handle(l.netns)
            idx = ipr.link_lookup(ifname=l.ifname)
            if not idx:
                bad.append(f"{l.src}->{l.dst}: interface {l.ifname} missing")
                continue
            self._if_index[(l.src, l.dst)] = idx[0]
            got, want = shaping.class_rate_mbit(ipr, idx[0], self.plan.htb), self._rate_mbit[(l.src, l.dst)]
            if got is None or not math.isclose(got, want, rel_tol=0.01):
                bad.append(f"{l.src}->{l.dst} on {l.ifname}: HTB class {self.plan.htb.default_class} rate {got} "
                           f"Mbit, expected {want:g}")
        if bad:
            errors = [m for m in self._mn_messages if "rror" in m]
            raise TestbedError("Mininet did not shape the links: " + "; ".join(bad)
                               + (f"; Mininet said: {' | '.join(errors[-5:])}" if errors else ""))

    # -- teardown ------------------------------------------------------------
    @on_netlink_thread
    def _teardown(self):
        self._stop_shells()
        report = super()._teardown()
        self._wait_root_peers_gone(report)
        return report

    def _stop_shells(self, timeout_s: float = 1.0) -> None:
        """Stop Mininet's shells as ``Node.terminate`` does (SIGHUP to the group each leads), bounded.

        Each shell is our own unreaped child, so its pid cannot name another
        process; ``mnexec -d`` made it a session and group leader, and the
        group holds only what Mininet ran through it.
        """
        nodes, self._nodes = list(self._nodes), []
        live = []
        for node in nodes:
            shell = getattr(node, "shell", None)
            if shell is not None and shell.poll() is None:
                try:
                    os.killpg(shell.pid, signal.SIGHUP)
                except ProcessLookupError:
                    pass
                live.append(shell)
        deadline = time.monotonic() + timeout_s
        for shell in live:
            try:
                shell.wait(timeout=max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                shell.kill()
                shell.wait()
        for node in nodes:
            if getattr(node, "shell", None) is not None:
                try:
                    node.terminate()  # shell gone: closes its pty and reaps it, signals nothing
                except OSError as exc:
                    log.debug("mininet node %s cleanup: %s", node.name, exc)
        self._net = None

    def _wait_root_peers_gone(self, report, timeout_s: float = 2.0) -> None:
        """Host veths leave the root namespace when their host namespace is destroyed (asynchronously)."""
        from pyroute2 import IPRoute, NetlinkError

        names = list(self._root_peers)
        deadline = time.monotonic() + timeout_s
        left = names
        while left and time.monotonic() < deadline:
            have = _root_links()
            left = [n for n in left if n in have]
            if left:
                time.sleep(0.005)
        if not left:
            return
        with IPRoute() as ipr:  # a namespace outlived teardown (a handle kept open?): remove the pair by name
            for name in left:
                try:
                    idx = ipr.link_lookup(ifname=name)
                    if idx:
                        ipr.link("del", index=idx[0])
                        report.removed.append(f"link netns=None ifname={name} (host namespace still alive)")
                except NetlinkError as exc:
                    report.failures.append(f"link {name}: {exc}")

    def info(self) -> dict:
        out = super().info()
        out.update(backend="mininet", mininet={"version": self._mn.version, "path": self._mn.path},
                   bridges={**self._bridges, "(management)": self._mg_bridge},
                   mininet_nodes={name: ns for name, ns in self._node_ns.items()})
        return out
