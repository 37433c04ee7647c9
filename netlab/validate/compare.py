"""The referee against netlab's models: per job side by side, and the error summaries the benchmark keeps.

Two errors per job and model:

* ``ape``: the model's *slowdown* (its iteration time over its own time for
  the job alone) applied to the referee's measured time alone, against the
  referee's iteration time. This is the error of the sharing rule alone:
  a ring's own pipelining and per-step latency, which netlab's alone formula
  only approximates (:mod:`netlab.validate.predict`), cancel out. The
  benchmark's headline numbers are these.
* ``ape_raw``: the model's own iteration time against the referee's.

``contended``: the job's flows share a directed link with another job's
(the fidelity benchmark's definition). ``ref_slowdown``: the referee's
iteration time over its time alone; ``heavy`` jobs are those it slows 2x or
more, where the issue found ``tcp`` biased (``signed``: prediction over
truth minus one).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from .scenario import RefereeScenario

HEAVY_SLOWDOWN = 2.0
SLOWED = 1.1  # jobs the referee slows this much or more: contention that binds


def job_links(sc: RefereeScenario) -> dict[int, set[int]]:
    """Directed link ids every job's ring flows load (netlab's routes)."""
    from .predict import _paths

    return {j.job_id: {int(x) for p in _paths(sc, j) for x in p} for j in sc.jobs}


def contended_jobs(sc: RefereeScenario) -> dict[int, bool]:
    links = job_links(sc)
    count: dict[int, int] = {}
    for ls in links.values():
        for x in ls:
            count[x] = count.get(x, 0) + 1
    return {jid: any(count[x] > 1 for x in ls) for jid, ls in links.items()}


def compare_jobs(sc: RefereeScenario, ref_iter_s: dict, ref_alone_s: dict, predictions: pd.DataFrame) -> pd.DataFrame:
    """One row per (job, model): the referee's times, the model's, and both errors (module docstring).

    ``predictions``: :func:`netlab.validate.predict.predict_all`'s rows (model, job_id, iter_s).
    """
    from .predict import alone_iter_s

    model_alone = alone_iter_s(sc)
    cont = contended_jobs(sc)
    p = predictions.copy()
    p["ref_iter_s"] = p.job_id.map(ref_iter_s)
    p["ref_alone_s"] = p.job_id.map(ref_alone_s)
    p["model_alone_s"] = p.job_id.map(model_alone)
    p["contended"] = p.job_id.map(cont).astype(bool)
    p["ref_slowdown"] = p.ref_iter_s / p.ref_alone_s
    p["model_slowdown"] = p.iter_s / p.model_alone_s
    p["pred_s"] = p.ref_alone_s * p.model_slowdown
    p["signed"] = p.pred_s / p.ref_iter_s - 1.0
    p["ape"] = p.signed.abs()
    p["signed_raw"] = p.iter_s / p.ref_iter_s - 1.0
    p["ape_raw"] = p.signed_raw.abs()
    p["heavy"] = p.ref_slowdown >= HEAVY_SLOWDOWN
    p["slowed"] = p.ref_slowdown >= SLOWED
    ranks = {j.job_id: j.ranks for j in sc.jobs}
    grad = {j.job_id: j.grad_bytes for j in sc.jobs}
    p["ranks"] = p.job_id.map(ranks)
    p["grad_bytes"] = p.job_id.map(grad)
    p.insert(0, "scenario", sc.name)
    return p


def _q(x: pd.Series, q: float):
    return float(x.quantile(q)) if len(x) else None


def error_summary(rows: pd.DataFrame) -> dict:
    """Per model: over contended jobs median / p90 / max of ``ape`` (and of ``ape_raw``), the median signed
    error on heavy jobs, the same APEs over the jobs the referee slows 1.1x or more (``slowed_*``), over
    uncontended jobs the median ``ape``, and the counts."""
    out = {}
    for model, d in rows.groupby("model", sort=True):
        c = d[d.contended]
        h = c[c.heavy]
        a = d[~d.contended]
        s = c[c.slowed]
        out[model] = dict(
            n_contended=int(len(c)), n_heavy=int(len(h)), n_alone=int(len(a)), n_slowed=int(len(s)),
            slowed_median_ape=_q(s.ape, 0.5), slowed_p90_ape=_q(s.ape, 0.9),
            median_ape=_q(c.ape, 0.5), p90_ape=_q(c.ape, 0.9), max_ape=float(c.ape.max()) if len(c) else None,
            heavy_median_signed=_q(h.signed, 0.5), heavy_mean_signed=float(h.signed.mean()) if len(h) else None,
            median_ape_raw=_q(c.ape_raw, 0.5), p90_ape_raw=_q(c.ape_raw, 0.9),
            max_ape_raw=float(c.ape_raw.max()) if len(c) else None,
            heavy_median_signed_raw=_q(h.signed_raw, 0.5),
            alone_median_ape=_q(a.ape, 0.5), alone_median_ape_raw=_q(a.ape_raw, 0.5))
    return out


def side_by_side(rows: pd.DataFrame, digits: int = 2) -> pd.DataFrame:
    """Per job: the referee's iteration (ms), alone and slowdown, then every model's prediction (ms, the
    slowdown applied to the referee's alone time) with its signed error in percent."""
    base = rows.drop_duplicates("job_id").set_index("job_id")
    table = pd.DataFrame({"ranks": base.ranks, "contended": base.contended, "ns3_ms": base.ref_iter_s * 1e3,
                          "alone_ms": base.ref_alone_s * 1e3, "slowdown": base.ref_slowdown})
    for model, d in rows.groupby("model", sort=True):
        d = d.set_index("job_id")
        table[f"{model}_ms"] = d.pred_s * 1e3
        table[f"{model}_%"] = d.signed * 100
    return table.round(digits).sort_index()


def scenario_speed(ns3_cpu_s: float, predictions: pd.DataFrame) -> dict:
    """ns-3's CPU seconds over each model's, for one scenario."""
    per = predictions.groupby("model").cpu_s.first()
    return {m: float(ns3_cpu_s / max(float(c), 1e-9)) for m, c in per.items()} | {"ns3_cpu_s": float(ns3_cpu_s)}


def pooled(rows: pd.DataFrame, value: str = "ape") -> pd.Series:
    """``value`` over the contended jobs of every scenario (for intervals)."""
    return rows.loc[rows.contended, value].astype(float).replace([np.inf, -np.inf], np.nan).dropna()
