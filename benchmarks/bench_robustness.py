"""Robustness of the input boundaries (issue 14) and under faults (issue 30).

Fuzzing: for each parser (spec strings, topology spec strings, topology YAML, trace CSV/.trace files, trace
spec strings, sweep grids) the strategies of ``tests/test_fuzz_inputs.py`` generate inputs; each either loads
or must raise ``netlab.errors.InputError``. Anything else is a fault (recorded, the run goes on). Then
``netlab simulate`` is run on fuzzed trace files and topology specs: a refused input must give exit status 2,
one ``error:`` line, no traceback, and leave nothing behind in ``--out``.

Fault injections (``robustness_faults.py``): sweeps killed with SIGKILL and SIGTERM, stores with foreign
folders, symlinks, stray files and random flipped bits, YAML alias bombs and duplicate keys, huge grids,
hostile traces, OS errors (injected, and a real full tmpfs as root), a SIGSTOPped agent, oversized agent
requests (root): one row each, with the count tried and the count that held. Then the peak RSS of the
command refusing each kind of hostile input, against 200 MB plus twice the input's size.

    python benchmarks/bench_robustness.py [--scale 1.0] [--no-faults] [--refused-only]

Writes ``benchmarks/results/robustness.json``. Run it as root for the root-only rows (a tmpfs of its own, an
agent in a network namespace of its own: nothing machine-wide, so no lock is needed); elsewhere they say
``skipped``.
"""

from __future__ import annotations

import argparse
import collections
import importlib.util
import os
import platform
import sys
import tempfile
import time
import traceback
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "benchmarks" / "results" / "robustness.json"


def _fuzz_module():
    spec = importlib.util.spec_from_file_location("fuzz_inputs", ROOT / "tests" / "test_fuzz_inputs.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _grid_case():
    """The sweep-grid fuzz of ``tests/test_sweep_store.py`` (its strategies), as (strategy, check)."""
    spec = importlib.util.spec_from_file_location("sweep_store_tests", ROOT / "tests" / "test_sweep_store.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    keys = st.one_of(st.sampled_from(mod._KEYS), st.integers(0, 3))
    strategy = st.tuples(st.dictionaries(keys, mod._VALUES, max_size=4),
                         st.one_of(st.none(), mod._VALUES, st.dictionaries(keys, mod._VALUES, max_size=3)))

    def check(top, axes):
        from netlab.errors import InputError
        from netlab.sweep.grid import expand

        try:
            expand(dict(top, grid=axes), "grid file 'fuzz.yaml'")
        except InputError as exc:  # a GridError, or an UnknownNameError for a name that is not registered
            if "fuzz.yaml" not in str(exc):
                raise AssertionError(f"a grid error that does not name the file: {exc}") from exc
            return "refused"
        return "loaded"

    return strategy, check


def fuzz(name: str, strategy, check, n: int) -> dict:
    """Run ``check`` on ``n`` generated inputs; count outcomes; record (not raise) faults."""
    counts = collections.Counter()
    faults = []

    @settings(max_examples=n, deadline=None, database=None, suppress_health_check=list(HealthCheck))
    @given(strategy)
    def run(case):
        args = case if isinstance(case, tuple) else (case,)
        try:
            counts[check(*args)] += 1
        except Exception as exc:  # noqa: BLE001 - a fault: anything that is not the project's InputError
            counts["fault"] += 1
            if len(faults) < 10:
                faults.append({"input": repr(args)[:300], "error": f"{type(exc).__name__}: {str(exc)[:300]}",
                               "where": traceback.format_exc(limit=-2)[-600:]})

    t0 = time.perf_counter()
    run()
    out = {"inputs": sum(counts.values()), "loaded": counts["loaded"], "refused": counts["refused"],
           "faults": counts["fault"], "fault_examples": faults, "wall_s": round(time.perf_counter() - t0, 1)}
    print(f"{name:22s} {out['inputs']:6d} inputs  {out['loaded']:5d} loaded  {out['refused']:6d} refused  "
          f"{out['faults']} faults  ({out['wall_s']} s)", flush=True)
    return out


def cli_runs(fz, n: int) -> dict:
    """``netlab simulate`` on fuzzed trace files and topology specs; refused runs must leave nothing behind."""
    from typer.testing import CliRunner

    from netlab.cli import app

    runner = CliRunner()
    counts = collections.Counter()
    left, bad = [], []
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        cwd = os.getcwd()
        os.chdir(tmp)  # a default --out (results/...) would land here
        try:
            strategy = st.one_of(fz.trace_csv().map(lambda c: ("trace", c)),
                                 fz.spec_text(fz.TOPOLOGY_KINDS[:3] * 3 + fz.TOPOLOGY_KINDS[3:], fz.TOPOLOGY_KEYS,
                                              fz.TOPO_VALUE).map(lambda s: ("topology", s)))

            @settings(max_examples=n, deadline=None, database=None, suppress_health_check=list(HealthCheck))
            @given(strategy)
            def run(case):
                kind, value = case
                i = sum(counts.values())
                out = tmp / f"out{i}"
                if kind == "trace":
                    data, suffix = value
                    path = tmp / f"in{i}{suffix}"
                    path.write_bytes(data)
                    args = ["--trace", str(path), "--topology", "leafspine,racks=2,hosts_per_rack=2,gpus_per_host=8"]
                else:
                    args = ["--trace", "synthetic,jobs=3,cluster_gpus=8", "--topology", value]
                res = runner.invoke(app, ["simulate", "--quiet", "--max-jobs", "3", "--out", str(out), *args])
                err = getattr(res, "stderr", "") or res.output
                if res.exit_code == 0:
                    counts["simulated"] += 1
                    return
                counts["refused"] += 1
                one_error = res.exit_code == 2 and err.strip().startswith(("error:", "Usage:", "╭")) \
                    and "Traceback" not in err and res.exception is None or isinstance(res.exception, SystemExit)
                if not one_error:
                    counts["fault"] += 1
                    if len(bad) < 10:
                        bad.append({"args": args, "exit": res.exit_code, "output": err[-400:],
                                    "exception": repr(res.exception)[:300]})
                if out.exists():
                    left.extend(str(p.relative_to(tmp)) for p in [out, *out.rglob("*")])

            t0 = time.perf_counter()
            run()
            stray = sorted(str(p.relative_to(tmp)) for p in tmp.iterdir()
                           if not p.name.startswith(("in", "out")))
        finally:
            os.chdir(cwd)
    out = {"runs": sum(counts.values()), "simulated": counts["simulated"], "refused": counts["refused"],
           "faults": counts["fault"], "fault_examples": bad, "left_behind_by_refused_runs": left,
           "stray_files_in_cwd": stray, "wall_s": round(time.perf_counter() - t0, 1)}
    print(f"{'cli simulate':22s} {out['runs']:6d} runs    {out['simulated']:5d} ran     {out['refused']:6d} refused  "
          f"{out['faults']} faults, {len(left)} files left behind, {len(stray)} stray ({out['wall_s']} s)", flush=True)
    return out


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--scale", type=float, default=1.0, help="multiply every input count (0.1 for a smoke run)")
    ap.add_argument("--out", type=Path, default=OUT)
    ap.add_argument("--no-faults", action="store_true", help="fuzzing only (no fault injections, no RSS rows)")
    ap.add_argument("--refused-only", action="store_true",
                    help="measure again only the peak RSS of refused inputs, into the existing --out file")
    args = ap.parse_args(argv)
    if args.refused_only:
        return _refused_only(args.out)
    n = lambda k: max(10, int(k * args.scale))  # noqa: E731
    fz = _fuzz_module()
    injected = []
    t0 = time.perf_counter()
    parsers = {
        "spec_string": fuzz("spec_string", st.text(max_size=60) | fz.spec_text(fz.TOPOLOGY_KINDS, fz.TOPOLOGY_KEYS),
                            fz.check_spec, n(5000)),
        "topology_spec": fuzz("topology_spec", fz.spec_text(fz.TOPOLOGY_KINDS[:3] * 3 + fz.TOPOLOGY_KINDS[3:],
                                                            fz.TOPOLOGY_KEYS, fz.TOPO_VALUE),
                              fz.check_topology_spec, n(3000)),
        "topology_yaml": fuzz("topology_yaml", fz.yaml_bytes(), fz.check_topology_file, n(3000)),
        "trace_file": fuzz("trace_file", fz.trace_csv(record=injected), fz.check_trace_file, n(3000)),
        "trace_spec": fuzz("trace_spec", fz.spec_text(fz.TRACE_KINDS, fz.TRACE_KEYS, fz.TRACE_VALUE),
                           fz.check_trace_spec, n(1000)),
        "sweep_grid": fuzz("sweep_grid", *_grid_case(), n(2000)),
    }
    cli = cli_runs(fz, n(300))
    faults = None
    if not args.no_faults:
        sys.path.insert(0, str(Path(__file__).resolve().parent))
        from robustness_faults import run_all

        faults = run_all(args.scale)
    result = {
        "what": "issue 14: fuzzed inputs per parser; each must load or raise netlab.errors.InputError (anything else "
                "is a fault); netlab simulate on fuzzed traces/topologies must refuse with exit 2 and one error line "
                "and leave nothing in --out",
        "command": "python benchmarks/bench_robustness.py" + (f" --scale {args.scale}" if args.scale != 1 else ""),
        "parsers": parsers,
        "inputs_total": sum(p["inputs"] for p in parsers.values()),
        "faults_total": sum(p["faults"] for p in parsers.values()) + cli["faults"],
        "faults_injected_into_trace_files": dict(collections.Counter(injected).most_common()),
        "faults_injected_total": sum(1 for f in injected if f != "none"),
        "cli_simulate": cli,
        "left_behind": len(cli["left_behind_by_refused_runs"]) + len(cli["stray_files_in_cwd"]),
        "fault_injections": faults,
        "wall_s": round(time.perf_counter() - t0, 1),
        "machine": {"python": platform.python_version(), "cpus": os.cpu_count(), "note": "shared 2-core machine"},
    }
    from netlab.sim.metrics import write_json

    args.out.parent.mkdir(parents=True, exist_ok=True)
    write_json(args.out, result)
    held = "" if faults is None else (f"; fault injections held {faults['held']}/{faults['tried']}; refused inputs "
                                      f"within the RSS target {faults['refused_within_target']}/"
                                      f"{len(faults['refused_inputs'])}")
    print(f"wrote {args.out}: {result['inputs_total']} parser inputs, {result['faults_total']} faults, "
          f"{result['left_behind']} files left behind{held}")
    return result


def _refused_only(out: Path) -> dict:
    """Replace the refused inputs' peak RSS in ``out`` by a new measurement (the rest of the file is kept)."""
    import json
    import tempfile

    from netlab.sim.metrics import write_json

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from robustness_faults import refused_inputs

    result = json.loads(out.read_text())
    with tempfile.TemporaryDirectory(prefix="netlab-rss-") as tmp:
        refused = refused_inputs(Path(tmp))
    faults = result["fault_injections"]
    faults.update(refused_inputs=refused, refused_within_target=sum(r["within_target"] for r in refused))
    write_json(out, result)
    print(f"wrote {out}: refused inputs within the RSS target {faults['refused_within_target']}/{len(refused)}")
    return result


def _ok(result: dict) -> bool:
    faults = result["fault_injections"]
    return result["faults_total"] == 0 and (faults is None or (faults["held"] == faults["tried"] and faults[
        "refused_within_target"] == len(faults["refused_inputs"])))


if __name__ == "__main__":
    sys.exit(0 if _ok(main()) else 1)
