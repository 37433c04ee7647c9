"""Ordering policies; importing this package registers them all."""

from . import fifo, sjf, srtf, themis, tiresias  # noqa: F401
