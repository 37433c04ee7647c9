"""The answer first: one sentence, then one verdict per policy and setting in a small table.

Both read :func:`netlab.compare.compare_policies` rows (each policy against the
baseline, paired by seed, with bootstrap intervals) and decide on one metric
(average JCT): *better* or *worse* when its interval excludes 0, else *no clear
difference* (:func:`netlab.compare.verdict_word`).
"""

from __future__ import annotations

import math

import pandas as pd

from .. import compare
from .tables import oversub_name, with_policy_labels

DECIDE_ON = "avg_jct_s"
#: verdict -> CSS class and colour (background, text) shared by the page and the notebooks' styled table
COLOURS = {"better": ("#d5efd9", "#14532d"), "worse": ("#f9d6d5", "#7f1d1d"),
           "no clear difference": ("#eeeeee", "#333333")}


def settings(cmp: pd.DataFrame) -> list[str]:
    """The columns of a comparison that make its setting (oversub, network, trace...)."""
    return [c for c in cmp.columns if c not in compare.COLUMNS]


def setting_name(row, cols: list[str], varying: set[str]) -> str:
    """How a setting reads in a header or a sentence: ``8:1`` for an oversubscription, the network's or the
    transport regime's name, else ``name=value``."""
    parts = []
    for c in cols:
        if c not in varying or (c == "network" and "regime" in cols and pd.notna(row["regime"])):
            continue  # a regime names its network
        v = row[c]
        parts.append(oversub_name(v) or "own oversubscription" if c == "oversub" else
                     (str(v) if c in ("network", "regime") else f"{c}={v}"))
    return ", ".join(parts)


def _varying(cmp: pd.DataFrame, cols: list[str]) -> set[str]:
    """The setting columns a verdict names: those that vary, and always the oversubscription and the regime."""
    return {c for c in cols if cmp[c].nunique(dropna=False) > 1 or (c in ("oversub", "regime")
                                                                    and cmp[c].notna().any())}


def verdict_rows(cmp: pd.DataFrame, metric: str = DECIDE_ON) -> pd.DataFrame:
    """One row per policy and setting on ``metric``: ``policy``, ``setting`` (as it reads), ``change``, ``ci_low``,
    ``ci_high`` (fractions), ``lower_seeds``, ``seeds``, ``verdict``, then the setting's own columns (oversub,
    network...); settings in their sweep order."""
    if cmp is None or cmp.empty:
        return pd.DataFrame(columns=["policy", "baseline", "setting", "change", "ci_low", "ci_high", "lower_seeds",
                                     "seeds", "verdict"])
    cmp = with_policy_labels(cmp)
    cols = settings(cmp)
    vary = _varying(cmp, cols)
    d = cmp[cmp.metric == metric]
    if cols:
        d = d.sort_values(cols, kind="stable")
    rows = [dict(policy=r.label, baseline=r.baseline, setting=setting_name(r, cols, vary) or "all", change=r.change,
                 ci_low=r.ci_low, ci_high=r.ci_high, lower_seeds=int(r.lower_seeds), seeds=int(r.seeds),
                 verdict=compare.verdict_word(r), **{c: r[c] for c in cols}) for _, r in d.iterrows()]
    return pd.DataFrame(rows)


def pct(v: float, signed: bool = True) -> str:
    """A change in percent for reading: ``-16%``, ``+2.4%``, ``-0.03%``, ``0%``."""
    if not math.isfinite(v):
        return "n/a"
    p = 100 * v
    text = f"{p:+.0f}" if abs(p) >= 10 else (f"{p:+.1f}" if abs(p) >= 1 else f"{p:+.2f}")
    text = text if signed else text.lstrip("+-")
    return ("0" if float(text) == 0 else text) + "%"


def cell_text(r) -> str:
    """``-16% [-23%, -11%]``: the change of the mean and its interval."""
    return f"{pct(r.change)} [{pct(r.ci_low)}, {pct(r.ci_high)}]"


def verdict_table(cmp: pd.DataFrame, metric: str = DECIDE_ON) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(text, verdict): two policy x setting frames, the cell text (change, interval, seeds lower) and the verdict
    word that colours it. Policies best first (by their mean change over the settings)."""
    rows = verdict_rows(cmp, metric)
    if rows.empty:
        return pd.DataFrame(), pd.DataFrame()
    rows = rows.assign(text=[f"{cell_text(r)} · lower in {r.lower_seeds}/{r.seeds}" for r in rows.itertuples()])
    order = list(rows.groupby("policy").change.mean().sort_values().index)
    cols = list(dict.fromkeys(rows.setting))
    text = rows.pivot(index="policy", columns="setting", values="text").reindex(index=order, columns=cols)
    word = rows.pivot(index="policy", columns="setting", values="verdict").reindex(index=order, columns=cols)
    text.columns.name = word.columns.name = None
    return text.fillna(""), word.fillna("")


def metric_table(cmp: pd.DataFrame) -> pd.DataFrame:
    """Every metric's change against the baseline with its interval, one row per setting and policy (the detail
    behind the verdict table): ``setting``, ``policy``, then one column per metric, then the verdict on average
    JCT and its seed count."""
    if cmp is None or cmp.empty:
        return pd.DataFrame()
    per = {m: verdict_rows(cmp, m) for m in dict.fromkeys(cmp.metric)}
    decide = per.get(DECIDE_ON, next(iter(per.values())))
    out = decide[["setting", "policy"]].copy()
    for m, rows in per.items():
        out[compare.METRICS.get(m, m)] = [cell_text(r) for r in rows.itertuples()]
    out["verdict (avg JCT)"] = [f"{r.verdict}, lower in {r.lower_seeds}/{r.seeds}" for r in decide.itertuples()]
    return out.reset_index(drop=True)


def styled_verdicts(cmp: pd.DataFrame, metric: str = DECIDE_ON, by_setting: bool | None = None):
    """:func:`verdict_table` as a pandas Styler, each cell coloured by its verdict (for notebooks). ``by_setting``:
    one row per setting and a column per policy (default: when there are more settings than policies)."""
    text, word = verdict_table(cmp, metric)
    if by_setting or (by_setting is None and text.shape[1] > text.shape[0]):
        text, word = text.T, word.T
    colour = word.map(lambda w: "background-color:{};color:{}".format(*COLOURS[w]) if w in COLOURS else "")
    return text.style.apply(lambda _: colour, axis=None).set_properties(**{"white-space": "nowrap"})


def _join(names: list[str]) -> str:
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]


def headline(cmp: pd.DataFrame, metric: str = DECIDE_ON) -> str:
    """The answer in one sentence, e.g. "At 8:1, dally cuts average JCT by 16% [11%, 23%] against
    tiresias+consolidated, lower in 10 of 10 seeds; at 2:1 no policy differs clearly from it." Settings with a
    clear winner first (largest cut first); per setting the policy with the largest clear cut, or which policies
    are clearly worse when none is better."""
    rows = verdict_rows(cmp, metric)
    if rows.empty:
        return ""
    what = compare.METRICS.get(metric, metric).replace("avg", "average")
    base = rows.baseline.iloc[0]
    wins, rest = [], {}  # rest: the same clause for several settings is said once ("at 2:1 and 4:1 ...")
    for setting, g in rows.groupby("setting", sort=False):
        better = g[g.verdict == "better"].sort_values("change", kind="stable")
        worse = g[g.verdict == "worse"]
        if len(better):
            r = better.iloc[0]
            more = len(better) - 1
            extra = f" ({more} other polic{'y' if more == 1 else 'ies'} also clearly better)" if more else ""
            where = "" if setting == "all" else f"at {setting}, "
            wins.append((r.change, f"{where}{r.policy} cuts {what} by {pct(r.change, False)} "
                                   f"[{pct(-r.ci_high, False)}, {pct(-r.ci_low, False)}] against {base}, lower in "
                                   f"{r.lower_seeds} of {r.seeds} seeds{extra}"))
        elif len(worse):
            names = list(worse.policy)
            clause = (f"no policy is clearly better than {base}; {_join(names)} "
                      f"{'is' if len(names) == 1 else 'are'} clearly worse")
            rest.setdefault(clause, []).append(setting)
        else:
            rest.setdefault(f"no policy differs clearly from {base}", []).append(setting)
    wins.sort(key=lambda c: c[0])
    clauses = [c for _, c in wins]
    for clause, where in rest.items():
        at = [w for w in where if w != "all"]
        clauses.append(f"at {_join(at)} {clause}" if at else clause)
    text = "; ".join(clauses)
    if text.startswith(("at ", "no ")):  # a sentence that starts with a policy keeps its label as it is
        text = text[0].upper() + text[1:]
    return text + "."
