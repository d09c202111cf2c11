"""Counting a capture file, for ``ibwire check``: no columns, two threads, no numpy.

A regular, uncompressed classic pcap file whose records are the frames themselves (Ethernet,
raw IP, LINKTYPE_INFINIBAND, or a link ibwire does not read) or Linux SLL/SLL2 records (the
cooked header is read in C) is read in windows of ``ibwire.scan.feed``. Each window is split
in two at a record boundary guessed near its middle (``pcap_sync``); both halves are scanned
and counted in C at once, the GIL released. The guess is used only when the walk of the first
half ends exactly on it; otherwise the second half's work is dropped and the walk goes on
from where the first stopped, so the result never depends on the guess. pcapng files take the
same path for their runs of plain Enhanced Packet Blocks (``ibwire.scan.tally_pcapng``).

What comes out, window by window, is the counts (``TALLY``) and the records to look at again
(failed, or a caplen above the snaplen or orig_len), with their bytes; a record walk that ends
in an error (an absurd caplen, a record cut by the end of the file) ends with that error, as
in ``ibwire.pcap``. Anything else returns None from :func:`open_tally`: the full scanner
(``scan_capture``) is then the way. A file that shrinks while it is counted ends as in
``scan_capture``: with a TruncatedError when the data is found shorter, with CaptureError
when bytes vanished under the window being counted (``ibwire.pcap.filemap``).
"""

from __future__ import annotations

import os
import struct
import sys
import threading
from collections.abc import Callable, Iterator
from types import ModuleType, TracebackType
from typing import TYPE_CHECKING, Any, NamedTuple

from ibwire._twins import load_twin
from ibwire.errors import CaptureError, IbwireError
from ibwire.pcap.linktypes import direct_link_codes, header_kind
from ibwire.pcap.pcap import (
    GLOBAL_HEADER_LEN,
    RECORD_HEADER_LEN,
    PcapHeader,
    PcapWalker,
    caplen_warning,
    is_modified_pcap,
    parse_pcap_header,
    pcap_magic,
    pcap_stop,
)
from ibwire.pcap.records import INT64_MAX, INT64_MIN, LINK_OTHER, MAX_CAPLEN, Buffer
from ibwire.scan.feed import MappedFeed, open_feed

if TYPE_CHECKING:
    from ibwire.pcap.source import Source
    from ibwire.scan.tally_pcapng import PcapngTally

WINDOW = 64 * 1024 * 1024
SPLIT_AT_LEAST = 1024 * 1024
"""Smaller windows are scanned by one thread."""
SYNC_DEPTH = 8
"""Plausible records in a row that make a guessed boundary."""
SYNC_SEARCH = 1024 * 1024
FLAGGED_CAP = 4096
"""Records listed per C call at most (the walk then pauses for them to be copied)."""
_NATIVE = "<" if sys.byteorder == "little" else ">"
PCAPNG_MAGIC = b"\x0a\x0d\x0d\x0a"


def engine() -> tuple[ModuleType, str]:
    """The counting scan's C engine or its Python twin, as ``ibwire.scan.implementation``."""
    return load_twin("ibwire.scan._tally", "ibwire.scan._tally_python")


class Flagged(NamedTuple):
    """A record to look at again, as the scanner has it: its number (from 0), where its frame
    is in the file, its timestamp, the frame's wire length and bytes, link code and link
    type, the capture's warning about it, or the error that makes it a record that could not
    be read (the frame is then empty)."""

    record: int
    offset: int
    timestamp_ns: int
    orig_len: int
    frame: bytes
    link: int = LINK_OTHER
    linktype: int = 0
    warning: IbwireError | None = None
    error: IbwireError | None = None


def located(buf: Buffer, base: int, record: int, start: int, end: int, timestamp_ns: int,
            orig_len: int, linktype: int, warning: IbwireError | None) -> Flagged:
    """The :class:`Flagged` of a record whose data is ``buf[start:end]`` (``base``: where
    ``buf`` is in the file), its frame found as the reader finds it."""
    timestamp_ns = min(max(timestamp_ns, INT64_MIN), INT64_MAX)
    code = direct_link_codes().get(linktype)
    if code is not None or header_kind(linktype) is None:
        return Flagged(record, base + start, timestamp_ns, orig_len, bytes(buf[start:end]),
                       LINK_OTHER if code is None else code, linktype, warning)
    from ibwire.pcap.locators import locator_for  # only here: it loads the ERF reader

    code, first, last, wire, _erf_ts, _t, _f, link_warning, error = locator_for(linktype)(
        buf, start, end, orig_len, base)
    if error is not None:
        return Flagged(record, base + start, 0, 0, b"", LINK_OTHER, linktype, None, error)
    return Flagged(record, base + first, timestamp_ns, wire, bytes(buf[first:last]), code,
                   linktype, warning or link_warning)


class Window(NamedTuple):
    """What one window added: counts in ``TALLY`` order, flagged records, where the walk
    stopped, and the error that ends the file (``error_record``: its number) if it stopped on
    one."""

    counts: tuple[int, ...]
    flagged: list[Flagged]
    position: int
    error: IbwireError | None = None
    error_record: int = 0


def split_walk(check: Callable[[Any, int, int], tuple[Any, ...]],
               sync: Callable[[Any, int, int], int], threads: int, buf: Any, start: int,
               end: int) -> tuple[Any, ...]:
    """One walk of ``buf[start:end]``, split between two threads when it is big:
    ``check(buf, start, end)`` -> (counts, flagged (record from start, offset), stop, status;
    2: the data may end inside the record at stop), ``sync(buf, start, end)`` -> a record
    boundary guessed in the second half of the span, or -1."""
    guess = -1
    if threads > 1 and end - start >= SPLIT_AT_LEAST:
        guess = sync(buf, start, end)
    if guess < 0:
        return check(buf, start, end)
    second: list[tuple[Any, ...] | BaseException] = []
    worker = threading.Thread(target=_into, args=(second, check, buf, guess, end),
                              name="ibwire-tally")
    worker.start()
    try:
        first = check(buf, start, guess)
    finally:
        worker.join()
    if isinstance(second[0], BaseException):
        raise second[0]
    _counts, _flagged, stop, status = first
    if stop == guess and status == 0:
        rest = second[0]
    elif status == 2:  # the guess was wrong (it cut a record): walk on from the stop
        rest = check(buf, stop, end)
    else:  # the first half paused (flagged records) or met what it does not take
        return first
    return _joined(first, rest)


class Tally:
    """A classic pcap file being counted (see the module); iterate :meth:`windows`."""

    def __init__(self, feed: MappedFeed, header: PcapHeader, threads: int) -> None:
        self.feed, self.header, self.threads = feed, header, threads
        self.engine, self.implementation = engine()
        self.link = LINK_OTHER if (code := direct_link_codes().get(header.linktype)) is None \
            else code
        self.frames_at = self.engine.HEADERS.index(header_kind(header.linktype))
        self.swapped = header.byte_order != _NATIVE
        self.fraction_ns = 1 if header.nanoseconds else 1000
        self.limit = 1_000_000_000 if header.nanoseconds else 1_000_000
        self.names: tuple[str, ...] = self.engine.TALLY

    def __enter__(self) -> Tally:
        return self

    def __exit__(self, kind: type[BaseException] | None, value: BaseException | None,
                 trace: TracebackType | None) -> None:
        self.feed.close()

    def _check(self, buf: Any, start: int, end: int) -> tuple[Any, ...]:
        return self.engine.check_pcap(buf, start, end, self.swapped, MAX_CAPLEN,
                                      self.header.snaplen, self.link, self.frames_at,
                                      FLAGGED_CAP)

    def _sync(self, buf: Any, start: int, end: int) -> int:
        guess: int = self.engine.pcap_sync(buf, start + (end - start) // 2, end, self.swapped,
                                           MAX_CAPLEN, self.limit, SYNC_DEPTH, SYNC_SEARCH)
        return guess

    def windows(self) -> Iterator[Window]:
        pos, need, record = GLOBAL_HEADER_LEN, RECORD_HEADER_LEN, 0
        walker = PcapWalker(self.header)
        while True:
            self.feed.record = record
            buf, base, at_end = self.feed.window(pos, need)
            cut = self.feed.error if at_end else None  # the file shrank: the data ends here
            try:
                counts, flagged, stop, status = split_walk(self._check, self._sync,
                                                           self.threads, buf, pos - base,
                                                           len(buf))
                found = [self._flagged(buf, base, record + r, at) for r, at in flagged]
                self.feed.check(record)  # both threads read zeros where bytes vanished
                record += counts[0]
                error, want, finished = pcap_stop(walker, buf, stop, status, cut is None and at_end,
                                                  base)
                if cut is not None and error is None and (status == 2 or stop == len(buf)):
                    error, cut.offset = cut, base + stop
            finally:
                buf.release()
            yield Window(counts, found, base + stop, error, record)
            if finished or error is not None:
                return
            pos, need = base + stop, max(want, RECORD_HEADER_LEN)  # want: a record's bytes

    def _flagged(self, buf: Any, base: int, record: int, at: int) -> Flagged:
        seconds, fraction, caplen, orig = struct.unpack_from(
            self.header.byte_order + "IIII", buf, at - RECORD_HEADER_LEN)
        warning = caplen_warning(caplen, orig, self.header.snaplen,
                                 base + at - RECORD_HEADER_LEN)
        return located(buf, base, record, at, at + caplen,
                       seconds * 1_000_000_000 + fraction * self.fraction_ns, orig,
                       self.header.linktype, warning)


def _joined(first: tuple[Any, ...], then: tuple[Any, ...]) -> tuple[Any, ...]:
    """Two walks, the second from where the first stopped, as one."""
    counts, flagged = first[0], first[1]
    more, flagged_more, stop, status = then
    return (tuple(a + b for a, b in zip(counts, more, strict=True)),
            flagged + [(counts[0] + r, at) for r, at in flagged_more], stop, status)


def _into(out: list[Any], work: Callable[..., Any], *args: Any) -> None:
    try:
        out.append(work(*args))
    except BaseException as exc:  # re-raised in the thread that waits
        out.append(exc)


def open_tally(source: Source, threads: int = 2, window: int = WINDOW
               ) -> Tally | PcapngTally | None:
    """A :class:`Tally` (or a ``tally_pcapng.PcapngTally``) of ``source`` when it is a file this
    path counts, else None (the file is closed; standard input, a pipe or a file object is
    left unread). File-level problems raise :class:`CaptureError` as ``scan_capture`` would."""
    if not isinstance(source, (str, os.PathLike)) or source == "-" or not os.path.isfile(source):
        return None
    feed = open_feed(source, window)
    if not isinstance(feed, MappedFeed):
        feed.close()
        return None
    try:
        buf, _base, at_end = feed.window(0, GLOBAL_HEADER_LEN)
        try:
            head = bytes(buf[:GLOBAL_HEADER_LEN])
            if head[:4] == PCAPNG_MAGIC:
                from ibwire.scan.tally_pcapng import open_pcapng_tally

                return open_pcapng_tally(feed, buf, at_end, threads)
        finally:
            buf.release()
        if pcap_magic(head) is None or is_modified_pcap(head) or len(head) < GLOBAL_HEADER_LEN:
            feed.close()
            return None
        header = parse_pcap_header(head, feed.name)
    except (CaptureError, OSError):
        feed.close()
        return None  # the full path says what is wrong, in its own words
    if header_kind(header.linktype) not in engine()[0].HEADERS:  # ERF: the full path
        feed.close()
        return None
    return Tally(feed, header, threads)
