"""Collecting fidelity runs on a live testbed (root, sshd, torch): the only part of the comparison that
needs the testbed.

Every scenario runs for hundreds of iterations (so drift and locking show) and every rank's raw
per-iteration timestamps are kept, with the scenario's parameters, link byte/packet/drop counters and
how busy the machine's CPU was (:mod:`.runs` describes the columns), so that nothing needs the testbed
afterwards. Collection is repeat-major and resumable, and the file is replaced atomically after every
run, so a stopped collection leaves whole repeats.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pandas as pd

from ...testbed.scenarios import Scenario, run_scenario_logs
from .runs import RUN_KEYS, runs_frame, write_runs
from .scenarios import HEADER_OVERHEAD, ITERATIONS, fidelity_scenarios, scenario_key
from .scoring import score_runs


def _link_counters(testbed) -> pd.DataFrame | None:
    """Cumulative bytes, packets and drops per directed link, or None where the testbed cannot say."""
    try:
        return testbed.link_stats().set_index(["src", "dst"])[["bytes", "packets", "drops"]]
    except Exception:  # noqa: BLE001 - counters are a bonus (Mininet or a lab may not have them)
        return None


def _cpu_busy() -> tuple[float, float]:
    """(busy, total) CPU seconds of the whole machine so far (psutil), to tell runs that shared the CPU."""
    import psutil

    t = psutil.cpu_times()
    idle = t.idle + getattr(t, "iowait", 0.0)
    total = sum(t)
    return total - idle, total


def collect_runs(ctl, scenarios: list[Scenario] | None = None, repeats: int = 1, out=None,
                 progress: bool | None = None, log=print, extra: dict | None = None) -> pd.DataFrame:
    """Run every scenario ``repeats`` times (repeat-major: a stopped collection leaves whole repeats);
    the raw logs of all runs (:func:`runs_frame`), also written to ``out`` (parquet) after every run.

    Resumable: runs already in ``out`` with the same scenario key are not run again; rows of scenarios
    no longer in the list (or defined differently) are dropped. Each write replaces the file atomically.
    ``extra``: columns added to every new row (e.g. how the collection was set up).
    """
    from ...progress import tqdm

    tb = ctl.testbed
    scenarios = scenarios or fidelity_scenarios(tb)
    keys = {scenario_key(sc) for sc in scenarios}
    done = pd.DataFrame()
    if out is not None and Path(out).exists():
        done = pd.read_parquet(out)
        stale = ~done.scenario_key.isin(keys)
        if stale.any():
            log(f"dropping {done[stale].groupby(list(RUN_KEYS)).ngroups} stored runs of scenarios not in this "
                f"collection (or defined differently)")
            done = done[~stale]
    have = set(zip(done.scenario_key, done.repeat)) if len(done) else set()
    todo = [(r, sc) for r in range(repeats) for sc in scenarios if (scenario_key(sc), r) not in have]
    frames = [done] if len(done) else []
    for r, sc in tqdm(todo, desc="fidelity runs", disable=progress is False):
        ranks = sum(len(j.hosts) for j in sc.jobs)
        before, cpu0 = _link_counters(tb), _cpu_busy()
        t = time.time()
        raw = run_scenario_logs(ctl, sc, start_delay_s=4.0 + 1.0 * ranks)
        wall = time.time() - t
        cpu1 = _cpu_busy()
        busy = (cpu1[0] - cpu0[0]) / max(cpu1[1] - cpu0[1], 1e-9) if cpu0 and cpu1 else float("nan")
        after = _link_counters(tb)
        counters = "[]"
        if before is not None and after is not None:
            d = (after - before.reindex(after.index).fillna(0))
            d = d[d.bytes > 0]
            counters = json.dumps([[a, b, int(x.bytes), int(x.packets), int(x.drops)]
                                   for (a, b), x in d.iterrows()])
        # cpu_busy_frac: the machine's CPU busy fraction over the run (everything, not only the testbed)
        frames.append(runs_frame(tb, sc, r, raw, run_wall_s=wall, link_counters=counters, cpu_busy_frac=busy,
                                 load_avg_1m=os.getloadavg()[0], collected_at=time.time(), **(extra or {})))
        log(f"repeat {r} {sc.name}: {wall:.1f} s (cpu busy {busy:.0%})")
        if out is not None:
            write_runs(pd.concat(frames, ignore_index=True), out)
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


def run_fidelity(ctl, scenarios: list[Scenario] | None = None, progress: bool | None = None,
                 iterations: int = ITERATIONS) -> pd.DataFrame:
    """Collect one repeat of every scenario (``iterations`` each) and score it: per job, measured and
    predicted iteration times (see :func:`score_runs`). :func:`collect_runs` keeps the raw logs."""
    tb = ctl.testbed
    scenarios = scenarios or fidelity_scenarios(tb, iterations=iterations)
    runs = collect_runs(ctl, scenarios, repeats=1, progress=progress, log=lambda *_: None)
    df = score_runs(runs, tb)
    df.attrs["wire_overhead"] = df.attrs["wire_overhead"].get(0, HEADER_OVERHEAD)
    return df
