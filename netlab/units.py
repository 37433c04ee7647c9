"""Numbers for reading: a unit chosen by magnitude, noise shown as 0, no scientific notation.

Shared by the report's tables and the figures (:mod:`netlab.plotting`), so a table and
the figure beside it say a time in the same unit. Simulated times are sums of float
event times: a job that never waited shows ``avg_wait_s`` of ``2.6e-14``, which is
noise, not a wait; :func:`denoise` makes it 0.
"""

from __future__ import annotations

import math

import numpy as np

#: a simulated time below this is numerical noise (sums of float event times), shown as 0
NOISE_S = 1e-6
#: a dimensionless value (ratio, share) below this is noise
NOISE = 1e-9
#: time units a table can use (name, seconds), chosen by :func:`time_unit`
TIME_UNITS = (("s", 1.0), ("min", 60.0), ("h", 3600.0), ("d", 86400.0))
BIT_UNITS = (("Gbit", 1.0), ("Tbit", 1e3), ("Pbit", 1e6), ("Ebit", 1e9), ("Zbit", 1e12))


def denoise(values, noise: float):
    """``values`` with every magnitude below ``noise`` set to exactly 0 (NaN kept)."""
    v = np.asarray(values, dtype=float)
    return np.where(np.abs(v) < noise, 0.0, v)


def time_unit(seconds) -> tuple[str, float]:
    """(unit, seconds per unit) for times of this magnitude: the median of the positive values below 2 min is
    shown in s, below 2 h in min, below 3 days in h, else in days."""
    v = np.asarray(seconds, dtype=float)
    v = v[np.isfinite(v) & (v > NOISE_S)]
    typical = float(np.median(v)) if v.size else 0.0
    for (name, div), limit in zip(TIME_UNITS, (120.0, 7200.0, 3 * 86400.0, math.inf)):
        if typical < limit:
            return name, div
    return TIME_UNITS[-1]  # pragma: no cover - the last limit is infinite


def bit_unit(gbit) -> tuple[str, float]:
    """(unit, Gbit per unit) so the largest value reads between 1 and 1,000."""
    v = np.asarray(gbit, dtype=float)
    top = float(np.nanmax(np.abs(v))) if v.size and np.isfinite(v).any() else 0.0
    pick = BIT_UNITS[0]
    for name, div in BIT_UNITS:
        if top >= div:
            pick = (name, div)
    return pick


def decimals(value: float, significant: int = 3) -> int:
    """Decimals that show ``value`` with ``significant`` digits (0 from 100 up: ``1,234``)."""
    if not math.isfinite(value) or value == 0:
        return 0
    magnitude = math.floor(math.log10(abs(value)))
    return max(0, significant - 1 - magnitude)


def fmt(value, places: int | None = None) -> str:
    """A number for reading: thousands separators, ``places`` decimals (default: 3 significant digits), never
    scientific notation; exactly 0 is ``0``, a value that rounds to 0 ``<0.01``; '' for NaN."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return ""
    if not isinstance(value, (float, np.floating)):
        return str(value)
    value = float(value)
    if value == 0:
        return "0"
    places = decimals(value) if places is None else places
    text = f"{value:,.{places}f}"
    if text.strip("-0.,") == "":  # not 0, but below the shown precision
        return ("<" if value > 0 else ">-") + f"{10.0 ** -places:,.{places}f}"
    return text


def column_places(values, significant: int = 3, most: int = 4) -> int:
    """One number of decimals for a whole column: ``significant`` digits of its typical (median non-zero)
    magnitude, at most ``most``."""
    v = np.abs(np.asarray(values, dtype=float))
    v = v[np.isfinite(v) & (v > 0)]
    return min(decimals(float(np.median(v)), significant), most) if v.size else 0


def mean_sd(mean: float, sd: float | None, places: int | None = None) -> str:
    """``2.31 ± 0.12``: a mean and its spread with ``places`` decimals (default: 3 significant digits of the mean);
    the mean alone without a spread (one seed)."""
    if mean is None or not math.isfinite(mean):
        return ""
    places = decimals(mean) if places is None else places
    if sd is None or not math.isfinite(sd):
        return fmt(mean, places)
    return f"{fmt(mean, places)}\u00a0±\u00a0{fmt(sd, places)}"  # no line break inside a cell
