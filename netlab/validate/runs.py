"""Referee runs of a scenario, cached by the scenario's hash so re-scoring a model never re-runs ns-3.

:func:`referee_record` runs a scenario twice in the referee (the jobs together,
then each alone, one after the other) and keeps what scoring needs: every
job's steady iteration time and its time alone, the run's counters (drops,
ECN marks, retransmission timeouts), each job's own loss counters
(``job_loss``, ``job_loss_alone``; absent from records of a referee that
did not count per job: unknown, never zero) and ns-3's CPU seconds. A
:class:`RunStore` folder holds one JSON record per scenario key
(:meth:`~netlab.validate.scenario.RefereeScenario.key`), written atomically:
an interrupted benchmark resumes where it stopped, and a record is reused
only for the very scenario (topology, jobs, transport, seed) it was run for,
by the very referee source (a changed ``referee.cc`` measures again), or by
one of :data:`SAME_TIMES_SOURCES`: earlier sources the current one
reproduces to the bit in every time it measures (a change that only added
counters), whose records stay valid without their new fields.
"""

from __future__ import annotations

import json
import resource
from pathlib import Path

from .scenario import RefereeScenario, scenario_doc

RECORD_VERSION = 1
#: referee sources (:func:`referee_source_hash`) whose measured times the current source reproduces exactly:
#: it only adds counters (per-job loss) or an opt-in trace, so their records stay valid, without those counters.
#: ``tests/test_validate_loss.py`` re-runs a scenario cached by each and compares the times.
SAME_TIMES_SOURCES = {
    "75735fb8941aa5a3": "before per-job loss counters (job_loss)",
    "bedfcf610cb76ea1": "before the opt-in trace (per-flow ring steps and bytes, per-queue bins; no packet moves)",
}


def referee_source_hash() -> str:
    """A hash of the referee's C++ source: a record made by another version of it is measured again."""
    import hashlib

    from .referee import SOURCE

    return hashlib.sha256(SOURCE.read_bytes()).hexdigest()[:16]


def _children_cpu_s() -> float:
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


def measure(sc: RefereeScenario, timeout_s: float = 3600.0, binary=None) -> dict:
    """Run ``sc`` in the referee (together, then alone); the record :class:`RunStore` keeps."""
    from .predict import steady_iter_s
    from .referee import alone_periods, run_referee

    t0 = _children_cpu_s()
    together = run_referee(sc, timeout_s=timeout_s, binary=binary)
    t1 = _children_cpu_s()
    alone = run_referee(sc, timeout_s=timeout_s, binary=binary, alone=True)
    t2 = _children_cpu_s()
    iter_s = steady_iter_s(together.starts, {j.job_id: j.compute_s for j in sc.jobs}, sc.warmup)
    return dict(version=RECORD_VERSION, key=sc.key(), referee_source=referee_source_hash(), name=sc.name, meta=sc.meta,
                transport=scenario_doc(sc)["transport"],
                ref_iter_s={str(k): v for k, v in iter_s.items()},
                ref_alone_s={str(k): v for k, v in alone_periods(alone).items()},
                iterations_run={str(k): int(len(v) - 1) for k, v in together.starts.items()},
                sim_s=together.sim_s, stats=together.stats, alone_stats=alone.stats,
                job_loss={str(k): v for k, v in together.job_loss.items()},
                job_loss_alone={str(k): v for k, v in alone.job_loss.items()},
                drops_marks_by_link=together.drops_marks_by_link, ns3_cpu_s=t1 - t0, alone_cpu_s=t2 - t1)


class RunStore:
    """A folder of referee records, one ``<key>.json`` per scenario."""

    def __init__(self, folder):
        self.folder = Path(folder)

    def path(self, sc: RefereeScenario) -> Path:
        return self.folder / f"{sc.key()}.json"

    def get(self, sc: RefereeScenario, need_job_loss: bool = False) -> dict | None:
        """The current record of ``sc``, or None; ``need_job_loss``: None also for a record without per-job loss
        counters (one made before the referee counted them), so that it is measured again."""
        p = self.path(sc)
        if not p.exists():
            return None
        try:
            rec = json.loads(p.read_text())
        except (OSError, ValueError):
            return None  # a damaged record is measured again
        current = (rec.get("version") == RECORD_VERSION and rec.get("key") == sc.key()
                   and (rec.get("referee_source") == referee_source_hash()
                        or rec.get("referee_source") in SAME_TIMES_SOURCES))
        if need_job_loss and "job_loss" not in rec:
            return None
        return rec if current else None

    def put(self, sc: RefereeScenario, record: dict) -> Path:
        from ..sim.metrics import write_json

        return write_json(self.path(sc), record)


def referee_record(sc: RefereeScenario, store: RunStore | None = None, timeout_s: float = 3600.0, binary=None,
                   need_job_loss: bool = False) -> dict:
    """The scenario's record: from ``store`` when it has one (with per-job loss counters if ``need_job_loss``),
    else measured (and stored)."""
    if store is not None:
        rec = store.get(sc, need_job_loss)
        if rec is not None:
            return rec
    rec = measure(sc, timeout_s, binary)
    if store is not None:
        store.put(sc, rec)
    return rec


def record_job_loss(rec: dict, alone: bool = False) -> dict[int, dict] | None:
    """Each job's loss counters in a record (its jobs together, or ``alone``), or None where the record has none
    (a referee before per-job counters): unknown, not zero."""
    doc = rec.get("job_loss_alone" if alone else "job_loss")
    return None if doc is None else {int(k): dict(v) for k, v in doc.items()}


def record_times(rec: dict) -> tuple[dict[int, float], dict[int, float]]:
    """(steady iteration s, alone iteration s) per job id of a record."""
    return ({int(k): float(v) for k, v in rec["ref_iter_s"].items()},
            {int(k): float(v) for k, v in rec["ref_alone_s"].items()})
