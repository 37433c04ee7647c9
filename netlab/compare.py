"""Which policy wins, by how much, how sure: paired comparisons against a baseline, with bootstrap intervals.

Every cell of one sweep replicate (``seed``) replays the same jobs (common random
numbers, see :mod:`netlab.sweep.grid`), so a policy is compared with the
baseline seed by seed, in the same setting (the same trace, topology,
oversubscription, network...): the per-seed *paired* differences cancel what
the replicate itself contributes, and a few seeds already separate policies
whose unpaired spreads overlap.

* :func:`paired_differences`: one row per setting, policy, seed and metric: the
  policy's value, the baseline's, their difference and relative change;
* :func:`compare_policies`: one row per setting, policy and metric: the change of
  the mean relative to the baseline's mean (``change``: -0.31 is 31% lower), its
  percentile-corrected (BCa) bootstrap confidence interval over paired seed
  resamples (:func:`scipy.stats.bootstrap`, ``paired=True``), and in how many
  seeds the policy was lower or higher;
* :func:`verdicts`: one sentence per policy and setting, e.g. ``dally vs
  tiresias+consolidated at 8:1 (5 seeds): avg JCT -4.6% [-7.1%, -2.0%], ... ->
  better (avg JCT lower in 5/5 seeds)``.

With 5 seeds a 95% bootstrap interval is approximate (a bootstrap of few
samples is known to be narrow); the seed counts beside it are the plain
evidence. Lower is better for every metric here (times).
"""

from __future__ import annotations

import functools
import warnings

import numpy as np
import pandas as pd

from .errors import UnknownNameError, short
from .network.model import ideal_networks
from .sweep.grid import DEFAULTS, OPTIONAL

#: summary column -> name in verdicts and figures (every one a time: lower is better)
METRICS = {"avg_jct_s": "avg JCT", "p99_jct_s": "p99 JCT", "makespan_s": "makespan",
           "avg_wait_s": "total wait"}
DEFAULT_BASELINE = "tiresias+consolidated"
#: parameters that make a policy arm (its label says which); the seed pairs; the rest is the setting. The network
#: policy, migration and compression are named in a cell's label (``tiresias+consolidated+crux``): arms, compared
#: with the baseline in the same setting, not settings of their own (where no baseline ran)
ARM_PARAMS = ("policy", "placement", "preemption", "backfill", "netpolicy", "migration", "compression")
#: networks that are bounds, not settings a scheduler runs in: left out of comparisons by default
BOUNDS = tuple(ideal_networks())
COLUMNS = ["label", "baseline", "metric", "seeds", "baseline_mean", "mean", "diff_mean", "change", "ci_low",
           "ci_high", "lower_seeds", "higher_seeds"]


def arm_name(label: str) -> str:
    """A sweep label (``policy+placement``, ``+default`` when the grid left the placement to the policy) as
    tables, verdicts, figures, errors and ``--baseline`` all say it: the placement is named unless it is the
    policy's own. ``dally+default`` and ``dally+dally`` are ``dally`` (Dally brings its placement);
    ``tiresias+default`` is ``tiresias+consolidated`` (what the simulator runs when a policy has none);
    ``tiresias+cassini`` stays. Labels of policies netlab does not know are kept as they are."""
    policy, plus, placement = str(label).partition("+")
    if not plus:
        return str(label)
    own = _own_placement(policy)
    if own is _UNKNOWN:
        return policy if placement in ("default", policy) else str(label)
    if placement == "default":
        placement = own or "consolidated"
    return policy if placement == own else f"{policy}+{placement}"


_UNKNOWN = object()


@functools.lru_cache(maxsize=None)
def _own_placement(policy: str):
    """The placement an ordering policy brings (None: it has none, the simulator uses consolidated)."""
    from .policies import ORDERING

    if policy not in ORDERING:
        return _UNKNOWN
    return ORDERING.create(policy).default_placement


def setting_columns(summary: pd.DataFrame) -> list[str]:
    """The sweep parameters present in ``summary`` that are neither the policy arm nor the seed."""
    return [c for c in (*DEFAULTS, *OPTIONAL) if c in summary.columns and c not in ARM_PARAMS + ("seed",)]


def _without_bounds(summary: pd.DataFrame, bounds) -> pd.DataFrame:
    return summary[~summary.network.isin(bounds)] if "network" in summary and bounds else summary


def paired_differences(summary: pd.DataFrame, baseline: str = DEFAULT_BASELINE, metrics=METRICS,
                       bounds=BOUNDS) -> pd.DataFrame:
    """Per setting, policy (``label``), seed and metric: ``value``, ``baseline_value``, ``diff`` (value -
    baseline) and ``change`` (value / baseline - 1). Only seeds where both ran; the baseline's own rows and
    settings without the baseline are left out. Raises :class:`~netlab.errors.UnknownNameError` (a ValueError)
    when the baseline is not in ``summary``, ValueError when two cells share a setting, label and seed (a policy
    parameter not in the label varies)."""
    s = _without_bounds(summary, bounds)
    if s.empty or baseline not in set(s.label):
        known = ", ".join(sorted(set(s.label))) if not s.empty else "none"
        raise UnknownNameError(f"baseline {short(baseline)} is not among the compared policies; known: {known}")
    setting = setting_columns(s)
    keys = setting + ["seed"]
    dup = s.duplicated(keys + ["label"], keep=False)
    if dup.any():
        groups = s[dup].groupby(keys + ["label"], dropna=False)
        varying = [c for c in ARM_PARAMS if c in s and groups[c].nunique(dropna=False).max() > 1]
        raise ValueError(f"cells share a setting, label and seed ({int(dup.sum())} rows): {varying or 'a parameter'}"
                         " varies without changing the label; compare those separately")
    cols = [m for m in metrics if m in s.columns]
    base = s.loc[s.label == baseline, keys + cols]
    other = s.loc[s.label != baseline, keys + ["label"] + cols]
    # NaN (e.g. oversub null) must pair with NaN: merge on strings of the keys
    tag = lambda d: d.assign(_key=d[keys].map(str).agg("|".join, axis=1))  # noqa: E731
    merged = tag(other).merge(tag(base).drop(columns=keys), on="_key", suffixes=("", "_base"))
    rows = []
    for m in cols:
        part = merged[setting + ["label", "seed"]].assign(metric=m, value=merged[m].to_numpy(dtype=float),
                                                           baseline_value=merged[f"{m}_base"].to_numpy(dtype=float))
        rows.append(part.dropna(subset=["value", "baseline_value"]))
    out = pd.concat(rows, ignore_index=True) if rows else pd.DataFrame()
    out["diff"] = out.value - out.baseline_value
    with np.errstate(divide="ignore", invalid="ignore"):
        out["change"] = np.where(out.baseline_value != 0, out.value / out.baseline_value.where(
            out.baseline_value != 0, 1.0) - 1.0, np.nan)
    return out.sort_values(setting + ["label", "metric", "seed"], kind="stable").reset_index(drop=True)


def _ratio_change(x, b, axis=-1):
    return np.mean(x, axis=axis) / np.mean(b, axis=axis) - 1.0


def change_interval(value, baseline, confidence: float = 0.95, n_resamples: int = 9999,
                    rng=0) -> tuple[float, float, float]:
    """(change of the mean, low, high): ``mean(value) / mean(baseline) - 1`` and its paired bootstrap
    interval (BCa; percentile if BCa cannot be computed). Identical ratios in every seed give a zero-width
    interval; fewer than 2 seeds give NaN bounds. ``rng`` seeds the resampling (same inputs, same bounds)."""
    x, b = np.asarray(value, dtype=float), np.asarray(baseline, dtype=float)
    if x.shape != b.shape or x.ndim != 1:
        raise ValueError(f"paired samples must be two 1-d arrays of one length, got {x.shape} and {b.shape}")
    if not len(x) or np.mean(b) == 0:
        return float("nan"), float("nan"), float("nan")
    est = float(_ratio_change(x, b))
    if len(x) < 2:
        return est, float("nan"), float("nan")
    if np.allclose(x * np.mean(b), b * np.mean(x), rtol=1e-12, atol=0.0):  # every resample gives the same ratio
        return est, est, est
    from scipy import stats  # here, not at import: reading results needs no scipy

    for method in ("BCa", "percentile"):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", stats.DegenerateDataWarning)
            res = stats.bootstrap((x, b), _ratio_change, paired=True, vectorized=True, n_resamples=n_resamples,
                                  confidence_level=confidence, method=method, rng=np.random.default_rng(rng))
        low, high = float(res.confidence_interval.low), float(res.confidence_interval.high)
        if np.isfinite(low) and np.isfinite(high):
            return est, min(low, est), max(high, est)
    return est, float("nan"), float("nan")  # pragma: no cover - percentile bounds are finite for finite data


def compare_policies(summary: pd.DataFrame, baseline: str = DEFAULT_BASELINE, metrics=METRICS,
                     confidence: float = 0.95, n_resamples: int = 9999, rng=0, bounds=BOUNDS) -> pd.DataFrame:
    """One row per setting, policy and metric against ``baseline`` (see the module docstring): ``seeds``
    paired, ``baseline_mean``, ``mean``, ``diff_mean`` (mean paired difference, the metric's unit),
    ``change`` with ``ci_low``/``ci_high`` (fractions: -0.31 is 31% lower), ``lower_seeds`` and
    ``higher_seeds``. Settings on ``bounds`` networks (``ideal``) are left out."""
    diffs = paired_differences(summary, baseline, metrics, bounds)
    setting = setting_columns(_without_bounds(summary, bounds))
    rows = []
    for key, g in diffs.groupby(setting + ["label", "metric"], sort=False, dropna=False):
        est, low, high = change_interval(g.value, g.baseline_value, confidence, n_resamples, rng)
        rows.append(dict(zip(setting + ["label", "metric"], key), baseline=baseline, seeds=len(g),
                         baseline_mean=g.baseline_value.mean(), mean=g.value.mean(), diff_mean=g["diff"].mean(),
                         change=est, ci_low=low, ci_high=high, lower_seeds=int((g["diff"] < 0).sum()),
                         higher_seeds=int((g["diff"] > 0).sum())))
    out = pd.DataFrame(rows, columns=setting + [c for c in COLUMNS if c not in setting])
    out["metric"] = pd.Categorical(out.metric, [m for m in metrics if m in set(out.metric)], ordered=True)
    return out.sort_values(setting + ["metric", "change"], kind="stable").reset_index(drop=True)


def _pct(v: float) -> str:
    if not np.isfinite(v):
        return "n/a"
    if abs(v) >= 10:
        return f"{100 * v:+,.0f}%"
    pct = round(100 * v, 1) + 0.0  # no "-0.0%"
    return f"{pct:+.1f}%" if pct else "0.0%"


def _where(row: pd.Series, setting: list[str], varying: set[str]) -> str:
    """How a verdict names its setting: ``at 8:1`` for the oversubscription, ``on tcp``, ``trace=...``."""
    parts = []
    for c in setting:
        if c not in varying:
            continue
        v = row[c]
        if c == "oversub":
            parts.append("at the topology's own oversubscription" if pd.isna(v) else f"at {v:g}:1")
        elif c == "network":
            if "regime" not in row or pd.isna(row["regime"]):  # a regime names its network
                parts.append(f"on {v}")
        elif c == "regime":
            parts.append(f"in the {v} regime")
        else:
            parts.append(f"{c}={v}")
    return (" " + " ".join(parts)) if parts else ""


def verdict_word(row) -> str:
    """``better`` / ``worse`` when the interval of the change excludes 0, else ``no clear difference``."""
    if row.ci_high < 0:
        return "better"
    if row.ci_low > 0:
        return "worse"
    return "no clear difference"


def verdicts(comparison: pd.DataFrame, decide_on: str = "avg_jct_s",
             always: tuple = ("oversub", "regime")) -> list[str]:
    """One line per setting and policy: every metric's change with its interval, then the verdict on
    ``decide_on`` (its interval excludes 0 or not) and in how many seeds it was lower. ``always``: setting
    columns named even when they do not vary (the oversubscription a verdict holds at, the transport regime it
    was computed for)."""
    if comparison.empty:
        return []
    meta = set(COLUMNS)
    setting = [c for c in comparison.columns if c not in meta]
    varying = {c for c in setting if comparison[c].nunique(dropna=False) > 1
               or (c in always and comparison[c].notna().any())}
    lines = []
    for key, g in comparison.groupby(setting + ["label"], sort=False, dropna=False):
        g = g.set_index("metric", drop=False)
        head = g.iloc[0]
        parts = [f"{METRICS.get(m, m)} {_pct(r.change)} [{_pct(r.ci_low)}, {_pct(r.ci_high)}]"
                 for m, r in g.iterrows()]
        decide = g.loc[decide_on] if decide_on in g.index else head
        lines.append(f"{arm_name(head.label)} vs {arm_name(head.baseline)}{_where(head, setting, varying)} "
                     f"({int(head.seeds)} seeds): {', '.join(parts)} -> {verdict_word(decide)} "
                     f"({METRICS.get(decide.metric, decide.metric)} lower in {int(decide.lower_seeds)}/"
                     f"{int(decide.seeds)} seeds)")
    return lines
