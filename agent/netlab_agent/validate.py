"""Declarative argument checks shared by the job and traffic commands.

A schema maps each field to (required, check, description); unknown fields are
an error naming the field, so a typo (``rate_mibt``) never silently becomes a
default.
"""

from __future__ import annotations

import math
import re

from .errors import SpecError

NAME_RE = re.compile(r"^[A-Za-z0-9_.-]{1,64}$")


def is_int(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def is_num(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def name_id(v) -> bool:
    """Ids become file names: a short safe string or an integer."""
    return (is_int(v) and v >= 0) or (isinstance(v, str) and bool(NAME_RE.match(v)))


def check_args(args, schema: dict) -> dict:
    if not isinstance(args, dict):
        raise SpecError("args must be an object")
    for key in args:
        if key not in schema:
            raise SpecError(f"unknown field {key!r}", key)
    out = {}
    for key, (required, check, what) in schema.items():
        if key not in args or args[key] is None:
            if required:
                raise SpecError(f"missing field {key!r}", key)
            continue
        if not check(args[key]):
            raise SpecError(f"{key} must be {what}, got {args[key]!r}", key)
        out[key] = args[key]
    return out
