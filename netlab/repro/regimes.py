"""The reproductions per transport regime: which regimes a grid runs, each one's network model (from the registry
:mod:`netlab.network.regimes`, by name), and which regime each paper's own setup corresponds to, and why.

Why per regime: the papers' conclusions depend on the transport (issue 26). A time shift such as CASSINI's
matters where jobs that start in step stay in step (a rate-fair, ECN-reacting transport); deep-buffer TCP
separates jobs into turns by itself (a flow in flight holds the queue), leaving a time shift little to do. A
verdict computed for one regime says so, and the regime the paper's testbed ran is named beside it.

Nothing here switches on a regime's or a model's name: a regime is looked up in the registry, which names the
model spec that represents it; the paper regimes are choices by name, as a grid's list of networks is.
"""

from __future__ import annotations

from collections.abc import Iterable

import pandas as pd

#: per paper: the regime its evaluation setup corresponds to, and why (``reference/anchors.md``)
PAPER_REGIMES = {
    "CASSINI": ("dcqcn", "CASSINI's testbed used RDMA-capable NICs (50 Gbit/s per A100 server) behind an ECN-marking "
                         "switch and counts ECN-marked packets (its '33x fewer'): RoCE with DCQCN, a rate-based, "
                         "ECN-reacting transport in which jobs that start in step stay in step; the rate-fair "
                         "regime stands for it (the testbed details are marked unverified in anchors.md)"),
    "Dally": ("dcqcn", "Dally was evaluated in a simulator built on ASTRA-sim, not on a TCP testbed: ASTRA-sim's "
                       "analytical network serves each link's chunks in turn with no loss and no congestion window "
                       "(no leader advantage, no RTO tail), and its packet-level backend (ns-3) models RDMA with "
                       "DCQCN; both are closest to the rate-fair, lossless regime. The paper does not say which "
                       "backend it used: this is an inference, not a statement of the paper"),
}


def registry():
    """The transport regimes' registry (imported here: reading results needs no network package)."""
    from ..network.regimes import REGIMES

    return REGIMES


def names() -> list[str]:
    """Every registered regime, in the registry's order."""
    return list(registry().names())


def network_of(regime: str) -> dict:
    """The settings a simulation of ``regime`` runs with: ``network``, the model the registry names for it. An
    unknown regime is the registry's UnknownNameError naming the known ones."""
    from ..network.regimes import regime as get

    return dict(network=get(regime).network)


def ordered(regimes: Iterable[str] | None, present: Iterable[str]) -> list[str]:
    """``regimes`` if given, else the regimes in ``present`` (a column), registered ones first in the
    registry's order, then any others as they come."""
    if regimes is not None:
        return list(regimes)
    seen = list(dict.fromkeys(str(r) for r in present if pd.notna(r)))
    try:
        order = names()
    except ImportError:  # pragma: no cover - reading recorded results without the registry
        order = []
    return [r for r in order if r in seen] + [r for r in seen if r not in order]


def with_paper_regime(claims: pd.DataFrame, system: str) -> pd.DataFrame:
    """``claims`` (one row per claim and ``regime``) with ``paper_regime`` (the regime ``system``'s setup corresponds
    to), ``paper_regime_why`` and ``is_paper_regime`` (this row was computed in that regime)."""
    regime, why = PAPER_REGIMES[system]
    out = claims.assign(paper_regime=regime, paper_regime_why=why)
    return out.assign(is_paper_regime=out.regime == regime if "regime" in out else False)


def regime_specs() -> dict:
    """Every registered regime's network model, the referee transport it is scored against and what it stands for,
    for a results file: which model each regime's figures were computed on."""
    from ..network.regimes import regimes

    return {r.name: dict(network=r.network, referee=r.referee, description=r.description) for r in regimes()}


def paper_regimes() -> dict:
    """Per paper: the regime its setup corresponds to and why (:data:`PAPER_REGIMES`), for a results file."""
    return {system: dict(regime=regime, why=why) for system, (regime, why) in PAPER_REGIMES.items()}
