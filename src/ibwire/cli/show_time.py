"""``show``'s time column, as tshark's ``-t`` writes it: relative to the first record of the
capture (``r``, the default; a ``--where`` that hides records does not move that start), the
delta from the previous record read (``d``) or shown (``dd``), absolute local time (``a``, with
the date ``ad``), UTC (``u``, ``ud``), or seconds since the epoch (``e``); with nanosecond
digits when the capture file says its timestamps have them (``capture_digits``), else
microseconds.

The default (``r`` with microseconds) is written by the C filler from the scanner's columns
(``ibwire.cli.show_columns``); :class:`Clock` writes the others, and the lines of the packets
show dissects, the same way.
"""

from __future__ import annotations

import os
import time
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import argparse

    import numpy as np

    from ibwire.pcap.source import Source

FORMATS = {"r": "seconds since the first record (default)",
           "a": "absolute local time of day", "ad": "absolute local date and time",
           "d": "delta from the previous record", "dd": "delta from the previous record shown",
           "e": "seconds since the epoch", "u": "UTC time of day", "ud": "UTC date and time"}
#: Width of the relative and delta columns (right-aligned, as show always wrote them).
WIDTH = 11
_NS = 1_000_000_000


def capture_digits(source: Source) -> int:
    """9 when the capture file's timestamps have nanoseconds (a nanosecond pcap, a pcapng
    interface finer than microseconds, ERF), else 6; 6 for standard input, a named pipe and
    a live capture, which cannot be looked at before they are read. A file that cannot be read
    here is reported by the reading that follows."""
    from ibwire.errors import IbwireError
    from ibwire.pcap import open_capture

    if not isinstance(source, (str, os.PathLike)) or not os.path.isfile(source):
        return 6  # standard input, a pipe, a live capture: read once, by the real reading
    try:
        with open_capture(source) as reader:
            if reader.format == "erf":
                return 9
            if reader.format == "pcap":
                return 9 if reader.header is not None and reader.header.nanoseconds else 6
            for _record in reader:  # pcapng: the interfaces described before the first record
                break
            finest = max((i.units_per_second for i in reader.interfaces), default=10 ** 6)
            return 9 if finest > 10 ** 6 else 6
    except (IbwireError, OSError):
        return 6


class Clock:
    """The time texts of the records of one capture, told of every record read in order
    (:meth:`advance`), shown or not."""

    def __init__(self, fmt: str = "r", digits: int = 6) -> None:
        if fmt not in FORMATS:
            raise ValueError(f"time format {fmt!r} is none of {', '.join(FORMATS)}")
        self.fmt, self.digits = fmt, digits
        self.first: int | None = None
        self.previous: int | None = None
        self.shown: int | None = None

    @property
    def in_c(self) -> bool:
        """Whether the C filler writes this column (relative, microseconds)."""
        return self.fmt == "r" and self.digits == 6

    def advance(self, timestamp_ns: int | None, shown: bool = True) -> str:
        """The text of a record read (``timestamp_ns`` None: one that could not be read),
        "" when not ``shown``."""
        if timestamp_ns is None:
            return f"{'-':>{WIDTH}}" if shown else ""
        if self.first is None:
            self.first = timestamp_ns
        text = self._text(timestamp_ns) if shown else ""
        self.previous = timestamp_ns
        if shown:
            self.shown = timestamp_ns
        return text

    def batch(self, stamps: np.ndarray, readable: np.ndarray) -> list[str]:
        """:meth:`advance` of each of ``stamps`` (int64 nanoseconds; ``readable`` False for
        a record that could not be read), every one shown: the relative, delta and epoch
        texts made with numpy, the others one by one."""
        import numpy as np

        limit = 1 << 62  # no int64 overflow below this
        if self.fmt not in ("r", "d", "dd", "e") or not len(stamps) or not readable.all() or \
                int(np.abs(stamps).max()) >= limit or abs(self.first or 0) >= limit:
            return [self.advance(ns if ok else None)
                    for ns, ok in zip(stamps.tolist(), readable.tolist(), strict=True)]
        stamps = stamps.astype(np.int64)
        if self.first is None:
            self.first = int(stamps[0])
        if self.fmt == "r":
            since = np.int64(self.first)
        elif self.fmt == "e":
            since = np.int64(0)
        else:
            since = np.empty_like(stamps)
            since[0] = stamps[0] if self.previous is None else self.previous
            since[1:] = stamps[:-1]
        self.previous = self.shown = int(stamps[-1])
        ns = stamps - since
        width = 0 if self.fmt == "e" else WIDTH
        if self.digits == 6:
            return [f"{v / 1e9:{width}.6f}" for v in ns.tolist()]
        whole, part = np.divmod(np.abs(ns), _NS)
        part //= 10 ** (9 - self.digits)
        signs = np.where(ns < 0, "-", "").tolist()
        digits = self.digits
        return [f"{f'{sign}{w}.{p:0{digits}d}':>{width}}" for sign, w, p in
                zip(signs, whole.tolist(), part.tolist(), strict=True)]

    def _text(self, ns: int) -> str:
        if self.fmt in ("r", "d", "dd"):
            since = self.first if self.fmt == "r" else \
                self.previous if self.fmt == "d" else self.shown
            return self.seconds(ns - (ns if since is None else since))
        if self.fmt == "e":
            return self.seconds(ns, 0)
        return self._wall(ns)

    def seconds(self, ns: int, width: int = WIDTH) -> str:
        """``ns`` as seconds with this clock's digits."""
        if self.digits == 6:  # as the C filler rounds it
            return f"{ns / 1e9:{width}.6f}"
        whole, part = divmod(abs(ns), _NS)
        sign = "-" if ns < 0 else ""
        text = f"{sign}{whole}.{part // 10 ** (9 - self.digits):0{self.digits}d}"
        return f"{text:>{width}}"

    def _wall(self, ns: int) -> str:
        whole, part = divmod(ns, _NS)
        try:
            when = (time.gmtime if self.fmt.startswith("u") else time.localtime)(whole)
        except (OverflowError, OSError, ValueError):  # beyond the C library's calendar
            return self.seconds(ns, 0)
        day = time.strftime("%Y-%m-%d %H:%M:%S" if self.fmt.endswith("d") else "%H:%M:%S",
                            when)
        return f"{day}.{part // 10 ** (9 - self.digits):0{self.digits}d}"


def clock_for(source: Source, args: argparse.Namespace) -> Clock:
    """The clock ``show``'s ``-t`` asks for (default relative), with the capture's digits."""
    fmt = getattr(args, "time_format", None) or "r"
    return Clock(fmt, capture_digits(source))
