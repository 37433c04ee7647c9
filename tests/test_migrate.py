"""Migration: the ``migrate`` policy moves a congested job when the move pays, the simulator charges the move its
model's restart, and mechanisms that cannot move a job refuse the policy. Figures hand-computed."""

import pytest

from netlab.policies import MIGRATION
from netlab.policies.base import PlacementPolicy
from netlab.sched import Mechanism, Placement, PolicyError, Scheduler
from netlab.sim import Simulator, SimConfig
from netlab.topology import load_topology
from netlab.workload.job import Job
from netlab.workload.zoo import JobModel, ModelZoo

# Two racks of three one-GPU hosts (0-2 and 3-5), 100 Gbit/s each; each rack's uplinks carry 100 Gbit/s in all
# (3:1). A job of 2 GPUs sends 12.5 GB per iteration each way around its ring of two: 1 s alone at 100 Gbit/s,
# after 1 s of compute. Alone its iteration is 2 s; two such jobs across the same uplinks share them max-min
# (``fair``): 50 Gbit/s each, 2 s of communication, 3 s a iteration, slowdown 1.5.
TOPO = "leafspine,racks=2,hosts_per_rack=3,gpus_per_host=1,oversub=3"
# 250 M parameters x 12 bytes = 3 GB = 24 Gbit: 1 s each way at 24 Gbit/s; with a 3 s launch a move costs 5 s.
ZOO = ModelZoo({"m": JobModel("m", compute_s=1.0, grad_bytes=12.5e9, params_m=250.0)})
CONFIG = dict(network="fair", storage_gbps=24.0, launch_s=3.0)


class Crossed(PlacementPolicy):
    """Job 0 on hosts 0 and 3, job 1 on hosts 1 and 4: both across the uplinks."""

    name = "crossed"

    def place(self, job, view):
        return Placement((0, 3), (1, 1)) if job.job_id == 0 else Placement((1, 4), (1, 1))


def run(migration):
    jobs = [Job(0, 0.0, 2, "m", 40), Job(1, 0.0, 2, "m", 40)]
    sim = Simulator(load_topology(TOPO), jobs, "fifo", Crossed(), zoo=ZOO, config=SimConfig(**CONFIG),
                    migration=migration)
    return sim.run()


def test_one_of_two_colliding_jobs_migrates_and_both_finish_sooner():
    before = run("none").jobs.set_index("job_id")
    # 40 iterations of 3 s: both end at 120 s
    assert before.end_s.tolist() == pytest.approx([120.0, 120.0])
    policy = MIGRATION.create("migrate", threshold=1.2, hold_s=20.0, margin=0.1, period_s=10.0)
    res = run(policy)
    after = res.jobs.set_index("job_id")
    # Checks at 10, 20, 30 s: both congested (1.5 >= 1.2) since 10 s; at 30 s they have been for 20 s. A rack-local
    # pair is free (hosts 2 and 5 plus each job's own): predicted slowdown 1.0 <= 1.5 - 0.1, and the 30 iterations
    # left would save 30 x 1 s > the 5 s move. Equal savings: the smaller id, job 0, moves (one move per check).
    assert after.migrations.tolist() == [1, 0] and after.preemptions.tolist() == [0, 0]
    assert len(set(after.placement[0].split(","))) == 2 and after.racks[0] == 1  # its new hosts share a rack
    # job 0: 10 iterations by 30 s, 5 s of restart, then 30 iterations of 2 s: ends at 95 s (25 s sooner)
    assert after.end_s[0] == pytest.approx(95.0)
    # job 1: 10 iterations by 30 s, then alone on the uplinks: 30 x 2 s, ends at 90 s (30 s sooner)
    assert after.end_s[1] == pytest.approx(90.0)
    assert before.jct_s[0] - after.jct_s[0] == pytest.approx(25.0)
    assert res.summary["migrations"] == 1 and res.config["migration"]["name"] == "migrate"
    assert after.runs[0] != "" and after.runs[1] == ""  # the run before the move is on the job's timeline


def test_a_move_that_does_not_pay_for_itself_is_not_made():
    # the same collision, but a move now costs more than the 30 s it would save
    policy = MIGRATION.create("migrate", threshold=1.2, hold_s=20.0, margin=0.1, period_s=10.0)
    jobs = [Job(0, 0.0, 2, "m", 40), Job(1, 0.0, 2, "m", 40)]
    config = SimConfig(**CONFIG | dict(launch_s=29.0))  # 1 + 29 + 1 = 31 s > 30 x 1 s saved
    res = Simulator(load_topology(TOPO), jobs, "fifo", Crossed(), zoo=ZOO, config=config, migration=policy).run()
    assert res.jobs.migrations.sum() == 0 and res.jobs.end_s.tolist() == pytest.approx([120.0, 120.0])


def test_a_job_congested_for_less_than_the_hold_time_stays():
    policy = MIGRATION.create("migrate", threshold=1.2, hold_s=200.0, margin=0.1, period_s=10.0)
    assert run(policy).jobs.migrations.sum() == 0


def test_below_the_threshold_or_the_margin_nothing_moves():
    assert run(MIGRATION.create("migrate", threshold=1.6, hold_s=0.0, period_s=10.0)).jobs.migrations.sum() == 0
    assert run(MIGRATION.create("migrate", margin=0.6, hold_s=0.0, period_s=10.0)).jobs.migrations.sum() == 0


@pytest.mark.parametrize("kwargs", [dict(threshold=0.9), dict(hold_s=-1), dict(margin=-0.1), dict(period_s=0)])
def test_bad_parameters_are_refused(kwargs):
    with pytest.raises(ValueError, match="migrate: need"):
        MIGRATION.create("migrate", **kwargs)


def test_a_mechanism_that_cannot_move_a_job_refuses_the_policy():
    class Fixed(Mechanism):
        pass

    with pytest.raises(PolicyError, match="Fixed cannot move a running job.*use migration 'none'"):
        Scheduler(None, None, None, Fixed(), backfill=False, migration=MIGRATION.create("migrate"))
    Scheduler(None, None, None, Fixed(), backfill=False, migration=MIGRATION.create("none"))  # nothing to refuse


def test_sweeps_take_migration_as_a_key_and_unknown_names_are_refused():
    from netlab.errors import InputError
    from netlab.sweep.grid import expand
    from netlab.sweep.cell import run_cell

    doc = dict(name="m", trace="philly-sample", max_jobs=5, grid=dict(migration=["none", "migrate"]))
    cells = expand(doc)
    assert [c.params["migration"] for c in cells] == ["none", "migrate"] and cells[1].label.endswith("+migrate")
    assert "migration" not in expand(dict(name="m", grid=dict(seed=[0])))[0].params  # optional: ids unchanged
    assert run_cell(cells[1]).summary["migrations"] >= 0
    with pytest.raises(InputError, match="migration"):
        expand(dict(name="m", grid=dict(migration=["teleport"])))
