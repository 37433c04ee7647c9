"""Slurm hostlists: ``n[01-03,05]`` <-> ``["n01", "n02", "n03", "n05"]``.

Why our own: the maintained library for this (python-hostlist) is GPL-2.0,
netlab is Apache-2.0; the syntax netlab needs is small. Grammar (Slurm's,
``slurm_hostlist`` in ``src/common/hostlist.c``), as far as netlab reads it:

* a list is comma-separated entries; commas inside brackets separate ranges;
* an entry is text with zero or more bracket groups, ``prefix[ranges]suffix``;
  several groups expand as a cartesian product, left group outermost
  (``r[1-2]n[1-2]`` is r1n1, r1n2, r2n1, r2n2);
* a range is ``a`` or ``a-b`` (``a <= b``), digits only; the width of ``a``
  (leading zeros) is kept: ``[08-10]`` is 08, 09, 10.

Anything else (an unclosed bracket, an empty range, ``b < a``, letters in a
range) is a :class:`HostlistError` saying where. Expansion is bounded
(:data:`MAX_HOSTS`) so a typo like ``n[1-99999999]`` fails at once.
"""

from __future__ import annotations

import itertools
import re

from .errors import InputError

#: a hostlist expanding to more names than this is refused (the largest topology netlab builds has 100,000 hosts)
MAX_HOSTS = 100_000

_RANGE = re.compile(r"(\d+)(?:-(\d+))?")


class HostlistError(InputError):
    """A Slurm hostlist is malformed; the message says which part."""


def _split_top(text: str) -> list[str]:
    """Split on commas outside brackets; brackets must balance and not nest."""
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        if ch == "[":
            if depth:
                raise HostlistError(f"hostlist {text!r}: nested '[' at character {i + 1}")
            depth = 1
        elif ch == "]":
            if not depth:
                raise HostlistError(f"hostlist {text!r}: ']' without '[' at character {i + 1}")
            depth = 0
        elif ch == "," and not depth:
            parts.append(text[start:i])
            start = i + 1
    if depth:
        raise HostlistError(f"hostlist {text!r}: '[' is never closed")
    parts.append(text[start:])
    return parts


def _ranges(group: str, whole: str) -> list[str]:
    out = []
    for part in group.split(","):
        m = _RANGE.fullmatch(part.strip())
        if m is None:
            raise HostlistError(f"hostlist {whole!r}: range {part!r} is not N or N-M (digits only)")
        lo, hi = m.group(1), m.group(2)
        if hi is None:
            out.append(lo)
            continue
        if int(hi) < int(lo):
            raise HostlistError(f"hostlist {whole!r}: range {part!r} ends before it starts")
        if int(hi) - int(lo) >= MAX_HOSTS:
            raise HostlistError(f"hostlist {whole!r}: range {part!r} has over {MAX_HOSTS:,} names")
        width = len(lo)
        out.extend(str(i).zfill(width) for i in range(int(lo), int(hi) + 1))
    return out


def expand(text: str) -> list[str]:
    """The names a hostlist stands for, in order (duplicates kept, as Slurm keeps them)."""
    text = str(text).strip()
    if not text:
        return []
    names: list[str] = []
    for entry in _split_top(text):
        entry = entry.strip()
        if not entry:
            raise HostlistError(f"hostlist {text!r}: empty entry (two commas in a row or a trailing comma)")
        pieces = re.split(r"\[([^\]]*)\]", entry)  # text, group, text, group, ..., text
        choices = [[p] if i % 2 == 0 else _ranges(p, text) for i, p in enumerate(pieces)]
        count = 1
        for c in choices:
            count *= len(c)
        if len(names) + count > MAX_HOSTS:
            raise HostlistError(f"hostlist {text!r}: over {MAX_HOSTS:,} names")
        names.extend("".join(combo) for combo in itertools.product(*choices))
    return names


_TAIL = re.compile(r"^(.*?)(\d+)$")


def compress(names) -> str:
    """A short hostlist for ``names`` (order kept): runs of one prefix with consecutive numbers of one width
    become ``prefix[a-b,c]``. ``expand(compress(x)) == list(x)`` for any list of names without brackets or commas."""
    groups: list[tuple[str, int, list[int]] | str] = []  # (prefix, width, numbers) or a plain name
    for name in names:
        name = str(name)
        if any(c in name for c in "[],"):
            raise HostlistError(f"name {name!r}: '[', ']' and ',' cannot appear in a host name")
        m = _TAIL.match(name)
        if m is None:
            groups.append(name)
            continue
        prefix, digits = m.group(1), m.group(2)
        last = groups[-1] if groups else None
        if isinstance(last, tuple) and last[0] == prefix and last[1] == len(digits) and int(digits) > last[2][-1]:
            last[2].append(int(digits))
        else:
            groups.append((prefix, len(digits), [int(digits)]))
    out = []
    for g in groups:
        if isinstance(g, str):
            out.append(g)
            continue
        prefix, width, nums = g
        if len(nums) == 1:
            out.append(f"{prefix}{nums[0]:0{width}d}")
            continue
        runs, start = [], nums[0]
        for a, b in zip(nums, nums[1:] + [None]):
            if b != a + 1:
                runs.append(f"{start:0{width}d}" if start == a else f"{start:0{width}d}-{a:0{width}d}")
                start = b
        out.append(f"{prefix}[{','.join(runs)}]")
    return ",".join(out)
