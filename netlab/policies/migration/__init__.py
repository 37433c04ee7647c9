"""Migration policies (the fifth decision: moving running jobs); importing this package registers them."""

from . import congestion, none  # noqa: F401
