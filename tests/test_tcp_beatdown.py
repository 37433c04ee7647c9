"""DCTCP's multi-bottleneck beat-down weights (netlab.network.tcp.beatdown), by hand."""

import numpy as np
import pytest

from netlab.network.tcp.beatdown import beatdown_weights, flow_beatdown


def test_a_flow_marked_at_two_queues_is_weighted_down_by_their_ratio():
    marked = np.array([0.3, 0.1, 0.0, 0.3])  # links 0 and 3 mark 30% of arrivals, link 1 10%, link 2 nothing
    assert flow_beatdown(np.array([0, 2]), marked) == (pytest.approx(0.3), pytest.approx(1.0))  # one marking link
    assert flow_beatdown(np.array([0, 3]), marked) == (pytest.approx(0.6), pytest.approx(2.0))  # two equal ones
    assert flow_beatdown(np.array([0, 1]), marked) == (pytest.approx(0.4), pytest.approx(4 / 3))
    assert flow_beatdown(np.array([2]), marked) == (0.0, 1.0)  # nothing marks: no beat-down
    flows = {
        1: [np.array([0, 3]), np.array([2])],  # its costlier flow crosses two 30% queues: 2 ** -2
        2: [np.array([0, 2]), np.array([0, 1])],  # its costlier flow (0.4) is 30% + 10%: (4/3) ** -2 = 0.5625
        3: [np.array([2])],  # nothing marks: 1
    }
    assert beatdown_weights(flows, marked, 2.0) == pytest.approx({1: 0.25, 2: 0.5625, 3: 1.0})
    assert beatdown_weights(flows, marked, 0.0) == pytest.approx({1: 1.0, 2: 1.0, 3: 1.0})
    # the costlier flow decides, not the larger ratio: job 4's flow over 0.3 + 0.3 (price 0.6, ratio 2) is costlier
    # than its flow over three 5% links (price 0.15, ratio 3), so 2 ** -1 at beta 1
    marked2 = np.array([0.3, 0.3, 0.05, 0.05, 0.05])
    assert beatdown_weights({4: [np.array([2, 3, 4]), np.array([0, 1])]}, marked2, 1.0) == pytest.approx({4: 0.5})
    # ... and a cheaper flow with the larger ratio (0.15 / 0.05 = 3) does not
    assert beatdown_weights({5: [np.array([2, 3, 4]), np.array([0])]}, marked2, 1.0) == pytest.approx({5: 1.0})


def test_the_prototype_solve_is_the_model_at_beta_0_and_moves_jobs_above():
    from netlab.validate.families import generate
    from netlab.validate.predict import predict, predict_beatdown
    from netlab.validate.scenario import REGIMES

    sc = generate("2tier", 4, REGIMES["dctcp"])  # 8:1: links mark
    plain = predict(sc, "dctcp")
    assert predict_beatdown(sc, "dctcp", 0.0) == plain  # every weight 1: the same solve
    beaten = predict_beatdown(sc, "dctcp", 3.0)
    assert any(beaten[j] > plain[j] * 1.01 for j in plain) and any(beaten[j] < plain[j] * 0.99 for j in plain)
