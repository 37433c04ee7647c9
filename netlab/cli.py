"""The ``netlab`` command line (typer). Every command is a thin shell over a library call.

Option values are checked by the library's schemas, not here: ``simulate``'s
by :class:`netlab.run.RunParams`, a sweep's and the demo's by the grid
(:class:`netlab.sweep.grid.CellParams`), with the same rules a notebook meets.
Output directories are checked before anything runs. Bad input of any command
(:class:`netlab.errors.InputError`: the message names the file, line or field
and the allowed values) is one ``error:`` line with exit status 2, printed by
the root command group (:mod:`netlab.cli_base`), not by each command; so is
any ``OSError`` a command meets (naming the path), and a SIGTERM or SIGHUP
that stops a sweep exits with 128 + the signal after the pool is stopped.
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path

import typer

from .cli_base import Commands, check_out_dir, fail
from .cli_io import export_app, import_app

app = typer.Typer(cls=Commands, add_completion=False, no_args_is_help=True,
                  help="netlab: network-aware scheduling of distributed DL training (simulator, policies, traces).")
app.add_typer(export_app, name="export")
app.add_typer(import_app, name="import")


def _finite_seconds(value: float) -> float:
    if value is not None and not math.isfinite(value):
        raise typer.BadParameter(f"{value} is not a finite number of seconds")
    return value


@app.command()
def simulate(
    trace: str = typer.Option(None, help="Trace name, spec string (e.g. 'synthetic,jobs=200') or path; default: "
                                         "the bundled philly-sample."),
    topology: str = typer.Option(None, help="Topology spec string, YAML file or Crux topo.csv; default: "
                                            "leafspine,racks=4,hosts_per_rack=4,gpus_per_host=8,oversub=4."),
    policy: str = typer.Option(None, help="Ordering policy (see `netlab policies`); default: fifo."),
    placement: str = typer.Option(None, help="Placement policy; default: the policy's own, else consolidated."),
    netpolicy: str = typer.Option(None, help="Network policy: per-job priority class, weight, rate cap and "
                                  "paths (see `netlab policies`); default none: every job alike."),
    migration: str = typer.Option(None, help="Migration policy: move running jobs whose slowdown stays high "
                                  "(see `netlab policies`); default none."),
    compression: str = typer.Option(None, help="Gradient compression for every job of 2 or more GPUs: "
                                    "powersgd-r2, qsgd-8bit or topk-1pct (netlab.workload.compression: bytes "
                                    "and compute per step, with sources); default none."),
    network: str = typer.Option(None, help="Network model (see `netlab policies`): tcp (the default, "
                                "netlab.network.DEFAULT_NETWORK), fair, phase, ideal, or a transport regime's "
                                "model (see `netlab regimes`): tcp-shallow, dctcp, dcqcn."),
    seed: int = typer.Option(None, help="Seed for every random stream of the run (an integer >= 0; default 0)."),
    out: Path = typer.Option(Path("results/simulate"), help="Output directory."),
    max_jobs: int = typer.Option(None, help="Keep the first N jobs by submit time."),
    trace_dir: Path = typer.Option(None, help="Directory holding the shared traces."),
    checkpoint_s: float = typer.Option(None, help="Checkpoint cost paid at each restart, the same for every job (s; "
                                       "default: each job's own, its model's state over --storage-gbps)."),
    restore_s: float = typer.Option(None, help="Restore cost paid at each restart, the same for every job (s; "
                                    "default: --launch-s plus its model's state over --storage-gbps)."),
    storage_gbps: float = typer.Option(None, help="Bandwidth of a job's checkpoints to and from storage (Gbit/s; "
                                       "default 20, netlab.workload.checkpoint)."),
    launch_s: float = typer.Option(None, help="Process and framework start at each restart (s; default 30)."),
    quiet: bool = typer.Option(False, help="No progress bar."),
    link_history: str = typer.Option(None, help="Per-link history in links.parquet: full (every interval; the "
                                     "default), aggregate (per-link time-weighted load per --link-resolution-s) "
                                     "or none (netlab.sim.history): bounded memory for long traces."),
    link_resolution_s: float = typer.Option(None, help="Bin width of --link-history aggregate (s; default 3600)."),
):
    """Simulate a trace; write jobs.parquet, links.parquet, summary.json, config.json."""
    from .run import RunParams, run_one

    check_out_dir(out)
    given = dict(trace=trace, topology=topology, policy=policy, placement=placement, netpolicy=netpolicy,
                 migration=migration, compression=compression,
                 network=network, seed=seed, max_jobs=max_jobs, checkpoint_s=checkpoint_s, restore_s=restore_s,
                 storage_gbps=storage_gbps, launch_s=launch_s,
                 link_history=link_history, link_resolution_s=link_resolution_s)
    params = RunParams.parse({k: v for k, v in given.items() if v is not None} | dict(progress=None if not quiet
                                                                                       else False),
                             where="netlab simulate")
    result = run_one(params, trace_dir=trace_dir)
    result.save(out)
    s = result.summary
    typer.echo(json.dumps({k: s[k] for k in ("jobs", "finished", "avg_jct_s", "p50_jct_s", "p99_jct_s", "makespan_s",
                                              "avg_wait_s", "avg_start_delay_s", "gpu_util", "overload_gbit",
                                              "wall_s", "events")},
                          indent=2))
    offered = result.config.get("offered_load")
    typer.echo(f"GPU utilisation reached {s['gpu_util']:.3f}"
               + (f" (the trace offers load {offered:.3f} of these GPUs)" if offered is not None else ""))
    typer.echo(f"wrote {out}/jobs.parquet, links.parquet, summary.json, config.json")


@app.command()
def policies():
    """List the registered ordering, placement, preemption, network and migration policies and network models."""
    from .network import NETWORKS
    from .policies import MIGRATION, NETWORK_POLICIES, ORDERING, PLACEMENT, PREEMPTION

    for title, reg in (("ordering (--policy)", ORDERING), ("placement (--placement)", PLACEMENT),
                       ("preemption", PREEMPTION), ("network policy (--netpolicy)", NETWORK_POLICIES),
                       ("migration (--migration)", MIGRATION),
                       ("network (--network)", NETWORKS)):
        typer.echo(f"{title}:")
        for name, doc in reg.describe().items():
            typer.echo(f"  {name:18s} {doc}")


@app.command()
def regimes():
    """List the transport regimes: the network model (--network) that represents each and its referee transport."""
    from .network.regimes import regimes as all_regimes

    for r in all_regimes():
        typer.echo(f"  {r.name:13s} --network {r.network:12s} referee {r.referee:13s} {r.description}")


@app.command()
def traces():
    """List the trace loaders and where their files are."""
    from .traces import list_traces

    df = list_traces()
    typer.echo(df.to_string(index=False))


BACKEND_HELP = "serial | processes | dask"


@app.command()
def demo(
    out: Path = typer.Option(Path("results/demo"), help="Sweep store, table, figures and report.html go here."),
    trace: str = typer.Option("philly-sample", help="Trace (default: the sample bundled with the package)."),
    topology: str = typer.Option(None, help="Base topology spec; the oversubscription is swept (default: a 128-GPU "
                                            "leaf-spine)."),
    oversub: list[float] = typer.Option(None, help="Oversubscription levels, repeatable (default: 2 and 8)."),
    seeds: int = typer.Option(None, min=1, help="Replicates per configuration, paired by the comparisons "
                                                "(default: 10)."),
    max_jobs: int = typer.Option(None, help="Keep the first N jobs."),
    baseline: str = typer.Option(None, help="Label every policy is compared with (default: "
                                            "tiresias+consolidated)."),
    backend: str = typer.Option("processes", help=BACKEND_HELP),
    workers: int = typer.Option(None, min=1, help="Worker processes (default: one per core)."),
    ideal: bool = typer.Option(True, help="Also run every scheduler once per seed on the ideal network (the ratio "
                                          "to ideal)."),
):
    """The main job: classic schedulers (fifo, fjf, tiresias, themis on consolidated placement) against
    network-aware ones (Dally, Tiresias with CASSINI, topology-aware best fit, Tiresias with Crux's network
    policy) on the bundled trace, on a leaf-spine at 2:1 and 8:1 in two transport regimes (reno-deep, the default
    tcp network; dcqcn: see `netlab regimes`) and on the ideal network, 10 seeds; prints the summary table and
    one verdict per policy against tiresias+consolidated (paired by seed, 95% bootstrap intervals); writes
    an HTML report with the headline comparison first."""
    from .demo import demo_report

    check_out_dir(out)
    report = demo_report(out, trace=trace, topology=topology, seeds=seeds, max_jobs=max_jobs, backend=backend,
                         workers=workers, ideal=ideal, oversub=oversub or None, baseline=baseline)
    typer.echo(f"\nreport: {report.resolve()}")
    typer.echo(f"tables and figures in {report.parent.resolve()}; the sweep store: {out.resolve()}")


@app.command()
def sweep(
    grid: Path = typer.Argument(..., help="Grid YAML (see netlab.sweep.grid for the format)."),
    out: Path = typer.Option(..., help="Results store directory (re-running resumes it)."),
    backend: str = typer.Option("serial", help=BACKEND_HELP),
    address: str = typer.Option(None, help="Dask scheduler address (tcp://host:8786); default: a LocalCluster."),
    workers: int = typer.Option(None, min=1, help="Local workers for processes/dask (default: one per core)."),
    report: bool = typer.Option(False, help="Also write the report folder OUT/report (report.html, tables, "
                                            "figures)."),
    quiet: bool = typer.Option(False, help="No progress bar."),
):
    """Run every cell of a grid not yet in OUT; print the summary table. Exit 1 if any cell failed."""
    from .sweep import run_sweep
    from .sweep.backends import BACKENDS

    check_out_dir(out)
    if backend not in BACKENDS:  # before the store exists: a bad option writes nothing
        fail(f"--backend {backend!r}: not a sweep backend; one of {', '.join(BACKENDS.names())}")
    res = run_sweep(grid, out=out, backend=backend, progress=not quiet, address=address, workers=workers)
    from .report import comparison_table, print_table, readable_table, render_report  # after the grid is accepted
    if not res.summary.empty:
        print_table(readable_table(comparison_table(res.summary)), "mean ± sd over seeds:")
    if report:
        typer.echo(f"report: {render_report(res).resolve()}")
    typer.echo(f"{len(res.summary)} cells done, {len(res.errors)} failed; store: {out.resolve()}")
    if not res.errors.empty:
        for e in res.errors.itertuples():
            typer.secho(f"  failed {e.cell_id} ({e.label}): {e.error}", fg=typer.colors.RED, err=True)
        typer.secho(f"tracebacks in {out}/cells/*.error.json; re-run to retry the failed cells", err=True)
        raise typer.Exit(1)


@app.command()
def results(
    root: Path = typer.Argument(Path("results"), help="Directory to search (3 levels deep); with --check or "
                                                      "--repair, one sweep store."),
    check: bool = typer.Option(False, "--check", help="Read back every stored cell of the sweep ROOT; list the "
                                                      "corrupt ones (exit 1 if any)."),
    repair: bool = typer.Option(False, "--repair", help="Set the corrupt cells of the sweep ROOT aside "
                                                        "(ROOT/corrupt/, never deleted) and recompute them."),
    baseline: str = typer.Option(None, help="When ROOT is one sweep: the label its verdicts compare with "
                                            "(default: tiresias+consolidated when the sweep has it)."),
):
    """List the sweeps stored under ROOT, or check/repair one sweep store. When ROOT is one sweep, also
    print its verdicts: every policy against the baseline, paired by seed, with 95% bootstrap intervals."""
    import pandas as pd

    from .sweep import list_sweeps

    if check or repair:
        _check_store(root, repair)
        return
    table = list_sweeps(root)
    if table.empty:
        typer.echo(f"no sweeps under {root}")
        return
    table["policies"] = [", ".join(_stored_policies(Path(p))) for p in table.path]
    with pd.option_context("display.width", 250, "display.max_columns", 20, "display.max_colwidth", 400):
        typer.echo(table.to_string(index=False))
    if (root / "manifest.json").is_file():
        _print_verdicts(root, baseline)
    elif baseline is not None:
        fail(f"--baseline needs ROOT to be one sweep store (a directory with manifest.json); {root} is not")
    else:
        typer.echo("\none sweep's verdicts: netlab results DIR [--baseline POLICY]")


def _stored_policies(path: Path) -> list[str]:
    """A stored sweep's policies as --baseline takes them (from its manifest, without reading any cell)."""
    from .compare import arm_name
    from .sweep import Store, StoreError

    try:
        return sorted({arm_name(c["label"]) for c in Store(path).read_manifest()["cells"]})
    except (StoreError, ValueError, KeyError, TypeError):
        return []


def _print_verdicts(root: Path, baseline: str | None) -> None:
    from .report import comparison, pick_baseline, policies, print_verdicts
    from .sweep import load_sweep

    res = load_sweep(root)  # not a store, a corrupt cell, a bad baseline: one error line (cli_base)
    base = pick_baseline(res.summary, baseline) if not res.summary.empty else None
    typer.echo(f"\npolicies (--baseline takes any): {', '.join(policies(res.summary)) or 'none finished'}")
    if base is None:
        typer.echo("\nno verdicts: the sweep has no tiresias+consolidated cells; pick one of its policies with "
                   "--baseline")
        return
    if not print_verdicts(comparison(res.summary, base)):
        typer.echo(f"\nno verdicts: nothing pairs with {base} by seed outside the ideal network")


def _check_store(root: Path, repair: bool) -> None:
    from .sweep.runner import check_store, repair_store

    # not a store, a busy or unreadable one: one error line (cli_base)
    check, res = (repair_store(root) if repair else (check_store(root), None))
    for cid, why in check.corrupt.items():
        typer.secho(f"corrupt cell {cid}: {why}", fg=typer.colors.RED, err=True)
    for path in check.strays:
        typer.secho(f"stray file cells/{path.name}: belongs to no cell of this sweep", fg=typer.colors.RED, err=True)
    found = f"{check.stored} stored cells read back, {len(check.corrupt)} corrupt" + \
        (f", {len(check.strays)} stray file(s)" if check.strays else "")
    if not repair:
        typer.echo(found + ("" if check.ok else f"; `netlab results {root} --repair` sets them aside and recomputes "
                                                 "the cells"))
        if not check.ok:
            raise typer.Exit(1)
        return
    if res is None:
        typer.echo(f"{found}: nothing to repair")
        return
    run = res.manifest["runs"][-1]
    moved, stale, stray = run.get("set_aside", {}), run.get("set_aside_stale"), run.get("set_aside_stray")
    typer.echo((f"set aside {len(moved['cells'])} corrupt cell(s) in {moved['moved_to']}; " if moved else "")
               + (f"set aside {stale['cells']} cell(s) computed by other netlab code in {stale['moved_to']}; "
                  if stale else "")  # set aside first: corrupt ones among them too
               + (f"set aside {len(stray['files'])} stray file(s) in {stray['moved_to']}; " if stray else "")
               + f"recomputed {run['ran']} cell(s); {len(res.errors)} failed")
    if not res.errors.empty:
        raise typer.Exit(1)


@app.command()
def report(
    sweep_dir: Path = typer.Argument(..., help="A sweep store directory."),
    out: Path = typer.Option(None, help="The report folder (default: DIR/report); new, empty or an earlier report: "
                                        "it is replaced whole."),
    baseline: str = typer.Option(None, help="The policy every other is compared with (default: "
                                            "tiresias+consolidated when the sweep has it; `netlab results DIR` lists "
                                            "the sweep's policies)."),
):
    """Write the report folder of a stored sweep: report.html (the answer, the verdicts, the figures embedded), the
    tables as CSV and the figures as PNG. The folder is replaced whole: the old report or the new one, never a mix."""
    from .report import render_report
    from .report.folder import check_destination

    if out is not None:
        check_out_dir(out)
    # not a store, a corrupt cell, a bad baseline or destination: one error line (cli_base)
    check_destination((out if out is not None else sweep_dir / "report").absolute())
    path = render_report(sweep_dir, out, baseline=baseline)
    typer.echo(f"report: {path.resolve()}")


@app.command(context_settings={"allow_extra_args": True, "ignore_unknown_options": True})
def notebooks(
    ctx: typer.Context,
    folder: Path = typer.Option(Path("notebooks"), "--dir", help="The notebooks' folder (default: ./notebooks, "
                                                                 "in a netlab checkout)."),
):
    """Start JupyterLab on the notebooks (adds --allow-root when run as root, which Jupyter refuses otherwise).
    Further arguments go to `jupyter lab` (e.g. --no-browser --port 8888)."""
    from .jupyter import lab_argv

    argv = lab_argv(folder, ctx.args)  # a JupyterError is bad input: one error line (cli_base)
    os.execv(argv[0], argv)


@app.command()
def validate(
    scenario: str = typer.Argument(..., help="A referee scenario file (.json) or FAMILY:SEED (e.g. 2tier:3)."),
    against: str = typer.Option("ns3", help="The referee: ns3 (Debian's libns3-dev, g++, pkg-config)."),
    regime: str = typer.Option(None, help="Transport regime instead of the scenario's: reno-deep, reno-shallow, "
                                          "cubic-deep, dctcp, dcqcn."),
    runs_dir: Path = typer.Option(None, help="Cache of referee runs by scenario hash (reused when present)."),
    timeout_s: float = typer.Option(3600.0, min=1, callback=_finite_seconds, help="Per referee run (s)."),
):
    """Run one scenario packet by packet in ns-3 and print per-job iteration times beside every network model."""
    from .validate.command import render, validate as run_validate
    from .validate.referee import RefereeError

    if runs_dir is not None:
        check_out_dir(runs_dir, "--runs-dir")
    try:  # bad input is one error line (cli_base); so is a referee that cannot run
        table, summary, rec = run_validate(scenario, against, regime, runs_dir, timeout_s)
    except RefereeError as exc:
        fail(str(exc) or type(exc).__name__)
    typer.echo(render(table, summary, rec))


if __name__ == "__main__":  # pragma: no cover
    app()
