"""A ledger of everything a testbed created, so exactly that is removed.

Why a file: the controller can die at any point (SIGKILL, a crash, a power
button on a laptop). The ledger is rewritten atomically after every record
(temp file + ``os.replace``), so a guardian process or a later
``python -m netlab.testbed.ledger cleanup PATH`` can undo what was created,
and nothing else. Things are recorded *before* they are created where their
identity is known in advance (a name), because removal is idempotent:
removing what does not exist is a no-op, while a resource created but never
recorded would leak.

Processes are killed only by recorded pid after checking that the process
start time (``/proc/<pid>/stat`` field 22) still matches, through a pidfd so
the check and the signal refer to the same process. Processes that live in
one of the ledger's namespaces (sshd's per-connection children, whatever an
agent started) are found by comparing ``/proc/<pid>/ns/net`` with the
namespace inode recorded at creation: identification by recorded namespace,
never by name pattern.
"""

from __future__ import annotations

import errno
import json
import os
import select
import shutil
import signal
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

NETNS_DIR = "/run/netns"
# Removal order (processes are handled first, separately). A "jobnet" record lists one job's network
# allocation (u32 filters, HTB classes, policy rules, routes, addresses: netlab.testbed.jobnet), in removal order.
_PHASES = (("route",), ("jobnet",), ("qdisc", "link", "bridge"), ("netns",), ("file", "dir"))
_IFACES = _PHASES[2]
# Which recorded processes go first: clients before sshd listeners (their children are in between).
_ROLE_ORDER = {"client": 0, "sshd": 2}


# -- /proc helpers -----------------------------------------------------------
def proc_start_time(pid: int) -> int | None:
    """Start time of ``pid`` in clock ticks since boot, or None if it does not exist (or is a zombie)."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = text[text.rindex(")") + 2:].split()
    if fields[0] == "Z":
        return None
    return int(fields[19])


def netns_inode(name: str) -> int | None:
    """Inode of the named namespace (what ``/proc/<pid>/ns/net`` points to), None if it is gone."""
    try:
        return os.stat(os.path.join(NETNS_DIR, name)).st_ino
    except OSError:
        return None


def pids_in_netns(inodes) -> dict[int, int]:
    """pid -> namespace inode for every process whose network namespace is one of ``inodes``."""
    wanted = {f"net:[{i}]": i for i in inodes if i}
    found = {}
    if not wanted:
        return found
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            link = os.readlink(f"/proc/{entry.name}/ns/net")
        except OSError:
            continue
        if link in wanted:
            found[int(entry.name)] = wanted[link]
    return found


@dataclass
class TeardownReport:
    """What a teardown did; ``failures`` lists what could not be removed and why."""

    removed: list[str] = field(default_factory=list)
    killed: list[int] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.failures


class Ledger:
    """Creation-ordered records of testbed resources in a JSON file (see module doc)."""

    def __init__(self, path, records: list[dict] | None = None, meta: dict | None = None):
        self.path = Path(path)
        self.records: list[dict] = list(records or [])
        self.meta = dict(meta or {})

    @classmethod
    def load(cls, path) -> "Ledger":
        doc = json.loads(Path(path).read_text())
        return cls(path, doc.get("records", []), doc.get("meta", {}))

    # -- recording -----------------------------------------------------------
    def add(self, kind: str, **fields) -> dict:
        """Append one record and write the file; returns the record (for update/discard)."""
        rec = {"kind": kind, **fields}
        self.records.append(rec)
        self.save()
        return rec

    def update(self, rec: dict, **fields) -> None:
        rec.update(fields)
        self.save()

    def discard(self, rec: dict) -> None:
        """Forget a record whose creation failed because the thing was not ours (e.g. EEXIST)."""
        self.records = [r for r in self.records if r is not rec]
        self.save()

    def save(self) -> None:
        """Atomic rewrite: a reader sees the old or the new ledger, never half of one."""
        doc = {"version": 1, "meta": self.meta, "records": self.records}
        fd, tmp = tempfile.mkstemp(prefix=".ledger-", dir=self.path.parent)
        try:
            with os.fdopen(fd, "w") as fh:
                json.dump(doc, fh, indent=1)
            os.replace(tmp, self.path)
        except BaseException:
            try:
                os.unlink(tmp)
            except OSError:
                pass
            raise

    def namespaces(self) -> dict[str, int | None]:
        return {r["name"]: r.get("inode") for r in self.records if r["kind"] == "netns"}

    # -- removal -------------------------------------------------------------
    def teardown(self, skip_roles=(), keep_files: bool = False, term_timeout_s: float = 1.0) -> TeardownReport:
        """Remove every recorded resource in reverse creation order; keeps going past failures.

        Processes first (recorded clients, then anything else inside our
        namespaces, then recorded sshd listeners, then the rest), then routes,
        jobs' network allocations and interfaces (those inside a recorded
        namespace go with it), namespaces
        and finally files. Files are kept when anything
        failed, so the ledger survives for another ``cleanup`` attempt.
        """
        report = TeardownReport()
        self._kill_processes(report, set(skip_roles), term_timeout_s)
        ipr_cache: dict = {}
        owned_ns = set(self.namespaces())
        try:
            for kinds in _PHASES[:-1]:
                for rec in reversed(self.records):
                    if rec["kind"] in kinds:
                        if kinds == _IFACES and rec.get("netns") in owned_ns:
                            # Removing the namespace unregisters all its devices in one kernel batch;
                            # deleting veths one by one costs an RCU grace period (~20 ms) each.
                            report.removed.append(f"{rec['kind']} {_describe(rec)} (with its namespace)")
                            continue
                        if rec["kind"] == "jobnet":  # what lives in our namespaces goes with them
                            items = [i for i in rec.get("items", []) if i.get("netns") not in owned_ns]
                            if not items:
                                report.removed.append(f"jobnet {_describe(rec)} (with its namespaces)")
                                continue
                            rec = {**rec, "items": items}
                        if rec["kind"] == "netns":
                            _close_handles(ipr_cache)
                        self._remove(rec, report, ipr_cache)
        finally:
            _close_handles(ipr_cache)
        if report.failures:
            report.failures.append(f"ledger kept at {self.path} for `python -m netlab.testbed.ledger cleanup`")
        elif not keep_files:
            for rec in reversed(self.records):
                if rec["kind"] in _PHASES[-1]:
                    self._remove(rec, report, ipr_cache)
        return report

    def _owned_inodes(self) -> set[int]:
        """Inodes of recorded namespaces that still exist under their recorded identity."""
        out = set()
        for name, inode in self.namespaces().items():
            now = netns_inode(name)
            if now is not None and (inode is None or inode == now):
                out.add(now)
        return out

    def _kill_processes(self, report: TeardownReport, skip_roles: set, term_timeout_s: float) -> None:
        me = os.getpid()
        procs = [r for r in self.records if r["kind"] == "process" and r.get("role") not in skip_roles]
        procs.sort(key=lambda r: _ROLE_ORDER.get(r.get("role"), 3))
        first = [(r["pid"], r.get("start")) for r in procs if _ROLE_ORDER.get(r.get("role"), 3) < 1]
        listeners = [(r["pid"], r.get("start")) for r in procs if _ROLE_ORDER.get(r.get("role"), 3) >= 1]
        _kill_group(first, me, report, term_timeout_s)
        inodes = self._owned_inodes()
        skip = {pid for pid, _ in listeners} | {me}
        in_ns = [(pid, proc_start_time(pid)) for pid in pids_in_netns(inodes) if pid not in skip]
        _kill_group(in_ns, me, report, term_timeout_s)
        _kill_group(listeners, me, report, term_timeout_s)
        # Anything that appeared meanwhile (e.g. a child forked during the above).
        rest = [(pid, proc_start_time(pid)) for pid in pids_in_netns(inodes) if pid != me]
        _kill_group(rest, me, report, term_timeout_s)
        left = [pid for pid in pids_in_netns(inodes) if pid != me]
        if left:
            report.failures.append(f"processes still inside testbed namespaces: {left}")

    def _remove(self, rec: dict, report: TeardownReport, ipr_cache: dict) -> None:
        kind = rec["kind"]
        what = f"{kind} {_describe(rec)}"
        try:
            done = _REMOVERS[kind](rec, ipr_cache)
        except Exception as exc:  # noqa: BLE001 - keep going, report every failure
            report.failures.append(f"{what}: {type(exc).__name__}: {exc}")
            return
        if done:
            report.removed.append(what)


def _describe(rec: dict) -> str:
    keys = ("name", "netns", "ifname", "dst", "path", "pid", "job")
    return " ".join(f"{k}={rec[k]}" for k in keys if rec.get(k) is not None)


def _kill_group(procs, me: int, report: TeardownReport, term_timeout_s: float) -> None:
    """SIGTERM every still-matching process, wait (pidfd poll, bounded), then SIGKILL what is left."""
    fds: dict[int, int] = {}
    for pid, start in procs:
        if pid == me or pid in fds or start is None:
            continue
        try:
            fd = os.pidfd_open(pid)
        except OSError:
            continue  # already gone
        if proc_start_time(pid) != start:
            os.close(fd)  # gone, a zombie, or the pid now names another process: not ours
            continue
        fds[pid] = fd
    opened = dict(fds)
    try:
        for sig, timeout_s in ((signal.SIGTERM, term_timeout_s), (signal.SIGKILL, 2.0)):
            live = {}
            for pid, fd in fds.items():
                try:
                    signal.pidfd_send_signal(fd, sig)
                    live[pid] = fd
                except ProcessLookupError:
                    pass
                except OSError as exc:
                    report.failures.append(f"process pid={pid}: {sig.name}: {exc}")
            fds_left = _wait_exit(live, timeout_s)
            report.killed.extend(p for p in live if p not in fds_left)
            if not fds_left:
                break
            fds = fds_left
        else:
            report.failures.append(f"processes did not exit after SIGKILL: {sorted(fds)}")
    finally:
        _close_all(opened)


def _close_all(fds: dict) -> None:
    for fd in fds.values():
        try:
            os.close(fd)
        except OSError:
            pass


def _wait_exit(live: dict[int, int], timeout_s: float) -> dict[int, int]:
    """Wait until every pidfd reports exit or the deadline passes; returns the ones still running."""
    left = dict(live)
    deadline = time.monotonic() + timeout_s
    poller = select.poll()
    for fd in left.values():
        poller.register(fd, select.POLLIN)
    by_fd = {fd: pid for pid, fd in left.items()}
    while left:
        remaining_ms = int((deadline - time.monotonic()) * 1000)
        if remaining_ms <= 0:
            break
        for fd, _ in poller.poll(remaining_ms):
            poller.unregister(fd)
            left.pop(by_fd[fd], None)
    return left


# -- removers: return True if something was removed, False if it was already gone ----------
def _ns_handle(name: str | None, cache: dict):
    from pyroute2 import IPRoute

    if name is None:
        key = None
    else:
        if netns_inode(name) is None:
            return None
        key = name
    if key not in cache:
        cache[key] = IPRoute() if key is None else IPRoute(netns=key, flags=0)
    return cache[key]


def _close_handles(cache: dict) -> None:
    """Close netlink sockets: a socket opened in a namespace keeps that namespace alive."""
    for ipr in cache.values():
        try:
            ipr.close()
        except Exception:  # noqa: BLE001
            pass
    cache.clear()


def _remove_route(rec: dict, cache: dict) -> bool:
    from pyroute2 import NetlinkError

    ipr = _ns_handle(rec.get("netns"), cache)
    if ipr is None:
        return False
    try:
        ipr.route("del", dst=rec["dst"], type=rec.get("type", "unicast"), priority=rec.get("priority", 0))
    except NetlinkError as exc:
        if exc.code in (errno.ESRCH, errno.ENOENT):
            return False
        raise
    return True


def _remove_link(rec: dict, cache: dict) -> bool:
    from pyroute2 import NetlinkError

    ipr = _ns_handle(rec.get("netns"), cache)
    if ipr is None:
        return False
    idx = ipr.link_lookup(ifname=rec["ifname"])
    if not idx:
        return False
    try:
        if rec["kind"] == "qdisc":
            ipr.tc("del", index=idx[0], root=True)
        else:
            ipr.link("del", index=idx[0])
    except NetlinkError as exc:
        if exc.code in (errno.ENODEV, errno.ENOENT, errno.EINVAL):
            return False
        raise
    return True


def _remove_jobnet(rec: dict, cache: dict) -> bool:
    """Remove a job's allocation item by item (filters before the classes they point to); what is gone
    already is skipped. True if anything was removed."""
    from pyroute2 import NetlinkError

    removed = False
    for item in rec.get("items", []):
        ipr = _ns_handle(item.get("netns"), cache)
        if ipr is None:
            continue
        what = item["what"]
        idx = ipr.link_lookup(ifname=item["ifname"]) if "ifname" in item else [None]
        if not idx:
            continue
        try:
            if what == "filter":  # the whole preference; pyroute2's u32 encoder wants a target even to delete
                ipr.tc("del-filter", "u32", index=idx[0], parent="1:", prio=item["pref"], protocol=0x0800, target=0)
            elif what == "class":
                ipr.tc("del-class", index=idx[0], handle=item["classid"])
            elif what == "rule":
                ipr.rule("del", src=item["src"], src_len=32, dst=item["dst"], dst_len=32, table=item["table"],
                         priority=item["priority"])
            elif what == "route":
                ipr.route("del", dst=item["dst"])
            elif what == "addr":
                ipr.addr("del", index=idx[0], address=item["address"], prefixlen=32)
            else:
                raise RuntimeError(f"unknown jobnet item {item!r}")
        except NetlinkError as exc:
            if exc.code in (errno.ENOENT, errno.ESRCH, errno.EINVAL, errno.ENODEV, errno.EADDRNOTAVAIL):
                continue
            raise
        removed = True
    return removed


def _remove_netns(rec: dict, cache: dict) -> bool:
    from pyroute2 import netns

    now = netns_inode(rec["name"])
    if now is None:
        return False
    if rec.get("inode") not in (None, now):
        raise RuntimeError(f"namespace {rec['name']} now has inode {now}, recorded {rec['inode']}: not ours, left alone")
    netns.remove(rec["name"])
    return True


def _remove_file(rec: dict, cache: dict) -> bool:
    path = rec["path"]
    if rec["kind"] == "dir":
        if not os.path.isdir(path):
            return False
        if rec.get("tree"):
            shutil.rmtree(path)
        else:
            os.rmdir(path)
        return True
    try:
        os.unlink(path)
    except FileNotFoundError:
        return False
    return True


_REMOVERS = {"route": _remove_route, "link": _remove_link, "bridge": _remove_link, "qdisc": _remove_link,
             "jobnet": _remove_jobnet, "netns": _remove_netns, "file": _remove_file, "dir": _remove_file}


def main(argv: list[str] | None = None) -> int:
    """``python -m netlab.testbed.ledger cleanup PATH``: undo a ledger left by a dead controller."""
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 2 or argv[0] != "cleanup":
        print("usage: python -m netlab.testbed.ledger cleanup LEDGER.json", file=sys.stderr)
        return 2
    path = Path(argv[1])
    try:
        ledger = Ledger.load(path)
    except (OSError, ValueError) as exc:
        print(f"cannot read ledger {path}: {exc}", file=sys.stderr)
        return 2
    report = ledger.teardown()
    print(f"removed {len(report.removed)} resources, killed {len(report.killed)} processes")
    for line in report.failures:
        print(f"FAILED: {line}", file=sys.stderr)
    return 0 if report.ok else 1


if __name__ == "__main__":
    sys.exit(main())
