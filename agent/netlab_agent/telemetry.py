"""Counters of this host: links, qdiscs/classes and the namespace's TCP stack.

The sampler runs on absolute deadlines (t0 + k * interval) rather than
sleeping ``interval`` after each sample, so time spent sampling does not
accumulate into drift: a 10 Hz stream for 60 s yields 600 samples. A deadline
that is already past when the previous sample finishes is skipped and counted
in ``lost`` (the stream stays regular instead of bursting to catch up).
"""

from __future__ import annotations

import threading
import time
from typing import Callable

from pyroute2 import IPRoute

from .errors import SpecError
from .validate import IFNAME_WHAT, ifname_ok

TC_H_ROOT = 0xFFFFFFFF
LINK_FIELDS = ("rx_bytes", "tx_bytes", "rx_packets", "tx_packets", "tx_dropped", "rx_dropped")
# (file, section, counter) read from /proc/thread-self/net: the agent's namespace.
TCP_COUNTERS = {
    "snmp": {"Tcp": ("RetransSegs", "OutSegs", "InSegs", "ActiveOpens", "CurrEstab", "InErrs", "OutRsts")},
    "netstat": {
        "TcpExt": ("TCPDeliveredCE", "TCPDelivered", "TCPLostRetransmit", "TCPTimeouts",
                   "TCPSackRecovery", "TCPFastRetrans", "TCPBacklogDrop"),
        "IpExt": ("InCEPkts", "InECT0Pkts", "InECT1Pkts", "InNoECTPkts", "InOctets", "OutOctets"),
    },
}


def _handle(h: int) -> str:
    return "root" if h == TC_H_ROOT else f"{h >> 16:x}:{h & 0xFFFF:x}"


def read_proc_counters(kind: str) -> dict:
    """Parse the header/value line pairs of /proc/thread-self/net/{snmp,netstat}."""
    wanted = TCP_COUNTERS[kind]
    out: dict = {}
    with open(f"/proc/thread-self/net/{kind}") as fh:
        lines = fh.read().splitlines()
    for head, vals in zip(lines[0::2], lines[1::2]):
        section, names = head.split(":", 1)
        if section not in wanted:
            continue
        row = dict(zip(names.split(), vals.split(":", 1)[1].split()))
        for name in wanted[section]:
            if name in row:
                out[name] = int(row[name])
    return out


def read_links(ipr: IPRoute, ifnames: list[str] | None) -> dict:
    links = {}
    for msg in ipr.get_links():
        name = msg.get_attr("IFLA_IFNAME")
        if ifnames is not None and name not in ifnames:
            continue
        stats = msg.get_attr("IFLA_STATS64") or msg.get_attr("IFLA_STATS") or {}
        links[name] = {k: int(stats.get(k, 0)) for k in LINK_FIELDS}
    return links


def _tc_entry(msg, ifname: str, what: str) -> dict:
    stats2 = msg.get_attr("TCA_STATS2")
    basic = (stats2.get_attr("TCA_STATS_BASIC") if stats2 else None) or {}
    queue = (stats2.get_attr("TCA_STATS_QUEUE") if stats2 else None) or {}
    return {"ifname": ifname, "type": what, "handle": _handle(msg["handle"]),
            "parent": _handle(msg["parent"]), "kind": msg.get_attr("TCA_KIND"),
            "bytes": int(basic.get("bytes", 0)), "packets": int(basic.get("packets", 0)),
            "drops": int(queue.get("drops", 0)), "backlog": int(queue.get("backlog", 0)),
            "qlen": int(queue.get("qlen", 0)), "overlimits": int(queue.get("overlimits", 0))}


def read_qdiscs(ipr: IPRoute, ifnames: list[str] | None) -> list[dict]:
    names = {m["index"]: m.get_attr("IFLA_IFNAME") for m in ipr.get_links()}
    out = []
    for index, name in sorted(names.items()):
        if ifnames is not None and name not in ifnames:
            continue
        out += [_tc_entry(q, name, "qdisc") for q in ipr.get_qdiscs(index=index)]
        out += [_tc_entry(c, name, "class") for c in ipr.get_classes(index=index)]
    return out


def sample(ipr: IPRoute, ifnames: list[str] | None = None) -> dict:
    tcp = read_proc_counters("snmp")
    tcp.update(read_proc_counters("netstat"))
    return {"t": time.time(), "links": read_links(ipr, ifnames),
            "qdiscs": read_qdiscs(ipr, ifnames), "tcp": tcp}


def check_ifnames(args: dict) -> list[str] | None:
    ifnames = args.get("ifnames")
    if ifnames is not None and not (isinstance(ifnames, list) and all(ifname_ok(x) for x in ifnames)):
        raise SpecError(f"ifnames must be a list of interface names, each {IFNAME_WHAT}", "ifnames")
    return ifnames


class Sampler:
    """One background stream; emits ``{"event": "telemetry", seq, t, sample}``."""

    def __init__(self, emit: Callable[[dict], None]):
        self.emit = emit
        self.thread: threading.Thread | None = None
        self.stop_event = threading.Event()
        self.seq = 0
        self.lost = 0
        self.interval_ms = 0.0
        self.ifnames: list[str] | None = None

    @property
    def running(self) -> bool:
        return self.thread is not None and self.thread.is_alive()

    def start(self, interval_ms, ifnames: list[str] | None) -> dict:
        if not (isinstance(interval_ms, (int, float)) and not isinstance(interval_ms, bool)
                and 1 <= interval_ms <= 3_600_000):
            raise SpecError("interval_ms must be a number in [1, 3600000]", "interval_ms")
        self.stop()
        self.seq, self.lost, self.interval_ms, self.ifnames = 0, 0, float(interval_ms), ifnames
        self.stop_event = threading.Event()
        self.thread = threading.Thread(target=self._run, name="telemetry", daemon=True)
        self.thread.start()
        return {"interval_ms": self.interval_ms, "ifnames": ifnames}

    def stop(self) -> dict:
        if self.thread is not None:
            self.stop_event.set()
            self.thread.join(timeout=10)
            self.thread = None
        return {"samples": self.seq, "lost": self.lost}

    def _run(self) -> None:
        ipr = IPRoute()  # pyroute2 sockets are not shared between threads
        try:
            period = self.interval_ms / 1000.0
            t0 = time.monotonic()
            k = 0
            while not self.stop_event.is_set():
                try:
                    s = sample(ipr, self.ifnames)
                    self.emit({"event": "telemetry", "seq": self.seq, "t": s.pop("t"), "sample": s})
                    self.seq += 1
                except OSError:
                    return  # channel gone: the server notices and cleans up
                k += 1
                # Late for deadline k is fine (sample at once); a whole period late means
                # deadlines k..n-1 were missed: skip and count them.
                behind = int((time.monotonic() - t0) / period) - k
                if behind > 0:
                    self.lost += behind
                    k += behind
                self.stop_event.wait(max(0.0, t0 + k * period - time.monotonic()))
        finally:
            ipr.close()
