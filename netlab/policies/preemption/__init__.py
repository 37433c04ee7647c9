"""Preemption policies; importing this package registers them all."""

from . import priority  # noqa: F401
