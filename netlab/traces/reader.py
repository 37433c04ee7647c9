"""Reading delimited trace files so that every bad value can be traced to its line.

pandas' fast CSV reader forgets line numbers and pads short rows with NaN, so a
truncated line would load as a job with no GPU count. Here the file goes
through :mod:`csv` once (C speed), each row keeps its line number, and columns
are converted with vectorised pandas calls; only rows that fail are looked at
one by one, to report them. Blank lines carry no data and are ignored.

Bounds, checked before the rows are held in memory: a file over
:data:`MAX_FILE_BYTES` is refused before it is read, one over :data:`MAX_ROWS`
lines as soon as the line past the limit is reached, and a field over the
:mod:`csv` limit (128 KiB) where it is. Bytes that are not UTF-8 (a binary or
Latin-1 file) are refused with their line. Each is one :class:`TraceError`
naming the file and line.
"""

from __future__ import annotations

import csv
import io
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

from ..errors import read_text
from .schema import TraceError

#: the largest shared trace (philly.csv) is 3.4 MB and 82,247 jobs; these bounds leave ample room
MAX_FILE_BYTES = 256 * 2**20
MAX_ROWS = 2_000_000
#: integer columns (GPUs, batch sizes) above this are refused, not wrapped around in int64
MAX_INT = 2**31 - 1
#: timestamps are read within these years (the Timestamp range is only ~584 years, so spans beyond overflow)
YEARS = (1970, 2200)


def read_rows(path, sep: str = ",", *, max_rows: int | None = None) -> list[tuple[int, list[str]]]:
    """(line, fields) for each non-blank row of a UTF-8 delimited file, within the bounds above."""
    path = Path(path)
    max_rows = MAX_ROWS if max_rows is None else max_rows
    text = read_text(path, TraceError, MAX_FILE_BYTES, what="trace file")
    quoting = csv.QUOTE_NONE if sep in ("\t", "|") else csv.QUOTE_MINIMAL  # sacct --parsable2 quotes nothing
    reader = csv.reader(io.StringIO(text, newline=""), delimiter=sep, quoting=quoting)
    rows = []
    try:
        for r in reader:
            if reader.line_num > max_rows + 1:  # + the header
                raise TraceError(f"{path}, line {reader.line_num}: more than {max_rows:,} rows, over the limit "
                                 "(netlab.traces.reader.MAX_ROWS)")
            if r:
                rows.append((reader.line_num, r))
    except csv.Error as exc:
        reason = str(exc)
        if "field larger than field limit" in reason:
            reason = f"a field is longer than {csv.field_size_limit():,} characters (the limit)"
        raise TraceError(f"{path}, line {reader.line_num}: not valid CSV: {reason}") from None
    return rows


def read_header(path) -> list[str]:
    """The header fields of a delimited file (its first line), with the same checks as :func:`read_rows`.

    Only the first line is read (a bounded read), so a file of the wrong kind is refused cheaply.
    """
    path = Path(path)
    try:
        with open(path, "rb") as fh:
            first = fh.readline(2**20)
    except IsADirectoryError:
        raise TraceError(f"{path}: is a directory, expected a trace file") from None
    except OSError as exc:
        raise TraceError(f"{path}: cannot read: {exc.strerror or exc}") from None
    try:
        line = first.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise TraceError(f"{path}, line 1: not UTF-8 text (byte 0x{first[exc.start]:02x}); a trace file must be "
                         "UTF-8 (save it as UTF-8, not Latin-1 or a binary format)") from None
    if "\x00" in line:
        raise TraceError(f"{path}, line 1: NUL byte; a trace file must be text (UTF-8)")
    try:
        return next(csv.reader([line]), [])
    except csv.Error as exc:
        raise TraceError(f"{path}, line 1 (header): not valid CSV: {exc}") from None


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
        rows = read_rows(self.path, sep)
        if names is None:
            if not rows:
                raise TraceError(f"{self.path}, line 1: empty file, expected a header")
            header = [h.strip() for h in rows.pop(0)[1]]
            missing = [c for c in required if c not in header]
            if missing:
                raise TraceError(f"{self.path}, line 1 (header): missing column(s) "
                                 f"{', '.join(repr(c) for c in missing)}; found {header}")
            dup = sorted({h for h in header if header.count(h) > 1})
            if dup:
                raise TraceError(f"{self.path}, line 1 (header): column(s) {dup} given twice")
            if not rows:
                raise TraceError(f"{self.path}: a header but no job rows (a trace needs at least one job)")
        else:
            header = list(names)
            if not rows:
                raise TraceError(f"{self.path}: no job rows (a trace needs at least one job)")
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
                  (nonnegative, values < 0, "must be >= 0"), (integer, values.abs() > MAX_INT,
                                                               f"must be <= {MAX_INT:,}")]
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
        outside = stamps.notna() & ((stamps.dt.year < YEARS[0]) | (stamps.dt.year >= YEARS[1]))
        self.bad(outside, col, f"outside the years {YEARS[0]}-{YEARS[1] - 1}")
        return stamps.where(~outside)

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
