"""``netlab import ...`` and ``netlab export ...``: real clusters' files in and out (typer sub-apps).

Every command is a thin shell over :mod:`netlab.integrations` or
:mod:`netlab.traces.sacct`; bad input (a topology.conf with a cycle, a sacct
line with a malformed TRES field, ...) is an :class:`~netlab.errors.InputError`
naming the file, line and field, raised before anything is written; the root
command group (:mod:`netlab.cli_base`) prints it as one ``error:`` line, exit
status 2. :mod:`netlab.cli` adds these sub-apps as ``export`` and ``import``.
"""

from __future__ import annotations

from pathlib import Path

import typer

from .cli_base import check_out_dir

export_app = typer.Typer(no_args_is_help=True, help="Write a netlab topology (and trace) in a scheduler's formats.")
import_app = typer.Typer(no_args_is_help=True, help="Read a real cluster's topology or job history into netlab.")


@export_app.command("slurm")
def export_slurm(
    topology: str = typer.Argument(..., help="Topology spec string, YAML file or Crux topo.csv."),
    out: Path = typer.Option(Path("topology.conf"), help="The topology.conf to write; topology.links.yaml (GPUs, "
                                                         "host rate) is written beside it."),
):
    """Write Slurm's topology.conf (topology/tree plugin) for a netlab topology."""
    import yaml

    from .integrations.slurm_topology import LINKS_SUFFIX, format_topology_conf, to_tree
    from .topology import load_topology

    topo = load_topology(topology)
    tree = to_tree(topo)
    gpus = sorted(set(int(g) for g in topo.host_gpus))
    links = {"gpus_per_host": gpus[0]} if len(gpus) == 1 else {}
    nics = sorted(set(float(g) for g in topo.host_nic_gbps))
    if len(nics) == 1:
        links["host_gbps"] = nics[0]
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(format_topology_conf(tree, header=f"topology.conf written by netlab from {topology!r}\n"
                                                     "LinkSpeed: the switch's downlink rate in Gbit/s"))
    beside = out.with_name(out.stem + LINKS_SUFFIX)
    beside.write_text(yaml.safe_dump(links, sort_keys=False))
    typer.echo(f"wrote {out} ({len(tree.switches)} switches, {topo.n_hosts} nodes) and {beside}")


@export_app.command("k8s")
def export_k8s(
    topology: str = typer.Argument(..., help="Topology spec string, YAML file or Crux topo.csv."),
    out: Path = typer.Option(Path("k8s"), help="Directory for node-labels.yaml, network-topology.yaml, "
                                               "app-groups.yaml."),
    trace: str = typer.Option(None, help="Trace whose jobs become AppGroups (name, spec or path)."),
    max_jobs: int = typer.Option(None, help="Keep the first N jobs of the trace (an integer >= 1)."),
    hop_cost: int = typer.Option(10, min=1, max=10_000, help="networkCost per switch-to-switch hop."),
    namespace: str = typer.Option("default", help="Namespace of the NetworkTopology and AppGroups."),
    gpus_per_pod: int = typer.Option(1, min=1, help="GPUs per pod (AppGroup members = GPUs / this)."),
):
    """Write Kubernetes scheduler-plugins objects (NetworkTopology, AppGroup) and node labels."""
    from .integrations.k8s import write_k8s
    from .topology import load_topology
    from .traces import load_trace

    check_out_dir(out)
    topo = load_topology(topology)
    df = load_trace(trace, max_jobs=max_jobs) if trace else None
    paths = write_k8s(topo, out, df, hop_cost=hop_cost, namespace=namespace, gpus_per_pod=gpus_per_pod)
    typer.echo("wrote " + ", ".join(str(p) for p in paths))


@import_app.command("slurm")
def import_slurm(
    conf: Path = typer.Argument(..., help="Slurm topology.conf (topology/tree plugin)."),
    out: Path = typer.Option(None, help="Write the topology as netlab YAML here (load it with --topology)."),
    host_gbps: float = typer.Option(None, help="Every node's link rate (Gbit/s); default: the YAML beside "
                                               "the file, else LinkSpeed, else 100."),
    gpus_per_host: int = typer.Option(None, help="GPUs per node (default: YAML beside, else 8)."),
    oversub: float = typer.Option(None, help="Uplink = downlink capacity / oversub where no rate is given."),
):
    """Build a netlab topology from topology.conf; print its hosts, racks and links. The options are checked by
    the topology.conf reader's schema (netlab.integrations.slurm_topology.LinkSpec)."""
    from .integrations.slurm_topology import read_topology_conf
    from .topology import save_yaml

    options = {k: v for k, v in dict(host_gbps=host_gbps, gpus_per_host=gpus_per_host, oversub=oversub).items()
               if v is not None}
    topo = read_topology_conf(conf, **options)
    typer.echo(repr(topo))
    typer.echo(topo.links_frame().groupby("tier").capacity_gbps.agg(["count", "min", "max"]).to_string())
    if out is not None:
        out.parent.mkdir(parents=True, exist_ok=True)
        save_yaml(topo, out)
        typer.echo(f"wrote {out}")


@import_app.command("sacct")
def import_sacct(
    dump: Path = typer.Argument(..., help="Output of sacct --parsable2 --allocations --format=JobID,JobName,"
                                          "Submit,Start,End,State,AllocTRES,NodeList"),
    out: Path = typer.Option(None, help="Write the trace (netlab's schema) as CSV here."),
    gpu_tres: str = typer.Option("gres/gpu", help="Where GPUs come from: gres/gpu (AllocTRES) or cpu."),
    seed: int = typer.Option(0, min=0, help="Seed of the model assignment."),
    skip_bad: bool = typer.Option(False, help="Drop malformed lines (listed) instead of failing."),
):
    """Load a sacct dump as a trace; print its jobs and what was filtered out (replay it with --trace
    'sacct,path=DUMP')."""
    from .traces.sacct import sacct

    # the loader itself, not a spec string: a path may hold ',' or '='
    df = sacct(path=str(dump), gpu_tres=gpu_tres, seed=seed, skip_bad=skip_bad)
    typer.echo(f"{len(df)} jobs, {int(df.gpus.sum())} GPUs requested in all, span {df.submit_s.max():.0f} s")
    for what, n in df.attrs.get("filtered", {}).items():
        if n:
            typer.echo(f"  filtered: {n} {what}")
    if out is not None:
        out.parent.mkdir(parents=True, exist_ok=True)
        df.to_csv(out, index=False)
        typer.echo(f"wrote {out}")
