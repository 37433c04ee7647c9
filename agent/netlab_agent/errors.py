"""Errors that become ``{"ok": false, "error": {type, message, field}}`` replies.

The ``type`` strings are part of the protocol (docs/testbed-design.md), so the
controller can react to a class of failure without parsing messages.
"""

from __future__ import annotations


class AgentError(Exception):
    """A command failed; ``field`` names the offending argument if there is one."""

    type = "AgentError"

    def __init__(self, message: str, field: str | None = None):
        super().__init__(message)
        self.message = message
        self.field = field

    def to_json(self) -> dict:
        return {"type": self.type, "message": self.message, "field": self.field}


class SpecError(AgentError):
    """The request itself is malformed: wrong type, range or an unknown field."""

    type = "SpecError"


class QdiscUnavailable(AgentError):
    """The kernel lacks the queueing discipline (probed at start)."""

    type = "QdiscUnavailable"


class NotFound(AgentError):
    """An interface, job or flow named in the request does not exist."""

    type = "NotFound"
