"""Topology builders, spec strings, YAML, the Crux host list, ECMP rules, bad input."""

from pathlib import Path

import numpy as np
import pytest

from netlab.topology import TopologyError, load_topology, save_yaml

SHARED = Path(__file__).resolve().parents[1].parent / "shared" / "traces"


def test_leafspine_spec_capacities_and_oversubscription():
    t = load_topology("leafspine,racks=8,hosts_per_rack=4,gpus_per_host=8,host_gbps=100,oversub=4,spines=2")
    assert (t.n_hosts, t.total_gpus, t.n_racks) == (32, 256, 8)
    up = t.link_capacity_gbps[t.link_id[("tor0", "spine0")]]
    assert up == pytest.approx(4 * 100 / 4 / 2)  # 400 Gbit/s down, 4:1, over 2 spines
    assert t.host_nic_gbps.tolist() == [100.0] * 32
    assert set(t.link_tier) == {"host", "tor-spine"}


def test_ecmp_split_spreads_a_flow_over_all_spines():
    t = load_topology("leafspine,racks=2,hosts_per_rack=1,gpus_per_host=1,spines=4")
    links, weights = t.flow_links(0, 1)
    spine_up = [t.link_id[("tor0", f"spine{s}")] for s in range(4)]
    w = dict(zip(links.tolist(), weights.tolist()))
    assert [w[l] for l in spine_up] == [0.25] * 4
    assert w[t.link_id[("r0h0", "tor0")]] == 1.0


def test_ecmp_hash_picks_one_stable_path():
    t = load_topology("leafspine,racks=2,hosts_per_rack=1,gpus_per_host=1,spines=4,ecmp=hash")
    links, weights = t.flow_links(0, 1, key=7)
    assert np.all(weights == 1.0) and len(links) == 4  # host-tor, tor-spine, spine-tor, tor-host
    assert t.flow_links(0, 1, key=7)[0].tolist() == links.tolist()
    chosen = {tuple(t.flow_links(0, 1, key=k)[0].tolist()) for k in range(64)}
    assert len(chosen) == 4  # different flows hash onto every spine


def test_fattree_paths():
    t = load_topology("fattree,k=4,gpus_per_host=1")
    assert (t.n_hosts, t.n_racks, len(t.pod_names)) == (16, 8, 4)
    assert len(t.paths(0, 1)) == 1  # same edge switch
    assert len(t.paths(0, 2)) == 2  # same pod: via either aggregation switch
    assert len(t.paths(0, 15)) == 4  # other pod: (k/2)^2 cores


def test_yaml_round_trip_and_builder_form(tmp_path):
    t = load_topology("leafspine,racks=2,hosts_per_rack=2,gpus_per_host=4,oversub=2")
    save_yaml(t, tmp_path / "t.yaml")
    back = load_topology(tmp_path / "t.yaml")
    assert back.n_hosts == t.n_hosts and np.allclose(back.link_capacity_gbps, t.link_capacity_gbps)
    (tmp_path / "b.yaml").write_text("builder: leafspine\nparams: {racks: 3, hosts_per_rack: 2, oversub: 2}\n")
    assert load_topology(tmp_path / "b.yaml").n_racks == 3


@pytest.mark.parametrize("text,needle", [
    ("hosts:\n  - {name: h1, rack: r}\nlinks: []\n", "hosts[0]: missing field 'gpus'"),
    ("hosts:\n  - {name: h1, gpus: -1, rack: r}\nlinks: []\n", "hosts[0]: field 'gpus' must be >= 0"),
    ("hosts:\n  - {name: h1, gpus: 1, rack: r}\nswitches: [{name: s}]\nlinks:\n  - {a: h1, b: s, gbps: 0}\n",
     "links[0]: field 'gbps' must be > 0"),
    ("hosts:\n  - {name: h1, gpus: 1, rack: r}\nlinks:\n  - {a: h1, b: nowhere, gbps: 10}\n", "unknown node 'nowhere'"),
    ("hosts: [\n", "invalid YAML"),
])
def test_bad_yaml_names_file_and_field(tmp_path, text, needle):
    path = tmp_path / "bad.yaml"
    path.write_text(text)
    with pytest.raises(TopologyError) as err:
        load_topology(path)
    assert "bad.yaml" in str(err.value) and needle in str(err.value)


@pytest.mark.parametrize("spec,needle", [
    ("leafspine,racks=0", "field 'racks' must be >= 1"),
    ("leafspine,bogus=1", "bogus"),
    ("torus,k=4", "unknown topology builder 'torus'"),
    ("fattree,k=3", "even number"),
])
def test_bad_spec_is_clear(spec, needle):
    with pytest.raises(TopologyError) as err:
        load_topology(spec)
    assert needle in str(err.value)


@pytest.mark.skipif(not SHARED.exists(), reason="../shared/traces not present")
def test_crux_topology_from_shared_csv():
    t = load_topology(SHARED / "alibaba-lingjun-crux-topology" / "topo.csv")
    assert t.n_hosts == 847 and t.n_racks == 119  # ToR = (PSW, ASW) pair, per the README
    assert len(t.pod_names) == 3  # P8, P10, P12
    # Hosts in different pods go host-tor-psw-dsw-psw-tor-host.
    a = int(np.flatnonzero(t.host_pod == 0)[0])
    b = int(np.flatnonzero(t.host_pod == 1)[0])
    assert len(t.paths(a, b)[0]) == 6


def test_crux_bad_rows(tmp_path):
    p = tmp_path / "topo.csv"
    p.write_text("ip,DSW,PSW,ASW\nabc,G6,P1,S1\ndef,G6,,S2\n")
    with pytest.raises(TopologyError, match=r"topo.csv: line 3: field 'PSW' is empty"):
        load_topology(p)
    p.write_text("ip,DSW,ASW\nabc,G6,S1\n")
    with pytest.raises(TopologyError, match=r"line 1: missing column\(s\) \['PSW'\]"):
        load_topology(p)


def test_background_traffic_takes_a_share_of_a_tier():
    t = load_topology("leafspine,racks=2,hosts_per_rack=2,gpus_per_host=1,oversub=4,spines=1")
    b = t.with_capacity({"tor-spine": 0.25})
    spine = t.link_tier == "tor-spine"
    assert np.allclose(b.link_capacity_gbps[spine], t.link_capacity_gbps[spine] * 0.25)
    assert np.allclose(b.link_capacity_gbps[~spine], t.link_capacity_gbps[~spine])
    with pytest.raises(TopologyError, match="must be in \\(0, 1\\]"):
        t.with_capacity({"tor-spine": 0.0})


# Host and switch names become file names, sshd_config lines and command arguments on the testbed.
BAD_NAMES = ["../../../../outside/escape", "h1\nPasswordAuthentication yes\nPermitEmptyPasswords yes", "h 1",
             "h;1", "..", ".", "-h", "", "h/1", "x" * 65]


@pytest.mark.parametrize("name", BAD_NAMES)
def test_yaml_host_name_outside_the_pattern_is_refused_naming_file_field_and_pattern(tmp_path, name):
    import yaml

    doc = {"hosts": [{"name": name, "gpus": 1, "rack": "r"}, {"name": "h2", "gpus": 1, "rack": "r"}],
           "switches": [{"name": "s"}], "links": [{"a": name, "b": "s", "gbps": 10}, {"a": "h2", "b": "s", "gbps": 10}]}
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(doc))
    with pytest.raises(TopologyError) as err:
        load_topology(path)
    msg = str(err.value)
    assert "bad.yaml: hosts[0]: field 'name'" in msg and "[A-Za-z0-9][A-Za-z0-9_.-]{0,63}" in msg, msg


@pytest.mark.parametrize("name", ["sw 1", "../sw", "sw\nx"])
def test_yaml_switch_name_outside_the_pattern_is_refused(tmp_path, name):
    import yaml

    doc = {"hosts": [{"name": "h1", "gpus": 1, "rack": "r"}], "switches": [{"name": name}],
           "links": [{"a": "h1", "b": name, "gbps": 10}]}
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(doc))
    with pytest.raises(TopologyError, match=r"bad.yaml: switches\[0\]: field 'name'.*must match"):
        load_topology(path)


def test_every_topology_checks_its_names_not_only_yaml():
    from netlab.topology import Host, Topology

    with pytest.raises(TopologyError, match=r"host 0, field 'name'.*must match"):
        Topology("t", [Host("../../x", 1, "r")], {"s": "tor"}, [("../../x", "s", 10.0, "host")])
    with pytest.raises(TopologyError, match=r"switch, field 'name'.*must match"):
        Topology("t", [Host("h1", 1, "r")], {"s;rm": "tor"}, [("h1", "s;rm", 10.0, "host")])
    # Names the builders make, FQDN-like names and 64 characters pass.
    ok = Topology("t", [Host("gpu1.lab-a_2", 1, "r"), Host("x" * 64, 1, "r")], {"leaf-rack1": "tor"},
                  [("gpu1.lab-a_2", "leaf-rack1", 10.0, "host"), ("x" * 64, "leaf-rack1", 10.0, "host")])
    assert ok.n_hosts == 2


def test_crux_switch_names_from_the_csv_are_checked(tmp_path):
    p = tmp_path / "topo.csv"
    p.write_text("ip,DSW,PSW,ASW\nabc,G6,P1,S1\ndef,G6,P1,S 2\n")
    with pytest.raises(TopologyError, match=r"topo.csv: line 3: field 'ASW': 'S 2' is not an allowed name"):
        load_topology(p)
