"""Cross-validation against Tiresias' simulator: every figure of shared/reference/cross-validation.md.

Four Gavel VC traces x three schedules (strict ``fifo``, ``fjf``, ``dlas-gpu`` = ``tiresias``) on
the ideal network with no restart cost and any-free-GPUs placement (:mod:`netlab.crossval`).
Targets: average JCT, p99 JCT and makespan within 0.1% (fifo, fjf) or 2% (dlas-gpu) of the
reference, ``tiresias`` with the reference's demotion timing (``demotion="reference"``). A figure
outside its target needs a measured cause in ``netlab.crossval.RESIDUALS`` (none today) and is
checked against its documented bound instead.
"""

from __future__ import annotations

import json
import math
import re
from functools import lru_cache
from pathlib import Path

import pytest

from netlab import crossval
from netlab.crossval import METRICS, REFERENCE, RESIDUALS, TARGETS
from netlab.workload.job import isolated_iter_s
from netlab.workload.zoo import ModelZoo

ZOO = ModelZoo.default()

SHARED = Path(__file__).resolve().parents[1].parent / "shared"
TRACES = SHARED / "traces"
FILE = SHARED / "reference" / "cross-validation.md"
CELLS = [(r.vc, r.schedule) for r in REFERENCE.itertuples()]
# Preemption counts have no target: who is displaced when depends on ties the two break differently.
# Its counts on these traces are within this of netlab's.
PREEMPTIONS_REL = 0.25


@pytest.fixture(scope="module")
def trace_dir():
    if not (TRACES / "gavel-philly-vc" / "seed0").is_dir():
        pytest.skip(f"shared traces not found at {TRACES} (they live beside the repository)")
    return TRACES


@lru_cache(maxsize=None)
def _jobs(vc: str, trace_dir: Path):
    return crossval.load_jobs(vc, trace_dir)


def test_reference_figures_are_the_files():
    if not FILE.exists():
        pytest.skip(f"{FILE} not found (it lives beside the repository)")
    rows = [line.split("|")[1:-1] for line in FILE.read_text().splitlines()
            if re.match(r"\|\s*[0-9a-f]{6}\s*\|", line)]
    assert len(rows) == len(REFERENCE) == 12
    for cells, ref in zip(rows, REFERENCE.itertuples()):
        vc, gpus, schedule, *nums = (c.strip().replace(",", "") for c in cells)
        assert (vc, int(gpus), schedule) == (ref.vc, ref.gpus, ref.schedule)
        assert [float(x) for x in nums] == [ref.jobs, ref.avg_jct_s, ref.p99_jct_s, ref.makespan_s, ref.preemptions]


@pytest.mark.parametrize("vc", list(crossval.TRACES))
def test_gavel_loader_follows_the_input_rules(trace_dir, vc):
    # The rules of cross-validation.md, computed here from the raw files.
    table = json.loads((trace_dir / "gavel-philly-vc" / "simulation_throughputs.json").read_text())["v100"]
    rates = {}
    for key, value in table.items():
        job_type, scale = key.strip("()").rsplit(",", 1)
        rates[(job_type.strip().strip("'"), int(scale))] = value["null"]
    want = []
    for line in (trace_dir / "gavel-philly-vc" / "seed0" / f"{vc}.trace").read_text().splitlines():
        job_type, _, _, _, steps, arrival, scale = line.split("\t")
        gpus = int(scale)
        tabled = max(s for (t, s) in rates if t == job_type and s <= gpus)
        want.append((math.floor(float(arrival)), gpus, float(steps) / rates[(job_type, tabled)]))
    want.sort(key=lambda w: w[0])  # stable: file order on ties, as the loader
    topo, jobs = _jobs(vc, trace_dir)
    assert topo.total_gpus == crossval.TRACES[vc] and len(jobs) == len(want)
    assert [(j.submit_s, j.gpus) for j in jobs] == [(float(w[0]), w[1]) for w in want]
    # what a job runs for alone on the ideal network: its iterations at the isolated iteration time
    durations = [j.iterations * isolated_iter_s(ZOO[j.model], j.pattern, j.gpus, topo) for j in jobs]
    assert durations == pytest.approx([w[2] for w in want], rel=1e-9)


@pytest.mark.parametrize("vc, schedule", CELLS)
def test_reference_cell(trace_dir, vc, schedule):
    res = crossval.run_cell(vc, schedule, jobs=_jobs(vc, trace_dir))
    got = crossval.figures(res)
    row = crossval.compare(vc, schedule, got)
    assert got["finished"] == got["jobs"] == row["reference_jobs"]
    assert res.config["backfill"] is (schedule != "fifo")
    for m in METRICS:
        rel = row[f"rel_{m}"]
        bound, why = RESIDUALS.get((vc, schedule, m), (TARGETS[schedule], "target"))
        assert abs(rel) <= bound, (f"{vc} {schedule} {m}: netlab {got[m]:,.1f} vs reference "
                                   f"{row[f'reference_{m}']:,.1f} ({rel:+.3%}, bound {bound:.1%}: {why})")
        if bound > TARGETS[schedule]:  # a documented residual: it really is outside the target
            assert abs(rel) > TARGETS[schedule], f"{vc} {schedule} {m} is within target now: drop its RESIDUALS entry"
    if schedule == "dlas-gpu":
        assert abs(row["rel_preemptions"]) <= PREEMPTIONS_REL, row
    else:
        assert got["preemptions"] == 0


def test_netlab_default_demotes_at_the_crossing_and_stays_near_the_reference(trace_dir):
    # netlab's default (exact demotion) is the documented deviation: on 0e4a51 its p99 JCT is +6.6% off
    # the reference's (the reference demotes late); everything else stays within the dlas-gpu target.
    from netlab.policies.base import ORDERING
    from netlab.sim import SimConfig, Simulator

    topo, jobs = _jobs("0e4a51", trace_dir)
    cfg = SimConfig(network="ideal", checkpoint_s=0.0, restore_s=0.0)
    res = Simulator(topo, jobs, ORDERING.create("tiresias"), crossval.PLACEMENT, None, cfg).run()
    row = crossval.compare("0e4a51", "dlas-gpu", crossval.figures(res))
    assert abs(row["rel_avg_jct_s"]) <= 0.02 and abs(row["rel_makespan_s"]) <= 0.02
    assert 0.02 < row["rel_p99_jct_s"] <= 0.07


def test_reference_demotion_timing_by_hand():
    # An 8-GPU job that started at 0 with nothing run: the reference looks again floor((3250 - 0) / 8) = 406 s
    # later (exact crossing: 406.25 s); at 406 s it has run 406 wall seconds (3,248 GPU-s, still queue 0) and
    # looks again floor((3250 - 406) / 8) = 355 s later, at 761 s, where netlab's default demotes at 406.25 s.
    from types import SimpleNamespace

    from netlab.policies.base import ORDERING

    ref, exact = ORDERING.create("tiresias", demotion="reference"), ORDERING.create("tiresias")
    job = SimpleNamespace(gpus=8, status="running", extra={}, attained_at=lambda now: 8.0 * now)
    assert ref.dynamic_keys and not exact.dynamic_keys
    assert ref.next_key_change(job, 0.0) == 406.0 and exact.next_key_change(job, 0.0) == 406.25
    assert ref.queue(job, 406.0) == 0 and ref.next_key_change(job, 406.0) == 761.0
    assert ref.queue(job, 761.0) == 1
    with pytest.raises(ValueError, match="demotion must be one of"):
        ORDERING.create("tiresias", demotion="late")
