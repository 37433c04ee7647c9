"""Reading delimited trace files so that every bad value can be traced to its line, in memory bounded by the file.

pandas' fast CSV reader forgets line numbers and pads short rows with NaN, so a
truncated line would load as a job with no GPU count. Here the file is streamed
through :mod:`csv` once (C speed), each row keeps its line number, and rows
become compact string columns (Arrow-backed ``str``) every :data:`CHUNK_ROWS`
rows, so no Python object per row outlives its chunk; columns are then
converted with vectorised pandas calls. Blank lines carry no data and are
ignored.

Bad rows cost no memory per row either: they are marked in a boolean mask and
only the first :data:`MAX_REPORTED` are described (file, line, field, a
bounded quote of the value); the rest are counted. Without ``skip_bad`` a file
with more than :data:`MAX_REPORTED` rows of the wrong width stops being read
there.

Bounds, checked before the rows are held in memory: a path that is not a
regular file (a FIFO would block, a device never end) is refused before it is
read, a file over :data:`MAX_FILE_BYTES` too, one over :data:`MAX_ROWS` lines
as soon as the line past the limit is reached, and a field over the :mod:`csv`
limit (128 KiB) where it is. Bytes that are not UTF-8 (a binary or Latin-1
file) and NUL bytes are refused with their line. Each is one
:class:`TraceError` naming the file and line.
"""

from __future__ import annotations

import codecs
import contextlib
import csv
import io
import os
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

from ..errors import short
from ..fileio import NotRegularFile, open_regular
from .schema import TraceError

#: the largest shared trace (philly.csv) is 3.4 MB and 82,247 jobs; these bounds leave ample room
MAX_FILE_BYTES = 256 * 2**20
MAX_ROWS = 2_000_000
#: integer columns (GPUs, batch sizes) above this are refused, not wrapped around in int64
MAX_INT = 2**31 - 1
#: timestamps are read within these years (the Timestamp range is only ~584 years, so spans beyond overflow)
YEARS = (1970, 2200)
#: bad rows described (in the error, or in ``attrs["skipped"]``); more are only counted
MAX_REPORTED = 10
#: rows held as Python lists before they become string columns
CHUNK_ROWS = 50_000
#: files over this size are checked whole before any converted row is kept (see :meth:`Table.load`)
VALIDATE_FIRST_BYTES = 16 * 2**20


def _open_trace(path: Path):
    """The file as binary, after the checks that need no reading (a regular file, within the size bound)."""
    try:
        fh = open_regular(path)
    except FileNotFoundError:
        from .schema import TraceNotFound

        raise TraceNotFound(f"{path}: no such file") from None
    except NotRegularFile as exc:
        raise TraceError(f"{path}: is {exc.kind}, expected a trace file (a regular file)") from None
    except OSError as exc:
        raise TraceError(f"{path}: cannot read: {exc.strerror or exc}") from None
    size = os.fstat(fh.fileno()).st_size
    if size > MAX_FILE_BYTES:
        fh.close()
        raise TraceError(f"{path}: trace file is {size:,} bytes, over the limit of {MAX_FILE_BYTES:,} bytes")
    return fh


def _utf8_error(path: Path) -> TraceError:
    """The error for the first byte of ``path`` that is not UTF-8, with its line (found in bounded blocks)."""
    decoder = codecs.getincrementaldecoder("utf-8")()
    offset = lines = 0
    with open_regular(path) as fh:
        while block := fh.read(2**20):
            try:
                decoder.decode(block)
            except UnicodeDecodeError as exc:
                bad = block[max(exc.start, 0)] if exc.start < len(block) else block[-1]
                line = lines + block.count(b"\n", 0, max(exc.start, 0)) + 1
                return TraceError(f"{path}, line {line}: not UTF-8 text (byte 0x{bad:02x}); a trace file must be "
                                  "UTF-8 (save it as UTF-8, not Latin-1 or a binary format)")
            lines += block.count(b"\n")
            offset += len(block)
    return TraceError(f"{path}: not UTF-8 text; a trace file must be UTF-8")


def _rows(path: Path, sep: str, max_rows: int):
    """(line, fields) for each row of a UTF-8 delimited file, streamed, within the bounds above."""
    quoting = csv.QUOTE_NONE if sep in ("\t", "|") else csv.QUOTE_MINIMAL  # sacct --parsable2 quotes nothing

    def text_lines(text):
        for number, line in enumerate(text, start=1):
            if "\x00" in line:  # csv accepts NUL since Python 3.11; a text trace never holds one
                raise TraceError(f"{path}, line {number}: NUL byte; a trace file must be text (UTF-8)")
            yield line

    with io.TextIOWrapper(_open_trace(path), encoding="utf-8", newline="") as text:  # closes the file too
        reader = csv.reader(text_lines(text), delimiter=sep, quoting=quoting)
        try:
            for r in reader:
                if reader.line_num > max_rows + 1:  # + the header
                    raise TraceError(f"{path}, line {reader.line_num}: more than {max_rows:,} rows, over the limit "
                                     "(netlab.traces.reader.MAX_ROWS)")
                yield reader.line_num, r
        except UnicodeDecodeError:
            raise _utf8_error(path) from None
        except csv.Error as exc:
            reason = str(exc)
            if "field larger than field limit" in reason:
                reason = f"a field is longer than {csv.field_size_limit():,} characters (the limit)"
            raise TraceError(f"{path}, line {reader.line_num}: not valid CSV: {reason}") from None


def read_rows(path, sep: str = ",", *, max_rows: int | None = None) -> list[tuple[int, list[str]]]:
    """(line, fields) for each non-blank row of a UTF-8 delimited file, within the bounds above.

    Holds every row as Python objects: for small files (tests, tools); :class:`Table` streams.
    """
    return [(line, r) for line, r in _rows(Path(path), sep, MAX_ROWS if max_rows is None else max_rows) if r]


def read_header(path) -> list[str]:
    """The header fields of a delimited file (its first line), with the same checks as :func:`read_rows`.

    Only the first line is read (a bounded read), so a file of the wrong kind is refused cheaply.
    """
    path = Path(path)
    with _open_trace(path) as fh:
        try:
            first = fh.readline(2**20)
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
    """A trace file read in chunks of string columns plus ``line``; collects bad rows instead of guessing.

    A loader describes one chunk: ``Table(path, ...).load(build)`` calls
    ``build(table)`` once per chunk of at most :data:`CHUNK_ROWS` rows, with
    :attr:`frame` holding that chunk, and concatenates what it returns (so
    ``build`` must only compute row by row; anything over the whole trace, a
    minimum or a sort, comes after ``load``). Converters (:meth:`number`,
    :meth:`timestamp`, :meth:`mapped`) mark each failing row in
    :attr:`bad_rows` (a boolean mask, no object per row) and describe the first
    :data:`MAX_REPORTED` as ``{"line", "field", "reason"}``. Without ``skip_bad``
    reading stops after the chunk where that many are found, and
    :class:`TraceError` names them; with it every bad row is dropped and a
    warning says how many.
    """

    def __init__(self, path, *, required: tuple[str, ...] = (), names: tuple[str, ...] | None = None,
                 sep: str = ",", skip_bad: bool = False):
        self.path = Path(path)
        self.required, self.names, self.sep = tuple(required), names, sep
        self.skip_bad = skip_bad
        self.problems: list[dict] = []  # the first MAX_REPORTED, by line
        self.misshapen = 0  # rows with the wrong number of fields (never in a chunk)
        self.bad_before = 0  # bad rows in the chunks already done
        self.stopped_at: int | None = None  # the last line read when reading stopped, bad rows being enough
        self.frame: pd.DataFrame | None = None  # the chunk being built
        self.bad_rows = np.zeros(0, dtype=bool)  # one flag per row of the chunk

    def load(self, build) -> tuple[pd.DataFrame, list[dict]]:
        """``build`` applied to every chunk, bad rows dropped: (the trace's rows, the first bad rows described).

        Raises :class:`TraceError` naming the first :data:`MAX_REPORTED` bad rows (file, line, field) unless
        ``skip_bad``. A file over :data:`VALIDATE_FIRST_BYTES` is read twice without ``skip_bad``: first
        every chunk is built and dropped, then, when no row was bad, built again and kept, so a refusal of a
        large file (one bad row at its end) holds one chunk, not every good row before it.
        """
        if not self.skip_bad and self._size() > VALIDATE_FIRST_BYTES:
            self._pass(build, keep=False)
            if self.bad_count:
                raise self._error()
            self.problems, self.bad_before, self.misshapen, self.stopped_at = [], 0, 0, None
        return self._pass(build, keep=True)

    def _size(self) -> int:
        with _open_trace(self.path) as fh:  # the same checks as reading (a regular file within the bound)
            return os.fstat(fh.fileno()).st_size

    def _pass(self, build, keep: bool) -> tuple[pd.DataFrame, list[dict]]:
        """One read of the file, ``build`` on each chunk; the built rows are kept only with ``keep``."""
        parts, first = [], None
        with contextlib.closing(_rows(self.path, self.sep, MAX_ROWS)) as rows:  # the file closes however this ends
            for chunk in self._chunks(rows):
                self.frame, self.bad_rows = chunk, np.zeros(len(chunk), dtype=bool)
                out = build(self)
                if first is None:
                    first = out.iloc[:0]  # the columns and dtypes, should every row be bad
                if self.bad_rows.any():
                    self.bad_before += int(self.bad_rows.sum())
                    out = out[~self.bad_rows]
                if keep and len(out):
                    parts.append(out)
                del out
                if not self.skip_bad and self.bad_count >= MAX_REPORTED:  # enough to say what is wrong: stop
                    self.stopped_at = int(chunk["line"].iloc[-1])
                    break
            self.frame, self.bad_rows = None, np.zeros(0, dtype=bool)
        if not keep:
            return first, []
        total = self.bad_count
        if total and not self.skip_bad:
            raise self._error()
        if total:
            warnings.warn(f"{self.path}: skipped {total:,} bad row(s) (the first {len(self.problems)} in "
                          f"df.attrs['skipped']); first: line {self.problems[0]['line']}, field "
                          f"{self.problems[0]['field']!r}: {self.problems[0]['reason']}", stacklevel=4)
        df = (pd.concat(parts, ignore_index=True) if len(parts) > 1 else parts[0].reset_index(drop=True)) if parts \
            else first
        return df, list(self.problems)

    def _header(self, rows) -> tuple[list[str], str]:
        if self.names is not None:
            return list(self.names), f"{self.path}: no job rows (a trace needs at least one job)"
        first = next(rows, None)
        if first is None:
            raise TraceError(f"{self.path}, line 1: empty file, expected a header")
        header = [h.strip() for h in first[1]]
        missing = [c for c in self.required if c not in header]
        if missing:
            raise TraceError(f"{self.path}, line 1 (header): missing column(s) "
                             f"{', '.join(repr(c) for c in missing)}; found {str(header)[:500]}")
        dup = sorted({h for h in header if header.count(h) > 1})
        if dup:
            raise TraceError(f"{self.path}, line 1 (header): column(s) {short(dup)} given twice")
        return header, f"{self.path}: a header but no job rows (a trace needs at least one job)"

    def _chunks(self, rows):
        """The rows of the right width as string-column frames of at most :data:`CHUNK_ROWS` rows; the others
        are recorded as bad. At least one frame (maybe empty) is yielded."""
        rows = (item for item in rows if item[1])
        header, empty = self._header(rows)
        width = len(header)
        fields, lines = [[] for _ in header], []
        yielded = False

        def chunk():
            frame = pd.DataFrame({**{h: pd.array(col, dtype="str") for h, col in zip(header, fields)},
                                  "line": np.array(lines, dtype="int64")})
            for col in fields:
                col.clear()
            lines.clear()
            return frame

        for line, r in rows:
            if len(r) != width:
                field = header[len(r)] if len(r) < width else f"<extra field {width + 1}>"
                self.misshapen += 1
                self._note(line, field, f"expected {width} fields, found {len(r)}")
                if not self.skip_bad and self.misshapen >= MAX_REPORTED:
                    self.stopped_at = line
                    break
                continue
            for col, value in zip(fields, r):
                col.append(value)
            lines.append(line)
            if len(lines) >= CHUNK_ROWS:
                yielded = True
                yield chunk()
        if lines or not yielded:
            if not lines and not yielded and not self.misshapen:
                raise TraceError(empty)
            yield chunk()

    def _note(self, line: int, field: str, reason: str) -> None:
        """Describe a bad row if it is among the first :data:`MAX_REPORTED` by line (else it is only counted)."""
        if len(self.problems) >= MAX_REPORTED and line >= self.problems[-1]["line"]:
            return
        self.problems.append({"line": int(line), "field": field, "reason": reason})
        self.problems.sort(key=lambda p: p["line"])
        del self.problems[MAX_REPORTED:]

    def _add(self, line: int, field: str, reason: str) -> None:
        """Record the row at ``line`` as bad in ``field`` (for checks a loader makes row by row)."""
        lines = self.frame["line"].to_numpy()
        i = int(np.searchsorted(lines, line))
        if i < len(lines) and lines[i] == line:
            self.bad_rows[i] = True
        self._note(line, field, reason)

    def bad(self, mask: pd.Series, field: str, reason: str) -> None:
        """Record every row where ``mask`` is true as bad in ``field``."""
        mask = np.asarray(mask, dtype=bool)
        self.bad_rows |= mask
        lines, values = self.frame["line"].to_numpy(), self.frame[field]
        for i in np.flatnonzero(mask)[:MAX_REPORTED]:  # the first ones of this check, in file order
            self._note(lines[i], field, f"{reason} (value {short(values.iloc[i])})")

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

    @property
    def bad_count(self) -> int:
        """Rows found bad so far (each once, whatever the number of bad fields in it)."""
        return self.bad_before + int(self.bad_rows.sum()) + self.misshapen

    def _error(self) -> TraceError:
        total, (p, *rest) = self.bad_count, self.problems
        also = "".join(f"; line {q['line']}, field {q['field']!r}: {q['reason']}" for q in rest)
        stopped = "" if self.stopped_at is None else f" up to line {self.stopped_at:,}, where reading stopped"
        more = f" ({total - 1:,} more bad line(s){stopped}{also}; skip_bad=True drops them)" if total > 1 else \
            (f" (also{also[1:]})" if also else "")
        return TraceError(f"{self.path}, line {p['line']}, field {p['field']!r}: {p['reason']}{more}")
