"""Ordering policies; importing this package registers them all."""

from . import edf, fairshare, fifo, priority, sjf, srtf, themis, tiresias  # noqa: F401
