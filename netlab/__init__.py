"""netlab: network-aware scheduling of distributed deep-learning training."""

from .numba_cache import configure as _configure_numba_cache

__version__ = "0.1.0"

_configure_numba_cache()  # before any kernel module is imported: an installed copy caches outside site-packages
