"""3-tier Clos and rail-optimised fabrics: counts, capacities and paths worked out by hand, sizes up to 131,072 GPUs,
and bad parameters refused with the field named."""

import numpy as np
import pytest

from netlab.network.demand import build_demand
from netlab.topology import TopologyError, load_topology
from netlab.workload.zoo import ModelZoo

# 64 GPUs in hosts of 4: 16 hosts, 4 per leaf (4 leaves), 2 leaves per pod (2 pods), 2 spines per pod, 2 cores in
# each of the 2 core planes; 100 Gbit/s hosts, 2:1 at the leaves and 2:1 at the spines.
CLOS = "clos3,gpus=64,gpus_per_host=4,hosts_per_leaf=4,leaves_per_pod=2,spines_per_pod=2,cores_per_plane=2," \
       "host_gbps=100,nics=1,oversub=2,spine_oversub=2"
# 32 GPUs in hosts of 4 (4 rails): 8 hosts, 2 per SU (4 SUs), 2 SUs per pod (2 pods), 2 spines per pod, 1 core per
# plane
RAIL = "rail,gpus=32,gpus_per_host=4,hosts_per_su=2,sus_per_pod=2,spines_per_pod=2,cores_per_plane=1,host_gbps=100"


def capacity(topo, a, b):
    return topo.link_capacity_gbps[topo.link_id[(a, b)]]


def test_clos3_by_hand():
    t = load_topology(CLOS)
    assert (t.n_hosts, t.total_gpus, t.n_racks, len(t.pod_names)) == (16, 64, 4, 2)
    tiers = list(t.switches.values())
    assert (tiers.count("tor"), tiers.count("spine"), tiers.count("core")) == (4, 4, 4)
    assert t.n_links == 2 * (16 + 4 * 2 + 4 * 2)
    assert capacity(t, "p0l0h0", "p0l0") == 100
    assert capacity(t, "p0l0", "p0s0") == 4 * 100 / 2 / 2  # 4 hosts' 400 Gbit/s, 2:1, over 2 spines
    assert capacity(t, "p0s1", "core1-0") == 2 * 100 / 2 / 2  # 2 leaves' 100 each, 2:1, over 2 cores
    assert ("p0s0", "core1-0") not in t.link_id  # spine s reaches only core plane s
    same_leaf, same_pod, other_pod = t.paths(0, 1), t.paths(0, 4), t.paths(0, 8)
    assert [len(same_leaf), len(same_pod), len(other_pod)] == [1, 2, 4]  # 1; 2 spines; 2 spines x 2 cores
    assert {len(p) for p in other_pod} == {6}


def test_rail_by_hand():
    t = load_topology(RAIL)
    assert (t.n_hosts, t.n_racks, len(t.pod_names)) == (8, 4, 2)
    host = t.hosts[0].name
    rails = sorted(t.graph.neighbors(host))
    assert rails == ["p0su0r0", "p0su0r1", "p0su0r2", "p0su0r3"]  # one NIC per GPU, each on its own rail leaf
    assert t.host_nic_gbps[0] == 4 * 100
    assert capacity(t, "p0su0r2", "p0s1") == 2 * 100 / 2  # 2 hosts' rail-2 NICs over 2 spines
    assert [len(t.paths(0, 1)), len(t.paths(0, 2)), len(t.paths(0, 4))] == [4, 4 * 2 * 4, 4 * 2 * 1 * 4]
    assert {len(p) for p in t.paths(0, 1)} == {2}  # same SU: one rail switch


def test_rail_spreads_a_flow_over_the_rails():
    t = load_topology(RAIL)
    demand, _ = build_demand(t, ModelZoo.default()["vgg16"], "ring", 0, (0, 1), (4, 4))
    up = [t.link_id[(t.hosts[0].name, f"p0su0r{k}")] for k in range(4)]
    w = dict(zip(demand.links.tolist(), demand.weights.tolist()))
    assert [w[u] for u in up] == [0.25] * 4  # the ring's one flow 0 -> 1, a quarter on each rail
    assert demand.iso_rate_gbps == pytest.approx(400.0)


@pytest.mark.parametrize("spec, hosts", [("clos3,gpus=16384", 2048), ("rail,gpus=16384", 2048),
                                         ("clos3,gpus=131072", 16384), ("rail,gpus=131072", 16384)])
def test_todays_sizes_build(spec, hosts):
    t = load_topology(spec)
    assert t.n_hosts == hosts and t.total_gpus == hosts * 8
    assert np.all(t.host_nic_gbps == 8 * 400)


@pytest.mark.parametrize("spec, message", [
    ("clos3,gpus=100", "field 'gpus' (100) must be a multiple of gpus_per_host (8)"),
    ("rail,gpus=64,rails=4", "unknown parameter(s) 'rails'"),
    ("clos3,oversub=0", "oversub"),
    ("rail,gpus=99999999", "gpus"),
])
def test_bad_parameters_name_the_field(spec, message):
    with pytest.raises(TopologyError) as err:
        load_topology(spec)
    assert message in str(err.value) and spec in str(err.value)
