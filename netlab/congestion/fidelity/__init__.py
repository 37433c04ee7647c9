"""How far the simulator's network models are from the emulated testbed, measured where it matters.

Two steps, so the testbed runs once and models are scored offline as often as wanted:

1. **Collect** (:func:`collect_runs`, needs the testbed): every scenario of :func:`fidelity_scenarios`
   runs for hundreds of iterations and every rank's raw per-iteration timestamps are kept with
   everything a prediction needs: ``benchmarks/results/fidelity_runs.parquet``.
2. **Score** (:func:`score_runs`): per job, the measured iteration time over the steady window against
   each network model's calibrated prediction, as absolute percentage errors over *contended* jobs and,
   separately, over jobs alone. :func:`phase_series` and :func:`phase_comparison` add the dynamics:
   the relative phase of every pair of jobs, on the testbed and in the ``tcp`` model (the simulator's
   default network, :data:`netlab.network.model.DEFAULT_NETWORK`).

This package is the one import path; its modules hold one idea each:

* :mod:`.scenarios`: the scenarios and their link geometry (which jobs contend), pure arithmetic;
* :mod:`.runs`: the stored raw-run format, written and read back, and the measured steady iteration time;
* :mod:`.dynamics`: relative-phase and iteration series, jitter, a model's own run beside the testbed's;
* :mod:`.scoring`: the models' predictions, the calibration, APE and its summaries;
* :mod:`.collect`: running the scenarios on a live testbed (root).
"""

from .collect import collect_runs, run_fidelity
from .dynamics import (circular_mean, compute_jitter, iteration_series, phase_comparison, phase_locking, phase_series,
                       phase_summary, relative_phase, simulated_runs)
from .runs import (RUN_KEYS, rank_rows, run_dict, run_groups, runs_frame, scenarios_from_runs, steady_iterations,
                   steady_window, write_runs)
from .scenarios import (GRAD_BYTES, HEADER_OVERHEAD, ITERATIONS, UPLINK_MBIT, WARMUP, alone_period_ms,
                        contended_jobs, crosses_uplink, equal_duration, fidelity_scenarios, ring_link_bytes,
                        scenario_contention, scenario_key)
from .scoring import (MODELS, ape_summary, fidelity_summary, fit_wire_overhead, link_bound, per_scenario_summary,
                      score_runs)

__all__ = [
    "collect_runs", "run_fidelity",
    "circular_mean", "compute_jitter", "iteration_series", "phase_comparison", "phase_locking", "phase_series",
    "phase_summary", "relative_phase", "simulated_runs",
    "RUN_KEYS", "rank_rows", "run_dict", "run_groups", "runs_frame", "scenarios_from_runs", "steady_iterations",
    "steady_window", "write_runs",
    "GRAD_BYTES", "HEADER_OVERHEAD", "ITERATIONS", "UPLINK_MBIT", "WARMUP", "alone_period_ms", "contended_jobs",
    "crosses_uplink", "equal_duration", "fidelity_scenarios", "ring_link_bytes", "scenario_contention",
    "scenario_key",
    "MODELS", "ape_summary", "fidelity_summary", "fit_wire_overhead", "link_bound", "per_scenario_summary",
    "score_runs",
]
