"""Transport regimes: which network model stands for which real transport, and what checks it.

netlab's verdicts depend on the transport (issue 26): a leader advantage that
makes jobs take turns by themselves is a deep-buffer Reno phenomenon, a
rate-fair RoCE/DCQCN fabric has none, and a shallow-buffer TCP fabric loses
packets and waits for retransmission timeouts. A researcher must be able to
say which of these a result was computed for. A :class:`Regime` is that
choice, named: the network model that represents it (a ``NETWORKS`` name,
what ``netlab simulate --network`` takes), the packet-level referee's
transport it is validated against (a key of
:data:`netlab.validate.scenario.REGIMES`; ``benchmarks/bench_referee.py``
scores every model on it) and the real setups it stands for.

Code outside ``netlab/network/`` asks a regime for its ``network`` and never
switches on a regime's or model's name (``tests/test_model_names.py``).
"""

from __future__ import annotations

from dataclasses import dataclass

from ..registry import Registry

#: the regime a simulation is in unless told otherwise: the default network model's
DEFAULT_REGIME = "reno-deep"


@dataclass(frozen=True)
class Regime:
    """One transport regime (see the module doc).

    ``network``: the registered network model that represents it (``--network``); ``referee``: the referee
    transport it is scored against; ``description``: the real setups it stands for, one line.
    """

    name: str
    network: str
    referee: str
    description: str


REGIMES: Registry[Regime] = Registry("transport regime")


def _register(regime: Regime) -> Regime:
    REGIMES.register(regime.name, doc=f"{regime.description} (--network {regime.network})")(lambda: regime)
    return regime


for _r in (
    Regime("reno-deep", "tcp", "reno-deep",
           "deep-buffer drop-tail TCP (Linux Reno/Cubic, Ethernet switches with MBs per port): the testbed's own"),
    Regime("reno-shallow", "tcp-shallow", "reno-shallow",
           "shallow-buffer drop-tail TCP (commodity ToRs, ~100 packets per port): losses and retransmission timeouts"),
    Regime("dctcp", "dctcp", "dctcp",
           "DCTCP with ECN step marking (datacenter TCP on ECN-enabled switches)"),
    Regime("dcqcn", "dcqcn", "dcqcn",
           "rate-fair RoCEv2 with DCQCN and ECN (RDMA NICs; CASSINI's testbed): per-flow fair, no leader advantage"),
):
    _register(_r)


def regime(name: str, field: str | None = None) -> Regime:
    """The registered regime ``name``; else one UnknownNameError naming ``field`` and every regime."""
    return REGIMES.get(name, field)()


def regimes() -> list[Regime]:
    """Every registered regime, by name."""
    return [regime(n) for n in REGIMES.names()]


def regime_of_network(network: str) -> list[str]:
    """The regimes a network model represents (by name; empty for a model that represents none)."""
    return [r.name for r in regimes() if r.network == network]
