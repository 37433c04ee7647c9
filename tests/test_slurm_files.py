"""Slurm's files without a Slurm: hostlists, topology.conf export/import and its errors, sacct dumps, sbatch argv."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from netlab.cli import app
from netlab.hostlist import HostlistError, compress, expand
from netlab.integrations.slurm_advisor import gres_gpus, sbatch_argv
from netlab.integrations.slurm_topology import (SlurmTopologyError, format_topology_conf, parse_scontrol_topology,
                                                parse_topology_conf, read_topology_conf, to_topology, to_tree)
from netlab.topology import load_topology
from netlab.traces import TraceError, load_trace

# -- hostlists ----------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("text, names", [
    ("n[01-03,05]", ["n01", "n02", "n03", "n05"]),
    ("r[1-2]n[1-2]", ["r1n1", "r1n2", "r2n1", "r2n2"]),
    ("tor0,spine[0-1]", ["tor0", "spine0", "spine1"]),
    ("n[08-10]", ["n08", "n09", "n10"]),
    ("a", ["a"]),
    ("", []),
])
def test_expand(text, names):
    assert expand(text) == names


@pytest.mark.parametrize("text, says", [("n[1-", "never closed"), ("n[3-1]", "ends before"), ("n[a-b]", "digits"),
                                        ("n1,,n2", "empty entry"), ("n]1", "without '['"),
                                        ("n[1-999999999]", "over 100,000")])
def test_expand_refuses(text, says):
    with pytest.raises(HostlistError, match=says.replace("[", r"\[").replace("(", r"\(")):
        expand(text)


def test_compress_is_expand_inverse():
    names = ["r0h0", "r0h1", "r0h2", "r1h0", "n08", "n09", "n10", "gpu", "n3", "n1"]
    assert compress(names) == "r0h[0-2],r1h0,n[08-10],gpu,n3,n1"  # "10" is two digits wide, as "08"
    assert expand(compress(names)) == names


# -- topology.conf --------------------------------------------------------------------------------------------------


def test_leafspine_exports_to_one_spine_group_and_reads_back():
    topo = load_topology("leafspine,racks=2,hosts_per_rack=2,gpus_per_host=4,oversub=2,host_gbps=100")
    text = format_topology_conf(to_tree(topo))
    lines = [line for line in text.splitlines() if not line.startswith("#")]
    # by hand: ToR uplinks are 2 hosts x 100 / oversub 2 / 2 spines = 50 Gbit/s each, 100 to the group
    assert lines == ["SwitchName=tor0 Nodes=r0h[0-1] LinkSpeed=100", "SwitchName=tor1 Nodes=r1h[0-1] LinkSpeed=100",
                     "SwitchName=spine0 Switches=tor[0-1] LinkSpeed=100"]
    assert "# spine0 stands for the ECMP group spine0 spine1" in text
    back = to_topology(parse_topology_conf(text))
    assert sorted(h.name for h in back.hosts) == sorted(h.name for h in topo.hosts)
    assert {h.rack for h in back.hosts} == {"tor0", "tor1"}
    frame = back.links_frame()
    assert sorted(frame[frame.tier != "host"].capacity_gbps.unique()) == [100.0]  # one 100 G uplink per ToR
    assert (frame[frame.tier == "host"].capacity_gbps == 100.0).all()


def test_dumbbell_gets_a_root_above_its_two_tops():
    tree = to_tree(load_topology("dumbbell,hosts_per_side=2"))
    assert tree.roots() == ["root"] and tree.switches["root"].switches == ["swL", "swR"]


def test_scontrol_output_parses_to_the_tree():
    shown = ("SwitchName=tor0 Level=0 LinkSpeed=100 Nodes=r0h[0-1]\n"
             "SwitchName=tor1 Level=0 LinkSpeed=100 Nodes=r1h[0-1]\n"
             "SwitchName=spine0 Level=1 LinkSpeed=200 Nodes=r0h[0-1],r1h[0-1] Switches=tor[0-1]\n")
    topo = load_topology("leafspine,racks=2,hosts_per_rack=2")
    assert parse_scontrol_topology(shown).shape() == to_tree(topo).shape()


def test_links_yaml_beside_and_options(tmp_path):
    conf = tmp_path / "topology.conf"
    conf.write_text("SwitchName=s0 Nodes=n[1-2]\nSwitchName=s1 Nodes=n[3-4]\nSwitchName=top Switches=s[0-1]\n")
    (tmp_path / "topology.links.yaml").write_text("host_gbps: 25\ngpus_per_host: 2\nswitch_gbps: {s1: 10}\n")
    topo = read_topology_conf(conf)
    assert topo.total_gpus == 8 and set(topo.host_nic_gbps) == {25.0}
    up = {(a, b): g for a, b, g, _ in topo.cables}
    assert up[("s0", "top")] == 50.0 and up[("s1", "top")] == 10.0  # 2 x 25 / oversub 1; given
    assert read_topology_conf(conf, oversub=2.0, host_gbps=100.0).cables[-2][2] == 100.0  # s0: 2 x 100 / 2


@pytest.mark.parametrize("text, says", [
    ("SwitchName=a Switches=b\nSwitchName=b Switches=a\nSwitchName=c Nodes=n1\n",
     "line 2, field 'Switches': the switches form a cycle: a -> b -> a"),
    ("SwitchName=a Nodes=n1 Switches=x\n", "line 1, field 'Switches': unknown switch 'x'"),
    ("SwitchName=a Nodes=n1\nSwitchName=a Nodes=n2\n", "line 2, field 'SwitchName': switch 'a' given twice"),
    ("SwitchName=a Nodes=n1\nSwitchName=b Nodes=n[1-2]\n", "line 2, field 'Nodes': node 'n1' is already under"),
    ("SwitchName=a Nodes=n1\nNodes=n2\n", "line 2, field 'SwitchName': missing"),
    ("SwitchName=a Nodes=n1 Speed=3\n", "line 1, field 'Speed': not a topology.conf key"),
    ("SwitchName=a Nodes=n1 garbage\n", "line 1: 'garbage' is not Key=value"),
    ("SwitchName=a Nodes=n[1-\n", "line 1, field 'Nodes': hostlist"),
    ("SwitchName=a Nodes=n1 LinkSpeed=fast\n", "line 1, field 'LinkSpeed'"),
    ("SwitchName=a Nodes=../x\n", "line 1, field 'Nodes'"),
    ("SwitchName=a Switches=b\nSwitchName=b Switches=c\nSwitchName=c Switches=a\nSwitchName=d Nodes=n1\n",
     "the switches form a cycle"),
])
def test_bad_topology_conf_names_file_line_field(tmp_path, text, says):
    conf = tmp_path / "topology.conf"
    conf.write_text(text)
    with pytest.raises(SlurmTopologyError) as err:
        read_topology_conf(conf)
    assert str(err.value).startswith(f"{conf}, line ") and says in str(err.value)


def test_unknown_node_against_the_known_list(tmp_path):
    conf = tmp_path / "topology.conf"
    conf.write_text("SwitchName=a Nodes=n[1-3]\n")
    (tmp_path / "topology.links.yaml").write_text("nodes: n[1-2]\n")
    with pytest.raises(SlurmTopologyError, match=r"line 1, field 'Nodes': unknown node 'n3'"):
        read_topology_conf(conf)


def test_bad_links_yaml_names_field_and_line(tmp_path):
    conf = tmp_path / "topology.conf"
    conf.write_text("SwitchName=a Nodes=n1\n")
    (tmp_path / "topology.links.yaml").write_text("gpus_per_host: 2\nhost_gbps: -5\n")
    with pytest.raises(SlurmTopologyError, match=r"topology.links.yaml: field 'host_gbps' must be > 0.*line 2"):
        read_topology_conf(conf)


def test_cli_export_then_import_round_trip(tmp_path):
    runner = CliRunner()
    conf = tmp_path / "topology.conf"
    res = runner.invoke(app, ["export", "slurm", "fattree,k=4,gpus_per_host=4", "--out", str(conf)])
    assert res.exit_code == 0, res.output
    res = runner.invoke(app, ["import", "slurm", str(conf), "--out", str(tmp_path / "t.yaml")])
    assert res.exit_code == 0, res.output
    back = load_topology(str(tmp_path / "t.yaml"))
    # 16 hosts of 4 GPUs (the links YAML beside carries the GPUs), 8 racks, 4 pods: the fat-tree's shape
    assert (back.n_hosts, back.total_gpus, back.n_racks, len(back.pod_names)) == (16, 64, 8, 4)
    bad = tmp_path / "bad.conf"
    bad.write_text("SwitchName=a Switches=b\nSwitchName=b Switches=a\nSwitchName=c Nodes=n1\n")
    res = runner.invoke(app, ["import", "slurm", str(bad), "--out", str(tmp_path / "never.yaml")])
    assert res.exit_code == 2 and "line 2, field 'Switches'" in res.output
    assert not (tmp_path / "never.yaml").exists()


# -- sacct dumps ----------------------------------------------------------------------------------------------------

HEADER = "JobID|JobName|Submit|Start|End|State|AllocTRES|NodeList\n"
GOOD = [
    "7|a|2024-05-01T10:00:00|2024-05-01T10:00:05|2024-05-01T10:01:05|COMPLETED|billing=2,cpu=2,gres/gpu=6,node=2|n[01-02]",
    "8|b|2024-05-01T10:00:30|2024-05-01T10:00:40|2024-05-01T10:00:50|FAILED|cpu=1,gres/gpu:a100=2,mem=4G,node=1|n03",
    "9|c|2024-05-01T10:00:31|Unknown|Unknown|PENDING||None assigned",
    "10|d|2024-05-01T10:00:32|2024-05-01T10:00:33|Unknown|RUNNING|cpu=1,gres/gpu=1,node=1|n04",
    "11|e|2024-05-01T10:00:33|2024-05-01T10:00:34|2024-05-01T10:00:44|COMPLETED|cpu=4,node=1|n04",
]


def test_sacct_fields_by_hand(tmp_path):
    dump = tmp_path / "jobs.txt"
    dump.write_text(HEADER + "\n".join(GOOD) + "\n")
    df = load_trace(f"sacct,path={dump}")
    assert list(df.job_id) == ["7", "8"]
    assert list(df.gpus) == [6, 2]  # gres/gpu=6; the typed gres/gpu:a100=2
    assert list(df.submit_s) == [0.0, 30.0] and list(df.wait_s) == [5.0, 10.0]
    assert list(df.duration_s) == [60.0, 10.0] and list(df.nodes) == ["n01,n02", "n03"]
    assert list(df.state) == ["COMPLETED", "FAILED"] and list(df.n_nodes) == [2, 1]
    f = df.attrs["filtered"]
    assert (f["jobs that never started (Start not a time)"], f["jobs still running (End not a time)"],
            f["jobs with no GPU in AllocTRES (CPU-only)"]) == (1, 1, 1)
    cpu = load_trace(f"sacct,path={dump},gpu_tres=cpu")  # each CPU standing for a GPU
    assert list(cpu.gpus) == [2, 1, 4] and list(cpu.job_id) == ["7", "8", "11"]


@pytest.mark.parametrize("tres, says", [("cpu=2,gres/gpu=x,node=1", "count 'x' is not a whole number"),
                                        ("cpu=2,gres/gpu,node=1", "'gres/gpu' is not name=count"),
                                        ("cpu=2,,node=1", "is not name=count")])
def test_malformed_tres_names_file_line_field(tmp_path, tres, says):
    dump = tmp_path / "jobs.txt"
    bad = GOOD[1].replace("cpu=1,gres/gpu:a100=2,mem=4G,node=1", tres)
    dump.write_text(HEADER + GOOD[0] + "\n" + bad + "\n")
    with pytest.raises(TraceError) as err:
        load_trace(f"sacct,path={dump}")
    assert f"{dump}, line 3, field 'AllocTRES'" in str(err.value) and says in str(err.value)


def test_other_sacct_errors(tmp_path):
    dump = tmp_path / "jobs.txt"
    dump.write_text(HEADER + GOOD[0].replace("n[01-02]", "n[02-01]") + "\n")
    with pytest.raises(TraceError, match=r"line 2, field 'NodeList'.*ends before"):
        load_trace(f"sacct,path={dump}")
    dump.write_text(HEADER + GOOD[0].replace("2024-05-01T10:00:05", "yesterday") + "\n")
    with pytest.raises(TraceError, match=r"line 2, field 'Start': not a timestamp"):
        load_trace(f"sacct,path={dump}")
    dump.write_text(HEADER.replace("AllocTRES|", "") + "7|a|x|y|z|COMPLETED|n1\n")
    with pytest.raises(TraceError, match=r"line 1 \(header\): missing column\(s\) 'AllocTRES'"):
        load_trace(f"sacct,path={dump}")


def test_bundled_sample_comes_from_a_real_slurm():
    df = load_trace("sacct-sample")
    assert len(df) >= 8 and (df.gpus > 0).all() and (df.nodes != "").all()
    assert df.name.str.startswith("netlab-").all()  # the advisor's job names


def test_cli_import_sacct_fails_on_bad_tres(tmp_path):
    dump = tmp_path / "jobs.txt"
    dump.write_text(HEADER + GOOD[0].replace("gres/gpu=6", "gres/gpu=6x") + "\n")
    res = CliRunner().invoke(app, ["import", "sacct", str(dump)])
    assert res.exit_code == 2 and "line 2, field 'AllocTRES'" in res.output


# -- the advisor's pieces -------------------------------------------------------------------------------------------


def test_sbatch_argv_is_a_list_with_the_nodes_and_gpus():
    argv = sbatch_argv("netlab-3", ["r0h0", "r0h1"], [4, 4], ["sleep", "2.000"])
    assert argv == ["sbatch", "--parsable", "--job-name=netlab-3", "--nodes=2", "--nodelist=r0h[0-1]",
                    "--gpus-per-node=4", "--ntasks-per-node=1", "--output=/dev/null", "--wrap", "sleep 2.000"]
    assert "--gpus=6" in sbatch_argv("j", ["a", "b"], [4, 2], ["sleep", "1"])
    with pytest.raises(Exception, match="not an allowed name"):
        sbatch_argv("j; rm -rf /", ["a"], [1], ["sleep", "1"])


#: words a job's argv may hold that a shell would split, expand, glob or run
AWKWARD = ["two words", "x;touch pwned", "$(touch pwned2)", "`id`", "'single'", '"double"', "*", "back\\slash", "",
           "new\nline", "&& exit 3 ||"]


def test_sbatch_wrap_gives_the_job_every_word_as_one_argument(tmp_path):
    import json
    import subprocess
    import sys

    command = [sys.executable, "-c", "import json, sys; print(json.dumps(sys.argv[1:]))", *AWKWARD]
    argv = sbatch_argv("j", ["a"], [1], command)
    wrap = argv[argv.index("--wrap") + 1]
    # sbatch --wrap writes "#!/bin/sh" and the wrap into the batch script: run it the same way here
    script = tmp_path / "batch.sh"
    script.write_text(f"#!/bin/sh\n{wrap}\n")
    out = subprocess.run(["/bin/sh", str(script)], capture_output=True, text=True, cwd=tmp_path, timeout=60)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout) == AWKWARD
    assert sorted(p.name for p in tmp_path.iterdir()) == ["batch.sh"]  # nothing in the words ran


@pytest.mark.parametrize("gres, n", [("gpu:4", 4), ("gpu:a100:4(S:0)", 4), ("gpu:2(IDX:0-1)", 2), ("", 0),
                                     ("gpu:0(IDX:N/A)", 0), ("gpu:a:2,gpu:b:1", 3)])
def test_gres_gpus(gres, n):
    assert gres_gpus(gres) == n


class FakeSlurm:
    """sinfo, squeue and sbatch of a 4-node, 4-GPU-per-node Slurm whose jobs are ``sleep``s on the real clock.

    sbatch refuses a job asking more GPUs on a node than are free there (a wrong plan fails the test); squeue
    lists a finished job as COMPLETED, as Slurm does for a while after it ends.
    """

    def __init__(self, topo):
        self.gpus = {h.name: int(h.gpus) for h in topo.hosts}
        self.jobs: dict[str, dict] = {}

    def _used(self) -> dict:
        import time

        used = dict.fromkeys(self.gpus, 0)
        for j in self.jobs.values():
            if time.monotonic() < j["end"]:
                for n, g in zip(j["nodes"], j["split"]):
                    used[n] += g
        return used

    def run(self, argv, timeout_s=60.0, check=True):
        import json
        import shlex
        import subprocess
        import time

        from netlab.hostlist import compress, expand

        out = ""
        if argv[0] == "sinfo":
            used = self._used()
            out = json.dumps({"nodes": [{"name": n, "state": "mixed" if used[n] else "idle", "gres": f"gpu:{g}",
                                         "gres_used": f"gpu:{used[n]}(IDX:N/A)"} for n, g in self.gpus.items()]})
        elif argv[0] == "squeue":
            out = json.dumps({"jobs": [{"job_id": int(i), "name": j["name"], "nodes": compress(j["nodes"]),
                                        "job_state": "RUNNING" if time.monotonic() < j["end"] else "COMPLETED",
                                        "gres_detail": [f"gpu:{g}" for g in j["split"]]}
                                       for i, j in self.jobs.items()]})
        elif argv[0] == "sbatch":
            opt = dict(a[2:].split("=", 1) for a in argv[1:] if a.startswith("--") and "=" in a)
            nodes = expand(opt["nodelist"])
            split = ([int(opt["gpus-per-node"])] * len(nodes) if "gpus-per-node" in opt
                     else [int(opt["gpus"]) // len(nodes)] * len(nodes))
            used = self._used()
            assert all(used[n] + g <= self.gpus[n] for n, g in zip(nodes, split)), (argv, used)
            command = shlex.split(argv[argv.index("--wrap") + 1])
            assert command[0] == "sleep"
            job_id = str(1000 + len(self.jobs))
            self.jobs[job_id] = dict(name=opt["job-name"], nodes=nodes, split=split,
                                     end=time.monotonic() + float(command[1]))
            out = job_id
        return subprocess.CompletedProcess(argv, 0, out, "")


def test_replay_runs_every_job_through_the_pass_and_waits_for_the_last_to_end():
    """Through a fake Slurm (no root): every job is submitted where free GPUs were, fifo keeps submit order, and
    the replay returns once squeue shows the last one ended (it read squeue only while jobs waited once)."""
    from netlab.integrations.slurm_advisor import replay, sleep_trace

    topo = load_topology("leafspine,racks=2,hosts_per_rack=2,gpus_per_host=4,oversub=4")
    slurm = FakeSlurm(topo)
    trace = sleep_trace(jobs=10, seed=1, gap_s=0.5)
    plans = replay(slurm, topo, trace, placement="topo-bestfit", ordering="fifo", time_scale=0.02, poll_s=0.005,
                   timeout_s=120)
    assert [p.job.job_id for p in plans] == list(range(10))  # strict fifo: submitted in submit order
    for p in plans:
        assert sum(p.gpus) == p.job.gpus
        assert all(p.free_before[h] >= g for h, g in zip(p.hosts, p.gpus))  # chosen from GPUs that were free
        assert p.state == "COMPLETED"
    assert sorted(p.slurm_id for p in plans) == sorted(slurm.jobs)
