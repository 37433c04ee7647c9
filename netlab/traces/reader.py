"""Reading delimited trace files so that every bad value can be traced to its line.

pandas' fast CSV reader forgets line numbers and pads short rows with NaN, so a
truncated line would load as a job with no GPU count. Here the file goes
through :mod:`csv` once (C speed), each row keeps its line number, and columns
are converted with vectorised pandas calls; only rows that fail are looked at
one by one, to report them. Blank lines carry no data and are ignored.
"""

from __future__ import annotations

import csv
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

from .schema import TraceError


class Table:
    """A trace file as string columns plus ``line``; collects bad rows instead of guessing.

    Converters (:meth:`number`, :meth:`timestamp`, :meth:`mapped`) record each
    failing row as ``{"line", "field", "reason"}``. :meth:`good` then raises
    :class:`TraceError` for the first one, or with ``skip_bad`` drops them all
    and warns how many.
    """

    def __init__(self, path, *, required: tuple[str, ...] = (), names: tuple[str, ...] | None = None,
                 sep: str = ",", skip_bad: bool = False):
        self.path = Path(path)
        self.skip_bad = skip_bad
        self.problems: list[dict] = []
        quoting = csv.QUOTE_NONE if sep == "\t" else csv.QUOTE_MINIMAL
        with open(self.path, newline="", encoding="utf-8") as fh:
            reader = csv.reader(fh, delimiter=sep, quoting=quoting)
            rows = [(reader.line_num, r) for r in reader if r]
        if names is None:
            if not rows:
                raise TraceError(f"{self.path}, line 1: empty file, expected a header")
            header = [h.strip() for h in rows.pop(0)[1]]
            missing = [c for c in required if c not in header]
            if missing:
                raise TraceError(f"{self.path}, line 1 (header): missing column(s) "
                                 f"{', '.join(repr(c) for c in missing)}; found {header}")
        else:
            header = list(names)
        width = len(header)
        for line, r in rows:
            if len(r) != width:
                field = header[len(r)] if len(r) < width else f"<extra field {width + 1}>"
                self._add(line, field, f"expected {width} fields, found {len(r)}")
        ok = [r for _, r in rows if len(r) == width]
        self.frame = pd.DataFrame(ok, columns=header, dtype=str) if ok else pd.DataFrame(columns=header, dtype=str)
        self.frame["line"] = np.array([line for line, r in rows if len(r) == width], dtype="int64")

    def _add(self, line: int, field: str, reason: str) -> None:
        self.problems.append({"line": int(line), "field": field, "reason": reason})

    def bad(self, mask: pd.Series, field: str, reason: str) -> None:
        """Record every row where ``mask`` is true as bad in ``field``."""
        for line, value in zip(self.frame["line"][mask], self.frame[field][mask]):
            self._add(line, field, f"{reason} (value {value!r})")

    def number(self, col: str, *, integer: bool = False, positive: bool = False, nonnegative: bool = False,
               allow_empty: bool = False) -> pd.Series:
        """Column ``col`` as float; non-numbers and values outside the bounds are bad rows."""
        text = self.frame[col].str.strip()
        values = pd.to_numeric(text, errors="coerce").astype(float)
        empty = text.eq("")
        bad = values.isna() & ~(allow_empty & empty)
        self.bad(bad, col, "not a number")
        self.bad(np.isinf(values), col, "not finite")
        bad |= np.isinf(values)
        checks = [(integer, values % 1 != 0, "not an integer"), (positive, values <= 0, "must be > 0"),
                  (nonnegative, values < 0, "must be >= 0")]
        for wanted, fails, reason in checks:
            if wanted:
                fails = fails & values.notna() & ~bad
                self.bad(fails, col, reason)
                bad |= fails
        return values

    def timestamp(self, col: str, fmt: str) -> pd.Series:
        """Column ``col`` parsed with ``fmt``; unparsable stamps are bad rows."""
        stamps = pd.to_datetime(self.frame[col].str.strip(), format=fmt, errors="coerce")
        self.bad(stamps.isna(), col, f"not a timestamp in format {fmt!r}")
        return stamps

    def mapped(self, col: str, mapping, what: str) -> pd.Series:
        """Column ``col`` looked up in ``mapping`` (dict or function); misses are bad rows."""
        key = self.frame[col].str.strip()
        out = key.map(mapping)
        self.bad(out.isna(), col, f"unknown {what}")
        return out

    def good(self, frame: pd.DataFrame) -> tuple[pd.DataFrame, list[dict]]:
        """``frame`` (aligned with :attr:`frame`) without bad rows, and the skipped list.

        Raises :class:`TraceError` for the first bad line unless ``skip_bad``.
        """
        if not self.problems:
            return frame, []
        problems = sorted(self.problems, key=lambda p: p["line"])
        lines = sorted({p["line"] for p in problems})
        if not self.skip_bad:
            p = problems[0]
            more = f" ({len(lines) - 1} more bad line(s); skip_bad=True drops them)" if len(lines) > 1 else ""
            raise TraceError(f"{self.path}, line {p['line']}, field {p['field']!r}: {p['reason']}{more}")
        warnings.warn(f"{self.path}: skipped {len(lines)} bad row(s) (see df.attrs['skipped']); "
                      f"first: line {problems[0]['line']}, field {problems[0]['field']!r}: {problems[0]['reason']}",
                      stacklevel=3)
        keep = ~self.frame["line"].isin(lines)
        return frame[keep.to_numpy()], problems
