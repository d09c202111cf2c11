"""Units for the plots: a time unit that fits a span, "nice" bin widths, rate units, and the
``--plot-window T0:T1`` syntax.

Times are integer nanoseconds from the connection's first packet. A span is drawn in the
largest of ns, µs, ms and s in which it is at least 1 (so the ticks read 0 … 850 µs, never
0.0 … 1.2 with a ``1e7`` multiplier); a window far from the start goes to a coarser unit while
its end would need more than 5 integer digits, so no tick label needs an offset either.
"""

from __future__ import annotations

import math
import re
from datetime import datetime, timezone

#: (name, nanoseconds), smallest first.
TIME_UNITS = (("ns", 1), ("µs", 1_000), ("ms", 1_000_000), ("s", 1_000_000_000))
#: Rate units, (name, bits per second), smallest first.
RATE_UNITS = (("b/s", 1.0), ("kb/s", 1e3), ("Mb/s", 1e6), ("Gb/s", 1e9), ("Tb/s", 1e12))
#: A tick label needs at most this many integer digits.
MAX_DIGITS = 5
_WINDOW_UNITS = {"ns": 1, "us": 1_000, "µs": 1_000, "ms": 1_000_000, "s": 1_000_000_000, "": None}


def time_unit(span_ns: float, end_ns: float | None = None) -> tuple[str, int]:
    """The unit (name, ns) to draw a span of ``span_ns`` ending at ``end_ns`` (from the first
    packet; default the span itself)."""
    end = span_ns if end_ns is None else end_ns
    pick = TIME_UNITS[0]
    for unit in TIME_UNITS:
        if span_ns >= unit[1]:
            pick = unit
    for unit in TIME_UNITS:
        if unit[1] >= pick[1] and (end / unit[1] < 10 ** MAX_DIGITS or unit is TIME_UNITS[-1]):
            return unit
    return pick


def duration_text(ns: float) -> str:
    """``ns`` in the unit that fits it, three significant digits: "12.3 ms"."""
    name, size = time_unit(abs(ns))
    return f"{ns / size:.3g} {name}"


def utc_text(ns: int) -> str:
    """An absolute time in ns since the epoch as ISO 8601 UTC to the nanosecond."""
    seconds, rest = divmod(int(ns), 1_000_000_000)
    day = datetime.fromtimestamp(seconds, timezone.utc).strftime("%Y-%m-%dT%H:%M:%S")
    return f"{day}.{rest:09d}Z"


def nice_width(span_ns: float, bins: int) -> int:
    """A bin width of 1, 2 or 5 times a power of ten ns giving about ``bins`` bins."""
    raw = max(span_ns / max(bins, 1), 1.0)
    power = 10 ** math.floor(math.log10(raw))
    for step in (1, 2, 5, 10):
        if step * power >= raw:
            return int(step * power)
    return int(10 * power)


def rate_unit(top_bps: float) -> tuple[str, float]:
    """The rate unit whose values stay under 1000 for a maximum of ``top_bps``."""
    pick = RATE_UNITS[0]
    for unit in RATE_UNITS:
        if top_bps >= unit[1]:
            pick = unit
    return pick


def _instant(text: str, default_unit: int) -> int:
    m = re.fullmatch(r"\s*([0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)\s*(ns|us|µs|ms|s|)\s*", text)
    if m is None:
        raise ValueError(f"{text!r} is not a time (a number, optionally with ns, us, ms or s)")
    unit = _WINDOW_UNITS[m.group(2)]
    return round(float(m.group(1)) * (default_unit if unit is None else unit))


def parse_window(text: str) -> tuple[int | None, int | None]:
    """``T0:T1`` (seconds from the connection's first packet, or with a unit: ``10ms:20ms``;
    either side may be empty) -> (start, end) ns, None for an open side; ValueError when it
    does not read or ends before it starts."""
    if text.count(":") != 1:
        raise ValueError(f"{text!r} is not T0:T1 (e.g. 0.5:1.5 or 10ms:20ms)")
    left, right = text.split(":")
    start = _instant(left, 1_000_000_000) if left.strip() else None
    end = _instant(right, 1_000_000_000) if right.strip() else None
    if start is not None and end is not None and end <= start:
        raise ValueError(f"window {text!r} ends before it starts")
    return start, end
