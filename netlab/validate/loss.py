"""Per-job loss in the referee's runs: what a model of the loss tail (timeouts, drops, rate cuts) can fit on.

The referee counts, per job and summed over its flows, the packets its queues dropped and marked, the data
sent again, TCP's retransmission timeouts and fast recoveries and the rate transport's notifications
(``referee.cc``, ``JobLoss``). A model of the RTO tail needs them per job: a scenario's total says that
timeouts happened, not to whom. :func:`job_loss_rows` joins a record's counters to its jobs (contended or not,
the referee's slowdown, a model's error); :func:`loss_summary` says, per regime and half, how many jobs timed
out, how much contended jobs lost, and how the timeouts go with the model's error. Counters are over the
whole run (warm-up included), so they are compared per iteration run. A record made before the counters
existed has none: its jobs are left out and counted as unknown, never as zero.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from scipy.stats import spearmanr

from .compare import contended_jobs
from .runs import record_job_loss, record_times
from .scenario import RefereeScenario

#: counters per iteration run, for comparing jobs that ran different numbers of iterations
PER_ITERATION = ("drops", "retransmits", "rtos", "ecn_marks")  # drops: data packets (ack_drops apart)


def job_loss_rows(sc: RefereeScenario, rec: dict, errors: pd.DataFrame | None = None) -> pd.DataFrame | None:
    """One row per job of ``rec`` (``sc``'s record): its loss counters, per-iteration rates, whether it is
    contended, the referee's slowdown and (``errors``: rows of :func:`~netlab.validate.compare.compare_jobs` for
    one model) that model's signed error. None if the record has no per-job counters."""
    loss = record_job_loss(rec)
    if loss is None:
        return None
    ref_iter, ref_alone = record_times(rec)
    cont = contended_jobs(sc)
    iters = {int(k): int(v) for k, v in rec.get("iterations_run", {}).items()}
    rows = []
    for jid, counters in sorted(loss.items()):
        row = dict(family=sc.meta.get("family"), seed=sc.meta.get("seed"), half=sc.meta.get("half"), job_id=jid,
                   contended=bool(cont[jid]), ref_slowdown=ref_iter[jid] / ref_alone[jid], iterations=iters.get(jid),
                   **counters)
        for k in PER_ITERATION:
            row[f"{k}_per_iter"] = counters[k] / iters[jid] if iters.get(jid) else np.nan
        rows.append(row)
    df = pd.DataFrame(rows)
    if errors is not None:
        signed = errors.drop_duplicates("job_id").set_index("job_id").signed
        df["signed"] = df.job_id.map(signed)
    return df


def _spearman(x: pd.Series, y: pd.Series) -> float | None:
    ok = x.notna() & y.notna()
    if ok.sum() < 3 or x[ok].nunique() < 2 or y[ok].nunique() < 2:
        return None
    return float(spearmanr(x[ok], y[ok]).statistic)


def _median(x: pd.Series) -> float | None:
    return float(x.median()) if len(x) else None


def loss_summary(rows: pd.DataFrame, unknown_scenarios: int = 0) -> dict:
    """Over :func:`job_loss_rows` of one regime and half: jobs and contended jobs counted; jobs with any RTO
    (and their share); per contended job the median (and p90) drops, retransmits, RTOs and ECN marks per
    iteration; and, where a model's ``signed`` error is known, the Spearman correlation of a contended job's
    RTOs per iteration with that error and with its absolute value. ``unknown_scenarios``: scenarios of the
    same cell whose records have no per-job counters."""
    if not len(rows):
        return dict(scenarios=0, scenarios_without_counters=int(unknown_scenarios))
    c = rows[rows.contended]
    out = dict(scenarios=int(rows[["family", "seed"]].drop_duplicates().shape[0]),
               scenarios_without_counters=int(unknown_scenarios), jobs=int(len(rows)), contended=int(len(c)),
               jobs_with_rto=int((rows.rtos > 0).sum()),
               contended_with_rto=int((c.rtos > 0).sum()) if len(c) else 0,
               contended_with_drops=int((c.drops > 0).sum()) if len(c) else 0)
    out["share_contended_with_rto"] = out["contended_with_rto"] / out["contended"] if out["contended"] else None
    for k in PER_ITERATION:
        col = c[f"{k}_per_iter"] if len(c) else pd.Series(dtype=float)
        out[f"median_{k}_per_iter"] = _median(col)
        out[f"p90_{k}_per_iter"] = float(col.quantile(0.9)) if len(col) else None
    out["median_drops_per_contended_job"] = _median(c.drops) if len(c) else None
    if len(c) and "signed" in c:
        out["n_with_error"] = int(c.signed.notna().sum())
        out["spearman_rtos_vs_signed_error"] = _spearman(c.rtos_per_iter, c.signed)
        out["spearman_rtos_vs_abs_error"] = _spearman(c.rtos_per_iter, c.signed.abs())
        timed_out = c[c.rtos > 0]
        out["median_signed_error_with_rto"] = _median(timed_out.signed.dropna())
        out["median_signed_error_without_rto"] = _median(c[c.rtos == 0].signed.dropna())
    return out
