"""The ``tcp`` model's transport variants: one fluid, other parameters, each a registered network model.

A transport regime (:mod:`netlab.network.regimes`) differs from deep-buffer
Reno in how a link is shared, not in what a job is: the same fluid
(:mod:`netlab.network.tcp`) with other defaults (:data:`~.params.TRANSPORT_PARAMS`,
each with its source there) stands for it. Each variant is registered under
its own name, so ``--network dctcp`` runs it, the referee benchmark scores it
beside every other model, and a result table names what it computed with.
Keyword arguments still override any default, as for ``tcp``.
"""

from __future__ import annotations

from ..model import NETWORKS
from .model import TcpNetwork
from .params import TRANSPORT_PARAMS


def _variant(name: str, doc: str, defaults: dict) -> type[TcpNetwork]:
    def __init__(self, **kwargs):
        TcpNetwork.__init__(self, **{**defaults, **kwargs})

    cls = type(f"TcpNetwork_{name.replace('-', '_')}", (TcpNetwork,), dict(name=name, __doc__=doc, __init__=__init__,
                                                                               __module__=__name__))
    return NETWORKS.register(name, doc)(cls)


VARIANTS = {name: _variant(name, doc, defaults) for name, (doc, defaults) in TRANSPORT_PARAMS.items()}
