"""summarise_logs on synthetic logs: jobs that should overlap but did not are flagged, never passed off as shared."""

import warnings

import numpy as np
import pandas as pd
import pytest

from netlab.testbed.scenarios import Scenario, ScenarioJob, summarise_logs


def _log(start: float, iter_s: float, n: int, compute_s: float = 0.01) -> pd.DataFrame:
    t = start + iter_s * np.arange(n + 1)
    return pd.DataFrame(dict(rank=0, iter=np.arange(n), compute_start=t[:-1], allreduce_start=t[:-1] + compute_s,
                             allreduce_end=t[1:], compute_s=compute_s, allreduce_s=iter_s - compute_s))


SC = Scenario("shared", (ScenarioJob(1, ("l0", "r0"), 1_000_000, 0.0, iterations=6),
                         ScenarioJob(2, ("l1", "r1"), 1_000_000, 0.0, iterations=6)), warmup=1)


def test_overlapping_jobs_are_measured_in_the_common_window_without_a_warning():
    logs = {1: _log(0.0, 0.2, 6), 2: _log(0.05, 0.2, 6)}
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        out = summarise_logs(SC, logs)
    assert out.overlapped.tolist() == [True, True]
    assert out.iter_s.tolist() == pytest.approx([0.2, 0.2])


def test_jobs_that_did_not_overlap_are_flagged_and_warned_about():
    # Job 2 started after job 1 had finished (the flaky test's failure: uncontended times passed off as shared).
    logs = {1: _log(0.0, 0.1, 6), 2: _log(0.7, 0.1, 6)}
    with pytest.warns(RuntimeWarning, match=r"scenario 'shared': jobs \[1, 2\] .*not a shared measurement"):
        out = summarise_logs(SC, logs)
    assert out.overlapped.tolist() == [False, False]
    assert out.iter_s.tolist() == pytest.approx([0.1, 0.1])  # each job's own steady state, as before


def test_a_single_job_is_its_own_window():
    sc = Scenario("alone", SC.jobs[:1], warmup=1)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        out = summarise_logs(sc, {1: _log(0.0, 0.1, 6)})
    assert out.overlapped.tolist() == [True]


def test_the_mean_period_is_the_throughput_when_periods_take_a_few_values():
    # A lower class behind a higher one alternates short and long periods: after the warm-up iteration the window
    # holds 0.3 0.2 0.3 0.2 0.3, whose median is the long one (0.3); the mean (the window's span, 1.3 s, over its
    # five periods) is what the job runs at.
    t = np.concatenate([[0.0], np.cumsum([0.2, 0.3, 0.2, 0.3, 0.2, 0.3, 0.2])])
    log = pd.DataFrame(dict(rank=0, iter=np.arange(7), compute_start=t[:-1], allreduce_start=t[:-1] + 0.01,
                            allreduce_end=t[1:], compute_s=0.01, allreduce_s=np.diff(t) - 0.01))
    sc = Scenario("alone", (ScenarioJob(1, ("l0", "r0"), 1_000_000, 0.0, iterations=7),), warmup=1)
    out = summarise_logs(sc, {1: log})
    assert out.iter_s.iloc[0] == pytest.approx(0.3)
    assert out.mean_iter_s.iloc[0] == pytest.approx(1.3 / 5)
