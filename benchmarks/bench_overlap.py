"""The zoo's compute/communication overlap, derived from measured step times: writes benchmarks/results/overlap.json.

Why: DDP all-reduces gradient buckets during the backward pass, so part of every iteration's communication
is hidden. How much is a property of the model (how early its gradients are ready, how its backward pass
compares with its all-reduce), measured nowhere in netlab before. The Pollux artifact (OSDI'21,
``../shared/traces/pollux/throughput-profiles``) measured six models on AWS g4dn.12xlarge nodes (4 T4 GPUs
each) on 1-16 hosts at several per-GPU batch sizes: enough to fit netlab's iteration-time rule
(:mod:`netlab.workload.overlap`). Per model, the placements over two or more hosts are split in two by their
sorted position: the overlap is the median fit on the even half (calibration); on the odd half (score) each
placement's communication is fitted with that overlap fixed, and the step times it predicts are compared
with the measured ones, beside the same fit with overlap 0 (every byte exposed, netlab's former rule).

Usage: python benchmarks/bench_overlap.py [--trace-dir DIR]
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).parent.parent))
from netlab.sim.metrics import write_json  # noqa: E402
from netlab.traces.files import find_trace_dir  # noqa: E402
from netlab.workload.overlap import exposed_s, fit_comm, model_overlap, profile_fits  # noqa: E402
from netlab.workload.zoo import ModelZoo  # noqa: E402

#: Pollux profile -> zoo model it stands for (Pollux's ImageNet job trains ResNet-50, its CIFAR-10 job ResNet-18,
#: its BERT job fine-tunes BERT-base; see the zoo's time_source column)
POLLUX_MODELS = {"imagenet": "resnet50", "cifar10": "resnet18", "bert": "bert-base", "yolov3": "yolov3",
                 "deepspeech2": "deepspeech2", "ncf": "ncf"}
OUT = Path(__file__).parent / "results" / "overlap.json"


def _ape(profile, placements, overlap: float) -> np.ndarray:
    """Absolute percentage errors of predicted step times on ``placements`` with ``overlap`` fixed."""
    df = profile.assign(placement=profile.placement.astype(str))
    single = df[df.placement == "1"].groupby("local_bsz").step_time.mean()
    out = []
    for p in placements:
        g = df[(df.placement == p) & df.local_bsz.isin(single.index)]
        compute, step = single[g.local_bsz].to_numpy(), g.step_time.to_numpy()
        comm = fit_comm(compute, step, overlap)
        out.append(np.abs(compute + exposed_s(compute, comm, overlap) - step) / step * 100)
    return np.concatenate(out)


def derive(profile) -> dict:
    fits = profile_fits(profile)
    calib, score = fits.iloc[0::2], fits.iloc[1::2]
    overlap = model_overlap(calib)
    with_o, without = _ape(profile, score.placement, overlap), _ape(profile, score.placement, 0.0)
    return dict(overlap=overlap, placements=len(fits), calibration_placements=len(calib),
                overlap_all_median=round(float(fits.overlap.median()), 3),
                overlap_all_iqr=[round(float(fits.overlap.quantile(q)), 3) for q in (0.25, 0.75)],
                comm_s_median=round(float(fits.comm_s.median()), 4),
                heldout_step_ape_pct=dict(median=round(float(np.median(with_o)), 2),
                                          p90=round(float(np.percentile(with_o, 90)), 2)),
                heldout_step_ape_pct_overlap0=dict(median=round(float(np.median(without)), 2),
                                                   p90=round(float(np.percentile(without, 90)), 2)))


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--trace-dir", default=None)
    args = ap.parse_args(argv)
    root = find_trace_dir(args.trace_dir) / "pollux" / "throughput-profiles"
    zoo = ModelZoo.default()
    models = {}
    for profile_name, model in POLLUX_MODELS.items():
        row = derive(pd.read_csv(root / profile_name / "placements.csv"))
        row.update(profile=profile_name, zoo_overlap=zoo[model].overlap)
        models[model] = row
        print(f"{model:12s} overlap {row['overlap']:.2f} (zoo {row['zoo_overlap']:.2f}); held-out step APE "
              f"median {row['heldout_step_ape_pct']['median']:.1f}% p90 {row['heldout_step_ape_pct']['p90']:.1f}% "
              f"(overlap 0: {row['heldout_step_ape_pct_overlap0']['median']:.1f}% / "
              f"{row['heldout_step_ape_pct_overlap0']['p90']:.1f}%)")
    out = dict(source="Pollux OSDI'21 artifact, petuum/adaptdl osdi21-artifact simulator/traces/<model>/placements.csv",
               rule="iter = compute + comm - overlap x min(compute, comm); compute = the one-GPU step time",
               split="placements over >= 2 hosts, sorted: even positions calibrate, odd positions score",
               trace_dir_from_env=bool(os.environ.get("NETLAB_TRACE_DIR")), python=platform.python_version(),
               models=models)
    write_json(OUT, out)
    return out


if __name__ == "__main__":
    main()
