"""``netlab validate --against ns3 SCENARIO``: one scenario in the referee, beside every network model.

SCENARIO is a scenario file (:func:`netlab.validate.scenario.load_scenario`)
or ``FAMILY:SEED`` for a generated one (:data:`netlab.validate.families.FAMILIES`,
e.g. ``2tier:3``). ``regime`` replaces the scenario's transport with one of
:data:`netlab.validate.scenario.REGIMES`. The table has one row per job: the
referee's iteration time, its time alone and slowdown, and each model's
prediction with its signed error (:func:`netlab.validate.compare.side_by_side`);
below it, each model's error summary over contended jobs.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from .scenario import REGIMES, RefereeScenario, ScenarioError, load_scenario

AGAINST = ("ns3",)


def resolve_scenario(text: str, regime: str | None = None) -> RefereeScenario:
    """A scenario from a file path or ``FAMILY:SEED``, with ``regime``'s transport if given."""
    from .families import FAMILIES, generate

    path = Path(text)
    if path.suffix == ".json" or path.exists():
        sc = load_scenario(path)
    else:
        family, sep, seed = text.partition(":")
        if not sep or family not in FAMILIES or not seed.isdigit():
            raise ScenarioError(f"scenario {text!r}: not a scenario file (.json) nor FAMILY:SEED with FAMILY one of "
                                f"{', '.join(FAMILIES)} and SEED a whole number >= 0")
        sc = generate(family, int(seed))
    if regime is not None:
        if regime not in REGIMES:
            raise ScenarioError(f"--regime {regime!r}: must be one of {', '.join(REGIMES)}")
        sc = sc.with_transport(REGIMES[regime])
    return sc


def validate(scenario: str, against: str = "ns3", regime: str | None = None, runs_dir=None,
             timeout_s: float = 3600.0) -> tuple[pd.DataFrame, pd.DataFrame, dict]:
    """(per-job table, per-model summary, the referee's record) for one scenario."""
    from .compare import compare_jobs, error_summary, side_by_side
    from .predict import predict_all
    from .runs import RunStore, record_times, referee_record

    if against not in AGAINST:
        raise ScenarioError(f"--against {against!r}: must be one of {', '.join(AGAINST)}")
    sc = resolve_scenario(scenario, regime)
    rec = referee_record(sc, RunStore(runs_dir) if runs_dir else None, timeout_s)
    ref_iter, ref_alone = record_times(rec)
    rows = compare_jobs(sc, ref_iter, ref_alone, predict_all(sc))
    summary = pd.DataFrame(error_summary(rows)).T[["n_contended", "median_ape", "p90_ape", "max_ape",
                                                   "heavy_median_signed", "n_heavy", "median_ape_raw"]]
    return side_by_side(rows), summary, rec


def render(table: pd.DataFrame, summary: pd.DataFrame, rec: dict) -> str:
    s = rec["stats"]
    head = (f"scenario {rec['name']} ({rec['transport']['name']}, switch queues "
            f"{rec['transport']['switch_queue_packets']} packets): {len(table)} jobs, "
            f"{int(table.contended.sum())} contended; ns-3 {rec['ns3_cpu_s']:.1f} + {rec['alone_cpu_s']:.1f} CPU s "
            f"(together + alone), {s['link_packets']:,} link packets, drops {s['drops']}, ECN marks {s['ecn_marks']}, "
            f"RTOs {s['rtos']}")
    with pd.option_context("display.width", 250, "display.max_columns", 100):
        return "\n".join([head, "", "per job (ms; <model>_%: signed error of the model's slowdown applied to the "
                                    "referee's time alone):", table.to_string(), "",
                          "over contended jobs (fractions):", summary.astype(float).round(4).to_string()])
