"""A real Slurm 22.05 (munge, MariaDB + slurmdbd, slurmctld, one slurmd per node) on this machine.

The fixture starts it as root from netlab.integrations.slurm_local (skipped with the reason elsewhere),
records every process it starts and stops exactly those; the last test checks none is left.
"""

from __future__ import annotations

import os

import pandas as pd
import pytest

from netlab.integrations import slurm_local
from netlab.integrations.slurm_advisor import SACCT_FORMAT, compare_placements, read_nodes, replay, sleep_trace
from netlab.integrations.slurm_topology import format_topology_conf, parse_scontrol_topology, to_tree
from netlab.topology import load_topology
from netlab.traces import load_trace

pytestmark = pytest.mark.skipif(bool(slurm_local.missing()), reason="; ".join(slurm_local.missing()) or "ok")

SPEC = "leafspine,racks=2,hosts_per_rack=2,gpus_per_host=4,oversub=4"


def _gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


@pytest.fixture(scope="module")
def topo():
    return load_topology(SPEC)


@pytest.fixture(scope="module")
def cluster(topo, tmp_path_factory):
    c = slurm_local.LocalSlurm(tmp_path_factory.mktemp("slurm"), {h.name: int(h.gpus) for h in topo.hosts},
                               format_topology_conf(to_tree(topo)))
    c.start(timeout_s=120)
    yield c
    c.stop()


@pytest.fixture(scope="module")
def replayed(cluster, topo):
    """A 10-job sleep trace through the real Slurm with topo-bestfit placement; Slurm's record beside the plan."""
    trace = sleep_trace(jobs=10, seed=1, gap_s=0.5)
    plans = replay(cluster, topo, trace, placement="topo-bestfit", ordering="fifo", timeout_s=300)
    return trace, plans, compare_placements(cluster, plans)


def test_every_node_registers_with_its_gpus(cluster, topo):
    nodes = read_nodes(cluster).set_index("node")
    assert sorted(nodes.index) == sorted(h.name for h in topo.hosts)
    assert (nodes.gpus == 4).all() and (nodes.gpus_used == 0).all() and (nodes.state == "idle").all()
    assert set(cluster.pids) == {"munged", "mariadbd", "slurmdbd", "slurmctld"} | {f"slurmd-{h.name}"
                                                                                  for h in topo.hosts}


def test_scontrol_shows_the_exported_tree(cluster, topo):
    shown = parse_scontrol_topology(cluster.run(["scontrol", "show", "topology"]).stdout)
    assert shown.shape() == to_tree(topo).shape()
    # by hand: two ToRs with two hosts each, the spines' ECMP group above them
    assert shown.shape() == {"tor0": ({"r0h0", "r0h1"}, frozenset()), "tor1": ({"r1h0", "r1h1"}, frozenset()),
                             "spine0": (frozenset(), {"tor0", "tor1"})}
    assert shown.levels() == {"tor0": 0, "tor1": 0, "spine0": 1}


def test_slurm_places_every_job_where_netlab_planned(replayed):
    trace, plans, cmp = replayed
    assert len(cmp) == len(trace) == 10
    assert (cmp.state == "COMPLETED").all(), cmp[["slurm_id", "state"]]
    # --nodes=k with k nodes listed leaves Slurm no choice of nodes; the GPU total is what was asked
    assert cmp.same_nodes.all(), cmp[["planned_nodes", "slurm_nodes"]]
    assert cmp.same_gpus.all()
    # jobs with one GPU count per node go in with --gpus-per-node: the split Slurm made (seen while running) is
    # the plan's; uneven ones go in with --gpus=<total> and Slurm splits the total itself
    seen = cmp[cmp.same_split.notna()]
    even = seen.planned_split.map(lambda s: len(set(s.values())) == 1)
    assert len(seen) >= len(cmp) // 2, "the replay saw too few jobs running to compare splits"
    assert seen[even].same_split.astype(bool).all(), seen[even][["planned_split", "slurm_split"]]
    print(f"\nagreement on {len(cmp)} jobs: nodes {int(cmp.same_nodes.sum())}/{len(cmp)}, GPU totals "
          f"{int(cmp.same_gpus.sum())}/{len(cmp)}, per-node split {int(seen.same_split.astype(bool).sum())}/{len(seen)} "
          f"seen running ({int(even.sum())} even: {int(seen[even].same_split.astype(bool).sum())} agree; "
          f"{int((~even).sum())} uneven: {int(seen[~even].same_split.astype(bool).sum())} agree); Slurm's start after "
          f"submission: median {cmp.slurm_wait_s.median():.0f} s, max {cmp.slurm_wait_s.max():.0f} s")


def test_topology_aware_plan_keeps_jobs_in_a_rack_when_one_holds_them(replayed, topo):
    _, plans, _ = replayed
    rack = {h.name: h.rack for h in topo.hosts}
    fits = []
    for p in plans:
        rack_free = pd.Series(p.free_before).groupby(rack).sum()
        if (rack_free >= p.job.gpus).any():
            fits.append(p)
            assert len({rack[h] for h in p.hosts}) == 1, (p.job.job_id, p.hosts, p.free_before)
    assert fits, "no job of the trace fitted in one rack: the test shows nothing"


def test_sacct_loader_reads_what_slurm_ran(replayed, cluster, tmp_path):
    trace, plans, cmp = replayed
    ids = ",".join(p.slurm_id for p in plans)
    dump = tmp_path / "sacct.txt"
    dump.write_text(cluster.run(["sacct", "--allusers", "--parsable2", "--allocations", f"--jobs={ids}",
                                 f"--format={SACCT_FORMAT}"]).stdout)
    df = load_trace(f"sacct,path={dump}")
    assert len(df) == len(plans) and sum(df.attrs["filtered"].values()) == 0
    by_id = df.set_index("job_id")
    for p in plans:
        row = by_id.loc[p.slurm_id]
        assert row["name"] == f"netlab-{p.job.job_id}"
        assert row.gpus == p.job.gpus
        assert sorted(row.nodes.split(",")) == sorted(p.hosts)
        # sacct keeps whole seconds: a sleep of d s runs between floor(d) and d + 2 s by its clock
        d = float(trace.duration_s.iloc[p.job.job_id])
        assert int(d) <= row.duration_s <= d + 2, (p.slurm_id, d, row.duration_s)
    assert (df.wait_s >= 0).all() and df.submit_s.iloc[0] == 0


def test_sbatch_hands_the_job_each_word_as_one_argument(cluster, topo, tmp_path):
    """sbatch runs --wrap through /bin/sh: the quoted words come back to the job whole, and none of them runs."""
    import json
    import sys

    from netlab.integrations.slurm_advisor import sbatch_argv

    words = ["two words", f"x;touch {tmp_path}/pwned", f"$(touch {tmp_path}/pwned2)", "*", "'q'", '"d"', ""]
    out = tmp_path / "argv.json"
    argv = sbatch_argv("netlab-argv", [topo.hosts[0].name], [1],
                       [sys.executable, "-c", "import json, sys; print(json.dumps(sys.argv[1:]))", *words], str(out))
    cluster.run([argv[0], "--wait", *argv[1:]], timeout_s=120)  # --wait: sbatch returns when the job has ended
    assert json.loads(out.read_text()) == words
    assert sorted(p.name for p in tmp_path.iterdir()) == ["argv.json"]


def test_a_three_level_tree_too(tmp_path):
    topo = load_topology("fattree,k=2,hosts_per_edge=2,gpus_per_host=2")
    tree = to_tree(topo)
    with slurm_local.LocalSlurm(tmp_path / "s", {h.name: 2 for h in topo.hosts}, format_topology_conf(tree)) as c:
        shown = parse_scontrol_topology(c.run(["scontrol", "show", "topology"]).stdout)
        pids = list(c.pids.values())
    assert shown.shape() == tree.shape()
    assert shown.levels() == {"p0edge0": 0, "p1edge0": 0, "p0agg0": 1, "p1agg0": 1, "core0": 2}
    assert all(_gone(pid) for pid in pids) and c.alive() == []


def test_zz_stopping_leaves_nothing_running(cluster):
    pids = dict(cluster.pids)
    assert cluster.alive() == list(pids)
    cluster.stop()  # waits for (reaps) each process, so kill(pid, 0) must find none
    assert [r for r, p in pids.items() if not _gone(p)] == []
    assert cluster.alive() == []
