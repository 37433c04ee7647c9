"""Flow-level network models (see :mod:`netlab.network.model`): one module per model, each registered in
``NETWORKS`` when imported here."""

from . import fair, ideal, phase, tcp  # noqa: F401  (register the models)
from .maxmin import MaxMinResult, max_min
from .model import (ALLOCATION_KINDS, DEFAULT_NETWORK, NETWORKS, Capabilities, CommDemand, LiveNetwork, Moved,
                    NetSolution, NetworkModel, UnsupportedAllocation, capabilities_of, ideal_networks, is_ideal,
                    iteration_time,
                    make_network)
from .regimes import DEFAULT_REGIME, REGIMES, Regime, regime

__all__ = ["ALLOCATION_KINDS", "DEFAULT_NETWORK", "DEFAULT_REGIME", "max_min", "MaxMinResult", "NETWORKS", "REGIMES",
           "Capabilities", "CommDemand", "LiveNetwork", "Moved", "NetSolution", "NetworkModel", "Regime",
           "UnsupportedAllocation", "capabilities_of", "ideal_networks", "is_ideal", "iteration_time", "make_network",
           "regime"]
