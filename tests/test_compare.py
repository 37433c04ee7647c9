"""Paired comparisons against a baseline (netlab.compare), on hand-made summaries with hand-computed answers."""

import numpy as np
import pandas as pd
import pytest

from netlab.compare import change_interval, compare_policies, paired_differences, verdicts

BASE = "tiresias+consolidated"


def summary(rows):
    """A sweep summary: one dict per cell (label, oversub, seed, metrics); network tcp unless given."""
    df = pd.DataFrame(rows)
    df["network"] = df.network.fillna("tcp") if "network" in df else "tcp"
    df["policy"] = df.label.str.split("+").str[0]
    df["placement"] = df.label.str.split("+").str[1]
    df["trace"] = "philly-sample"
    return df


def arm(label, jcts, oversub=8, **metrics):
    return [dict(label=label, oversub=oversub, seed=i, avg_jct_s=float(v),
                 **{k: float(m[i]) for k, m in metrics.items()}) for i, v in enumerate(jcts)]


def test_paired_differences_pair_by_seed_and_setting():
    s = summary(arm(BASE, [100, 200, 300, 400]) + arm("dally+default", [90, 170, 285, 360])
                + arm(BASE, [10, 20, 30, 40], oversub=2) + arm("dally+default", [11, 22, 33, 44], oversub=2)
                + [dict(label="dally+default", oversub=8, seed=9, avg_jct_s=1.0)]  # no baseline in seed 9: dropped
                + [dict(label=BASE, oversub=np.nan, seed=0, avg_jct_s=5.0, network="ideal"),
                   dict(label="dally+default", oversub=np.nan, seed=0, avg_jct_s=1.0, network="ideal")])
    d = paired_differences(s, BASE, metrics={"avg_jct_s": "avg JCT"})
    assert set(d.network) == {"tcp"}  # the ideal network is a bound, not a setting: left out
    at8 = d[d.oversub == 8].sort_values("seed")
    assert list(at8.seed) == [0, 1, 2, 3]
    assert list(at8["diff"]) == [-10, -30, -15, -40]
    assert list(at8.change) == pytest.approx([-0.1, -0.15, -0.05, -0.1])
    at2 = d[d.oversub == 2].sort_values("seed")  # paired with the baseline of its own oversub
    assert list(at2["diff"]) == [1, 2, 3, 4] and list(at2.change) == pytest.approx([0.1] * 4)
    assert BASE not in set(d.label)


def test_compare_policies_change_of_the_mean_and_seed_counts():
    s = summary(arm(BASE, [100, 200, 300, 400], p99_jct_s=[1000, 1000, 1000, 1000])
                + arm("dally+default", [90, 170, 285, 360], p99_jct_s=[900, 1100, 800, 1200]))
    c = compare_policies(s, BASE, metrics={"avg_jct_s": "avg JCT", "p99_jct_s": "p99 JCT"}).set_index("metric")
    jct = c.loc["avg_jct_s"]
    assert jct.change == pytest.approx(905 / 1000 - 1)  # ratio of the means, not the mean of ratios (-0.1)
    assert jct.diff_mean == pytest.approx(-95 / 4)
    assert (jct.seeds, jct.lower_seeds, jct.higher_seeds) == (4, 4, 0)
    assert jct.ci_low <= jct.change <= jct.ci_high < 0  # lower in every seed: the interval stays below 0
    p99 = c.loc["p99_jct_s"]
    assert p99.change == pytest.approx(0.0) and (p99.lower_seeds, p99.higher_seeds) == (2, 2)
    assert p99.ci_low < 0 < p99.ci_high


def test_interval_contains_the_estimate_is_deterministic_and_shrinks_with_seeds():
    rng = np.random.default_rng(1)
    b = rng.uniform(1000, 2000, 80)
    x = b * (0.9 + rng.normal(0, 0.05, 80))  # 10% lower on average, 5% noise per seed
    widths = {}
    for n in (5, 20, 80):
        est, low, high = change_interval(x[:n], b[:n], rng=0)
        assert est == pytest.approx(x[:n].mean() / b[:n].mean() - 1)
        assert low <= est <= high
        assert change_interval(x[:n], b[:n], rng=0) == (est, low, high)  # same seed, same bounds
        widths[n] = high - low
    assert widths[80] < widths[20] < widths[5]
    # about 1/sqrt(n): four times the seeds, about half the width (loosely)
    assert 0.3 < widths[80] / widths[20] < 0.75
    est, low, high = change_interval(x, b, rng=0)
    assert low < -0.1 < high and high - low < 0.06  # 80 seeds: a tight interval around the true -10%


def test_interval_edge_cases():
    # the same ratio in every seed: every resample gives it, a zero-width interval (no bootstrap warning)
    assert change_interval([90, 180, 270], [100, 200, 300]) == pytest.approx((-0.1, -0.1, -0.1))
    est, low, high = change_interval([90.0], [100.0])
    assert est == pytest.approx(-0.1) and np.isnan(low) and np.isnan(high)  # one seed: no interval
    with pytest.raises(ValueError, match="one length"):
        change_interval([1, 2], [1, 2, 3])


def test_verdict_line_by_hand():
    s = summary(arm(BASE, [100, 200, 300, 400]) + arm("dally+default", [90, 180, 270, 360])
                + arm("fifo+consolidated", [150, 300, 450, 600]) + arm("sjf+consolidated", [90, 220, 280, 410]))
    lines = verdicts(compare_policies(s, BASE, metrics={"avg_jct_s": "avg JCT"}))
    assert lines == [
        "dally vs tiresias+consolidated at 8:1 (4 seeds): avg JCT -10.0% [-10.0%, -10.0%] -> better "
        "(avg JCT lower in 4/4 seeds)",
        # sjf: 1000 / 1000, lower in 2 seeds, higher in 2: the interval straddles 0
        lines[1],
        "fifo+consolidated vs tiresias+consolidated at 8:1 (4 seeds): avg JCT +50.0% [+50.0%, +50.0%] -> worse "
        "(avg JCT lower in 0/4 seeds)",
    ]
    assert lines[1].startswith("sjf+consolidated vs tiresias+consolidated at 8:1 (4 seeds): avg JCT 0.0% [-")
    assert lines[1].endswith("-> no clear difference (avg JCT lower in 2/4 seeds)")


def test_bad_baseline_and_ambiguous_arms_are_refused():
    s = summary(arm(BASE, [1, 2]) + arm("fifo+consolidated", [1, 2]))
    with pytest.raises(ValueError, match=r"baseline 'nope' is not among .*fifo\+consolidated, tiresias"):
        compare_policies(s, "nope")
    dup = pd.concat([s, s.assign(preemption="priority")], ignore_index=True)
    dup["preemption"] = dup.preemption.fillna("none")
    with pytest.raises(ValueError, match=r"\['preemption'\] varies without changing the label"):
        paired_differences(dup, BASE)


def test_a_network_policy_is_an_arm_compared_with_the_baseline_of_its_setting():
    """A sweep labels ``netpolicy=crux`` cells ``...+crux``: they pair with the baseline (netpolicy none) of the
    same oversubscription and seed; as a setting of their own they would have had no baseline and been dropped."""
    s = summary(arm(BASE, [100, 200]) + arm(f"{BASE}+crux", [80, 190]))
    s["netpolicy"] = np.where(s.label.str.endswith("+crux"), "crux", "none")
    d = paired_differences(s, BASE, metrics={"avg_jct_s": "avg JCT"}).sort_values("seed")
    assert set(d.label) == {f"{BASE}+crux"} and list(d["diff"]) == [-20, -10]
    c = compare_policies(s, BASE, metrics={"avg_jct_s": "avg JCT"}).set_index("metric").loc["avg_jct_s"]
    assert c.change == pytest.approx(270 / 300 - 1)
