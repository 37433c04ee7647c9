"""Errors that become ``{"ok": false, "error": {type, message, field}}`` replies.

The ``type`` strings are part of the protocol (docs/testbed-design.md), so the
controller can react to a class of failure without parsing messages.
"""

from __future__ import annotations

import reprlib

#: a reply quotes at most this many characters of a value the request sent (a bad value can be a megabyte)
QUOTE_CHARS = 80
#: and carries a message and a field name of at most these lengths, however it was built
MESSAGE_CHARS = 1000
FIELD_CHARS = 64

_repr = reprlib.Repr()
_repr.maxstring = _repr.maxother = QUOTE_CHARS
_repr.maxlevel = 2
_repr.maxlist = _repr.maxtuple = _repr.maxdict = 4


def brief(value, limit: int = QUOTE_CHARS) -> str:
    """A ``repr`` of a request's value that quotes at most a prefix of it (nested containers elided)."""
    try:
        text = _repr.repr(value)
    except Exception:  # noqa: BLE001 - a repr that fails must not hide the real error
        text = f"<{type(value).__name__}>"
    return text if len(text) <= limit + 8 else text[:limit] + "...(cut)"


def _cut(text, limit: int):
    if text is None or len(str(text)) <= limit:
        return text
    return str(text)[:limit] + "...(cut)"


class AgentError(Exception):
    """A command failed; ``field`` names the offending argument if there is one."""

    type = "AgentError"

    def __init__(self, message: str, field: str | None = None):
        super().__init__(message)
        self.message = message
        self.field = field

    def to_json(self) -> dict:
        return {"type": self.type, "message": _cut(self.message, MESSAGE_CHARS), "field": _cut(self.field, FIELD_CHARS)}


class SpecError(AgentError):
    """The request itself is malformed: wrong type, range or an unknown field."""

    type = "SpecError"


class QdiscUnavailable(AgentError):
    """The kernel lacks the queueing discipline (probed at start)."""

    type = "QdiscUnavailable"


class NotFound(AgentError):
    """An interface, job or flow named in the request does not exist."""

    type = "NotFound"
