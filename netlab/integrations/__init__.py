"""Real clusters in and out: Slurm (topology.conf, sacct history, a placement advisor) and Kubernetes exports.

Operators run Slurm or Kubernetes; these modules read their cluster's
description into netlab's one topology model and hand netlab's decisions back
in the formats their scheduler reads:

* :mod:`.slurm_topology`: ``topology.conf`` (topology/tree plugin) to and from a :class:`~netlab.topology.Topology`;
* :mod:`.slurm_local`: a real Slurm (munge, slurmdbd on MariaDB, slurmctld, several slurmd) on this one machine,
  for tests and for making sample data;
* :mod:`.slurm_advisor`: pending jobs and node state from ``squeue``/``sinfo``, a netlab placement, ``sbatch``;
* :mod:`.k8s`: scheduler-plugins ``NetworkTopology`` and ``AppGroup`` objects and node labels.

The ``sacct`` history loader is a trace loader (:mod:`netlab.traces.sacct`); Slurm's
compressed node lists (``n[01-04,07]``) are read by :mod:`netlab.hostlist`, below both.
These modules sit above the topology, trace and policy layers and below the
command line (:mod:`netlab.cli_io`).
"""
