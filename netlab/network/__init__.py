"""Flow-level network models (see :mod:`netlab.network.model`)."""

from .maxmin import MaxMinResult, max_min
from .model import DEFAULT_NETWORK, NETWORKS, CommDemand, NetSolution, NetworkModel, iteration_time
from . import tcp as _tcp  # noqa: F401  (registers the "tcp" model)

__all__ = ["DEFAULT_NETWORK", "max_min", "MaxMinResult", "NETWORKS", "CommDemand", "NetSolution", "NetworkModel", "iteration_time"]
