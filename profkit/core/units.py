"""Unit normalisation, done once, here: every counter leaves a parser in these units.

time -> ns, sizes -> byte, throughput -> byte/s, frequency -> Hz, percentages stay %,
counts are unitless (''). Rates per cycle keep their unit (e.g. byte/cycle), scaled to the
base size. Values from ncu's raw CSV come with display units (Mbyte, ms, Tbyte/s, Ghz) and
thousands separators; values from ncu_report come in base units. Both pass through here.
"""

from __future__ import annotations

import math
import re
from decimal import Decimal, InvalidOperation

_SIZE = {
    "byte": 1,
    "kbyte": 1e3,
    "mbyte": 1e6,
    "gbyte": 1e9,
    "tbyte": 1e12,
    "pbyte": 1e15,
    "kibyte": 1024,
    "mibyte": 1024**2,
    "gibyte": 1024**3,
    "tibyte": 1024**4,
}
_TIME = {
    "nsecond": 1,
    "ns": 1,
    "usecond": 1e3,
    "us": 1e3,
    "msecond": 1e6,
    "ms": 1e6,
    "second": 1e9,
    "s": 1e9,
    "sec": 1e9,
}
_FREQ = {"hz": 1, "khz": 1e3, "mhz": 1e6, "ghz": 1e9, "thz": 1e12}
_PER_TIME = {"second": 1, "s": 1, "msecond": 1e3, "ms": 1e3, "usecond": 1e6, "us": 1e6, "nsecond": 1e9, "ns": 1e9}
# count-like units ncu attaches to plain counts: they carry no scale
_COUNTS = {
    "",
    "inst",
    "warp",
    "block",
    "thread",
    "register/thread",
    "sm",
    "pass",
    "cluster",
    "cycle",
    "request",
    "sector",
    "wavefront",
    "transaction",
    "instance",
    "tpc",
    "gpc",
    "byte/block",
}
_NUM = re.compile(r"^[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?$")


def parse_number(text) -> float | None:
    """'65,536' -> 65536.0; 'n/a', '' and words -> None."""
    if text is None:
        return None
    if isinstance(text, (int, float)):
        return None if isinstance(text, float) and math.isnan(text) else float(text)
    s = str(text).strip().replace(",", "")
    if not s or not _NUM.match(s):
        return None
    v = float(s)
    return None if math.isnan(v) else v


_NEVER_NEGATIVE = ("ns", "byte", "Hz")


def impossible(value: float, unit: str) -> str | None:
    """Why a normalised counter value cannot be, or None: not a finite number (1e400 reads as
    inf), or a negative time, size, rate or frequency. One rule for every ncu parser: such a
    value is refused at ingest, not left for roofline's logarithms."""
    if not math.isfinite(value):
        return "is not a finite number"
    if value < 0 and (unit in _NEVER_NEGATIVE or unit.startswith("byte/") or unit.endswith("/s")):
        return "is negative"
    return None


def num_unit(unit: str) -> str:
    """The numerator of a rate unit as printed ('%' of '%/Kbyte')."""
    return unit.split("/", 1)[0]


def normalise(value: float, unit: str | None) -> tuple[float, str]:
    """Return (value, unit) in profkit's normalised units."""
    u = (unit or "").strip()
    lu = u.lower()
    if lu in _COUNTS:
        return value, "" if lu in ("", "inst", "warp", "thread", "pass", "sm", "cluster") else u
    if lu == "%":
        return value, "%"
    if lu in _SIZE:
        return value * _SIZE[lu], "byte"
    if lu in _TIME:
        return value * _TIME[lu], "ns"
    if lu in _FREQ:
        return value * _FREQ[lu], "Hz"
    if "/" in lu:
        num, den = lu.split("/", 1)
        if num in _SIZE and den in _PER_TIME:
            return value * _SIZE[num] * _PER_TIME[den], "byte/s"
        if num in _SIZE:  # byte/cycle, Kbyte/block ...
            return value * _SIZE[num], f"byte/{den}"
        if num in ("cycle", "inst", "warp") and den in _PER_TIME:
            return value * _PER_TIME[den], f"{num}/s"
        if num in ("cycle", "inst", "warp") and den in ("nsecond", "usecond", "msecond"):
            return value * _PER_TIME[den], f"{num}/s"
        if den in _SIZE:
            # ncu scales a value by its unit's prefix wherever the prefix sits: a report's
            # 1591 %/byte prints as 1.591 %/Kbyte (derived__pct_occupancy_per_shared_mem_size,
            # the same H200 report read both ways, tests/data/ncu-pages)
            return value * _SIZE[den], f"{num_unit(u)}/byte"
    return value, u


def us_to_ns(v) -> int | None:
    """Microseconds as a trace writes them (an int, or a decimal read as Decimal or text) ->
    integer ns, exactly: 4539407906150.204 us is 4539407906150204 ns, which a float cannot hold.
    Sub-ns digits round half to even. None for what is not a finite number of sane size."""
    if type(v) is int:
        return v * 1000
    if isinstance(v, float):
        v = repr(v)  # the shortest text that reads back as this float
    if isinstance(v, str):
        try:
            v = Decimal(v.strip())
        except (InvalidOperation, ValueError):
            return None
    if not isinstance(v, Decimal) or not v.is_finite() or v.adjusted() > 18:
        return None  # 1e19 us is past any 64-bit ns clock; bounding it first keeps int() cheap
    return int(v.scaleb(3).to_integral_value())
