"""Ordering policies; importing this package registers them all."""

from . import fifo  # noqa: F401
