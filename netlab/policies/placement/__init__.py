"""Placement policies; importing this package registers them all."""

from . import consolidated, first_fit, gandiva, k8s_netoverhead, random_scatter  # noqa: F401
from . import topo_bestfit  # noqa: F401
from . import tp_aware  # noqa: F401,E402  (wraps a base policy: after the ones it may wrap)
from . import predictive  # noqa: F401,E402  (predictive and oracle: score candidates by slowdown)
from .. import cassini  # noqa: F401,E402  (registers "cassini", which wraps the policies above)
