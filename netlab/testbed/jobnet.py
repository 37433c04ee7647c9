"""Per-job network allocations on a running namespace testbed: carry out :mod:`.jobplan`'s records, change
them in place, record them in the ledger, remove them exactly, and read the kernel's state back.

Why apart from the bring-up (:mod:`.netns`): allocations come and go while the testbed runs (a job starts,
its policy changes its priority, it ends), so this is a loop of its own: every change recomputes the plan of
all running jobs (a job's weight changes the quanta of the others on its links), then makes the kernel match
it. The tc part compares with the kernel (classes and filters read back per shaped link) and writes only
what differs; addresses, routes and rules are added where missing and the ones the previous plan had and the
new one has not are removed. Each job's records go into the ledger before anything is created (one
``jobnet`` record listing filters, classes, rules, routes and addresses), so the guardian and ``python -m
netlab.testbed.ledger cleanup`` remove them after a SIGKILL; they live in the testbed's namespaces and go with
them, and a job that ends is removed at once.
"""

from __future__ import annotations

import errno
from dataclasses import dataclass

from .base import TestbedError
from .jobplan import (JOB_SLOTS, RULE_PRIORITY_BASE, SLOT_BASE, JobNet, JobNetPlan, assign_slots, job_label,
                      plan_jobs)
from .netlink import on_netlink_thread
from .plan import DATA_IFNAME, NextHop, UnicastRoute, tc_handle
from . import routing, shaping

JOB_PREFS = range(SLOT_BASE + 1, SLOT_BASE + JOB_SLOTS + 1)
JOB_RULE_PRIORITIES = range(RULE_PRIORITY_BASE + 1, RULE_PRIORITY_BASE + JOB_SLOTS + 1)


@dataclass(frozen=True)
class JobNetwork:
    """What a job's ranks need: the address label to use as socket interface and its address on each host."""

    job: int
    slot: int
    label: str
    addresses: dict[str, str]  # host name -> the job's address there


def _ledger_items(p: JobNetPlan) -> list[dict]:
    """A job's records as the ledger keeps them, in removal order (filters before the classes they point to)."""
    return ([{"what": "filter", "netns": f.netns, "ifname": f.ifname, "pref": f.pref} for f in p.filters]
            + [{"what": "class", "netns": l.netns, "ifname": l.ifname, "classid": l.leaf.classid} for l in p.leaves]
            + [{"what": "rule", "netns": r.netns, "src": r.src, "dst": r.dst, "table": r.table,
                "priority": r.priority} for r in p.rules]
            + [{"what": "route", "netns": r.netns, "dst": f"{r.dst}/32"} for r in p.routes]
            + [{"what": "addr", "netns": a.netns, "ifname": a.ifname, "address": a.address} for a in p.addresses])


def _union(a: JobNetPlan, b: JobNetPlan) -> JobNetPlan:
    def both(x, y):
        return tuple(dict.fromkeys((*x, *y)))

    return JobNetPlan(both(a.slots, b.slots), both(a.addresses, b.addresses), both(a.routes, b.routes),
                      both(a.leaves, b.leaves), both(a.filters, b.filters), both(a.rules, b.rules))


class JobNetworks:
    """The allocations of one testbed (``tb``: a running :class:`~netlab.testbed.netns.NetnsTestbed`); every
    method runs on the testbed's netlink thread."""

    def __init__(self, tb):
        self._tb = tb
        self.jobs: dict[int, JobNet] = {}
        self.slots: dict[int, int] = {}
        self.applied = JobNetPlan(())
        self._records: dict[int, dict] = {}
        self.writes = 0  # netlink writes of the last change (0: the kernel already matched)

    def _plan(self, jobs: dict[int, JobNet], slots: dict[int, int]) -> JobNetPlan:
        tb = self._tb
        mbit = {l.link: tb._rate_mbit[(l.src, l.dst)] for l in tb.plan.links}
        return plan_jobs(tb.plan, tb.topology, mbit, tb.rate_scale, jobs, slots)

    def set(self, net: JobNet) -> JobNetwork:
        """Add ``net`` or change it in place (same slot, same addresses)."""
        jobs = {**self.jobs, net.job: net}
        slots = assign_slots(self.slots, jobs)
        self._commit(jobs, slots, self._plan(jobs, slots))  # the plan refuses bad input before anything changes
        slot = slots[net.job]
        return JobNetwork(net.job, slot, job_label(slot),
                          {a.host: a.address for a in self.applied.addresses if a.job == net.job})

    def remove(self, job: int) -> None:
        if job not in self.jobs:
            return
        jobs = {j: n for j, n in self.jobs.items() if j != job}
        slots = {j: s for j, s in self.slots.items() if j != job}
        self._commit(jobs, slots, self._plan(jobs, slots))

    def reapply(self) -> int:
        """Make the kernel match the current plan again (after a link's rate changed); returns the writes."""
        self._commit(self.jobs, self.slots, self._plan(self.jobs, self.slots))
        return self.writes

    def forget(self) -> None:
        """The testbed went down: its namespaces took every record along."""
        self.jobs, self.slots, self.applied, self._records = {}, {}, JobNetPlan(()), {}

    # -- carrying a plan out ----------------------------------------------------------------------
    def _commit(self, jobs: dict[int, JobNet], slots: dict[int, int], new: JobNetPlan) -> None:
        old, ledger = self.applied, self._tb._ledger
        for j in sorted(set(jobs) | set(self.jobs)):  # recorded before anything is created
            items = _ledger_items(_union(new.of_job(j), old.of_job(j)))
            if j in self._records:
                ledger.update(self._records[j], items=items)
            else:
                self._records[j] = ledger.add("jobnet", job=j, items=items)
        try:
            self.writes = self._apply(old, new)
        except BaseException:
            self.applied = _union(old, new)  # whatever may exist now: a later change removes it
            raise
        self.jobs, self.slots, self.applied = jobs, slots, new
        for j in list(self._records):
            if j in jobs:
                ledger.update(self._records[j], items=_ledger_items(new.of_job(j)))
            else:
                ledger.discard(self._records.pop(j))

    def _index(self, ns: str, ifname: str) -> int:
        found = self._tb._handle(ns).link_lookup(ifname=ifname)
        if not found:
            raise TestbedError(f"testbed {self._tb.tid}: no interface {ifname} in {ns}")
        return found[0]

    def _apply(self, old: JobNetPlan, new: JobNetPlan) -> int:
        tb, htb, writes = self._tb, self._tb.plan.htb, 0
        for a in new.addresses:
            writes += routing.add_address(tb._handle(a.netns), self._index(a.netns, a.ifname), a.address, a.label)
        for r in new.routes:
            writes += _add_source_route(tb._handle(r.netns), r, lambda name, ns=r.netns: self._index(ns, name))
        leaves, filters = {}, {}
        for l in new.leaves:
            leaves.setdefault(l.link, []).append(l.leaf)
        for f in new.filters:
            filters.setdefault(f.link, {})[f.pref] = f.filters
        for sl in tb.plan.links:
            ipr, idx = tb._handle(sl.netns), tb._if_index[(sl.src, sl.dst)]
            have_leaves, have_filters = shaping.read_leaves(ipr, idx, htb), shaping.read_filters(ipr, idx, htb)
            want = {leaf.classid for leaf in leaves.get(sl.link, ())}
            for leaf in leaves.get(sl.link, ()):
                writes += shaping.ensure_leaf(ipr, idx, htb, leaf, tb.plan.leaf_queue, have_leaves)
            for pref, fs in filters.get(sl.link, {}).items():
                writes += shaping.ensure_filters(ipr, idx, htb, pref, fs, have_filters)
            for pref in have_filters:
                if pref in JOB_PREFS and pref not in filters.get(sl.link, {}):
                    writes += shaping.remove_filters(ipr, idx, htb, pref)
            for classid in have_leaves:
                if classid not in want and tc_handle(classid) & 0xFFFF in JOB_PREFS:
                    writes += shaping.remove_leaf(ipr, idx, classid)
        for r in new.rules:
            writes += routing.add_rule(tb._handle(r.netns), r.src, r.dst, r.table, r.priority)
        for r in set(old.rules) - set(new.rules):
            writes += routing.del_rule(tb._handle(r.netns), r.src, r.dst, r.table, r.priority)
        kept = {(r.netns, r.dst) for r in new.routes}
        for r in set(old.routes) - set(new.routes):
            if (r.netns, r.dst) not in kept:
                writes += routing.del_route(tb._handle(r.netns), f"{r.dst}/32")
        kept = {(a.netns, a.address) for a in new.addresses}
        for a in set(old.addresses) - set(new.addresses):
            if (a.netns, a.address) not in kept:
                writes += routing.del_address(tb._handle(a.netns), self._index(a.netns, a.ifname), a.address)
        return writes

    # -- reading back -----------------------------------------------------------------------------------
    def mismatches(self) -> list[str]:
        """Where the kernel differs from the applied plan (empty: it matches): every shaped link's leaf
        classes (prio, quantum, rate, ceiling, queue) and u32 filters, the job addresses and their labels,
        the source routes and the path rules."""
        tb, plan, htb, out = self._tb, self.applied, self._tb.plan.htb, []
        for sl in tb.plan.links:
            ipr, idx = tb._handle(sl.netns), tb._if_index[(sl.src, sl.dst)]
            where = f"link {sl.src}->{sl.dst} ({sl.netns} {sl.ifname})"
            have = shaping.read_leaves(ipr, idx, htb)
            want = {l.leaf.classid: l.leaf for l in plan.leaves if l.link == sl.link}
            if set(have) != set(want):
                out.append(f"{where}: leaf classes {sorted(have)}, plan {sorted(want)}")
            for classid, leaf in want.items():
                got = have.get(classid)
                if got is not None and (not shaping.same_leaf(got[0], leaf) or got[0].queue_handle != leaf.queue_handle
                                        or got[1] != tb.plan.leaf_queue):
                    out.append(f"{where}: class {classid} is {got}, plan {leaf} with {tb.plan.leaf_queue}")
            have_f = {p: fs for p, fs in shaping.read_filters(ipr, idx, htb).items()}
            want_f = {f.pref: f.filters for f in plan.filters if f.link == sl.link}
            if have_f != want_f:
                out.append(f"{where}: filters {have_f}, plan {want_f}")
        for ns in tb.plan.namespaces.hosts:
            idx = self._index(ns, DATA_IFNAME)
            have = routing.read_labels(tb._handle(ns), idx)
            want = {a.address: a.label for a in plan.addresses if a.netns == ns}
            if have != want:
                out.append(f"{ns}: job addresses {have}, plan {want}")
            routes = routing.read_routes(tb._handle(ns))
            for r in plan.routes:
                if r.netns == ns and routes.get(f"{r.dst}/32", (None, None))[1] != r.prefsrc:
                    out.append(f"{ns}: route to {r.dst} is {routes.get(f'{r.dst}/32')}, plan source {r.prefsrc}")
        for ns in tb.plan.namespaces.routers:
            have = routing.read_rules(tb._handle(ns), JOB_RULE_PRIORITIES)
            want = {(r.src, r.dst, r.table, r.priority) for r in plan.rules if r.netns == ns}
            if have != want:
                out.append(f"{ns}: path rules {sorted(have)}, plan {sorted(want)}")
        return out

    def stats(self) -> list[dict]:
        """Counters of every leaf on every shaped link: the default class (job None) and each job's."""
        tb, rows = self._tb, []
        links = {sl.link: sl for sl in tb.plan.links}
        for l in self.applied.leaves:
            sl = links[l.link]
            counters = shaping.leaf_counters(tb._handle(l.netns), tb._if_index[(sl.src, sl.dst)])
            rows.append({"job": l.job, "link": l.link, "src": sl.src, "dst": sl.dst, "netns": l.netns,
                         "ifname": l.ifname, "classid": l.leaf.classid,
                         **counters.get(l.leaf.class_id, dict.fromkeys(shaping.COUNTERS, 0))})
        return rows


def _add_source_route(ipr, r, index_of) -> bool:
    from pyroute2 import NetlinkError

    route = UnicastRoute(r.netns, f"{r.dst}/32", (NextHop(r.ifname, r.gateway),), prefsrc=r.prefsrc)
    try:
        routing.put_route(ipr, route, index_of, replace=False)
    except NetlinkError as exc:
        if exc.code == errno.EEXIST:
            return False
        raise
    return True


class Allocations:
    """The testbed methods of per-job network allocations (mixed into :class:`~netlab.testbed.netns.NetnsTestbed`;
    it provides ``_jobnets``, ``_require_up``, the plan and the netlink thread)."""

    @on_netlink_thread
    def allocate(self, job: int, hosts, allocation, flows=None) -> JobNetwork:
        """Give ``job`` (on ``hosts``, distinct, rank order) its network ``allocation`` on every shaped link it
        may cross; called again for a running job it changes the allocation in place. ``flows``: directed host
        pairs in the order ``allocation.paths`` indexes (default: the ring over ``hosts``)."""
        self._require_up()
        return self._jobnets.set(JobNet(job, tuple(hosts), allocation, None if flows is None else tuple(flows)))

    @on_netlink_thread
    def release(self, job: int) -> None:
        """Remove ``job``'s classes, filters, rules, routes and addresses (nothing when it has none)."""
        if self._ledger is not None:
            self._jobnets.remove(job)

    def allocations(self) -> dict[int, JobNet]:
        return dict(self._jobnets.jobs)

    @property
    def allocation_writes(self) -> int:
        """Netlink writes the last allocation change made (0: the kernel already matched the plan)."""
        return self._jobnets.writes

    def allocation_plan(self) -> JobNetPlan:
        """The records of every job's allocation as last applied."""
        return self._jobnets.applied

    @on_netlink_thread
    def allocation_mismatches(self) -> list[str]:
        """Where the kernel's tc, address, route and rule state differs from the allocation plan (read back
        through pyroute2); empty when it matches."""
        self._require_up()
        return self._jobnets.mismatches()

    @on_netlink_thread
    def job_stats(self):
        """Per shaped link and leaf (the default class, job None, and each allocated job's): bytes, packets,
        drops, overlimits, backlog, qlen."""
        import pandas as pd

        self._require_up()
        df = pd.DataFrame(self._jobnets.stats())
        if len(df):
            df["job"] = df["job"].astype("Int64")
        return df
