"""Why CASSINI loses to its host where it does: the two runs job by job, and two counterfactuals.

Why: a seed where CASSINI's average JCT is above its host's (:func:`netlab.repro.cassini.cassini_vs_host`) is
either CASSINI's doing (its candidate choice or its phase shifts cost the jobs it places) or the host
scheduler's own chaos: a preemptive host (Themis, Tiresias) reorders many later decisions when one completion
moves (``benchmarks/bench_sensitivity.py``). :func:`case_cause` measures which, for one case, without changing
CASSINI:

* the two runs job by job (:func:`job_diff`, :func:`diff_summary`): the average JCT difference split into
  waiting and running time, how concentrated it is (the worst jobs' share of it), which jobs lose (their size,
  preemptions, racks), and the jobs the divergence never reached (same start and placement in both runs:
  CASSINI's direct effect, before the schedules part);
* CASSINI's own decisions (:class:`RecordingCassini`): how often it took one of the host's alternatives over
  the host's own pick, whether it set a phase, and how the jobs it put on an alternative fared
  (:func:`alternative_jobs`);
* CASSINI restricted to the host's own pick (``n_candidates=1``: the same placements as the host would choose
  in that state, phases shifted): what the phase shifts alone do;
* the host against itself (``nudges``): the host alone with every link's capacity times 1 + k x
  :data:`NUDGE_STEP` (far below anything a testbed could measure): its own average JCT's spread. A ratio
  inside that spread is the host's schedule moving, not a loss CASSINI's decisions cause; and CASSINI against
  its host on each nudged capacity (``nudged_ratio``): how often it is below 1 when nothing measurable changed.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from .cassini import simulate

#: the capacity nudge of the host-against-itself runs (bench_sensitivity.py's step)
NUDGE_STEP = 5e-5
#: how many of the worst jobs (largest JCT increase) the summary lists and measures the share of
WORST = 10


def job_diff(host: pd.DataFrame, cassini: pd.DataFrame) -> pd.DataFrame:
    """Per job (both runs' job tables, by ``job_id``): CASSINI's run minus the host's in waiting, running and
    total time (``d_wait_s``, ``d_run_s``, ``d_jct_s``), network-added time (``d_net_s``: (slowdown - 1) x
    isolated), whether the job started at the same time on the same placement in both (``untouched``), and
    each run's racks and preemptions; sorted by submission."""
    a, b = host.set_index("job_id"), cassini.set_index("job_id").loc[host.job_id]
    net = lambda t: (t.slowdown - 1.0) * t.isolated_s  # noqa: E731
    out = pd.DataFrame(dict(
        model=a.model, gpus=a.gpus, submit_s=a.submit_s, isolated_s=a.isolated_s,
        d_wait_s=b.wait_s - a.wait_s, d_run_s=b.run_s - a.run_s, d_jct_s=b.jct_s - a.jct_s,
        d_net_s=net(b) - net(a), racks_host=a.racks, racks_cassini=b.racks,
        preemptions_host=a.preemptions, preemptions_cassini=b.preemptions,
        slowdown_host=a.slowdown, slowdown_cassini=b.slowdown,
        untouched=(np.isclose(a.start_s, b.start_s, rtol=0, atol=1e-6) & (a.placement == b.placement)
                   & (a.preemptions == 0) & (b.preemptions == 0))))
    return out.sort_values(["submit_s"]).reset_index()


def diff_summary(d: pd.DataFrame, worst: int = WORST) -> dict:
    """What :func:`job_diff`'s rows say: mean differences; jobs worse / better; the ``worst`` jobs' share of the
    summed increase and of the summed absolute change; the worst jobs' size against the others'; preemptions and
    racks per run; the untouched jobs' mean difference (CASSINI's direct effect); the first job whose outcome
    differs."""
    inc = d.d_jct_s.clip(lower=0)
    top = d.sort_values("d_jct_s", ascending=False).head(worst)
    rest = d.drop(top.index)
    moved = d[d.d_jct_s.abs() > 1e-6]
    first = moved.iloc[0] if len(moved) else None
    un = d[d.untouched]
    return dict(
        jobs=int(len(d)), avg_d_jct_s=float(d.d_jct_s.mean()), avg_d_wait_s=float(d.d_wait_s.mean()),
        avg_d_run_s=float(d.d_run_s.mean()), avg_d_net_s=float(d.d_net_s.mean()),
        jobs_worse=int((d.d_jct_s > 1e-6).sum()), jobs_better=int((d.d_jct_s < -1e-6).sum()),
        worst_n=int(len(top)), worst_share_of_increase=float(top.d_jct_s.clip(lower=0).sum() / inc.sum())
        if inc.sum() > 0 else None,
        worst_share_of_abs_change=float(top.d_jct_s.abs().sum() / d.d_jct_s.abs().sum())
        if d.d_jct_s.abs().sum() > 0 else None,
        worst_d_wait_s=float(top.d_wait_s.sum() / len(d)), worst_d_run_s=float(top.d_run_s.sum() / len(d)),
        worst_median_isolated_s=float(top.isolated_s.median()), rest_median_isolated_s=float(rest.isolated_s.median()),
        worst_median_gpus=float(top.gpus.median()), rest_median_gpus=float(rest.gpus.median()),
        preemptions_host=int(d.preemptions_host.sum()), preemptions_cassini=int(d.preemptions_cassini.sum()),
        avg_racks_host=float(d.racks_host.mean()), avg_racks_cassini=float(d.racks_cassini.mean()),
        jobs_more_racks_under_cassini=int((d.racks_cassini > d.racks_host).sum()),
        d_run_s_of_jobs_on_more_racks=float(d.d_run_s[d.racks_cassini > d.racks_host].sum() / len(d)),
        untouched_jobs=int(len(un)), untouched_avg_d_jct_s=float(un.d_jct_s.mean()) if len(un) else None,
        first_changed_job=None if first is None else dict(job_id=int(first.job_id), submit_s=float(first.submit_s),
                                                          d_jct_s=float(first.d_jct_s),
                                                          d_run_s=float(first.d_run_s)),
        worst_jobs=[{k: (round(float(v), 3) if isinstance(v, (float, np.floating)) else
                         (int(v) if isinstance(v, (int, np.integer)) else v)) for k, v in r.items()}
                    for r in top[["job_id", "model", "gpus", "isolated_s", "d_jct_s", "d_wait_s", "d_run_s",
                                  "preemptions_host", "preemptions_cassini", "racks_host",
                                  "racks_cassini"]].to_dict(orient="records")])


def recording_cassini(n_candidates: int = 4):
    """A ``cassini`` placement that records each decision (:attr:`decisions`): the chosen candidate's index in
    the host's short list (0: the host's own pick), the list's length, the chosen and own racks, whether a phase
    was set and how many running jobs were re-phased. It decides exactly as ``cassini`` does."""
    from ..policies.cassini import Cassini

    class RecordingCassini(Cassini):
        def reset(self, rng):
            super().reset(rng)
            self.decisions = []

        def rank(self, job, view):
            ranked = super().rank(job, view)
            if ranked:
                own = next(s for s in ranked if s.index == 0)
                self.decisions.append(dict(job_id=int(job.job_id), index=int(ranked[0].index),
                                           candidates=len(ranked), racks=int(ranked[0].racks),
                                           own_racks=int(own.racks), score=float(ranked[0].score),
                                           own_score=float(own.score), phase=ranked[0].phase is not None,
                                           shifts=len(ranked[0].shifts)))
            return ranked

    return RecordingCassini(n_candidates=n_candidates)


def decision_summary(decisions: list[dict]) -> dict:
    """CASSINI's decisions in one run: how many, how many had a choice (2+ candidates), how often it took an
    alternative over the host's own pick (and on how many racks compared), how often it set a phase or re-phased
    running jobs. A job placed again after a preemption is a decision again."""
    d = pd.DataFrame(decisions)
    if d.empty:
        return dict(decisions=0)
    alt = d[d["index"] > 0]
    return dict(decisions=int(len(d)), with_choice=int((d.candidates > 1).sum()),
                took_alternative=int(len(alt)), alternative_fewer_racks=int((alt.racks < alt.own_racks).sum()),
                alternative_score_gain=float((alt.score - alt.own_score).median()) if len(alt) else None,
                phase_set=int(d.phase.sum()), rephased_running_jobs=int(d.shifts.sum()))


def alternative_jobs(d: pd.DataFrame, decisions: list[dict]) -> dict:
    """The jobs CASSINI placed at least once on one of the host's alternatives (not its own pick), from
    :func:`job_diff`'s rows: how many, their mean running-time and network-added difference against the host's
    run and their mean slowdown in each run; the same for the other jobs."""
    alt = {r["job_id"] for r in decisions if r["index"] > 0}
    out = {}
    for name, rows in (("alternative", d[d.job_id.isin(alt)]), ("host_pick", d[~d.job_id.isin(alt)])):
        out[name] = dict(jobs=int(len(rows)), avg_d_run_s=float(rows.d_run_s.mean()) if len(rows) else None,
                         avg_d_net_s=float(rows.d_net_s.mean()) if len(rows) else None,
                         slowdown_host=float(rows.slowdown_host.mean()) if len(rows) else None,
                         slowdown_cassini=float(rows.slowdown_cassini.mean()) if len(rows) else None)
    return out


def case_cause(case: dict, nudges: int = 4) -> dict:
    """One case (``case``: setup, oversub, host, regime, network, seed, jobs, load, as a ``cassini_cells`` cell
    without ``placement``): the host alone and CASSINI job by job, CASSINI's decisions, CASSINI on the host's own
    pick only, and the host alone and CASSINI under ``2 x nudges`` capacity nudges (module doc)."""
    host = simulate(dict(case, placement="consolidated"))[1]
    rec = recording_cassini()
    cas = simulate(dict(case, placement="cassini"), placement=rec)[1]
    own = simulate(dict(case, placement="cassini"), placement=recording_cassini(n_candidates=1))[1]
    avg = lambda r: float(r.summary["avg_jct_s"])  # noqa: E731
    d = job_diff(host.jobs, cas.jobs)
    ks = [k for k in range(-nudges, nudges + 1) if k]
    nudged = {k: (avg(simulate(dict(case, placement="consolidated"), capacity_scale=1 + k * NUDGE_STEP)[1]),
                  avg(simulate(dict(case, placement="cassini"), capacity_scale=1 + k * NUDGE_STEP)[1])) for k in ks}
    base = avg(host)
    self_ratios = [base / h for h, _ in nudged.values()]
    pair = [base / avg(cas)] + [h / c for h, c in nudged.values()]
    return dict(
        case={k: case[k] for k in ("setup", "oversub", "host", "regime", "network", "seed", "jobs", "load")},
        avg_jct_s_host=base, avg_jct_s_cassini=avg(cas), ratio=base / avg(cas),
        per_job=diff_summary(d), decisions=decision_summary(rec.decisions),
        jobs_by_decision=alternative_jobs(d, rec.decisions),
        host_pick_only=dict(avg_jct_s=avg(own), ratio=base / avg(own),
                            note="CASSINI with n_candidates=1: the host's own pick in every state, phases shifted"),
        host_vs_itself=dict(step=NUDGE_STEP, avg_jct_s={str(k): h for k, (h, _) in nudged.items()},
                            ratio_min=float(min(self_ratios)), ratio_max=float(max(self_ratios)),
                            note="host alone / host alone with every link's capacity x (1 + k x step)"),
        nudged_ratio=dict(ratios={str(k): float(r) for k, r in zip([0] + ks, pair)}, median=float(np.median(pair)),
                          below_1=int(sum(r < 1 for r in pair)), runs=len(pair),
                          note="host alone / CASSINI, both on the same nudged capacities (k = 0: the case itself)"))


def below_one(seed_table: pd.DataFrame) -> pd.DataFrame:
    """The rows of a per-seed CASSINI table (``cassini_table``) where CASSINI's average JCT is above its host's."""
    return seed_table[seed_table.avg_jct_s_vs_random < 1].reset_index(drop=True)
