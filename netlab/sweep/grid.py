"""Sweep grids: one declarative document expanded into cells (one simulation each).

A grid document (a YAML file or a dict)::

    name: oversub-study
    trace: philly-sample            # keys outside ``grid`` are fixed for every cell
    max_jobs: null
    topology: leafspine,racks=4,hosts_per_rack=4,gpus_per_host=8,host_gbps=100,spines=2
    base_seed: 0
    links: {network: fair, seed: 0} # which cells keep their per-link table: true, false or a filter
    grid:
      policy: [fifo, tiresias]      # a list is an axis: every value is crossed with the others
      placement: consolidated       # a scalar inside ``grid`` is a fixed value too
      oversub: [2, 4]               # sets ``oversub=`` in the base topology spec
      network: [fair, ideal]
      regime: [reno-deep, dcqcn]    # or a transport regime: it sets the network (the regime registry's model)
      seed: [0, 1, 2]               # replicate indices, not raw seeds (see below)
      pairs:                        # a list of mappings is zipped: each mapping is one value
        - {policy: sjf, placement: random}

A cell's id is a short hash of its canonical parameters (JSON with sorted
keys), so a re-run finds the cells it already has whatever the order or the
backend.

Every cell is checked against :class:`CellParams` (strictly: ``"2"`` is not
an integer here) before anything runs: the field rules are the ones
:class:`netlab.run.RunParams` and :class:`netlab.sim.SimConfig` use, so a
bad value is the same error with the same allowed values wherever it is
given (an unknown policy or network is a :class:`~netlab.errors.UnknownNameError`,
any other bad value a :class:`GridError`, both naming the grid file).

Seeds. ``seed`` is a replicate index. Every random stream comes from
``numpy.random.SeedSequence(base_seed, spawn_key=...)``, never ``seed + i``:

* the workload (model draw, synthetic arrivals) uses ``spawn_key=(seed, 0)``:
  every cell of one replicate sees the same jobs (common random numbers, so
  policies are compared on equal terms);
* the simulation (policies' own randomness) uses ``spawn_key=(seed, 1, k)``
  where ``k`` is the hash of the cell's other parameters: one independent
  stream per cell.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import math
import os
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..errors import InputError, Int, Schema, short
from ..network.model import DEFAULT_NETWORK
from ..run import (Background, Batch, Compression, MaxJobs, Migration, NetPolicy, Oversub, Placement, Policy,
                   Preemption, TopologyText, TraceText, topology_spec as _spec)
from ..sim.config import Backfill, Network, Regime, RestartSeconds, Seconds, Seed, StorageRate
from ..workload.checkpoint import LAUNCH_S, STORAGE_GBPS
from ..yaml_input import load_yaml, load_yaml_file

DEMO_TOPOLOGY = "leafspine,racks=4,hosts_per_rack=4,gpus_per_host=8,host_gbps=100,spines=2"
#: the main job's schedulers: classic ones on consolidated placement, then the network-aware ones
DEMO_SCHEDULERS = (
    dict(policy="fifo", placement="consolidated"),
    dict(policy="fjf", placement="consolidated"),
    dict(policy="tiresias", placement="consolidated"),  # DEMO_BASELINE
    dict(policy="themis", placement="consolidated"),
    dict(policy="dally"),  # Dally's own delay-scheduling placement and preemption
    dict(policy="tiresias", placement="cassini"),  # a host scheduler with CASSINI's ranker and time shifts
    dict(policy="tiresias", placement="topo-bestfit"),
    # Crux's GPU-intensity paths and priority classes on the baseline's ordering and placement (measured: a
    # cell costs 1.28x the baseline's CPU, +50 cells, about +12 s of the demo's 240 s budget on 2 cores)
    dict(policy="tiresias", placement="consolidated", netpolicy="crux"),
)
DEMO_BASELINE = "tiresias+consolidated"  # the label the demo's comparisons are against
DEMO_OVERSUB = (2, 8)
#: the transport regimes the main job's verdicts are computed for (netlab.network.regimes): the default
#: network's (deep-buffer TCP) and the rate-fair one (RoCE/DCQCN-like), whose verdicts on time-shift and
#: placement policies can differ (issue 26)
DEMO_REGIMES = ("reno-deep", "dcqcn")
#: replicates: per-seed changes against the baseline spread by about +-10% (the jobs' model mix), so
#: 5 seeds left Dally's 8:1 interval across 0 ([-12%, +6%]) and 10 separate it ([-16%, -3%])
DEMO_SEEDS = 10

META_KEYS = ("name", "description", "links", "grid")
#: the largest grid a sweep expands unless raised (NETLAB_MAX_CELLS, or max_cells=): the demo is 400 cells
MAX_CELLS = 10_000


class GridError(InputError):
    """A grid document is malformed; the message names the grid file, the key and the allowed values."""


class CellParams(Schema):
    """Every parameter a grid cell understands, with its default. ``seed`` is a replicate index (see the module
    docstring); the others mean what they mean in :class:`netlab.run.RunParams`."""

    error = GridError
    trace: TraceText = "philly-sample"
    max_jobs: MaxJobs = None
    topology: TopologyText = DEMO_TOPOLOGY
    oversub: Oversub = None
    policy: Policy = "fifo"
    placement: Placement = None
    preemption: Preemption = None
    network: Network = DEFAULT_NETWORK
    seed: Int(ge=0, le=2**32 - 1, what="an integer >= 0 (a replicate index)") = 0
    base_seed: Seed = 0
    checkpoint_s: RestartSeconds = None  # null: each job's own, from its model's size (netlab.workload.checkpoint)
    restore_s: RestartSeconds = None
    backfill: Backfill = None  # None: the ordering policy's own rule (strict fifo, fjf...)
    background: Background = 0.0  # optional
    batch: Batch = False  # optional
    netpolicy: NetPolicy = "none"  # optional: the network policy (per-job network allocations)
    # optional: a transport regime (netlab.network.regimes); the cell runs on the model the regime registry
    # names for it (:func:`regime_network` sets ``network``)
    regime: Regime = None
    migration: Migration = "none"  # optional: the migration policy (moving congested running jobs)
    storage_gbps: StorageRate = STORAGE_GBPS  # optional: a job's checkpoint bandwidth to storage (Gbit/s)
    launch_s: Seconds = LAUNCH_S  # optional: process start at each restart
    compression: Compression = None  # optional: gradient compression for the jobs of 2+ GPUs (null: none)


#: optional parameters: they enter a cell (and its id) only when a grid sets them, so adding
#: one never changes the ids of cells already stored
OPTIONAL = {k: CellParams.model_fields[k].default for k in ("background", "batch", "netpolicy", "regime",
                                                            "migration", "storage_gbps", "launch_s",
                                                            "compression")}
#: parameters that say which network a cell runs on (not a setting of their own beside it)
NETWORK_PARAMS = ("network", "regime")
#: parameters every cell has, with their defaults (all of them enter the cell id)
DEFAULTS = {k: f.default for k, f in CellParams.model_fields.items() if k not in OPTIONAL}


@dataclass(frozen=True)
class Cell:
    """One simulation: canonical parameters, derived seeds, and whether to keep per-link rows."""

    id: str
    params: dict
    workload_seed: int
    sim_seed: int
    keep_links: bool = False
    label: str = field(default="", compare=False)


def canonical_json(obj) -> str:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), default=str)


def short_hash(obj, n: int = 12) -> str:
    return hashlib.sha256(canonical_json(obj).encode()).hexdigest()[:n]


def _seed_int(ss: np.random.SeedSequence) -> int:
    return int(ss.generate_state(1, np.uint64)[0] >> np.uint64(1))  # 63 bits: fits int64 columns


def cell_seeds(params: dict) -> tuple[int, int]:
    """(workload seed, simulation seed) for a cell; see the module docstring."""
    base, rep = int(params["base_seed"]), int(params["seed"])
    rest = {k: v for k, v in params.items() if k not in ("seed", "base_seed")}
    k = int(short_hash(rest, 8), 16)
    workload = np.random.SeedSequence(base, spawn_key=(rep, 0))
    sim = np.random.SeedSequence(base, spawn_key=(rep, 1, k))
    return _seed_int(workload), _seed_int(sim)


def _matches(params: dict, selector, where: str = "grid") -> bool:
    if isinstance(selector, bool):
        return selector
    if isinstance(selector, dict):
        return all(params.get(k) in (v if isinstance(v, list) else [v]) for k, v in selector.items())
    raise GridError(f"{where}: 'links' must be true, false or a mapping of parameter values, got {short(selector)}")


def _axes(doc: dict, where: str = "grid") -> list[list[dict]]:
    """Each axis as a list of partial parameter dicts (fixed values are one-value axes)."""
    grid = doc.get("grid") or {}
    if not isinstance(grid, dict):
        raise GridError(f"{where}: 'grid' must be a mapping of parameter -> list of values, got {short(grid)}")
    axes = [[{k: v}] for k, v in doc.items() if k not in META_KEYS]
    for key, values in grid.items():
        if not isinstance(key, str):
            raise GridError(f"{where}: grid key {short(key)} is not a parameter name; known: "
                            f"{sorted(set(DEFAULTS) | set(OPTIONAL))}")
        if values is None:
            raise GridError(f"{where}: grid axis {short(key)} is empty (null); give a value or a list of values")
        values = values if isinstance(values, list) else [values]
        if not values:
            raise GridError(f"{where}: grid axis {short(key)} has no values")
        if all(isinstance(v, dict) for v in values):
            axes.append([dict(v) for v in values])
        elif any(isinstance(v, dict) for v in values):
            raise GridError(f"{where}: grid axis {short(key)} mixes mappings and plain values")
        else:
            axes.append([{key: v} for v in values])
    return axes


def max_cells_allowed() -> int:
    """The cell cap: ``NETLAB_MAX_CELLS`` if set (a positive integer), else :data:`MAX_CELLS`."""
    raw = os.environ.get("NETLAB_MAX_CELLS", "").strip()
    if not raw:
        return MAX_CELLS
    try:
        value = int(raw)
    except ValueError:
        value = 0
    if value < 1:
        raise GridError(f"NETLAB_MAX_CELLS={short(raw)}: must be a positive integer (the largest grid a sweep runs)")
    return value


def expand(doc: dict, where: str = "grid", max_cells: int | None = None) -> list[Cell]:
    """Cross every axis; canonicalise each cell; ids are unique (duplicates are merged).

    Every cell is checked (:func:`check_cells`) before any is returned, so a bad
    value is one :class:`GridError` naming ``where`` (the grid file), the key and
    the allowed values, before anything is written. A grid of more than
    ``max_cells`` cells (default :func:`max_cells_allowed`) is refused before a
    cell is made: a few lines of YAML can ask for millions.
    """
    cells, seen = [], set()
    _check_meta(doc, where)
    selector = doc.get("links", False)
    axes = _axes(doc, where)
    count, cap = math.prod(len(a) for a in axes), max_cells or max_cells_allowed()
    if count > cap:
        raise GridError(f"{where}: the grid has {count:,} cells, over the limit of {cap:,}; split it into smaller "
                        f"grids, or raise the limit (NETLAB_MAX_CELLS={count} in the environment, or "
                        f"max_cells={count} for run_sweep/expand)")
    combos = []
    for combo in itertools.product(*axes):
        params = dict(DEFAULTS)
        for part in combo:
            unknown = sorted(str(k) for k in set(part) - set(DEFAULTS) - set(OPTIONAL))
            if unknown:
                raise GridError(f"{where}: unknown grid parameter(s) {short(unknown)}; known: "
                                f"{sorted(set(DEFAULTS) | set(OPTIONAL))}")
            params.update(part)
        combos.append(regime_network(params, where))
    check_cells(combos, where)
    for params in combos:
        cid = short_hash(params)
        if cid in seen:
            continue
        seen.add(cid)
        workload, sim = cell_seeds(params)
        label = f"{params['policy']}+{params['placement'] or 'default'}"
        if params.get("netpolicy", "none") != "none":
            label += f"+{params['netpolicy']}"
        if params.get("migration", "none") != "none":
            label += f"+{params['migration']}"
        if params.get("compression") is not None:
            label += f"+{params['compression']}"
        cells.append(Cell(cid, params, workload, sim, _matches(params, selector, where), label))
    return cells


# -- checking a whole grid before anything is written ----------------------------------------------------------------

def regime_network(params: dict, where: str = "grid") -> dict:
    """``params`` with the network of its ``regime`` (the model the regime registry names for it), if it names
    one. A cell naming both a regime and another
    network is a :class:`GridError`: the regime says which model it runs on."""
    if params.get("regime") is None:
        return params
    from ..network.regimes import REGIMES, regime

    if params["regime"] not in REGIMES:  # check_cells names it with the registered regimes
        return params
    net = regime(params["regime"]).network
    if params.get("network", DEFAULT_NETWORK) not in (DEFAULT_NETWORK, net):
        raise GridError(f"{where}: a cell names regime {params['regime']!r} and network {params['network']!r}; "
                        "a regime sets the network (give one of them)")
    return params | dict(network=net)


def _check_meta(doc: dict, where: str) -> None:
    for key in ("name", "description"):
        if doc.get(key) is not None and not isinstance(doc[key], (str, int, float)):
            raise GridError(f"{where}: {key!r} must be text, got {short(doc[key])}")
    _matches({}, doc.get("links", False), where)


def check_cells(cells: list[dict], where: str = "grid") -> None:
    """Every parameter of every cell against :class:`CellParams` (its type and range, a registered name for
    policy, placement, preemption and network), then every trace and topology against the project's parsers.
    Raises one :class:`~netlab.errors.InputError` naming ``where``: an :class:`~netlab.errors.UnknownNameError`
    for a name that is not registered, else a :class:`GridError`."""
    from ..traces import resolve_trace
    from ..topology import load_topology

    for c in cells:
        CellParams.parse(c, where, strict=True)
    for trace in sorted({c["trace"] for c in cells}):
        try:
            resolve_trace(trace)
        except InputError as exc:
            raise GridError(f"{where}: 'trace': {exc}") from None
    for base, oversub in sorted({(c["topology"], c["oversub"]) for c in cells}, key=str):
        try:
            load_topology(_spec(base, oversub))
        except InputError as exc:
            key = "'topology'" if oversub is None else "'topology' with 'oversub'"
            raise GridError(f"{where}: {key}: {exc}") from None


def grid_source(what) -> str:
    """How errors name a grid: its file, or "grid" for a dict or YAML text."""
    if isinstance(what, Path) or (isinstance(what, str) and "\n" not in what
                                  and Path(what).suffix in (".yaml", ".yml", ".json")):
        return f"grid file {str(what)!r}"
    return "grid"


def read_grid(what) -> dict:
    """A grid document from a dict, a YAML path or YAML text."""
    if isinstance(what, dict):
        return dict(what)
    text, path = str(what), Path(str(what))
    if isinstance(what, Path) or ("\n" not in text and path.suffix in (".yaml", ".yml", ".json")):
        if not path.exists():
            raise GridError(f"grid file {text!r} not found")
        doc, _ = load_yaml_file(path, GridError, what="grid file")  # bounded: aliases, duplicate keys, size
    else:
        doc, _ = load_yaml(text, grid_source(what), GridError)
    if not isinstance(doc, dict):
        raise GridError(f"{path}: a grid document must be a mapping")
    return doc


def demo_grid(trace="philly-sample", max_jobs=None, topology=DEMO_TOPOLOGY, seeds: int = DEMO_SEEDS,
              ideal: bool = True, oversub=DEMO_OVERSUB, regimes=DEMO_REGIMES) -> dict:
    """The main job's sweep: every demo scheduler x oversub x seeds in each transport regime (``regimes``: each on
    the model the regime registry names for it), plus each scheduler and seed once on the ideal network.

    The ideal (non-blocking) network ignores oversubscription, so its cells carry none (the base
    topology's own): one per scheduler and seed, not one per oversub, and :func:`~netlab.sweep.runner.
    add_ideal_ratio` pairs it with every oversub and regime. Per-link rows are kept for seed 0 at the highest
    oversub in every regime (the report draws the links where its answer's winner ran).
    """
    nets = [dict(regime=r, oversub=o) for r in regimes for o in oversub] + ([dict(network="ideal")] if ideal else [])
    return dict(name="demo", trace=trace, max_jobs=max_jobs, topology=topology, base_seed=0,
                links={"regime": list(regimes), "seed": 0, "oversub": max(oversub)},
                grid=dict(scheduler=[dict(c) for c in DEMO_SCHEDULERS], setting=nets, seed=list(range(seeds))))