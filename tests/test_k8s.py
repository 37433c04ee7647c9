"""Kubernetes exports against the shapes scheduler-plugins' CRDs document.

The schemas below restate, in our words, what the CRDs' openAPIV3Schema requires of the fields netlab
writes (kubernetes-sigs/scheduler-plugins, manifests/networktopology/crd.yaml and
manifests/appgroup/crd.yaml, read 2026-08): required keys, types, integer bounds and the quantity
pattern. additionalProperties is false where the CRD lists every property, so a misspelt key (the
manifests' own example uses costList/originCosts, which the CRD does not have) fails here.
"""

from __future__ import annotations

import jsonschema
import pytest
import yaml

from netlab.integrations.k8s import (APPGROUP_LABEL, REGION, ZONE, app_group, network_topology, node_labels,
                                     quantity_bps, write_k8s, zone_costs)
from netlab.topology import load_topology
from netlab.traces import load_trace

QUANTITY = r"^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$"
STR = {"type": "string"}


def _obj(props: dict, required: list[str]) -> dict:
    return {"type": "object", "properties": props, "required": required, "additionalProperties": False}


COST = _obj({"destination": STR, "networkCost": {"type": "integer", "minimum": 0},
             "bandwidthCapacity": {"type": ["integer", "string"], "pattern": QUANTITY},
             "bandwidthAllocated": {"type": ["integer", "string"], "pattern": QUANTITY}},
            ["destination", "networkCost"])
ORIGIN = _obj({"origin": STR, "costList": {"type": "array", "items": COST}}, ["origin"])
TOPOLOGY_INFO = _obj({"topologyKey": STR, "originList": {"type": "array", "items": ORIGIN}},
                     ["originList", "topologyKey"])
WEIGHT = _obj({"name": STR, "topologyList": {"type": "array", "items": TOPOLOGY_INFO}}, ["name", "topologyList"])
NETWORK_TOPOLOGY = {"type": "object", "required": ["apiVersion", "kind", "metadata", "spec"], "properties": {
    "apiVersion": {"const": "networktopology.diktyo.x-k8s.io/v1alpha1"}, "kind": {"const": "NetworkTopology"},
    "metadata": {"type": "object"},
    "spec": _obj({"configmapName": STR, "weights": {"type": "array", "items": WEIGHT}}, ["configmapName", "weights"])}}

WORKLOAD = _obj({"apiVersion": STR, "kind": STR, "name": STR, "namespace": STR, "selector": STR},
                ["kind", "name", "selector"])
DEPENDENCY = _obj({"workload": WORKLOAD, "maxNetworkCost": {"type": "integer", "minimum": 0, "maximum": 10000},
                   "minBandwidth": {"type": ["integer", "string"], "pattern": QUANTITY}}, ["workload"])
APP_GROUP = {"type": "object", "required": ["apiVersion", "kind", "metadata", "spec"], "properties": {
    "apiVersion": {"const": "appgroup.diktyo.x-k8s.io/v1alpha1"}, "kind": {"const": "AppGroup"},
    "metadata": {"type": "object"},
    "spec": _obj({"numMembers": {"type": "integer", "minimum": 1, "maximum": 2**31 - 1},
                  "topologySortingAlgorithm": STR,
                  "workloads": {"type": "array", "items": _obj({"workload": WORKLOAD, "dependencies": {
                      "type": "array", "items": DEPENDENCY}}, ["workload"])}},
                 ["numMembers", "topologySortingAlgorithm", "workloads"])}}
LABEL_VALUE = {"type": "string", "maxLength": 63, "pattern": r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$"}
NODE = {"type": "object", "required": ["apiVersion", "kind", "metadata"], "properties": {
    "apiVersion": {"const": "v1"}, "kind": {"const": "Node"},
    "metadata": _obj({"name": {"type": "string", "pattern": r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$"},
                      "labels": {"type": "object", "additionalProperties": LABEL_VALUE,
                                 "required": [ZONE, REGION]}}, ["name", "labels"])}}


@pytest.mark.parametrize("spec", ["leafspine,racks=2,hosts_per_rack=2", "fattree,k=4", "dumbbell"])
def test_exports_match_the_crd_shapes(spec, tmp_path):
    topo = load_topology(spec)
    trace = load_trace("synthetic,jobs=5", seed=0)
    paths = write_k8s(topo, tmp_path, trace)
    docs = {p.name: list(yaml.safe_load_all(p.read_text())) for p in paths}
    for d in docs["network-topology.yaml"]:
        jsonschema.validate(d, NETWORK_TOPOLOGY)
    for d in docs["app-groups.yaml"]:
        jsonschema.validate(d, APP_GROUP)
    for d in docs["node-labels.yaml"]:
        jsonschema.validate(d, NODE)
    assert len(docs["node-labels.yaml"]) == topo.n_hosts and len(docs["app-groups.yaml"]) == 5


def test_the_schemas_catch_what_they_should():
    good = network_topology(load_topology("leafspine,racks=2,hosts_per_rack=1"))
    bad = yaml.safe_load(yaml.safe_dump(good).replace("originList", "originCosts"))
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(bad, NETWORK_TOPOLOGY)
    ag = app_group("j", 2, "resnet50")
    ag["spec"]["workloads"][0]["dependencies"][0]["maxNetworkCost"] = 20000
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(ag, APP_GROUP)


def test_costs_by_hand_on_a_fat_tree():
    zones, regions = zone_costs(load_topology("fattree,k=4"), hop_cost=10)
    z = zones.set_index(["origin", "destination"])
    # edge-agg-edge inside a pod: 2 hops; edge-agg-core-agg-edge across pods: 4 hops
    assert z.loc[("p0edge0", "p0edge1")].network_cost == 20 and z.loc[("p0edge0", "p1edge0")].network_cost == 40
    # an edge switch has 2 uplinks of 2 hosts x 100 / 2 = 100 Gbit/s; a pod's 2 aggs have 2 x 2 x 100 to the cores
    assert z.loc[("p0edge0", "p0edge1")].bandwidth_gbps == 200.0
    r = regions.set_index(["origin", "destination"])
    assert len(r) == 12 and r.loc[("pod0", "pod1")].network_cost == 40 and r.loc[("pod0", "pod1")].bandwidth_gbps == 400
    nt = network_topology(load_topology("fattree,k=4"))
    zone_list = nt["spec"]["weights"][0]["topologyList"][1]
    assert zone_list["topologyKey"] == ZONE
    first = zone_list["originList"][0]
    assert first["origin"] == "p0edge0" and first["costList"][0] == {"destination": "p0edge1", "networkCost": 20,
                                                                     "bandwidthCapacity": "200G"}


def test_labels_and_appgroup_by_hand():
    labels = node_labels(load_topology("fattree,k=4"))
    assert labels[0]["metadata"] == {"name": "p0e0h0", "labels": {ZONE: "p0edge0", REGION: "pod0",
                                                                   "netlab/rack": "p0edge0"}}
    ag = app_group("job-7", 3, "resnet50")
    spec = ag["spec"]
    assert spec["numMembers"] == 3 and [w["workload"]["selector"] for w in spec["workloads"]] == [
        "job-7-w0", "job-7-w1", "job-7-w2"]
    deps = [[d["workload"]["name"] for d in w.get("dependencies", [])] for w in spec["workloads"]]
    assert deps == [["job-7-w1"], ["job-7-w2"], []]  # the ring less its closing edge
    assert ag["metadata"]["name"] == "job-7" and APPGROUP_LABEL == "appgroup.diktyo.x-k8s.io"


@pytest.mark.parametrize("gbps, text", [(100, "100G"), (0.5, "500M"), (2.5, "2500M"), (1.3948, "1395M"),
                                        (1000, "1T"), (1e-6, "1k")])
def test_quantity(gbps, text):
    assert quantity_bps(gbps) == text
