"""Declarative argument checks shared by the job and traffic commands.

A schema maps each field to (required, check, description); unknown fields are
an error naming the field, so a typo (``rate_mibt``) never silently becomes a
default.
"""

from __future__ import annotations

import math
import re

from .errors import SpecError, brief

# Job and flow ids become directory and file names under the state dir: a letter or digit first (so
# never "." or ".."), then letters, digits, "_", "." or "-"; at most 64 characters. The controller holds
# host names to the same pattern (netlab.topology.NAME_PATTERN); this package cannot import netlab.
NAME_PATTERN = r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}"
NAME_RE = re.compile(NAME_PATTERN)
# Linux interface names: 1-15 bytes, no "/", ":" or whitespace (they reach tc's argv and rank env vars).
IFNAME_RE = re.compile(r"[A-Za-z0-9_.-]{1,15}")
# A rank's socket interface may also be an address label ("eth0:j3", at most 15 bytes as IFNAMSIZ): gloo
# and NCCL look interfaces up by getifaddrs() names, which are labels, so a label gives a job its own address.
SOCKET_IFNAME_RE = re.compile(r"[A-Za-z0-9_.-]{1,15}(:[A-Za-z0-9_.-]{1,14})?")
NAME_WHAT = f"a non-negative integer or a name matching {NAME_PATTERN}"
IFNAME_WHAT = f"an interface name matching {IFNAME_RE.pattern} (not '.' or '..')"
SOCKET_IFNAME_WHAT = f"an interface name or address label matching {SOCKET_IFNAME_RE.pattern}, at most 15 bytes"


def is_int(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def is_num(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def name_id(v) -> bool:
    """Ids become file names: a short safe string or an integer."""
    return (is_int(v) and v >= 0) or (isinstance(v, str) and NAME_RE.fullmatch(v) is not None)


def ifname_ok(v) -> bool:
    return isinstance(v, str) and IFNAME_RE.fullmatch(v) is not None and v not in (".", "..")


def socket_ifname_ok(v) -> bool:
    return ifname_ok(v) or (isinstance(v, str) and len(v) <= 15 and SOCKET_IFNAME_RE.fullmatch(v) is not None
                            and ifname_ok(v.partition(":")[0]))


def check_args(args, schema: dict) -> dict:
    if not isinstance(args, dict):
        raise SpecError("args must be an object")
    for key in args:
        if key not in schema:
            raise SpecError(f"unknown field {brief(key)}", key)
    out = {}
    for key, (required, check, what) in schema.items():
        if key not in args or args[key] is None:
            if required:
                raise SpecError(f"missing field {brief(key)}", key)
            continue
        if not check(args[key]):
            raise SpecError(f"{key} must be {what}, got {brief(args[key])}", key)
        out[key] = args[key]
    return out
