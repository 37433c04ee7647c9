"""Testbed boundaries: names that would become paths or config lines, and inherited ignored signals.

Host names are checked once, when the topology is made (every backend gets it); the testbed checks
again where it names a host's files and writes sshd_config, so a name never acts as a path.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

import pytest
import yaml

from netlab.testbed import NetnsTestbed, TestbedError
from netlab.topology import TopologyError

from .backend_helpers import DUMBBELL, REPO, assert_clean, snapshot
from .conftest import needs_netadmin

PATTERN = "[A-Za-z0-9][A-Za-z0-9_.-]{0,63}"
ISSUE_NAMES = ["../../../../outside/escape", "l0\nPasswordAuthentication yes\nPermitEmptyPasswords yes", "l 0", "l0;x"]


def _dumbbell_with(tmp_path: Path, name: str) -> Path:
    doc = yaml.safe_load(DUMBBELL.read_text())
    if "hosts" not in doc:  # builder form: write the explicit one
        from netlab.topology import load_topology

        doc = load_topology(DUMBBELL).to_dict()
    old = doc["hosts"][0]["name"]
    doc["hosts"][0]["name"] = name
    for link in doc["links"]:
        link["a"], link["b"] = (name if link["a"] == old else link["a"]), (name if link["b"] == old else link["b"])
    path = tmp_path / "topo.yaml"
    path.write_text(yaml.safe_dump(doc))
    return path


@pytest.mark.parametrize("name", ISSUE_NAMES)
def test_testbed_refuses_a_host_name_that_would_be_a_path_or_a_config_line(tmp_path, name):
    path = _dumbbell_with(tmp_path, name)
    with pytest.raises(TopologyError) as err:
        NetnsTestbed(path)
    msg = str(err.value)
    assert f"{path}: hosts[0]: field 'name'" in msg and PATTERN in msg, msg


def test_testbed_refuses_a_workdir_that_would_break_sshd_config_or_pip(tmp_path):
    for bad in (tmp_path / "a b", tmp_path / "a;b", tmp_path / "a#b"):
        with pytest.raises(TestbedError, match="workdir.*must be an absolute path matching"):
            NetnsTestbed(DUMBBELL, workdir=bad)
        assert not bad.exists()


def test_host_files_are_named_from_checked_names_only(tmp_path):
    from netlab.testbed.paths import host_file

    assert host_file(tmp_path, "l0", "_sshd_config") == tmp_path / "l0_sshd_config"
    for bad in ("../../escape", "..", "a/b", "a\nb", ""):
        with pytest.raises(TestbedError, match=re.escape(PATTERN)):
            host_file(tmp_path, bad, "_sshd_config")
    assert list(tmp_path.iterdir()) == []


def test_sshd_config_values_are_single_tokens(tmp_path):
    from netlab.testbed.sshd import write_sshd_config

    cfg = tmp_path / "sshd_config"
    good = tmp_path / "k"
    write_sshd_config(cfg, "10.78.0.1", 22, good, tmp_path / "pid", tmp_path / "auth")
    assert "PasswordAuthentication no" in cfg.read_text()
    cfg.unlink()
    for key in ("host_key", "pid_file", "authorized_keys"):
        args = dict(host_key=good, pid_file=tmp_path / "pid", authorized_keys=tmp_path / "auth")
        args[key] = Path(f"{tmp_path}/x\nPasswordAuthentication yes")
        with pytest.raises(TestbedError, match="is not one plain token"):
            write_sshd_config(cfg, "10.78.0.1", 22, **args)
        assert not cfg.exists()


def test_agent_install_refuses_a_workdir_pip_would_misread():
    from netlab.testbed.base import TestbedHost
    from netlab.testbed.deploy import install_agent

    workdir = str(Path(tempfile.gettempdir()) / "a;b")  # absolute, but with a character pip would misread
    host = TestbedHost("h1", 0, None, "10.0.0.1", "eth0", "10.0.0.1", 22, "root", 0, sys.executable, workdir)
    with pytest.raises(TestbedError, match=re.escape(f"h1: workdir: '{workdir}' is not allowed")):
        install_agent(None, host, Path("netlab_agent-0.1.0-py3-none-any.whl"))  # refused before any SSH


# A child that starts with `sig` ignored (as a script started in the background inherits SIGINT),
# brings a testbed up, and reports whether it is still up after the test has sent it `sig`.
CHILD = textwrap.dedent("""
    import json, os, sys
    from netlab.testbed import NetnsTestbed
    sig = int(sys.argv[2])
    tb = NetnsTestbed(sys.argv[1], ssh=False).up()
    print(json.dumps({"tid": tb.tid, "namespaces": tb.info()["namespaces"], "workdir": str(tb.workdir)}), flush=True)
    sys.stdin.readline()  # the test sends the signal, then a line
    up = tb.info()["up"] and all(os.path.exists(f"/run/netns/{n}") for n in tb.info()["namespaces"])
    print(json.dumps({"still_up": up}), flush=True)
    tb.down()
""")


@needs_netadmin
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_an_inherited_ignored_signal_stays_ignored(sig):
    from netlab.testbed.ledger import netns_inode

    before = snapshot()
    env = dict(os.environ, PYTHONPATH=str(REPO))
    proc = subprocess.Popen([sys.executable, "-c", CHILD, str(DUMBBELL), str(int(sig))], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                            preexec_fn=lambda: signal.signal(sig, signal.SIG_IGN))  # inherited across exec
    try:
        line = proc.stdout.readline()
        assert line, proc.stderr.read()[-2000:]
        state = json.loads(line)
        inodes = [netns_inode(n) for n in state["namespaces"]]
        proc.send_signal(sig)  # our own child, by its Popen
        proc.stdin.write("check\n")
        proc.stdin.flush()
        answer = proc.stdout.readline()
        assert answer, f"child died on an ignored {sig.name}: {proc.stderr.read()[-2000:]}"
        assert json.loads(answer) == {"still_up": True}, f"an ignored {sig.name} tore the testbed down"
        proc.stdin.close()
        assert proc.wait(timeout=60) == 0, proc.stderr.read()[-2000:]
    finally:
        if proc.poll() is None:
            proc.kill()  # its guardian then removes the testbed
            proc.wait()
    assert_clean(before, state["tid"], inodes, [])
    assert not Path(state["workdir"]).exists()


def test_agent_install_puts_a_relative_workdir_in_the_logins_home():
    """A relative workdir is resolved on the host (SFTP's folder at login), and the agent's state goes there."""
    import posixpath

    from netlab.testbed.base import TestbedHost
    from netlab.testbed.deploy import install_agent

    home = posixpath.join(tempfile.gettempdir(), "lab-home")  # the host's home as its SFTP server names it
    made, put, commands = [], [], []

    class FakeSftp:
        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return False

        def normalize(self, path):
            assert path == "."
            return home

        def stat(self, path):
            if not (home == path or home.startswith(path + "/")) and path not in made:
                raise FileNotFoundError(path)

        def mkdir(self, path):
            made.append(path)

        def put(self, local, remote):
            put.append(remote)

    class Out:
        channel = type("Channel", (), {"recv_exit_status": staticmethod(lambda: 0)})()

        def read(self):
            return b""

    class FakeSsh:
        def open_sftp(self):
            return FakeSftp()

        def exec_command(self, cmd, timeout=None):
            commands.append(cmd)
            return None, Out(), Out()

    host = TestbedHost("h1", 0, None, "10.0.0.1", "eth0", "10.0.0.1", 22, "lab", 0, "python3", ".netlab/agent")
    prefix, workdir = install_agent(FakeSsh(), host, Path("netlab_agent-0.1.0-py3-none-any.whl"))
    assert workdir == posixpath.join(home, ".netlab", "agent")
    assert made == [posixpath.join(home, ".netlab"), workdir]
    assert put == [posixpath.join(workdir, "netlab_agent-0.1.0-py3-none-any.whl")]
    assert prefix == ["env", f"PYTHONPATH={workdir}/agent-lib", "python3"]
    assert len(commands) == 1 and f"--target {workdir}/agent-lib" in commands[0]
