"""Placement features: what a job in a candidate placement would see, before it starts.

Why: a network-aware placement must know how much slower a job will run in
a placement given what already runs there. The simulator can answer exactly;
a real cluster has only the topology, the running jobs and telemetry. This
module turns that knowledge into one row of numbers, computed the same way
from a simulator :class:`~netlab.sched.ClusterView`, from a synthetic
experiment (:mod:`netlab.slowdown.samples`) or from the live testbed.

Raw columns (``FEATURES.columns``, the stored schema; units in the names):

========================  =====================================================
``n_gpus``                GPUs of the job
``n_hosts``, ``n_racks``  hosts and racks the placement spans
``flow_bytes``            bytes per flow per iteration (the pattern's plan)
``host_tier_bytes``       bytes per iteration on host-tier links (NIC up/down)
``upper_tier_bytes``      bytes per iteration on links above the ToRs (the
                          oversubscribed tiers); a byte crossing ToR->spine->ToR
                          counts on both links, as ``metrics.tier_bytes`` does
``compute_s``             compute seconds per iteration
``overlap``               share of min(compute, comm) hidden (0..1)
``serial_intra_s``        serial intra-host phase seconds per iteration
``iso_rate_gbps``         per-flow rate alone on this placement (0: one host)
``iso_iter_s``            the job's isolated iteration time (consolidated,
                          non-blocking): the reference of ``slowdown``
``comm_compute_ratio``    network seconds alone on this placement / compute
``path_util_max``         max time-averaged utilisation (load / capacity) of the
                          placement's links, before the job starts
``upper_util_max``        the same over its upper-tier links only
``path_jobs``             distinct running jobs sharing any of its links
``path_jobs_max``         max running jobs on one of its links
``path_flows_max``        max running flows (ECMP-weighted) on one of its links
``offered_load_max``      max over its links of (running jobs' isolated-rate
                          demand + its own) / capacity: > 1 means contention
``oversub``               oversubscription of the racks it spans (max)
``residual_gbps``         work-conserving estimate: per link, what the running
                          jobs' time-averaged load leaves free (per flow),
                          min over links, never below ``share_gbps``: jobs that
                          fall out of step use each other's compute gaps
``competitor_bytes_ratio``  largest per-flow bytes of a job sharing its links /
                          its own (0 alone): TCP favours long transfers over
                          short all-reduces, which max-min sharing ignores
``share_gbps``            max-min share estimate: per link, the rate r with
                          ``w r + sum_i w_i min(r_i, r) = capacity`` given the
                          running flows' current rates r_i; min over links and
                          the job's own cap (see :func:`water_fill`)
``fluid_tcp_slowdown``    slowdown (ratio to ``iso_iter_s``) from a fluid
                          simulation of the job with the running jobs on its
                          links (:mod:`netlab.slowdown.fluid`): each job
                          alternates compute and all-reduce from random
                          offsets, so links are shared only while transfers
                          overlap and gaps are reused; overlapping transfers
                          share a link in proportion to their bytes (TCP on
                          FIFO queues favours long transfers); one-host jobs
                          and jobs without contention get their alone value
========================  =====================================================

Telemetry columns (``FEATURES.telemetry``). The flow-level simulator has no
queues or packets, so simulator rows fill ``tel_backlog_bytes``,
``tel_drops_per_s``, ``tel_overlimits_per_s`` and ``tel_retransmits_per_s``
with 0 and ``tel_overload_gbps`` with its proxy: the running jobs' demand at
their isolated rates above capacity, max over the placement's links (what
would queue; the simulator's ECN-mark proxy). Testbed rows fill all five from
telemetry on the placement's links over the last interval (qdisc backlog,
drops and overlimits, TCP retransmits; overload = overlimit bytes rate).
:class:`PlacementFeaturizer` leaves them out unless ``telemetry=True``:
a model trained on simulator rows cannot learn from columns that are 0 there.

Targets (not features): ``slowdown`` = iteration time / ``iso_iter_s``;
``congestion_next`` (optional) = the max over the placement's links of the
overload (demand above capacity) / capacity once the job runs.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

import numpy as np
import pandas as pd
from ..jit import njit  # numba is imported at the first kernel call
from sklearn.base import BaseEstimator, TransformerMixin
from sklearn.utils.validation import check_array, check_is_fitted, validate_data

from ..network.demand import build_demand
from ..network.model import GBIT
from ..topology.info import topo_info
from ..workload.zoo import ModelZoo
from .fluid import JobTable, alone_slowdown, fluid_slowdown


@dataclass(frozen=True)
class FeatureSchema:
    """Ordered raw column names with a version; ``hash`` identifies them in saved models."""

    version: int
    columns: tuple[str, ...]
    telemetry: tuple[str, ...]

    @property
    def all(self) -> tuple[str, ...]:
        return self.columns + self.telemetry

    @property
    def hash(self) -> str:
        text = f"v{self.version}:" + ",".join(self.all)
        return hashlib.sha256(text.encode()).hexdigest()[:16]

    def as_dict(self) -> dict:
        return {"version": self.version, "hash": self.hash, "columns": list(self.columns),
                "telemetry": list(self.telemetry)}


FEATURES = FeatureSchema(
    version=3,
    columns=("n_gpus", "n_hosts", "n_racks", "flow_bytes", "host_tier_bytes", "upper_tier_bytes", "compute_s",
             "overlap", "serial_intra_s", "iso_rate_gbps", "iso_iter_s", "comm_compute_ratio", "path_util_max",
             "upper_util_max", "path_jobs", "path_jobs_max", "path_flows_max", "offered_load_max", "oversub",
             "share_gbps", "residual_gbps", "competitor_bytes_ratio", "fluid_tcp_slowdown"),
    telemetry=("tel_backlog_bytes", "tel_drops_per_s", "tel_overlimits_per_s", "tel_retransmits_per_s",
               "tel_overload_gbps"),
)
TARGET = "slowdown"


# ------------------------------------------------------------- background
class Background:
    """The running jobs' traffic, indexed by link: what a new placement would share.

    Built once per decision (not per candidate). ``demands`` and ``rates_gbps``
    (per-flow rate while communicating) are parallel lists; ``load_gbps`` is
    the time-averaged load per link (telemetry on a real cluster; computed
    from the rates and duty cycles when not given).
    """

    def __init__(self, topology, demands=(), rates_gbps=(), load_gbps: np.ndarray | None = None):
        self.topology = topology
        n = topology.n_links
        demands, rates = list(demands), np.asarray(list(rates_gbps), dtype=float)
        self.n_jobs = len(demands)
        self.job_flow_bytes = np.array([d.flow_bytes for d in demands], dtype=float)
        self.table = JobTable(demands)  # per job: what the fluid simulation needs
        sizes = [len(d.links) for d in demands]
        link = np.concatenate([d.links for d in demands]) if demands else np.zeros(0, dtype=np.int64)
        weight = np.concatenate([d.weights for d in demands]) if demands else np.zeros(0)
        job = np.repeat(np.arange(len(demands)), sizes)
        rate = rates[job] if len(job) else np.zeros(0)
        iso = np.array([d.iso_rate_gbps for d in demands])[job] if len(job) else np.zeros(0)
        if load_gbps is None:
            duty = np.array([d.net_s(r) / d.iter_s(r) if r > 0 else 0.0 for d, r in zip(demands, rates)])
            load_gbps = np.bincount(link, weights=weight * rate * (duty[job] if len(job) else 0.0), minlength=n)
        self.load_gbps = np.asarray(load_gbps, dtype=float)
        self.flows = np.bincount(link, weights=weight, minlength=n)
        self.jobs = np.bincount(link, minlength=n)
        self.offered_gbps = np.bincount(link, weights=weight * iso, minlength=n)
        # Entries sorted by (link, rate), with CSR offsets per link, for the water filling.
        order = np.lexsort((rate, link))
        self.e_link, self.e_weight, self.e_rate, self.e_job = link[order], weight[order], rate[order], job[order]
        self.ptr = np.concatenate(([0], np.cumsum(np.bincount(link, minlength=n))))

    @classmethod
    def from_view(cls, view) -> "Background":
        """From a cluster view: running jobs' demands and their current per-flow rates.

        A running job's rate is read back from its communication time
        (``comm_s`` less the serial intra-host phase = bytes / rate), which the
        simulator keeps current and an agent's iteration logs measure; jobs
        without a recorded demand (e.g. on the testbed) get one from
        ``view.demand_for``.
        """
        demands, rates = [], []
        for js in view.running.values():
            d = js.demand
            if d is None and js.placement is not None and len(js.placement.hosts) > 1:
                d = view.demand_for(js, js.placement)
            if d is None:
                continue
            net_s = js.comm_s - d.serial_intra_s
            rate = d.flow_bytes * 8 / (net_s * GBIT) if net_s > 1e-12 else d.iso_rate_gbps
            demands.append(d)
            rates.append(min(rate, d.iso_rate_gbps))
        return cls(view.topology, demands, rates, view.link_load_gbps())

    def entries(self, links: np.ndarray):
        """(segment index into ``links``, weight, rate, job) of the running flows on ``links``."""
        start, stop = self.ptr[links], self.ptr[links + 1]
        counts = stop - start
        total = int(counts.sum())
        seg = np.repeat(np.arange(len(links)), counts)
        idx = np.arange(total) - np.repeat(np.cumsum(counts) - counts, counts) + np.repeat(start, counts)
        return seg, self.e_weight[idx], self.e_rate[idx], self.e_job[idx]


def water_fill(capacity: np.ndarray, weight: np.ndarray, seg: np.ndarray, e_weight: np.ndarray,
               e_rate: np.ndarray) -> np.ndarray:
    """Per link, the per-flow rate r a new job with ``weight`` flows gets: w r + sum_i w_i min(r_i, r) = capacity.

    Running flows i (sorted by rate within each link, segment ``seg``) keep
    their rate r_i if it is below r (they are bottlenecked elsewhere) and
    are cut to r otherwise: max-min fairness on one link, holding the rest of
    the network fixed. With k flows frozen at their rates the root is
    ``g_k = (capacity - sum_{i<k} w_i r_i) / (w + sum_{i>=k} w_i)``; each
    ``g_k`` is a lower bound and the true root is the largest of them.
    """
    f64 = np.float64
    return _water_fill(np.ascontiguousarray(capacity, dtype=f64), np.ascontiguousarray(weight, dtype=f64),
                       np.ascontiguousarray(seg, dtype=np.int64), np.ascontiguousarray(e_weight, dtype=f64),
                       np.ascontiguousarray(e_rate, dtype=f64))


@njit(cache=True, nogil=True)
def _water_fill(capacity, weight, seg, e_weight, e_rate):  # pragma: no cover  (compiled)
    """:func:`water_fill`, one pass per link segment (entries sorted by link, then rate)."""
    n = capacity.shape[0]
    total_w = np.zeros(n)
    total_wr = np.zeros(n)
    for e in range(seg.shape[0]):
        total_w[seg[e]] += e_weight[e]
        total_wr[seg[e]] += e_weight[e] * e_rate[e]
    best = np.empty(n)
    for link in range(n):
        best[link] = max(capacity[link] - total_wr[link], 0.0) / weight[link]  # every running flow frozen
    e = 0
    while e < seg.shape[0]:
        link = seg[e]
        frozen_wr, live_w = 0.0, total_w[link]
        while e < seg.shape[0] and seg[e] == link:
            g = (capacity[link] - frozen_wr) / (weight[link] + live_w)  # flows before e frozen, the rest cut to g
            if g > best[link]:
                best[link] = g
            frozen_wr += e_weight[e] * e_rate[e]
            live_w -= e_weight[e]
            e += 1
    return best


# --------------------------------------------------------------- one row
def _oversub_by_rack(topo) -> np.ndarray:
    """Host NIC capacity over ToR uplink capacity, per rack (1 where a rack has no uplink)."""
    info = topo_info(topo)
    host_cap = np.bincount(topo.host_rack, weights=topo.host_nic_gbps, minlength=topo.n_racks)
    up = info.rack_cap / 2  # rack_cap counts both directions of each uplink cable
    return np.divide(host_cap, up, out=np.ones(topo.n_racks), where=up > 0)


def placement_features(background, job, placement, zoo: ModelZoo | None = None) -> dict:
    """The raw feature row (``FEATURES.all``) of ``job`` on ``placement`` given what runs now.

    ``background`` is a :class:`Background` or a cluster view (from which one
    is built: build it once and pass it when scoring several candidates).
    ``job`` is a :class:`~netlab.sched.JobState`.
    """
    if not isinstance(background, Background):
        zoo = zoo or background.zoo
        background = Background.from_view(background)
    return feature_rows(background, job, [placement], zoo)[0]


def placement_frame(background: Background, job, placements, zoo: ModelZoo | None = None) -> pd.DataFrame:
    """Raw feature rows of ``job`` on each of ``placements`` as a DataFrame (``FEATURES.all`` columns)."""
    rows = feature_rows(background, job, placements, zoo)
    return pd.DataFrame(np.array([[r[c] for c in FEATURES.all] for r in rows], dtype=float).reshape(len(rows), -1),
                        columns=_FRAME_COLUMNS)


_FRAME_COLUMNS = pd.Index(list(FEATURES.all))  # built once: building it converts every name (~0.1 ms per frame)


def feature_rows(background: Background, job, placements, zoo: ModelZoo | None = None) -> list[dict]:
    """Raw feature rows (dicts keyed by ``FEATURES.all``) of ``job`` on each of ``placements``."""
    topo = background.topology
    zoo = zoo or ModelZoo.default()
    model = zoo[job.job.model]
    oversub = _oversub_by_rack(topo)
    upper = topo_info(topo).oversub
    cap = topo.link_capacity_gbps
    rows = []
    for p in placements:
        racks = np.unique(topo.host_rack[list(p.hosts)])
        d, intra_s = build_demand(topo, model, job.job.pattern, job.job_id, p.hosts, p.gpus, job.iso_iter_s)
        row = dict.fromkeys(FEATURES.all, 0.0)
        row.update(n_gpus=float(sum(p.gpus)), n_hosts=float(len(p.hosts)), n_racks=float(len(racks)),
                   compute_s=model.compute_s, overlap=model.overlap, serial_intra_s=intra_s,
                   iso_iter_s=job.iso_iter_s, oversub=float(oversub[racks].max()),
                   fluid_tcp_slowdown=alone_slowdown(model.compute_s, intra_s, model.overlap, job.iso_iter_s))
        if d is not None:
            links, w = d.links, d.weights
            up = upper[links]
            seg, e_w, e_r, e_job = background.entries(links)
            share = water_fill(cap[links], w, seg, e_w, e_r).min()
            util = background.load_gbps[links] / cap[links]
            row.update(
                flow_bytes=d.flow_bytes,
                host_tier_bytes=d.flow_bytes * float(w[~up].sum()),
                upper_tier_bytes=d.flow_bytes * float(w[up].sum()),
                iso_rate_gbps=d.iso_rate_gbps,
                comm_compute_ratio=d.net_s(d.iso_rate_gbps) / model.compute_s,
                path_util_max=float(util.max()),
                upper_util_max=float(util[up].max()) if up.any() else 0.0,
                path_jobs=float(np.count_nonzero(np.bincount(e_job, minlength=background.n_jobs))),
                path_jobs_max=float(background.jobs[links].max()),
                path_flows_max=float(background.flows[links].max()),
                offered_load_max=float(((background.offered_gbps[links] + w * d.iso_rate_gbps) / cap[links]).max()),
                share_gbps=float(min(share, d.iso_rate_gbps)),
                # work-conserving estimate: what the others' time-averaged load leaves free, never below the share
                residual_gbps=float(min(max(share, np.min((cap[links] - background.load_gbps[links]).clip(0) / w)),
                                        d.iso_rate_gbps)),
                # TCP does not share max-min between a short all-reduce and long transfers: measured on the
                # testbed, small jobs next to much larger ones got a fraction of their max-min share
                competitor_bytes_ratio=float(background.job_flow_bytes[e_job].max() / d.flow_bytes)
                if len(e_job) and d.flow_bytes > 0 else 0.0,
                tel_overload_gbps=float(np.maximum(background.offered_gbps[links] - cap[links], 0.0).max()),
                fluid_tcp_slowdown=fluid_slowdown(d, cap[links], seg, e_w, e_job, background.table, job.iso_iter_s),
            )
        rows.append(row)
    return rows


# ------------------------------------------------------------ featuriser
DERIVED = ("share_slowdown_est", "alone_slowdown", "share_ratio", "residual_slowdown_est")


def share_slowdown(df: pd.DataFrame, rate_col: str = "share_gbps") -> np.ndarray:
    """Iteration time at the per-flow rate in ``rate_col`` over ``iso_iter_s`` (the max-min share formula)."""
    cols = ["flow_bytes", rate_col, "compute_s", "serial_intra_s", "overlap", "iso_iter_s"]
    return _share_slowdown(*df[cols].to_numpy(float).T)


def _share_slowdown(flow_bytes, rate_gbps, compute_s, serial_intra_s, overlap, iso_iter_s) -> np.ndarray:
    net = np.divide(flow_bytes * 8, rate_gbps * GBIT, out=np.zeros_like(flow_bytes),
                    where=(flow_bytes > 0) & (rate_gbps > 0))
    comm = net + serial_intra_s
    return (compute_s + comm - overlap * np.minimum(compute_s, comm)) / iso_iter_s  # network.iteration_time


class PlacementFeaturizer(TransformerMixin, BaseEstimator):
    """Raw placement columns -> the numeric feature matrix.

    Output columns: the derived ones first (``share_slowdown_est``: the
    max-min share formula's slowdown, which :class:`MaxMinShareRegressor`
    reads as column 0; ``alone_slowdown``: the same at the isolated rate on
    this placement; ``share_ratio``: share / isolated rate), then the raw
    columns of ``FEATURES.columns``, then, with ``telemetry=True``, the
    telemetry columns (missing telemetry, NaN, counts as 0).

    Input, at fit and transform alike (how one call reads its input does not
    depend on what the other was given):

    * a DataFrame: columns are matched by name, extra columns
      (``experiment_id``, targets, ...) are ignored, missing ones are named
      in the error;
    * a 2-D numeric array (anything :func:`~sklearn.utils.check_array`
      takes): exactly ``len(FEATURES.columns)`` columns (``FEATURES.all``
      with ``telemetry=True``) in that schema order; another width is a
      ValueError giving the expected and the received count.

    Fitting learns nothing; it records ``n_features_in_`` (the input's
    width, extra DataFrame columns included) and, for a DataFrame with string
    column names, ``feature_names_in_``, as sklearn's ``validate_data`` does.
    NaN in a non-telemetry column is an error naming the column(s).
    """

    def __init__(self, telemetry: bool = False):
        self.telemetry = telemetry

    def _inputs(self) -> tuple[str, ...]:
        return FEATURES.all if self.telemetry else FEATURES.columns

    def _check(self, X, reset: bool) -> np.ndarray:
        """The input columns as a float matrix, in ``_inputs()`` order; clear errors otherwise.

        ``reset`` (fit) records ``n_features_in_`` / ``feature_names_in_``.
        """
        inputs = self._inputs()
        if isinstance(X, pd.DataFrame):
            missing = [c for c in inputs if c not in X.columns]
            if missing:
                raise ValueError(f"PlacementFeaturizer: missing column(s) {missing} "
                                 f"(FEATURES schema v{FEATURES.version}, hash {FEATURES.hash})")
            if reset:  # names and width only: extra columns may be anything (strings, ids)
                validate_data(self, X, reset=True, skip_check_array=True)
            raw = None
            if X.shape[1] in (len(inputs), len(FEATURES.all)) and X.columns.tolist()[:len(inputs)] == list(inputs):
                try:  # the schema's columns first (as placement_frame builds them): no column lookup (~0.3 ms)
                    raw = X.to_numpy(dtype=float)[:, :len(inputs)]
                except (TypeError, ValueError):
                    raw = None
            if raw is None:
                raw = X[list(inputs)].to_numpy(dtype=float)
        else:
            # Positional: the schema fixes the columns, whatever fit saw (so no n_features_in_ check at transform).
            params = dict(dtype=np.float64, ensure_all_finite="allow-nan")
            raw = (validate_data(self, X, reset=True, **params) if reset
                   else check_array(X, input_name="X", estimator=self, **params))
            if raw.shape[1] != len(inputs):
                raise ValueError(f"PlacementFeaturizer: X has n_features={raw.shape[1]}, expected "
                                 f"n_features={len(inputs)}: the FEATURES schema v{FEATURES.version} columns "
                                 f"{'with' if self.telemetry else 'without'} telemetry, in order ({', '.join(inputs)})")
        nan = np.isnan(raw[:, :len(FEATURES.columns)]).any(axis=0)
        if nan.any():
            raise ValueError(f"PlacementFeaturizer: NaN in column(s) {np.asarray(FEATURES.columns)[nan].tolist()}")
        return raw

    def fit(self, X, y=None):
        self._check(X, reset=True)
        self.schema_hash_ = FEATURES.hash
        return self

    def transform(self, X):
        check_is_fitted(self, "schema_hash_")
        raw = self._check(X, reset=False)
        col = {c: raw[:, i] for i, c in enumerate(FEATURES.columns)}
        fb, compute, intra, overlap, iso = (col[c] for c in ("flow_bytes", "compute_s", "serial_intra_s", "overlap",
                                                             "iso_iter_s"))
        iso_rate = col["iso_rate_gbps"]
        derived = np.column_stack([
            _share_slowdown(fb, col["share_gbps"], compute, intra, overlap, iso),
            _share_slowdown(fb, iso_rate, compute, intra, overlap, iso),
            np.divide(col["share_gbps"], iso_rate, out=np.ones(len(raw)), where=iso_rate > 0),
            _share_slowdown(fb, col["residual_gbps"], compute, intra, overlap, iso),
        ])
        return np.nan_to_num(np.hstack([derived, raw]), nan=0.0)

    def get_feature_names_out(self, input_features=None):
        return np.asarray(DERIVED + self._inputs(), dtype=object)
