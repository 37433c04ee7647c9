"""Network policies (the fourth decision: per-job network allocations); importing this package registers them."""

from . import crux, none  # noqa: F401
