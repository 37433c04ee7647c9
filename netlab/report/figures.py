"""The report's figures, in reading order: the effect first, then what lies behind it.

1. ``comparison``: every policy's change against the baseline with its interval, per metric;
2. ``jct_tails``: each policy's JCT tail beside the baseline's (small multiples: none hides another);
3. ``metrics``: average and p99 JCT, makespan per policy and setting, mean and sd over seeds;
4. ``queue_delay``: waiting per job;
5. ``link_utilisation`` and ``placement_timeline``: the baseline beside the winner, the same setting
   and seed, on the same links, hosts and time span;
6. ``ideal_ratio``: how far each policy is from the non-blocking network.

Every policy has one colour (:func:`netlab.plotting.policy_colours`), in every figure and
in the notebooks.
"""

from __future__ import annotations

import matplotlib.pyplot as plt  # no backend chosen here: notebooks import this module (inline figures)
import pandas as pd

from .. import compare, plotting
from ..network.model import ideal_networks
from ..units import time_unit
from .tables import TIME_COLUMNS, varying, with_policy_labels
from .verdicts import verdict_rows


def facet(summary: pd.DataFrame) -> str | None:
    """The parameter besides the policy that varies (the groups of the bar charts), if any."""
    rest = [c for c in varying(summary) if c not in ("label", "network")]
    return rest[0] if rest else None


def headline_figure(cmp: pd.DataFrame):
    """One row of forest plots (one per metric): each policy's change against the baseline, with its
    interval, side by side per oversubscription (or whatever else the setting varies)."""
    cmp = with_policy_labels(cmp)
    setting = [c for c in cmp.columns if c not in compare.COLUMNS and cmp[c].nunique(dropna=False) > 1]
    hue = setting[0] if setting else None
    metrics = list(cmp.metric.cat.categories) if hasattr(cmp.metric, "cat") else list(dict.fromkeys(cmp.metric))
    arms = cmp.label.nunique()
    levels = cmp[hue].nunique() if hue else 1
    fig, axes = plt.subplots(1, len(metrics), figsize=(3.1 * len(metrics) + 2.2, 0.3 * arms * max(levels, 1.5) + 1.5),
                             sharey=True, squeeze=False)
    axes = list(axes[0])
    order = list(cmp[cmp.metric == metrics[0]].groupby("label").change.mean().sort_values().index)
    colours = plotting.policy_colours(cmp.label)
    for ax, m in zip(axes, metrics):
        plotting.comparison_forest(cmp, metric=m, hue=hue, ax=ax, order=order)
        ax.set_title(compare.METRICS.get(m, m), fontsize=10)
        ax.set_xlabel("change (log scale)", fontsize=8)
        ax.tick_params(axis="x", labelsize=7)
    for label in axes[0].get_yticklabels():
        label.set_color(colours.get(label.get_text(), "black"))
    for ax in axes[1:]:
        ax.tick_params(axis="y", left=False)
    if hue:
        axes[-1].legend(loc="upper left", bbox_to_anchor=(1.02, 1.0), frameon=False, fontsize=8,
                        title="oversubscription" if hue == "oversub" else hue, title_fontsize=8)
    fig.tight_layout()
    return fig


def _as_read(frame: pd.DataFrame) -> pd.DataFrame:
    """Labels as everywhere else; oversub as ordered ``8:1`` text."""
    if frame is None or frame.empty:
        return frame
    out = with_policy_labels(frame)
    if "oversub" in out and out.oversub.notna().any():
        levels = sorted(out.oversub.dropna().unique())
        names = {o: f"{o:g}:1" for o in levels}
        out = out.assign(oversub=pd.Categorical(out.oversub.map(names), [names[o] for o in levels], ordered=True))
    return out


def _in_setting(frame: pd.DataFrame, setting: dict) -> pd.DataFrame:
    if not setting:
        return frame
    keep = pd.Series(True, index=frame.index)
    for c, v in setting.items():  # NaN (no oversubscription) matches NaN
        keep &= frame[c].isna() if pd.isna(v) else (frame[c] == v)
    return frame[keep]


def showcase(res, cmp: pd.DataFrame | None, baseline: str | None) -> tuple[dict | None, dict | None, str]:
    """(baseline's cell row, winner's cell row, why): the cells the link and placement figures set side by side.
    The winner is the policy with the largest clear cut in average JCT (the one-sentence answer's), else the
    policy with the lowest average JCT in the most congested setting; both cells share that setting and the
    first seed whose links were kept."""
    s = with_policy_labels(res.summary)
    s = s[~s.network.isin(ideal_networks())] if "network" in s else s
    if s.empty:
        return None, None, ""
    kept = set(res.links.cell_id.unique()) if not res.links.empty else set(s.cell_id)
    rows = verdict_rows(cmp)
    better = rows[rows.verdict == "better"].sort_values("change", kind="stable") if len(rows) else rows
    cols = [c for c in compare.setting_columns(s) if c in s]
    if len(better):
        top = better.iloc[0]
        winner, setting = top.policy, {c: top[c] for c in cols if c in better}
        why = f"{winner}, the largest clear cut in average JCT ({top.setting})"
    else:
        worst = s.sort_values("overload_gbit").iloc[-1] if "overload_gbit" in s else s.iloc[0]
        setting = {c: worst[c] for c in cols}
        means = _in_setting(s, setting).groupby("label").avg_jct_s.mean()
        others = means.drop(baseline) if baseline in means.index and len(means) > 1 else means
        winner = others.idxmin()
        why = (f"{winner}, the next-best average JCT in the most congested setting (no policy is clearly better)"
               if len(others) < len(means) else f"{winner}, the lowest average JCT in the most congested setting")
    here = _in_setting(s, setting)
    base = baseline if baseline is not None and baseline in set(here.label) and baseline != winner else None
    for seed in sorted(here.seed.unique()) if "seed" in here else [None]:
        cells = here if seed is None else here[here.seed == seed]
        w, b = cells[cells.label == winner], cells[cells.label == base]
        if len(w) and w.cell_id.iloc[0] in kept and (base is None or (len(b) and b.cell_id.iloc[0] in kept)):
            return (b.iloc[0].to_dict() if len(b) else None), w.iloc[0].to_dict(), why
    return None, None, ""


def _where(row: dict, res) -> str:
    cols = [c for c in varying(res.summary)[1:] if c in row] + ["seed"]
    parts = []
    for c in cols:
        v = row.get(c)
        parts.append(f"{v:g}:1" if c == "oversub" and isinstance(v, float) else f"{c} {v}")
    return ", ".join(parts)


def side_by_side(res, base_row: dict | None, win_row: dict) -> tuple:
    """(links figure, timeline figure) of the baseline's cell beside the winner's: same links (the busiest of
    both), same hosts, same time span, one colour scale."""
    cells = [r for r in (base_row, win_row) if r is not None]
    ids = [r["cell_id"] for r in cells]
    links = res.links[res.links.cell_id.isin(ids)] if not res.links.empty else pd.DataFrame(
        columns=["cell_id", "t_start_s", "t_end_s", "src", "dst", "load_gbps", "utilisation"])
    jobs = res.jobs[res.jobs.cell_id.isin(ids)]
    t_end = max(jobs.end_s.max(), links.t_end_s.max() if len(links) else 0.0)
    t_range = (0.0, float(t_end))
    n = len(cells)
    fig_l, axes = plt.subplots(1, n, figsize=(6.2 * n + 1.2, 5.2), squeeze=False, sharey=True)
    rows = plotting.busiest_links(links) if len(links) else []
    for ax, r in zip(axes[0], cells):
        plotting.link_utilisation(links[links.cell_id == r["cell_id"]], ax=ax, rows=rows, t_range=t_range,
                                  colorbar=False)
        ax.set_title(f"{r['label']} ({_where(r, res)})", fontsize=9)
    for ax in axes[0][1:]:
        ax.set_ylabel("")
    if len(links):
        fig_l.colorbar(axes[0][-1].collections[0], ax=list(axes[0]), label="utilisation (share of capacity)",
                       fraction=0.03, pad=0.02)
    fig_t, axes = plt.subplots(1, n, figsize=(6.2 * n + 1.8, 5.6), squeeze=False, sharey=True)
    used = sorted({h for w in jobs.get("allocation", jobs.get("placement")).astype(str) for h in
                   (p.rpartition(":")[0] for p in w.split(",")) if h} |
                  {h for runs in jobs.get("runs", pd.Series(dtype=str)).fillna("").astype(str) for part in
                   runs.split(";") if part for h in (p.rpartition(":")[0] for p in part.partition("@")[2].split(","))
                   if h}, key=plotting.host_order)[:32]
    for k, (ax, r) in enumerate(zip(axes[0], cells)):
        plotting.placement_timeline(jobs[jobs.cell_id == r["cell_id"]], ax=ax, t_range=t_range, hosts=used,
                                    legend=k == n - 1)
        ax.set_title(f"{r['label']} ({_where(r, res)})", fontsize=9)
    for ax in axes[0][1:]:
        ax.set_ylabel("")
    fig_t.tight_layout()
    return fig_l, fig_t


def baseline_beside_winner(res, cmp: pd.DataFrame | None, baseline: str | None) -> tuple:
    """(links figure, timeline figure, which cells and why) for a sweep result: :func:`showcase`'s cells drawn
    by :func:`side_by_side`; (None, None, reason) when no cell kept its per-link rows."""
    baseline = compare.arm_name(baseline) if baseline else None
    base_row, win_row, why = showcase(res, cmp, baseline)
    if win_row is None:
        return None, None, "no cell of a congested network kept its per-link rows"
    fig_l, fig_t = side_by_side(res, base_row, win_row)
    return fig_l, fig_t, (f"{baseline} beside {why}" if base_row is not None else why)


def figures(res, cmp: pd.DataFrame | None = None, baseline: str | None = None) -> dict:
    """Figure name -> (caption, matplotlib Figure), in reading order (see the module docstring)."""
    s, jobs = _as_read(res.summary), _as_read(res.jobs)
    baseline = compare.arm_name(baseline) if baseline else None
    palette = plotting.policy_colours(s.label)
    congested = s[~s.network.isin(ideal_networks())] if "network" in s else s
    cjobs = jobs[~jobs.network.isin(ideal_networks())] if "network" in jobs else jobs
    by = facet(congested)
    out = {}
    if cmp is not None and not cmp.empty:
        seeds = sorted({int(n) for n in cmp.seeds})
        n_seeds = f"{seeds[0]}" if len(seeds) == 1 else f"{seeds[0]}-{seeds[-1]}"
        out["comparison"] = (f"Change against {baseline} per metric, paired by seed ({n_seeds} seeds): the change of "
                             "the mean (point) and its 95% bootstrap interval (bar). Left of 0 is better. The axis is "
                             "logarithmic in policy / baseline, so halving and doubling lie equally far from 0.",
                             headline_figure(cmp))
    out["jct_tails"] = ("Job completion times: the share of jobs that took longer than x (log-log, all seeds pooled), "
                        f"each policy (line) over {baseline or 'the baseline'} (wide pale band). Schedulers differ "
                        "most in the tail (lower right).",
                        plotting.jct_tails(cjobs, baseline, by=by, palette=palette))
    unit = time_unit(s[[c for c in TIME_COLUMNS if c in s]].to_numpy().ravel())  # the summary table's unit
    fig, axes = plt.subplots(1, 3, figsize=(15, 4.2))
    for k, (ax, col) in enumerate(zip(axes, ("avg_jct_s", "p99_jct_s", "makespan_s"))):
        plotting.metric_bars(congested, y=col, by=by, ax=ax, unit=unit, palette=palette)
        if k < 2 and ax.get_legend() is not None:
            ax.get_legend().remove()
    fig.tight_layout()
    out["metrics"] = ("Average JCT, p99 JCT and makespan per policy: mean over seeds, error bars one sd over seeds.",
                      fig)
    fig, ax = plt.subplots(figsize=(9, 4.2))
    col = "wait_s" if "wait_s" in cjobs else "queue_s"  # stores from before wait_s have the first-start delay only
    plotting.queue_delay(cjobs, by=by, ax=ax, y=col, palette=palette)
    what = ("Total waiting per job: before the first start and after every preemption" if col == "wait_s"
            else "First-start delay per job")
    out["queue_delay"] = (f"{what} (boxes: quartiles, whiskers 1.5 IQR, white dot: mean; all seeds).", fig)
    fig_l, fig_t, pair = baseline_beside_winner(res, cmp, baseline)
    if fig_l is not None:
        out["link_utilisation"] = (f"Per-link utilisation over time, the busiest links of both runs: {pair}.", fig_l)
        out["placement_timeline"] = (f"Where jobs ran: hosts split into GPU slots over the whole run, coloured by how "
                                     f"far each job spread; a preempted job's runs hatched. {pair}.", fig_t)
    fig, ax = plt.subplots(figsize=(9, 4.2))
    plotting.ideal_ratio(s, by=by, ax=ax, palette=palette)
    out["ideal_ratio"] = ("Average JCT over the same policy's on the ideal (non-blocking) network, same seed: 1 means "
                          "the network costs nothing (mean, error bars one sd over seeds).", fig)
    return out
