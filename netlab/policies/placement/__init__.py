"""Placement policies; importing this package registers them all."""

from . import consolidated, first_fit  # noqa: F401
