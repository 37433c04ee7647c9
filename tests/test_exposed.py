"""What communication added after the solve costs an iteration (netlab/network/tcp/exposed.py), by hand.

iter = compute + comm - overlap x min(compute, comm): 10 ms of compute, 4 ms of communication, overlap 0.5 gives
10 + 4 - 2 = 12 ms. 1 ms more communication: 10 + 5 - 2.5 = 12.5 ms, half of it paid. 8 ms more: comm 12 ms
outlasts the compute, 10 + 12 - 5 = 17 ms: 5 ms paid (8 less the 3 ms the overlap hides of the 6 ms left under the
compute).
"""

import pytest

from netlab.network.model import iteration_time
from netlab.network.tcp.exposed import exposed_s


@pytest.mark.parametrize("extra, paid", [(1e-3, 0.5e-3), (8e-3, 5e-3), (0.0, 0.0)])
def test_half_hidden_communication_pays_what_the_overlap_cannot_hide(extra, paid):
    assert exposed_s(10e-3, 4e-3, 0.5, extra) == pytest.approx(paid, rel=1e-12, abs=1e-15)
    assert iteration_time(10e-3, 4e-3 + extra, 0.5) - iteration_time(10e-3, 4e-3, 0.5) == pytest.approx(paid, rel=1e-9)


def test_no_overlap_or_no_compute_left_pays_in_full():
    assert exposed_s(10e-3, 4e-3, 0.0, 1e-3) == 1e-3
    assert exposed_s(3e-3, 4e-3, 1.0, 1e-3) == 1e-3  # communication already outlasts the compute
    assert exposed_s(10e-3, 4e-3, 1.0, 1e-3) == 0.0  # fully overlapped with room: hidden entirely


@pytest.mark.parametrize("comm", [4e-3, 12e-3])
def test_a_period_gives_back_the_communication_it_was_made_of(comm):
    """The scenario run records periods only: 12 ms at 10 ms compute, overlap 0.5 was 4 ms of communication (not
    the 7 ms of period left after the exposed 5 ms of compute: the rest is the wait for the overlapped compute),
    17 ms was 12 ms."""
    from netlab.network.tcp.exposed import comm_of_period

    assert comm_of_period(10e-3, 0.5, iteration_time(10e-3, comm, 0.5)) == pytest.approx(comm, rel=1e-9)
    assert comm_of_period(10e-3, 0.0, iteration_time(10e-3, comm, 0.0)) == pytest.approx(comm, rel=1e-9)
    # fully overlapped and hidden: the period says nothing beyond "at most the compute"; the floor given stands
    assert comm_of_period(10e-3, 1.0, 10e-3, at_least_s=3e-3) == 3e-3
