"""Gradient compression as a job attribute: bytes and compute per step, by hand."""

from __future__ import annotations

import pytest

from netlab.errors import InputError
from netlab.sim import SimConfig, Simulator
from netlab.topology import load_topology
from netlab.workload.compression import COMPRESSIONS, Compression, compressed_model, with_compression
from netlab.workload.job import Job
from netlab.workload.zoo import JobModel, ModelZoo

TOPO = load_topology("leafspine,racks=2,hosts_per_rack=2,gpus_per_host=1,oversub=2,spines=1")
ZOO = ModelZoo({"m": JobModel("m", 1.0, 6.25e9)})


def test_presets_carry_their_byte_ratios():
    assert COMPRESSIONS.create("powersgd-r2").byte_ratio == pytest.approx(1 / 136)
    assert COMPRESSIONS.create("qsgd-8bit").byte_ratio == pytest.approx(0.25 + 1 / 128)  # 8 of 32 bits + norms
    assert COMPRESSIONS.create("topk-1pct").byte_ratio == pytest.approx(0.02)  # 1% of values, each with an index


def test_a_compressed_model_sends_fewer_bytes_and_computes_longer():
    m = compressed_model(ZOO["m"], Compression("half", 0.5, 0.1))
    assert (m.name, m.grad_bytes, m.compute_s) == ("m+half", pytest.approx(3.125e9), pytest.approx(1.1))


def test_a_compressed_job_iterates_at_the_compressed_speed():
    # Two one-GPU hosts in two racks, 100 Gbit/s links: 6.25e9 bytes = 50 Gbit, 0.5 s alone; compute 1 s.
    # Compressed to half with 10% overhead: 1.1 + 0.25 = 1.35 s an iteration, 10 iterations. The one-GPU job
    # is left alone (nothing to all-reduce): 10 x 1 s.
    jobs = [Job(0, 0.0, 2, "m", 10.0), Job(1, 0.0, 1, "m", 10.0)]
    cjobs, zoo = with_compression(jobs, ZOO, Compression("half", 0.5, 0.1))
    assert [j.model for j in cjobs] == ["m+half", "m"]
    res = Simulator(TOPO, cjobs, "fifo", "consolidated", None, SimConfig(network="fair"), zoo=zoo).run()
    assert res.jobs.sort_values("job_id").jct_s.tolist() == pytest.approx([13.5, 10.0])
    base = Simulator(TOPO, jobs, "fifo", "consolidated", None, SimConfig(network="fair"), zoo=ZOO).run()
    assert base.jobs.sort_values("job_id").jct_s.tolist()[0] == pytest.approx(15.0)


def test_bad_compressions_are_refused():
    with pytest.raises(InputError, match="byte_ratio"):
        Compression("x", 1.5, 0.0)
    with pytest.raises(InputError, match="overhead"):
        Compression("x", 0.5, -0.1)
    jobs, zoo = with_compression([Job(0, 0.0, 2, "m", 1.0)], ZOO, "powersgd-r2")
    with pytest.raises(InputError, match="already compressed"):
        with_compression(jobs, zoo, "powersgd-r2")


def test_the_run_option_compresses_the_multi_gpu_jobs():
    # As above, through the run's option: powersgd-r2 sends 1/136 of the bytes (0.5 s alone -> 0.5/136 s) for 5%
    # more compute (1 s -> 1.05 s): 1.05 + 0.5/136 = 1.053676 s an iteration, 10 of them; the one-GPU job 10 s.
    import pandas as pd

    from netlab.errors import UnknownNameError
    from netlab.run import run_one

    frame = pd.DataFrame(dict(job_id=["a", "b"], submit_s=[0.0, 0.0], gpus=[2, 1], model=["m", "m"],
                              iterations=[10.0, 10.0], duration_s=[15.0, 10.0]))
    params = dict(trace=frame, topology="leafspine,racks=2,hosts_per_rack=2,gpus_per_host=1,oversub=2,spines=1",
                  policy="fifo", placement="consolidated", network="fair")
    res = run_one(params | dict(compression="powersgd-r2"), zoo=ZOO)
    assert res.jobs.sort_values("job_id").jct_s.tolist() == pytest.approx([10 * (1.05 + 0.5 / 136), 10.0])
    assert res.config["compression"] == "powersgd-r2"
    plain = run_one(params, zoo=ZOO)
    assert plain.jobs.sort_values("job_id").jct_s.tolist() == pytest.approx([15.0, 10.0])
    assert "compression" not in plain.config
    with pytest.raises(UnknownNameError, match="compression.*powersgd-r2"):
        run_one(params | dict(compression="zip"), zoo=ZOO)


def test_compression_is_an_optional_sweep_key():
    from netlab.errors import UnknownNameError
    from netlab.sweep.grid import expand

    plain = expand(dict(grid=dict(policy=["fifo"])))
    assert "compression" not in plain[0].params  # grids without it keep their cell ids
    cells = expand(dict(grid=dict(policy=["fifo"], compression=[None, "powersgd-r2"])))
    assert sorted(c.label for c in cells) == ["fifo+default", "fifo+default+powersgd-r2"]
    with pytest.raises(UnknownNameError, match="field 'compression'.*powersgd-r2"):
        expand(dict(grid=dict(policy=["fifo"], compression=["zip"])))
