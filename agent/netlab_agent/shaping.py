"""Egress shaping of this host's interfaces with pyroute2, undoable exactly.

Runs in the agent's own network namespace (a testbed host namespace or a lab
machine). Three rules make it safe to hand to a remote controller:

* A spec is validated completely (types, ranges, fields that belong to the
  kind, the interface, the kernel's support for the kind) before anything
  is touched, so a refused request changes nothing.
* The kinds this kernel supports are probed once, on a throwaway veth pair,
  so a missing qdisc is a clear ``QdiscUnavailable`` instead of the silent
  no-op Mininet gives.
* Before the first shape of an interface the existing root tree (htb with its
  classes, tbf, pfifo/bfifo) is snapshotted into the state file; ``clear`` and
  every cleanup path re-create exactly that tree (e.g. the testbed backend's
  HTB at its topology rate), or delete the root for the kernel default.
"""

from __future__ import annotations

import errno
import math
import secrets
import shutil
import subprocess
from dataclasses import dataclass, field

from pyroute2 import IPRoute, NetlinkError

from .errors import NotFound, QdiscUnavailable, SpecError, brief
from .state import StateStore, log
from .validate import IFNAME_WHAT, ifname_ok

TC_H_ROOT = 0xFFFFFFFF
# htb/tbf carry the rate as u32 bytes/s unless the 64-bit attributes are used: 34.3 Gbit.
MAX_RATE_MBIT = 34_000.0
MTU_BYTES = 1514

# field -> (check, description used in the error message)
def _positive(v):
    return _is_number(v) and v > 0 and math.isfinite(v)


def _non_negative(v):
    return _is_number(v) and v >= 0 and math.isfinite(v)


def _is_number(v):
    return isinstance(v, (int, float)) and not isinstance(v, bool)


FIELD_CHECKS = {
    "rate_mbit": (lambda v: _positive(v) and v <= MAX_RATE_MBIT, f"a number in (0, {MAX_RATE_MBIT:g}]"),
    "ceil_mbit": (lambda v: _positive(v) and v <= MAX_RATE_MBIT, f"a number in (0, {MAX_RATE_MBIT:g}]"),
    "burst_kb": (_positive, "a positive number"),
    "latency_ms": (_positive, "a positive number"),
    "delay_ms": (_non_negative, "a non-negative number"),
    "jitter_ms": (_non_negative, "a non-negative number"),
    "loss_pct": (lambda v: _non_negative(v) and v <= 100, "a number in [0, 100]"),
    "ecn": (lambda v: isinstance(v, bool), "true or false"),
    "limit_pkts": (lambda v: isinstance(v, int) and not isinstance(v, bool) and v > 0, "a positive integer"),
}

# kind -> (required fields, optional fields)
KIND_FIELDS = {
    "htb": ({"rate_mbit"}, {"ceil_mbit", "burst_kb", "limit_pkts"}),
    "tbf": ({"rate_mbit"}, {"burst_kb", "latency_ms"}),
    "netem": (set(), {"rate_mbit", "delay_ms", "jitter_ms", "loss_pct", "limit_pkts"}),
    # AQMs sit as the leaf of an HTB class so the link keeps its rate.
    "fq_codel": ({"rate_mbit"}, {"ceil_mbit", "ecn", "limit_pkts"}),
    "red": ({"rate_mbit"}, {"ceil_mbit", "ecn", "limit_pkts"}),
}
PROBED_KINDS = ["htb", "tbf", "netem", "fq_codel", "red", "pfifo", "bfifo"]
PROBE_ARGS = {
    "htb": {"handle": "1:", "default": 0x10},
    "tbf": {"rate": "10mbit", "burst": 16000, "latency": 50},
    "netem": {"delay": 1000},
    "fq_codel": {},
    "red": {},
    "pfifo": {"limit": 10},
    "bfifo": {"limit": 10000},
}
UNAVAILABLE_ERRNOS = (errno.ENOENT, errno.EOPNOTSUPP)


@dataclass
class Spec:
    ifname: str
    kind: str
    index: int
    params: dict = field(default_factory=dict)


def _mbit(rate_mbit: float) -> str:
    return f"{int(round(rate_mbit * 1e6))}bit"


def _ignore_missing(fn, *args, **kwargs):
    """Run a tc delete; 'nothing there' (ENOENT/EINVAL) is fine."""
    try:
        fn(*args, **kwargs)
    except NetlinkError as exc:
        if exc.code not in (errno.ENOENT, errno.EINVAL):
            raise


def _psched_tick_in_usec() -> float:
    """Same conversion tc and pyroute2 use for tbf's buffer (ticks) field."""
    try:
        t2us, us2t = (int(x, 16) for x in open("/proc/net/psched").read().split()[:2])
        return t2us / us2t
    except (OSError, ValueError):
        return 1.0


class Shaper:
    def __init__(self, state: StateStore, ipr: IPRoute | None = None):
        self.state = state
        self.ipr = ipr or IPRoute()
        self.available: list[str] = []
        self.probe_error: str | None = None
        self.current: dict[str, dict] = {}   # ifname -> applied spec

    # ---- probe -------------------------------------------------------------
    def probe(self) -> list[str]:
        """Find the kinds the kernel has by adding each to a throwaway veth."""
        name = "nlpr" + secrets.token_hex(4)
        self.state.update(lambda d: d["probe_links"].append(name))
        available = []
        try:
            self.ipr.link("add", ifname=name, kind="veth", peer={"ifname": name + "p"})
            index = self.ipr.link_lookup(ifname=name)[0]
            for kind in PROBED_KINDS:
                try:
                    root = {} if kind == "htb" else {"root": True}
                    self.ipr.tc("add", kind, index=index, **root, **PROBE_ARGS[kind])
                except NetlinkError as exc:
                    if exc.code in UNAVAILABLE_ERRNOS:
                        continue
                    # Any other refusal (bad options) means the kernel knows the kind.
                available.append(kind)
                _ignore_missing(self.ipr.tc, "del", index=index, root=True)
        except Exception as exc:  # noqa: BLE001 - report, shape nothing
            self.probe_error = f"qdisc probe failed: {exc!r}"
            log(self.probe_error)
        finally:
            _ignore_missing(self._del_link, name)
            self.state.update(lambda d: d["probe_links"].remove(name))
        self.available = available
        return available

    def _del_link(self, ifname: str) -> None:
        idx = self.ipr.link_lookup(ifname=ifname)
        if idx:
            self.ipr.link("del", index=idx[0])

    delete_link = _del_link

    # ---- validation ----------------------------------------------------------
    def validate(self, args: dict) -> Spec:
        if not isinstance(args, dict):
            raise SpecError("args must be an object")
        ifname = args.get("ifname")
        if not ifname_ok(ifname):
            raise SpecError(f"ifname must be {IFNAME_WHAT}, got {brief(ifname)}", "ifname")
        kind = args.get("kind")
        if kind not in KIND_FIELDS:
            raise SpecError(f"kind must be one of {sorted(KIND_FIELDS)}, got {brief(kind)}", "kind")
        required, optional = KIND_FIELDS[kind]
        params = {}
        for key, value in args.items():
            if key in ("ifname", "kind"):
                continue
            if key not in FIELD_CHECKS:
                raise SpecError(f"unknown field {brief(key)}", key)
            if key not in required | optional:
                raise SpecError(f"field {brief(key)} does not apply to kind {brief(kind)}", key)
            check, what = FIELD_CHECKS[key]
            if not check(value):
                raise SpecError(f"{key} must be {what}, got {brief(value)}", key)
            params[key] = value
        for key in sorted(required - params.keys()):
            raise SpecError(f"kind {brief(kind)} needs {key}", key)
        if "ceil_mbit" in params and params["ceil_mbit"] < params["rate_mbit"]:
            raise SpecError("ceil_mbit must be >= rate_mbit", "ceil_mbit")
        if params.get("jitter_ms") and not params.get("delay_ms"):
            raise SpecError("jitter_ms needs delay_ms", "jitter_ms")
        found = self.ipr.link_lookup(ifname=ifname)
        if not found:
            raise NotFound(f"no interface {brief(ifname)} in the agent's namespace", "ifname")
        if kind not in self.available:
            why = self.probe_error or f"the kernel lacks the {brief(kind)} qdisc"
            raise QdiscUnavailable(f"cannot shape with {kind}: {why} (available: {self.available})", "kind")
        return Spec(ifname, kind, found[0], params)

    # ---- shape / clear -------------------------------------------------------
    def shape(self, args: dict) -> dict:
        spec = self.validate(args)
        snaps = self.state.get("shaping")
        if spec.ifname not in snaps:
            snap = snapshot(self.ipr, spec.index)
            # Persist the snapshot before touching the tree, so a crash can be undone.
            self.state.update(lambda d: d["shaping"].__setitem__(spec.ifname, snap))
        else:
            snap = snaps[spec.ifname]
        try:
            _ignore_missing(self.ipr.tc, "del", index=spec.index, root=True)
            applied = APPLY[spec.kind](self.ipr, spec)
        except Exception:
            restore(self.ipr, spec.ifname, snap)
            raise
        self.current[spec.ifname] = {"kind": spec.kind, **applied}
        return {"ifname": spec.ifname, "kind": spec.kind, "applied": applied}

    def clear(self, ifname: str) -> dict:
        if not ifname_ok(ifname):
            raise SpecError(f"ifname must be {IFNAME_WHAT}, got {brief(ifname)}", "ifname")
        snaps = self.state.get("shaping")
        if ifname not in snaps:
            raise NotFound(f"{brief(ifname)} was not shaped by this agent", "ifname")
        restored = restore(self.ipr, ifname, snaps[ifname])
        self.state.update(lambda d: d["shaping"].pop(ifname, None))
        self.current.pop(ifname, None)
        return {"ifname": ifname, "restored": restored}

    def clear_all(self) -> list[str]:
        done = []
        for ifname in list(self.state.get("shaping")):
            try:
                self.clear(ifname)
                done.append(ifname)
            except Exception as exc:  # noqa: BLE001 - restore the others anyway
                log(f"clear {ifname}: {exc!r}")
        return done

    def restore_snapshot(self, ifname: str, snap: dict) -> None:
        """For the stale-state recovery of a dead agent's shaping."""
        restore(self.ipr, ifname, snap)


# ---- per-kind appliers (registry, no if/elif) ----------------------------------
def _htb_root(ipr: IPRoute, spec: Spec) -> dict:
    p = spec.params
    ceil = p.get("ceil_mbit", p["rate_mbit"])
    ipr.tc("add", "htb", index=spec.index, handle="1:", default=0x10)
    cls = {"rate": _mbit(p["rate_mbit"]), "ceil": _mbit(ceil)}
    if "burst_kb" in p:
        cls["burst"] = int(p["burst_kb"] * 1000)
    ipr.tc("add-class", "htb", index=spec.index, handle="1:10", parent="1:", **cls)
    applied = {"rate_mbit": p["rate_mbit"], "ceil_mbit": ceil}
    if "burst_kb" in p:
        applied["burst_kb"] = p["burst_kb"]
    return applied


def _apply_htb(ipr: IPRoute, spec: Spec) -> dict:
    applied = _htb_root(ipr, spec)
    if "limit_pkts" in spec.params:
        ipr.tc("add", "pfifo", index=spec.index, parent="1:10", handle="10:",
               limit=spec.params["limit_pkts"])
        applied["limit_pkts"] = spec.params["limit_pkts"]
    return applied


def _apply_tbf(ipr: IPRoute, spec: Spec) -> dict:
    p = spec.params
    # Default burst: 4 ms at the rate, at least 16 kB (a few MTUs); latency 50 ms.
    burst_kb = p.get("burst_kb", max(16.0, p["rate_mbit"] * 1e6 / 8 * 0.004 / 1000))
    latency_ms = p.get("latency_ms", 50.0)
    ipr.tc("add", "tbf", index=spec.index, root=True, rate=_mbit(p["rate_mbit"]),
           burst=int(burst_kb * 1000), latency=f"{int(latency_ms * 1000)}us")
    return {"rate_mbit": p["rate_mbit"], "burst_kb": burst_kb, "latency_ms": latency_ms}


def _apply_netem(ipr: IPRoute, spec: Spec) -> dict:
    p = spec.params
    kw = {"delay": int(p.get("delay_ms", 0) * 1000), "jitter": int(p.get("jitter_ms", 0) * 1000),
          "loss": p.get("loss_pct", 0), "limit": p.get("limit_pkts", 1000)}
    if "rate_mbit" in p:
        kw["rate"] = _mbit(p["rate_mbit"])
    ipr.tc("add", "netem", index=spec.index, root=True, **kw)
    return dict(p, limit_pkts=kw["limit"])


def _apply_fq_codel(ipr: IPRoute, spec: Spec) -> dict:
    applied = _htb_root(ipr, spec)
    ecn = spec.params.get("ecn", True)
    kw = {"fqc_ecn": int(ecn)}
    if "limit_pkts" in spec.params:
        kw["fqc_limit"] = spec.params["limit_pkts"]
    ipr.tc("add", "fq_codel", index=spec.index, parent="1:10", handle="10:", **kw)
    return dict(applied, ecn=ecn, **({"limit_pkts": kw["fqc_limit"]} if "fqc_limit" in kw else {}))


def _apply_red(ipr: IPRoute, spec: Spec) -> dict:
    """RED leaf with ECN marking; pyroute2 0.9 has no red encoder, so tc(8) builds it."""
    applied = _htb_root(ipr, spec)
    tc = shutil.which("tc")
    if tc is None:
        raise QdiscUnavailable("red needs the tc binary (iproute2), which is not installed", "kind")
    ecn = spec.params.get("ecn", True)
    limit_pkts = spec.params.get("limit_pkts", 400)
    limit = limit_pkts * MTU_BYTES
    qmax = limit // 4
    qmin = qmax // 3
    burst = max(2, (2 * qmin + qmax) // (3 * MTU_BYTES))
    argv = [tc, "qdisc", "add", "dev", spec.ifname, "parent", "1:10", "handle", "10:", "red",
            "limit", str(limit), "min", str(qmin), "max", str(qmax), "avpkt", str(MTU_BYTES),
            "burst", str(burst), "bandwidth", _mbit(spec.params["rate_mbit"]), "probability", "0.1"]
    if ecn:
        argv.append("ecn")
    res = subprocess.run(argv, capture_output=True, text=True, timeout=10)
    if res.returncode != 0:
        raise SpecError(f"tc refused the red qdisc: {res.stderr.strip()}", "kind")
    return dict(applied, ecn=ecn, limit_pkts=limit_pkts)


APPLY = {"htb": _apply_htb, "tbf": _apply_tbf, "netem": _apply_netem,
         "fq_codel": _apply_fq_codel, "red": _apply_red}


# ---- snapshot / restore --------------------------------------------------------
def _htb_rate_bytes(parms_msg, opts, name: str) -> int:
    r64 = opts.get_attr(f"TCA_HTB_{name.upper()}64")
    return int(r64) if r64 else int(parms_msg[name])


def snapshot(ipr: IPRoute, index: int) -> dict:
    """Describe the root tree so ``restore`` can re-create it."""
    roots = [q for q in ipr.get_qdiscs(index=index) if q["parent"] == TC_H_ROOT]
    if not roots:
        return {"kind": None}
    root = roots[0]
    kind = root.get_attr("TCA_KIND")
    opts = root.get_attr("TCA_OPTIONS")
    snap: dict = {"kind": kind, "handle": root["handle"]}
    if kind == "htb":
        snap["default"] = opts.get_attr("TCA_HTB_INIT")["defcls"]
        classes = []
        for c in ipr.get_classes(index=index):
            copts = c.get_attr("TCA_OPTIONS")
            parms = copts.get_attr("TCA_HTB_PARMS")
            classes.append({"handle": c["handle"], "parent": c["parent"],
                            "rate_bit": 8 * _htb_rate_bytes(parms, copts, "rate"),
                            "ceil_bit": 8 * _htb_rate_bytes(parms, copts, "ceil"),
                            "prio": int(parms["prio"]), "quantum": int(parms["quantum"])})
        snap["classes"] = classes
        snap["leaves"] = [
            {"kind": q.get_attr("TCA_KIND"), "handle": q["handle"], "parent": q["parent"],
             "limit": q.get_attr("TCA_OPTIONS")["limit"]}
            for q in ipr.get_qdiscs(index=index)
            if q["parent"] != TC_H_ROOT and q.get_attr("TCA_KIND") in ("pfifo", "bfifo")
        ]
    elif kind == "tbf":
        parms = opts.get_attr("TCA_TBF_PARMS")
        rate = int(parms["rate"])
        snap.update(rate_bit=8 * rate, limit_bytes=int(parms["limit"]),
                    burst_bytes=int(round(parms["buffer"] / _psched_tick_in_usec() * rate / 1e6)))
    elif kind in ("pfifo", "bfifo"):
        snap["limit"] = opts["limit"]
    return snap


def _h(handle: int) -> str:
    return f"{handle >> 16:x}:{handle & 0xFFFF:x}"


def _restore_htb(ipr: IPRoute, index: int, snap: dict) -> None:
    ipr.tc("add", "htb", index=index, handle=_h(snap["handle"]), default=snap["default"])
    pending = list(snap["classes"])
    made = {snap["handle"]}
    while pending:  # parents before children
        ready = [c for c in pending if c["parent"] in made or c["parent"] == TC_H_ROOT]
        if not ready:
            raise RuntimeError(f"htb snapshot has orphan classes: {pending}")
        for c in ready:
            # htb dumps top-level classes with parent TC_H_ROOT; they hang off the qdisc.
            parent = snap["handle"] if c["parent"] == TC_H_ROOT else c["parent"]
            # prio and quantum: a testbed's leaves share their link by them (older snapshots lack them)
            ipr.tc("add-class", "htb", index=index, handle=_h(c["handle"]), parent=_h(parent),
                   rate=f"{c['rate_bit']}bit", ceil=f"{c['ceil_bit']}bit", prio=c.get("prio", 0),
                   quantum=c.get("quantum", 0))
            made.add(c["handle"])
            pending.remove(c)
    for q in snap.get("leaves", []):
        ipr.tc("add", q["kind"], index=index, handle=_h(q["handle"]), parent=_h(q["parent"]),
               limit=q["limit"])


def _restore_tbf(ipr: IPRoute, index: int, snap: dict) -> None:
    ipr.tc("add", "tbf", index=index, root=True, rate=f"{snap['rate_bit']}bit",
           burst=snap["burst_bytes"], limit=snap["limit_bytes"])


def _restore_fifo(ipr: IPRoute, index: int, snap: dict) -> None:
    ipr.tc("add", snap["kind"], index=index, root=True, limit=snap["limit"])


RESTORE = {"htb": _restore_htb, "tbf": _restore_tbf, "pfifo": _restore_fifo, "bfifo": _restore_fifo}


def restore(ipr: IPRoute, ifname: str, snap: dict) -> str:
    """Put back the snapshotted root tree; returns what was restored."""
    found = ipr.link_lookup(ifname=ifname)
    if not found:
        raise NotFound(f"interface {brief(ifname)} is gone; nothing to restore", "ifname")
    index = found[0]
    _ignore_missing(ipr.tc, "del", index=index, root=True)
    fn = RESTORE.get(snap.get("kind"))
    if fn is None:
        return "kernel default" if snap.get("kind") in (None, "noqueue", "pfifo_fast", "mq") \
            else f"kernel default (previous {snap['kind']} root is not restorable)"
    fn(ipr, index, snap)
    return snap["kind"]
