"""Which binding links limit whom at the mean field's fixed point (hand-computed)."""

import numpy as np
import pytest

from netlab.network.slots import Entries
from netlab.network.tcp.mean_field import MeanFieldJobs, limiting_entries, mean_field


def test_the_shared_link_limits_both_jobs_and_the_wide_one_nobody():
    # A and B (cap 10 Gbit/s, 1 Gbit per iteration, 0.1 s of compute) share link 0 (10 Gbit/s); A and C also
    # meet on link 1 (12 Gbit/s), where C (cap 1) and A at its link-0 rate fit. By symmetry A and B run at r
    # with duty d = (1/r) / (0.1 + 1/r); link 0 full: r + d r = 10, so 0.1 r^2 + r - 10 = 0, r = 5 (sqrt 5 - 1).
    e = Entries(np.array([0, 0, 1, 2]), np.array([0, 1, 0, 1]), np.ones(4))
    jobs = MeanFieldJobs(np.array([10.0, 10.0, 1.0]), np.ones(3), np.array([1.0, 1.0, 0.01]), np.full(3, 0.1),
                         np.zeros(3))
    cap_link = np.array([10.0, 12.0])
    rate, duty = mean_field(e, cap_link, jobs, jobs.cap_gbps.copy())
    r = 5 * (np.sqrt(5) - 1)
    assert rate[:2] == pytest.approx([r, r], rel=2e-3) and rate[2] == 1.0
    assert limiting_entries(e, cap_link, jobs, rate, duty).tolist() == [True, False, True, False]


def test_a_link_full_only_on_average_limits_nobody():
    # the same pair on a link of 15 Gbit/s: each alone at 10 fits with the other's duty-weighted share
    # (10 + 0.5 x 10 = 15 at d = 0.5: exactly full, so 16 leaves room): nobody slowed, nothing limits
    e = Entries(np.array([0, 1]), np.array([0, 0]), np.ones(2))
    jobs = MeanFieldJobs(np.array([10.0, 10.0]), np.ones(2), np.ones(2), np.full(2, 0.1), np.zeros(2))
    cap_link = np.array([16.0])
    rate, duty = mean_field(e, cap_link, jobs, jobs.cap_gbps.copy())
    assert rate.tolist() == [10.0, 10.0]
    assert limiting_entries(e, cap_link, jobs, rate, duty).tolist() == [False, False]
