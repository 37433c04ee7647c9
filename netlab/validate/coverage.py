"""How much evidence stands behind each referee score: scenarios, contended and heavy jobs, component sizes.

A median over four contended jobs and one over four hundred look alike in a table of error figures;
:func:`coverage_table` says which it is, per regime, family and half: how many scenarios were run, how many
jobs share a link with another job (``contended``, what the scores are over), how many of those the referee
slows 2x or more (``heavy``, where the heavy-job bias is measured) and the sizes of the contention components
they come from.

A *component* (:func:`components`) is a set of jobs joined, directly or through others, by directed links their
flows share: what a network model must solve together, and the size issue 26 asks to hold at (10-100 jobs). A
job sharing no link is a component of one and is counted apart (``alone``); sizes are over components of two
jobs or more.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from scipy.sparse import coo_matrix
from scipy.sparse.csgraph import connected_components

from .compare import HEAVY_SLOWDOWN, job_links
from .runs import record_times
from .scenario import RefereeScenario


def components(sc: RefereeScenario) -> list[list[int]]:
    """The scenario's jobs grouped by shared directed links (transitively), largest group first."""
    links = job_links(sc)
    ids = sorted(links)
    link_index = {x: i for i, x in enumerate(sorted({x for ls in links.values() for x in ls}))}
    rows = [r for r, jid in enumerate(ids) for _ in links[jid]]
    cols = [link_index[x] for jid in ids for x in links[jid]]
    incidence = coo_matrix((np.ones(len(rows)), (rows, cols)), shape=(len(ids), max(len(link_index), 1))).tocsr()
    _, label = connected_components(incidence @ incidence.T, directed=False)
    groups: dict[int, list[int]] = {}
    for jid, g in zip(ids, label):
        groups.setdefault(int(g), []).append(jid)
    return sorted(groups.values(), key=lambda g: (-len(g), g[0]))


def scenario_coverage(sc: RefereeScenario, record: dict) -> dict:
    """One scenario's counts: jobs, contended jobs, heavy jobs among them, and its components' sizes."""
    ref_iter, ref_alone = record_times(record)
    shared = [g for g in components(sc) if len(g) > 1]
    heavy = sum(1 for g in shared for j in g if ref_iter[j] / ref_alone[j] >= HEAVY_SLOWDOWN)
    return dict(family=sc.meta.get("family"), seed=sc.meta.get("seed"), half=sc.meta.get("half"), n_jobs=len(sc.jobs),
                n_contended=sum(len(g) for g in shared), n_heavy=int(heavy),
                component_sizes=[len(g) for g in shared])


def coverage_table(rows: list[dict]) -> pd.DataFrame:
    """Per (regime, family, half) of :func:`scenario_coverage` rows (each with a ``regime``), and per (regime,
    half) over every family (``family="all"``): scenarios, jobs, contended and heavy jobs, the number of
    components of 2+ jobs and their min / median / max size. Empty cells (no scenario) do not appear."""
    out = []
    df = pd.DataFrame(rows)
    cells = [(k, d) for k, d in df.groupby(["regime", "family", "half"], sort=True)]
    cells += [((regime, "all", half), d) for (regime, half), d in df.groupby(["regime", "half"], sort=True)]
    for (regime, family, half), d in cells:
        sizes = [s for ss in d.component_sizes for s in ss]
        out.append(dict(regime=regime, family=family, half=half, scenarios=int(len(d)), jobs=int(d.n_jobs.sum()),
                        contended=int(d.n_contended.sum()), heavy=int(d.n_heavy.sum()), components=len(sizes),
                        component_min=int(min(sizes)) if sizes else None,
                        component_median=float(np.median(sizes)) if sizes else None,
                        component_max=int(max(sizes)) if sizes else None,
                        seeds=" ".join(str(s) for s in sorted(d.seed)) if family != "all" else ""))
    return pd.DataFrame(out).sort_values(["regime", "half", "family"], ignore_index=True)


def stored_family_runs(store, regimes: dict, families=None, half: str | None = None):
    """(regime, scenario, record) for every current record in ``store`` (a :class:`~netlab.validate.runs.RunStore`)
    of a family scenario under one of ``regimes`` (name -> Transport), optionally of some families and one half
    only. Each record's scenario is generated again from its family and seed and must hash to the record's key
    (a replicate of a family scenario, or a record of another referee source or scenario version, is left out,
    as the store would), so each scenario comes once."""
    import json

    from .families import generate

    for path in sorted(store.folder.glob("*.json")):
        try:
            rec = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        meta = rec.get("meta") or {}
        if "family" not in meta or (families is not None and meta["family"] not in families):
            continue
        if half is not None and meta.get("half") != half:
            continue
        doc = rec.get("transport") or {}
        for regime, transport in regimes.items():
            if all(getattr(transport, k, None) == v for k, v in doc.items()):
                sc = generate(meta["family"], int(meta["seed"]), transport)
                # a record of another scenario with the same family and seed (the noise check's replicate, other
                # jitter draws) is not this scenario's: it would count the scenario twice
                if rec.get("key") == sc.key() and store.get(sc) is not None:
                    yield regime, sc, rec
