"""LLM jobs (TP/PP/DP): traffic per dimension checked against numbers worked out by hand, where it travels,
its link demands, the zoo rows, the synthetic-trace option and TP-aware placement."""

from importlib import resources

import numpy as np
import pandas as pd
import pytest

from netlab.network.demand import build_demand
from netlab.policies import PLACEMENT
from netlab.sched import ClusterView, JobState, Placement
from netlab.policies.base import PlacementPolicy
from netlab.sim.simulator import SimConfig, Simulator
from netlab.topology import load_topology
from netlab.traces import load_trace, poisson_trace
from netlab.workload import llm
from netlab.workload.job import Job, jobs_from_frame
from netlab.workload.patterns import PATTERNS
from netlab.workload.traffic import placement_traffic
from netlab.workload.zoo import JobModel, ModelZoo

# A small TP2/PP2/DP2 job with round numbers: 4 layers, hidden 1024, sequence 1024, micro-batch 1, 4 micro-batches,
# 400 M parameters, 2 bytes per element (8 GPUs).
SHAPE = llm.LlmShape(layers=4, hidden=1024, seq_len=1024, micro_batch=1, micro_batches=4, tp=2, pp=2,
                     bytes_per_elem=2)
PARAMS = 400e6
MODEL = JobModel("toy-llm", compute_s=1.0, grad_bytes=PARAMS * 2, params_m=400.0, llm=SHAPE)
ZOO = ModelZoo.default().with_model(MODEL)

# By hand. One micro-batch's activation: b s h e = 1 x 1024 x 1024 x 2 = 2,097,152 bytes.
# TP: 4 all-reduces per layer (2 forward, 2 backward), 2 layers per stage (4 / pp), 4 micro-batches, a ring
#     all-reduce over 2 ranks sends 2 (2-1)/2 = 1 x the size per rank: 4 x 2 x 4 x 1 x 2,097,152 = 67,108,864.
TP_PER_GPU = 67_108_864
# PP: per micro-batch the activation forward and its gradient back, split over the 2 TP ranks (scatter/gather):
#     4 micro-batches x 2,097,152 / 2 = 4,194,304 bytes per peer and direction.
PP_PER_PEER = 4_194_304
# DP: gradient shard of 400e6 / (2 x 2) = 100e6 parameters x 2 bytes = 200e6 bytes; ring over 2 replicas:
#     2 (2-1)/2 x 200e6 = 200e6 bytes per GPU.
DP_PER_GPU = 200_000_000


def plan(gpus_per_host):
    return PATTERNS.get("3d")().plan_for(tuple(gpus_per_host), MODEL)


def flows_bytes(p):
    """{(src, dst): bytes} of a plan."""
    w = p.flow_weights or (1.0,) * len(p.flows)
    return {f: pytest.approx(p.flow_bytes * x) for f, x in zip(p.flows, w)}


def test_per_gpu_bytes_match_the_hand_computation():
    g = llm.per_gpu_bytes(SHAPE, PARAMS, dp=2)
    assert g == {"tp": TP_PER_GPU, "pp": PP_PER_PEER, "dp": DP_PER_GPU}
    total = llm.job_bytes(SHAPE, PARAMS, dp=2)
    # 8 GPUs; PP: 1 boundary x 2 directions x 2 replicas x 2 TP ranks x one peer's bytes.
    assert total == {"tp": 8 * TP_PER_GPU, "pp": 8 * PP_PER_PEER, "dp": 8 * DP_PER_GPU}


def test_one_host_keeps_everything_on_nvlink():
    p = plan((8,))
    assert p.flows == ()
    # the busiest GPU: its TP ring hop, its DP ring hop and one pipeline direction (stage 0 sends forward only)
    assert p.serial_intra_bytes == TP_PER_GPU + DP_PER_GPU + PP_PER_PEER
    tr = llm.traffic(SHAPE, PARAMS, (8,))
    assert tr.network_bytes == {"tp": 0.0, "pp": 0.0, "dp": 0.0}
    assert tr.nvlink_bytes == {"tp": 8 * TP_PER_GPU, "pp": 8 * PP_PER_PEER, "dp": 8 * DP_PER_GPU}


def test_a_stage_per_host_sends_only_pipeline_traffic():
    # 4 GPUs per host: ranks 0-3 (stage 0: TP ranks x DP replicas) on host 0, ranks 4-7 (stage 1) on host 1
    p = plan((4, 4))
    assert flows_bytes(p) == {(0, 1): 4 * PP_PER_PEER, (1, 0): 4 * PP_PER_PEER}
    assert p.serial_intra_bytes == TP_PER_GPU + DP_PER_GPU
    tr = llm.traffic(SHAPE, PARAMS, (4, 4))
    assert tr.network_bytes == {"tp": 0.0, "pp": 8 * PP_PER_PEER, "dp": 0.0}


def test_a_tp_group_per_host_sends_dp_and_pp_across_hosts():
    # host 0: replica 0 of stage 0; host 1: replica 1 of stage 0; host 2, 3: the same for stage 1
    p = plan((2, 2, 2, 2))
    assert flows_bytes(p) == {
        (0, 1): 2 * DP_PER_GPU, (1, 0): 2 * DP_PER_GPU, (2, 3): 2 * DP_PER_GPU, (3, 2): 2 * DP_PER_GPU,
        (0, 2): 2 * PP_PER_PEER, (2, 0): 2 * PP_PER_PEER, (1, 3): 2 * PP_PER_PEER, (3, 1): 2 * PP_PER_PEER,
    }
    assert p.serial_intra_bytes == TP_PER_GPU  # TP stays on NVLink
    assert p.flow_bytes == 2 * DP_PER_GPU


def test_a_split_tp_group_puts_tp_on_the_network():
    p = plan((1,) * 8)
    tr = llm.traffic(SHAPE, PARAMS, (1,) * 8)
    assert tr.network_bytes == {"tp": 8 * TP_PER_GPU, "pp": 8 * PP_PER_PEER, "dp": 8 * DP_PER_GPU}
    assert p.serial_intra_bytes == 0.0
    assert flows_bytes(p)[(0, 1)] == TP_PER_GPU  # rank 0 -> rank 1 is a TP ring hop


def test_dp_must_divide():
    with pytest.raises(ValueError, match="multiple of 4 GPUs"):
        plan((6,))


def test_weighted_flows_load_links_in_proportion_to_their_bytes():
    topo = load_topology("leafspine,racks=2,hosts_per_rack=2,gpus_per_host=2,host_gbps=100")
    demand, intra_s = build_demand(topo, MODEL, "3d", 7, (0, 1, 2, 3), (2, 2, 2, 2))
    up0 = topo.host_uplink(0)
    w = dict(zip(demand.links.tolist(), demand.weights.tolist()))
    # host 0 sends its DP hop to host 1 (the largest flow: weight 1) and its PP hop to host 2
    assert w[up0] == pytest.approx(1.0 + PP_PER_PEER / DP_PER_GPU)
    assert demand.flow_bytes == 2 * DP_PER_GPU
    assert intra_s == pytest.approx(TP_PER_GPU * 8 / 1200e9)
    # alone, host 0's NIC (100 Gbit/s) carries 2 x 200e6 + 2 x 4.19e6 bytes: the iteration's network time
    assert demand.net_s(demand.iso_rate_gbps) == pytest.approx((2 * DP_PER_GPU + 2 * PP_PER_PEER) * 8 / 100e9)


def test_zoo_llm_rows_cite_sources_and_their_compute_time_follows_the_formula():
    zoo = ModelZoo.default()
    llms = [n for n in zoo.names() if zoo[n].llm is not None]
    assert {"gpt3-175b", "llama2-70b", "llama3-70b", "llama3-8b"} <= set(llms)
    with resources.files("netlab.data").joinpath("zoo.csv").open() as fh:
        csv = pd.read_csv(fh).set_index("model")
    for name in llms:
        m = zoo[name]
        assert "NeMo-Framework-Launcher" in csv.loc[name, "llm_source"]
        assert m.compute_s == pytest.approx(llm.compute_s(m.llm, m.params_m * 1e6), rel=1e-4)
        assert m.grad_bytes == pytest.approx(m.params_m * 1e6 * m.llm.bytes_per_elem)
    g = zoo["gpt3-175b"].llm
    assert (g.tp, g.pp, g.published_dp, g.layers, g.hidden, g.seq_len) == (4, 8, 32, 96, 12288, 2048)
    # 6 x 175e9 x (1 x 64 x 2048) / 32 FLOPs at 502e15 / 3072 FLOP/s
    assert zoo["gpt3-175b"].compute_s == pytest.approx(6 * 175e9 * 64 * 2048 / 32 / (502e15 / 3072), rel=1e-4)
    # the existing rows are unchanged by the new columns
    assert zoo["vgg16"].llm is None and zoo["vgg16"].grad_bytes == 553e6


def test_variant_redoes_compute_time_for_another_split():
    m = ModelZoo.default()["gpt3-175b"]
    v = llm.variant(m, tp=8, pp=8)
    assert v.name == "gpt3-175b-tp8pp8m64" and v.llm.tp == 8
    assert v.compute_s == pytest.approx(m.compute_s * 32 / 64, rel=1e-3)


def test_synthetic_llm_option_assigns_published_configurations():
    df = load_trace("synthetic,jobs=400,load=0.9,cluster_gpus=4096,llm=0.25", seed=2)
    zoo = ModelZoo.default()
    big = df[df.pattern == "3d"]
    assert 60 < len(big) < 140  # about a quarter
    for row in big.itertuples():
        shape = zoo[row.model].llm
        dp = row.gpus // shape.model_parallel
        assert row.gpus % shape.model_parallel == 0 and dp & (dp - 1) == 0 and dp <= shape.published_dp
    # the other rows are what the trace would be without LLM jobs, arrivals slowed so the LLM jobs' GPUs fit the load
    plain = poisson_trace(jobs=400, load=0.9, cluster_gpus=4096, seed=2)
    rest = df.pattern != "3d"
    others = [c for c in df.columns if c != "submit_s"]
    pd.testing.assert_frame_equal(df.loc[rest, others], plain.loc[rest, others])
    slower = plain.attrs["rate_per_h"] / df.attrs["rate_per_h"]
    assert slower > 1 and np.allclose(df.submit_s, plain.submit_s * slower)
    jobs = jobs_from_frame(df, load_topology("leafspine,racks=16,hosts_per_rack=32,gpus_per_host=8"))
    assert {j.pattern for j in jobs} == {"ring", "3d"}


def test_synthetic_llm_option_refuses_what_cannot_fit():
    from netlab.traces import TraceError

    with pytest.raises(TraceError, match="llm_models.*not LLM zoo models"):
        load_trace("synthetic,jobs=10,llm=0.5,llm_models=vgg16")
    with pytest.raises(TraceError, match="fits cluster_gpus=8"):
        load_trace("synthetic,jobs=10,llm=0.5,llm_models=gpt3-175b,cluster_gpus=8")


def _state(gpus, model="toy-llm", pattern="3d", job_id=1):
    return JobState(Job(job_id, 0.0, gpus, model, 10.0, pattern=pattern), 1.0)


def test_tp_aware_keeps_tp_groups_whole_where_consolidated_splits_them():
    topo = load_topology("leafspine,racks=2,hosts_per_rack=4,gpus_per_host=4")
    free = np.array([3, 3, 2, 2, 4, 0, 0, 0])  # 14 free; whole TP pairs: 2 + 2 + 2 + 2 + 4 = 12
    view = ClusterView(topo, free, {}, 0.0, zoo=ZOO)
    js = _state(8)
    cons = PLACEMENT.create("consolidated").place(js, view)
    assert any(g % 2 for g in cons.gpus)  # consolidated takes 3 + 3 + 2: a TP pair across hosts
    p = PLACEMENT.create("tp-aware").place(js, view)
    assert p.n_gpus == 8 and all(g % 2 == 0 for g in p.gpus)
    assert 4 in p.hosts  # the wholly free host first (fewest hosts)
    # no whole-pair placement: it must split (fallback) or wait
    tight = np.array([1, 1, 1, 1, 1, 1, 1, 1])
    tview = ClusterView(topo, tight, {}, 0.0, zoo=ZOO)
    assert PLACEMENT.create("tp-aware").place(js, tview).n_gpus == 8
    assert PLACEMENT.create("tp-aware", split="wait").place(js, tview) is None
    # non-LLM jobs: exactly the base policy
    plain = _state(8, model="vgg16", pattern="ring")
    assert PLACEMENT.create("tp-aware").place(plain, view) == cons


class OnePerHost(PlacementPolicy):
    """Every GPU on its own host: each TP pair spans two hosts."""

    name = "one-per-host"

    def place(self, job, view):
        hosts = np.flatnonzero(view.free_gpus > 0)[:job.gpus]
        return Placement(tuple(int(h) for h in hosts), (1,) * len(hosts)) if len(hosts) == job.gpus else None


def test_simulated_llm_job_runs_at_its_hand_computed_speed_and_slower_when_tp_spans_hosts():
    topo = load_topology("leafspine,racks=2,hosts_per_rack=4,gpus_per_host=4,host_gbps=100")
    iters = 20.0

    def run(placement):
        sim = Simulator(topo, [Job(0, 0.0, 8, "toy-llm", iters, pattern="3d")], "fifo", placement, None,
                        SimConfig(network="fair"), zoo=ZOO)
        return sim.run().jobs.iloc[0]

    packed = run("tp-aware")
    assert packed.hosts == 2 and packed.racks == 1
    nic_s = (4 * PP_PER_PEER) * 8 / 100e9  # a stage per host: each host sends 4 PP peers' bytes to the other
    intra_s = (TP_PER_GPU + DP_PER_GPU) * 8 / 1200e9  # TP and DP hops over NVLink
    assert packed.run_s == pytest.approx(iters * (1.0 + nic_s + intra_s), rel=1e-6)
    spread = run(OnePerHost())
    # TP on the NICs: host 0 sends a TP hop, a DP hop and a PP hop, 271 MB, through 100 Gbit/s
    assert spread.run_s >= iters * (1.0 + (TP_PER_GPU + DP_PER_GPU + PP_PER_PEER) * 8 / 100e9) * (1 - 1e-9)


def test_placement_traffic_counts_each_dimension_over_the_run():
    topo = load_topology("leafspine,racks=2,hosts_per_rack=4,gpus_per_host=4,host_gbps=100")
    res = Simulator(topo, [Job(0, 0.0, 8, "toy-llm", 20.0, pattern="3d"), Job(1, 0.0, 4, "vgg16", 5.0)], "fifo",
                    "tp-aware", None, SimConfig(network="fair"), zoo=ZOO).run()
    table = placement_traffic(res.jobs, ZOO)
    assert table.job_id.tolist() == [0]  # LLM jobs only
    row = table.iloc[0]
    assert (row.tp, row.pp, row.dp, row.hosts) == (2, 2, 2, 2)
    # a stage per host: PP on the network, TP and DP on NVLink; 20 iterations
    assert row.pp_network_gb == pytest.approx(20 * 8 * PP_PER_PEER / 1e9)
    assert row.tp_nvlink_gb == pytest.approx(20 * 8 * TP_PER_GPU / 1e9)
    assert row.dp_nvlink_gb == pytest.approx(20 * 8 * DP_PER_GPU / 1e9)
    assert row.tp_network_gb == row.dp_network_gb == row.pp_nvlink_gb == 0.0
