"""The founding documents' missing baselines: priority, EDF and GPU fair-share ordering, and deadline metrics.

Every expectation is computed by hand on a one-GPU cluster on the ideal network, where a job runs exactly as
long as it says and only one runs at a time.
"""

from __future__ import annotations

import dataclasses
import math

import pandas as pd
import pytest

from netlab.policies import ORDERING
from netlab.sim import simulate
from netlab.topology import load_topology
from netlab.workload.job import Job, isolated_iter_s, jobs_from_frame
from netlab.workload.zoo import ModelZoo

ZOO = ModelZoo.default()


@pytest.fixture(scope="module")
def one_gpu():
    return load_topology("leafspine,racks=1,hosts_per_rack=1,gpus_per_host=1,oversub=1,spines=1")


def job(topo, job_id, submit_s, duration_s, **fields):
    it = duration_s / isolated_iter_s(ZOO["resnet50"], "ring", 1, topo)
    return Job(job_id, float(submit_s), 1, "resnet50", it, **fields)


def starts(result):
    r = result.jobs.set_index("job_id")
    return list(r.sort_values("start_s").index), r


def approx(x):
    return pytest.approx(x, rel=1e-9, abs=1e-6)


def test_priority_runs_the_highest_class_first_then_submit_order(one_gpu):
    # Job 0 holds the GPU 0-100 s; 1, 2, 3 wait. Priority 5 (job 3) beats 1 (jobs 1 and 2, submit order).
    jobs = [job(one_gpu, 0, 0, 100), job(one_gpu, 1, 1, 10, priority=1), job(one_gpu, 2, 2, 10, priority=1),
            job(one_gpu, 3, 3, 10, priority=5)]
    order, r = starts(simulate(one_gpu, jobs, ordering="priority", network="ideal"))
    assert order == [0, 3, 1, 2]
    assert r.start_s[3] == approx(100) and r.start_s[1] == approx(110) and r.start_s[2] == approx(120)
    # without priorities it is first come, first served
    plain = [dataclasses.replace(j, priority=0) for j in jobs]
    assert starts(simulate(one_gpu, plain, ordering="priority", network="ideal"))[0] == [0, 1, 2, 3]


def test_edf_runs_the_earliest_deadline_first_and_counts_misses(one_gpu):
    # 0 runs 0-100. Waiting: 1 (deadline 400), 2 (deadline 150), 3 (none). EDF: 2 at 100-150 (meets 150),
    # 1 at 150-250 (meets 400), then 3 at 250-260. FIFO would run 1 first (100-200), 2 at 200-250: 2 misses.
    jobs = [job(one_gpu, 0, 0, 100, deadline_s=1000.0), job(one_gpu, 1, 1, 100, deadline_s=400.0),
            job(one_gpu, 2, 2, 50, deadline_s=150.0), job(one_gpu, 3, 3, 10)]
    edf = simulate(one_gpu, jobs, ordering="edf", network="ideal")
    order, r = starts(edf)
    assert order == [0, 2, 1, 3]
    assert r.end_s[2] == approx(150) and r.end_s[1] == approx(250)
    assert edf.summary["deadline_jobs"] == 3 and edf.summary["deadline_misses"] == 0
    fifo = simulate(one_gpu, jobs, ordering="fifo", network="ideal")
    assert starts(fifo)[0] == [0, 1, 2, 3]
    assert fifo.summary["deadline_misses"] == 1  # job 2 ends at 250 > 150
    assert fifo.summary["deadline_miss_share"] == approx(1 / 3)
    assert list(fifo.jobs.sort_values("job_id").deadline_met) == [True, True, False, None]


def test_fair_share_serves_the_tenant_that_used_least(one_gpu):
    # Tenant a's job 0 holds the GPU 0-1000 s. At 1000 s, a has used 1000 GPU-s, b nothing: b's job 2 goes
    # before a's job 1 although it came later; then a's job 1 (b has used 100 by then, a 1000: but only a waits).
    jobs = [job(one_gpu, 0, 0, 1000, tenant="a"), job(one_gpu, 1, 10, 100, tenant="a"),
            job(one_gpu, 2, 20, 100, tenant="b")]
    order, r = starts(simulate(one_gpu, jobs, ordering="fair-share", network="ideal"))
    assert order == [0, 2, 1]
    assert r.start_s[2] == approx(1000) and r.start_s[1] == approx(1100)
    # everybody one tenant: first come, first served
    same = [dataclasses.replace(j, tenant="") for j in jobs]
    assert starts(simulate(one_gpu, same, ordering="fair-share", network="ideal"))[0] == [0, 1, 2]


def test_fair_share_usage_is_recalculated_per_period(one_gpu):
    policy = ORDERING.get("fair-share")(calc_period_s=100.0)
    assert policy.round_s == 100.0
    with pytest.raises(ValueError, match="calc_period_s"):
        ORDERING.get("fair-share")(calc_period_s=0)


def test_trace_columns_reach_the_job(one_gpu):
    frame = pd.DataFrame({"job_id": ["x", "y"], "submit_s": [0.0, 5.0], "gpus": [1, 1], "model": ["resnet50"] * 2,
                          "duration_s": [10.0, 10.0], "iterations": [math.nan] * 2, "pattern": ["ring"] * 2,
                          "priority": [3, 0], "deadline_s": [50.0, math.nan], "tenant": ["vc1", "vc2"]})
    a, b = jobs_from_frame(frame, one_gpu)
    assert (a.priority, a.deadline_s, a.tenant) == (3, 50.0, "vc1")
    assert (b.priority, b.deadline_s, b.tenant) == (0, math.inf, "vc2")


def test_loaders_give_priority_and_tenant(tmp_path):
    from netlab.traces.alibaba import read_alibaba
    from netlab.traces.philly import read_philly
    from netlab.traces.schema import TraceError

    head = "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,scheduled_time\n"
    pods = tmp_path / "pods.csv"
    pods.write_text(head + "p0,1,1,1,1000,,LS,Running,0,100,0\np1,1,1,2,1000,,BE,Running,5,100,5\n"
                    "p2,1,1,1,1000,,Burstable,Running,9,100,9\n")
    df = read_alibaba(pods).set_index("job_id")
    assert df.priority.to_dict() == {"p0": 3, "p1": 0, "p2": 1}
    pods.write_text(head + "p0,1,1,1,1000,,Gold,Running,0,100,0\n")
    with pytest.raises(TraceError, match=r"line 2.*qos.*Gold|qos.*line 2"):
        read_alibaba(pods)

    philly = tmp_path / "philly.csv"
    philly.write_text("timestamp,duration,num_gpus,cluster\n2017-10-03 10:00:00,60,2,vcA\n"
                      "2017-10-03 10:01:00,60,1,vcB\n")
    assert read_philly(philly).tenant.tolist() == ["vcA", "vcB"]
