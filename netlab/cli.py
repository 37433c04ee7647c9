"""The ``netlab`` command line (typer). Every command is a thin shell over a library call.

Options are checked where they are declared (typer/click ranges: ``--max-jobs``
>= 1, ``--seed`` >= 0, finite non-negative costs), output directories before
anything runs, and the library's own :class:`netlab.errors.InputError` (trace,
topology and spec errors, which name the file, line or field and the allowed
values) is printed as one ``error:`` line with exit status 2. So is any
``OSError`` a command meets (a full disk, a folder it may not write, a symlink
loop), naming the path, and a SIGTERM or SIGHUP that stops a sweep (exit
status 128 + the signal, after the worker pool is stopped and the store
released): :class:`_Commands` catches them once for every command.
"""

from __future__ import annotations

import errno
import json
import math
import os
from pathlib import Path

import click
import typer
from typer.core import TyperGroup

#: what each errno means for the user, said once (the OS's own words are often terse: "Errno 40")
OS_HINTS = {
    errno.ENOSPC: "no space left on the device; free some or write elsewhere (nothing half-written was left)",
    errno.EDQUOT: "disk quota exceeded; free some space or write elsewhere",
    errno.EACCES: "permission denied",
    errno.EPERM: "operation not permitted",
    errno.EROFS: "read-only file system; write elsewhere",
    errno.ELOOP: "too many levels of symbolic links (a symlink loop, or a symlink where netlab follows none)",
    errno.ENAMETOOLONG: "file name too long",
    errno.EISDIR: "is a directory",
    errno.ENOTDIR: "a part of the path is not a directory",
}


def _os_error_line(exc: OSError) -> str:
    """``path: what happened`` for an OSError, the path first (both paths of a failed rename)."""
    what = OS_HINTS.get(exc.errno) or exc.strerror or str(exc) or type(exc).__name__
    paths = [p for p in (exc.filename, exc.filename2) if p is not None]
    where = " -> ".join(os.fsdecode(p) if isinstance(p, (bytes, str, os.PathLike)) else str(p) for p in paths)
    return f"{where}: {what}" if where else f"{what} ({exc})"


class _Commands(TyperGroup):
    """The command group: an OSError or a stop signal in any command becomes one ``error:`` line."""

    def invoke(self, ctx: click.Context):
        from .procguard import Terminated

        try:
            return super().invoke(ctx)
        except Terminated as exc:
            typer.secho(f"error: {exc}; the worker pool was stopped and what was finished is kept (a sweep store "
                        "resumes on re-run)", fg=typer.colors.RED, err=True)
            raise typer.Exit(exc.code) from None
        except OSError as exc:
            _fail(_os_error_line(exc))


app = typer.Typer(cls=_Commands, add_completion=False, no_args_is_help=True,
                  help="netlab: network-aware scheduling of distributed DL training (simulator, policies, traces).")


def _fail(message: str) -> None:
    typer.secho(f"error: {message}", fg=typer.colors.RED, err=True)
    raise typer.Exit(2)


def _message(exc: BaseException) -> str:
    """The whole message of an error (``str``), not its first argument: a KeyError keeps its text unquoted."""
    if isinstance(exc, KeyError) and exc.args:
        return str(exc.args[0])
    return str(exc) or type(exc).__name__


def _finite_seconds(value: float) -> float:
    if value is not None and not math.isfinite(value):
        raise typer.BadParameter(f"{value} is not a finite number of seconds")
    return value


def _check_out_dir(out: Path, option: str = "--out") -> None:
    """``out`` must be a directory or creatable as one, outside the installed package, checked before any work
    (nothing written here)."""
    package = Path(__file__).resolve().parent
    where = Path(os.path.realpath(out))  # realpath: a symlink loop is reported below, not raised here
    if where == package or package in where.parents:
        _fail(f"{option} {out}: is inside the installed netlab package ({package}); write results elsewhere")
    if out.exists() and not out.is_dir():
        _fail(f"{option} {out}: exists and is not a directory; give a directory (it is created if missing)")
    parent = out
    while not parent.exists():
        parent = parent.parent
    if not parent.is_dir():
        _fail(f"{option} {out}: {parent} is not a directory")
    if not os.access(parent, os.W_OK | os.X_OK):
        _fail(f"{option} {out}: {parent} is not writable")


@app.command()
def simulate(
    trace: str = typer.Option("philly-sample", help="Trace name, spec string (e.g. 'synthetic,jobs=200') or path."),
    topology: str = typer.Option("leafspine,racks=4,hosts_per_rack=4,gpus_per_host=8,oversub=4",
                                 help="Topology spec string, YAML file or Crux topo.csv."),
    policy: str = typer.Option("fifo", help="Ordering policy (see `netlab policies`)."),
    placement: str = typer.Option(None, help="Placement policy; default: the policy's own, else consolidated."),
    netpolicy: str = typer.Option("none", help="Network policy: per-job priority class, weight, rate cap and "
                                  "paths (see `netlab policies`); none: every job alike."),
    network: str = typer.Option("tcp", help="Network model (see `netlab policies`): tcp (the default, "
                                "netlab.network.DEFAULT_NETWORK), fair, phase, ideal."),
    seed: int = typer.Option(0, min=0, help="Seed for every random stream of the run."),
    out: Path = typer.Option(Path("results/simulate"), help="Output directory."),
    max_jobs: int = typer.Option(None, min=1, help="Keep the first N jobs by submit time."),
    trace_dir: Path = typer.Option(None, help="Directory holding the shared traces."),
    checkpoint_s: float = typer.Option(10.0, min=0, callback=_finite_seconds,
                                       help="Checkpoint cost paid at each restart (s)."),
    restore_s: float = typer.Option(20.0, min=0, callback=_finite_seconds, help="Restore cost paid at each restart (s)."),
    quiet: bool = typer.Option(False, help="No progress bar."),
    link_history: str = typer.Option(None, help="Per-link history in links.parquet: full (every interval; the "
                                     "default), aggregate (per-link time-weighted load per --link-resolution-s) "
                                     "or none (netlab.sim.history): bounded memory for long traces."),
    link_resolution_s: float = typer.Option(3600.0, min=0, callback=_finite_seconds,
                                            help="Bin width of --link-history aggregate (s)."),
):
    """Simulate a trace; write jobs.parquet, links.parquet, summary.json, config.json."""
    from .errors import InputError
    from .experiments import run

    _check_out_dir(out)
    try:
        result = run(trace=trace, topology=topology, policy=policy, placement=placement, netpolicy=netpolicy,
                     network=network, seed=seed,
                     max_jobs=max_jobs, trace_dir=trace_dir, progress=None if not quiet else False,
                     checkpoint_s=checkpoint_s, restore_s=restore_s, link_history=link_history,
                     link_resolution_s=link_resolution_s)
    except (InputError, KeyError, ValueError, FileNotFoundError) as exc:
        _fail(_message(exc))
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
    """List the registered ordering, placement, preemption and network policies and network models."""
    from .network import NETWORKS
    from .policies import NETWORK_POLICIES, ORDERING, PLACEMENT, PREEMPTION

    for title, reg in (("ordering (--policy)", ORDERING), ("placement (--placement)", PLACEMENT),
                       ("preemption", PREEMPTION), ("network policy (--netpolicy)", NETWORK_POLICIES),
                       ("network (--network)", NETWORKS)):
        typer.echo(f"{title}:")
        for name, doc in reg.describe().items():
            typer.echo(f"  {name:18s} {doc}")


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
    oversub: list[float] = typer.Option(None, min=1, help="Oversubscription levels, repeatable (default: 2 and 8)."),
    seeds: int = typer.Option(None, min=1, help="Replicates per configuration, paired by the comparisons "
                                                "(default: 10)."),
    max_jobs: int = typer.Option(None, min=1, help="Keep the first N jobs."),
    baseline: str = typer.Option(None, help="Label every policy is compared with (default: "
                                            "tiresias+consolidated)."),
    backend: str = typer.Option("processes", help=BACKEND_HELP),
    workers: int = typer.Option(None, min=1, help="Worker processes (default: one per core)."),
    ideal: bool = typer.Option(True, help="Also run every scheduler once per seed on the ideal network (the ratio "
                                          "to ideal)."),
):
    """The main job: classic schedulers (fifo, fjf, tiresias, themis on consolidated placement) against
    network-aware ones (Dally, Tiresias with CASSINI, topology-aware best fit) on the bundled trace, on a
    leaf-spine at 2:1 and 8:1 (tcp network) and on the ideal network, 10 seeds; prints the summary table and
    one verdict per policy against tiresias+consolidated (paired by seed, 95% bootstrap intervals); writes
    an HTML report with the headline comparison first."""
    from .errors import InputError
    from .demo import demo_report
    from .sweep import StoreError

    _check_out_dir(out)
    if oversub and not all(math.isfinite(o) for o in oversub):
        _fail(f"--oversub {oversub}: every level must be a finite number >= 1")
    try:
        report = demo_report(out, trace=trace, topology=topology, seeds=seeds, max_jobs=max_jobs, backend=backend,
                             workers=workers, ideal=ideal, oversub=oversub or None, baseline=baseline)
    except (InputError, KeyError, ValueError, StoreError) as exc:
        _fail(_message(exc))
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
    from .errors import InputError
    from .sweep import GridError, StoreError, run_sweep
    from .sweep.backends import BACKENDS

    _check_out_dir(out)
    if backend not in BACKENDS:  # before the store exists: a bad option writes nothing
        _fail(f"--backend {backend!r}: not a sweep backend; one of {', '.join(BACKENDS.names())}")
    try:
        res = run_sweep(grid, out=out, backend=backend, progress=not quiet, address=address, workers=workers)
    except (InputError, KeyError, GridError, StoreError) as exc:
        _fail(_message(exc))
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
        _fail(f"--baseline needs ROOT to be one sweep store (a directory with manifest.json); {root} is not")
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
    from .sweep import StoreError, load_sweep

    try:
        res = load_sweep(root)
        base = pick_baseline(res.summary, baseline) if not res.summary.empty else None
    except (StoreError, ValueError) as exc:
        _fail(_message(exc))
    typer.echo(f"\npolicies (--baseline takes any): {', '.join(policies(res.summary)) or 'none finished'}")
    if base is None:
        typer.echo("\nno verdicts: the sweep has no tiresias+consolidated cells; pick one of its policies with "
                   "--baseline")
        return
    if not print_verdicts(comparison(res.summary, base)):
        typer.echo(f"\nno verdicts: nothing pairs with {base} by seed outside the ideal network")


def _check_store(root: Path, repair: bool) -> None:
    from .errors import InputError
    from .sweep import GridError, StoreError
    from .sweep.runner import check_store, repair_store

    try:
        check, res = (repair_store(root) if repair else (check_store(root), None))
    except (InputError, GridError, StoreError) as exc:
        _fail(_message(exc))
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
    from .sweep import StoreError

    if out is not None:
        _check_out_dir(out)
    try:
        check_destination((out if out is not None else sweep_dir / "report").absolute())
        path = render_report(sweep_dir, out, baseline=baseline)
    except (StoreError, ValueError) as exc:  # not a store, a corrupt cell, a bad baseline or destination
        _fail(_message(exc))
    typer.echo(f"report: {path.resolve()}")


@app.command(context_settings={"allow_extra_args": True, "ignore_unknown_options": True})
def notebooks(
    ctx: typer.Context,
    folder: Path = typer.Option(Path("notebooks"), "--dir", help="The notebooks' folder (default: ./notebooks, "
                                                                 "in a netlab checkout)."),
):
    """Start JupyterLab on the notebooks (adds --allow-root when run as root, which Jupyter refuses otherwise).
    Further arguments go to `jupyter lab` (e.g. --no-browser --port 8888)."""
    from .jupyter import JupyterError, lab_argv

    try:
        argv = lab_argv(folder, ctx.args)
    except JupyterError as exc:
        _fail(str(exc))
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
    from .errors import InputError
    from .validate.command import render, validate as run_validate
    from .validate.referee import RefereeError

    if runs_dir is not None:
        _check_out_dir(runs_dir, "--runs-dir")
    try:
        table, summary, rec = run_validate(scenario, against, regime, runs_dir, timeout_s)
    except (InputError, RefereeError) as exc:
        _fail(_message(exc))
    typer.echo(render(table, summary, rec))


from .cli_io import add_io_commands  # noqa: E402  (netlab import / netlab export: real clusters' files)
add_io_commands(app)

if __name__ == "__main__":  # pragma: no cover
    app()
