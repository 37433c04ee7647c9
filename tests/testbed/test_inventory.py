"""The physical-lab inventory: Ansible's YAML shape, typed fields, errors with file, line, host and field."""

import tempfile
from pathlib import Path

import pytest

from netlab.testbed.inventory import InventoryError, PhysicalLab, inventory_topology, load_inventory

EXAMPLE = Path(__file__).resolve().parents[2] / "testbed" / "inventory" / "lab.example.yaml"
TMP = tempfile.gettempdir()  # any absolute directory: the workdirs below are only validated, never made

GOOD = """\
all:
  vars:
    ansible_user: lab
    netlab_python: python3.11
    netlab_nic_gbps: 100
  hosts:
    gpu1:
      ansible_host: 192.168.10.11
      netlab_data_iface: ens1f0
      netlab_data_addr: 10.10.0.11
      netlab_gpus: 8
    gpu2:
      ansible_host: 192.168.10.12
      ansible_port: 2222
      netlab_data_iface: ens1f0
      netlab_data_addr: 10.10.0.12
      netlab_gpus: 8
    gpu3:
      ansible_host: 192.168.10.13
      netlab_data_iface: ens1f0
      netlab_data_addr: 10.10.0.13
      netlab_gpus: 4
  children:
    rack1:
      hosts: {gpu1: {}, gpu2: {}}
    rack2:
      hosts: {gpu3: {}}
"""


def write(tmp_path, text):
    p = tmp_path / "lab.yaml"
    p.write_text(text)
    return p


def test_hosts_take_group_vars_as_defaults(tmp_path):
    records, _ = load_inventory(write(tmp_path, GOOD))
    by = {r["name"]: r for r in records}
    assert by["gpu1"]["ansible_user"] == "lab" and by["gpu1"]["ansible_port"] == 22
    assert by["gpu2"]["ansible_port"] == 2222
    assert by["gpu3"]["netlab_python"] == "python3.11"
    assert [by[n]["rack"] for n in ("gpu1", "gpu2", "gpu3")] == ["rack1", "rack1", "rack2"]


def test_topology_from_racks_is_non_blocking_by_default(tmp_path):
    records, _ = load_inventory(write(tmp_path, GOOD))
    topo = inventory_topology(records)
    assert topo.n_hosts == 3 and topo.total_gpus == 20
    caps = {(a, b): g for a, b, g, _ in topo.cables}
    # rack1 has two 100 Gbit hosts: its uplink defaults to their sum.
    assert caps[("leaf-rack1", "spine")] == 200.0 and caps[("leaf-rack2", "spine")] == 100.0


def test_physical_lab_maps_hosts(tmp_path):
    lab = PhysicalLab(write(tmp_path, GOOD))
    h = lab.host("gpu2")
    assert (h.ssh_addr, h.ssh_port, h.user, h.ifname, h.data_addr, h.gpus) == \
        ("192.168.10.12", 2222, "lab", "ens1f0", "10.10.0.12", 8)
    assert h.netns is None
    with pytest.raises(Exception, match="not shaped by netlab"):
        lab.set_link_rate("gpu1", "leaf-rack1", 100)


@pytest.mark.parametrize("old,new,line,field", [
    ("      netlab_data_addr: 10.10.0.12\n", "      netlab_data_addr: not-an-ip\n", 16, "netlab_data_addr"),
    ("      ansible_port: 2222\n", "      ansible_port: many\n", 14, "ansible_port"),
    ("      netlab_gpus: 4\n", "      netlab_gpus: -1\n", 22, "netlab_gpus"),
])
def test_bad_field_names_file_line_host_and_field(tmp_path, old, new, line, field):
    p = write(tmp_path, GOOD.replace(old, new))
    with pytest.raises(InventoryError) as err:
        load_inventory(p)
    msg = str(err.value)
    assert f"{p}:{line}:" in msg and f"field {field!r}" in msg and "host 'gpu" in msg


def test_missing_required_field_is_named(tmp_path):
    p = write(tmp_path, GOOD.replace("      netlab_data_iface: ens1f0\n      netlab_data_addr: 10.10.0.13\n",
                                     "      netlab_data_addr: 10.10.0.13\n"))
    with pytest.raises(InventoryError, match=r"host 'gpu3', field 'netlab_data_iface': missing"):
        load_inventory(p)


def test_not_an_inventory(tmp_path):
    with pytest.raises(InventoryError, match="'all' group"):
        load_inventory(write(tmp_path, "- just a list\n"))
    with pytest.raises(InventoryError, match="no such file"):
        load_inventory(tmp_path / "absent.yaml")


def test_the_example_inventory_loads():
    lab = PhysicalLab(EXAMPLE)
    assert len(lab.hosts) >= 2
    assert all(h.ifname and h.data_addr for h in lab.hosts)


@pytest.mark.parametrize("old, new, needle", [
    ("    gpu3:\n", "    ../../outside/escape:\n", "host '../../outside/escape', field 'name'"),
    ("    gpu3:\n", "    'gpu3\\nPasswordAuthentication yes':\n", "field 'name'"),
    ("    gpu3:\n", "    gpu 3:\n", "host 'gpu 3', field 'name'"),
    ("    rack2:\n", "    rack 2:\n", "group 'rack 2'"),
    ("    netlab_nic_gbps: 100\n", f"    netlab_nic_gbps: 100\n    netlab_workdir: {TMP}/a;b\n",
     "field 'netlab_workdir': must be an absolute path"),
    ("    netlab_nic_gbps: 100\n", f"    netlab_nic_gbps: 100\n    netlab_workdir: {TMP}/../../etc\n",
     "field 'netlab_workdir'"),
    ("    netlab_python: python3.11\n", "    netlab_python: 'python3 -c x'\n", "field 'netlab_python'"),
    ("      netlab_data_iface: ens1f0\n      netlab_data_addr: 10.10.0.13\n",
     "      netlab_data_iface: ../ens1f0\n      netlab_data_addr: 10.10.0.13\n", "field 'netlab_data_iface'"),
    ("    ansible_user: lab\n", "    ansible_user: 'lab; id'\n", "field 'ansible_user'"),
])
def test_names_and_paths_that_reach_files_or_commands_are_checked(tmp_path, old, new, needle):
    """Host names, rack names, the workdir, the interpreter, the interface and the user: one error each,
    naming the file, line, host and field, with the allowed pattern."""
    assert old in GOOD
    with pytest.raises(InventoryError) as err:
        load_inventory(write(tmp_path, GOOD.replace(old, new, 1)))
    msg = str(err.value)
    assert msg.startswith(f"{tmp_path / 'lab.yaml'}:") and needle in msg and "match" in msg, msg


def test_interpreter_is_a_command_on_the_hosts_path_or_an_absolute_path(tmp_path):
    # the default is found on each host's PATH; an absolute path (a venv's python) still works
    records, _ = load_inventory(write(tmp_path, GOOD.replace("    netlab_python: python3.11\n", "")))
    assert {r["netlab_python"] for r in records} == {"python3"}
    venv_python = str(Path(TMP, "venv", "bin", "python"))
    records, _ = load_inventory(write(tmp_path, GOOD.replace("python3.11", venv_python)))
    assert {r["netlab_python"] for r in records} == {venv_python}
    for bad in ("python3/..", "../python3", "py thon"):
        with pytest.raises(InventoryError, match="field 'netlab_python'"):
            load_inventory(write(tmp_path, GOOD.replace("python3.11", repr(bad))))


def test_workdir_is_relative_to_the_logins_home_or_absolute(tmp_path):
    # the default is a folder in the SSH login's home directory; an absolute folder still works
    records, _ = load_inventory(write(tmp_path, GOOD))
    assert {r["netlab_workdir"] for r in records} == {".netlab"}
    def with_workdir(value):
        return GOOD.replace("    netlab_nic_gbps: 100\n", f"    netlab_nic_gbps: 100\n    netlab_workdir: {value}\n")

    for ok in ("netlab/agent", str(Path(TMP, "netlab"))):
        records, _ = load_inventory(write(tmp_path, with_workdir(ok)))
        assert {r["netlab_workdir"] for r in records} == {ok}
    for bad in ("../outside", "netlab/../..", "a;b", "net lab"):
        with pytest.raises(InventoryError, match="field 'netlab_workdir'"):
            load_inventory(write(tmp_path, with_workdir(repr(bad))))
