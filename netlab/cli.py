"""The ``netlab`` command line (typer). Every command is a thin shell over a library call."""

from __future__ import annotations

import json
from pathlib import Path

import typer

app = typer.Typer(add_completion=False, no_args_is_help=True,
                  help="netlab: network-aware scheduling of distributed DL training (simulator, policies, traces).")


def _fail(message: str) -> None:
    typer.secho(f"error: {message}", fg=typer.colors.RED, err=True)
    raise typer.Exit(2)


@app.command()
def simulate(
    trace: str = typer.Option("philly-sample", help="Trace name, spec string (e.g. 'synthetic,jobs=200') or path."),
    topology: str = typer.Option("leafspine,racks=4,hosts_per_rack=4,gpus_per_host=8,oversub=4",
                                 help="Topology spec string, YAML file or Crux topo.csv."),
    policy: str = typer.Option("fifo", help="Ordering policy (see `netlab policies`)."),
    placement: str = typer.Option(None, help="Placement policy; default: the policy's own, else consolidated."),
    network: str = typer.Option("fair", help="fair | phase | ideal"),
    seed: int = typer.Option(0, help="Seed for every random stream of the run."),
    out: Path = typer.Option(Path("results/simulate"), help="Output directory."),
    max_jobs: int = typer.Option(None, help="Keep the first N jobs by submit time."),
    trace_dir: Path = typer.Option(None, help="Directory holding the shared traces."),
    checkpoint_s: float = typer.Option(10.0, help="Checkpoint cost paid at each restart (s)."),
    restore_s: float = typer.Option(20.0, help="Restore cost paid at each restart (s)."),
    quiet: bool = typer.Option(False, help="No progress bar."),
):
    """Simulate a trace; write jobs.parquet, links.parquet, summary.json, config.json."""
    from .experiments import run

    try:
        result = run(trace=trace, topology=topology, policy=policy, placement=placement, network=network, seed=seed,
                     max_jobs=max_jobs, trace_dir=trace_dir, progress=None if not quiet else False,
                     checkpoint_s=checkpoint_s, restore_s=restore_s)
    except (KeyError, ValueError, FileNotFoundError) as exc:
        _fail(exc.args[0] if exc.args else str(exc))
    result.save(out)
    s = result.summary
    typer.echo(json.dumps({k: s[k] for k in ("jobs", "finished", "avg_jct_s", "p50_jct_s", "p99_jct_s", "makespan_s",
                                              "avg_queue_s", "gpu_util", "overload_gbit", "wall_s", "events")},
                          indent=2))
    typer.echo(f"wrote {out}/jobs.parquet, links.parquet, summary.json, config.json")


@app.command()
def policies():
    """List the registered ordering, placement and preemption policies and network models."""
    from .network import NETWORKS
    from .policies import ORDERING, PLACEMENT, PREEMPTION

    for title, reg in (("ordering (--policy)", ORDERING), ("placement (--placement)", PLACEMENT),
                       ("preemption", PREEMPTION), ("network (--network)", NETWORKS)):
        typer.echo(f"{title}:")
        for name, doc in reg.describe().items():
            typer.echo(f"  {name:18s} {doc}")


@app.command()
def traces():
    """List the trace loaders and where their files are."""
    from .traces import list_traces

    df = list_traces()
    typer.echo(df.to_string(index=False))


@app.command()
def demo(
    out: Path = typer.Option(Path("results/demo"), help="Where the table and figures go."),
    trace: str = typer.Option("philly-sample", help="Trace (default: the sample bundled with the package)."),
    topology: str = typer.Option(None, help="Topology spec (default: a 128-GPU 4:1 leaf-spine)."),
    seeds: int = typer.Option(1, help="Seeds per configuration."),
    max_jobs: int = typer.Option(None, help="Keep the first N jobs."),
):
    """The main job: simulate the bundled trace under several policies, print a table, write figures."""
    from .experiments import DEMO_TOPOLOGY
    from .report import demo_report

    summary_path = demo_report(out, trace=trace, topology=topology or DEMO_TOPOLOGY, seeds=range(seeds),
                               max_jobs=max_jobs)
    typer.echo(f"\nresults and figures in {summary_path.parent.resolve()}")


if __name__ == "__main__":  # pragma: no cover
    app()
