"""Counting a pcapng file, for ``ibwire check`` (see ``ibwire.scan.tally``).

The pcapng walker (``ibwire.pcap.pcapng``) reads the file in windows; at each Enhanced Packet
Block it hands the run of plain EPBs from there (``bulk`` hook) to the C counting walk
(``check_pcapng``: frames at the record or behind a Linux SLL/SLL2 header, two threads when
the run is long, split at a guessed block boundary as for classic pcap). Everything else
(section and interface blocks, packets the walk does not take: Simple and obsolete Packet
Blocks, EPBs over the snaplen or on an ERF interface, blocks that do not hold together) the
walker reads itself, and its records are scanned at the end of the window in one batch, as
``scan_capture`` scans them. Flagged records and counts are the scanner's, in either case.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from types import TracebackType
from typing import Any

from ibwire.errors import IbwireError
from ibwire.pcap.linktypes import direct_link_codes, header_kind
from ibwire.pcap.pcapng import Interface, PcapngWalker, check_first_section, clock, timestamp_rule
from ibwire.pcap.records import LINK_OTHER, MAX_CAPLEN, RawRecord
from ibwire.scan import tally
from ibwire.scan.feed import MappedFeed
from ibwire.scan.tally import Flagged, Window, located, split_walk

_NS_PER_S = 1_000_000_000


class _Paused(Exception):
    """The C walk listed its most flagged records: the window ends at ``stop``."""

    def __init__(self, stop: int) -> None:
        super().__init__(stop)
        self.stop = stop


class PcapngTally:
    """A pcapng file being counted (see the module); iterate :meth:`windows`."""

    def __init__(self, feed: MappedFeed, threads: int) -> None:
        self.feed, self.threads = feed, threads
        self.engine, self.implementation = tally.engine()  # (looked up: tests replace it)
        self.names: tuple[str, ...] = self.engine.TALLY
        self.walker = PcapngWalker()
        self.record = 0
        self._rules: dict[tuple[Interface, ...], list[tuple[int, int, int]]] = {}
        self._counts = [0] * len(self.names)
        self._found: list[Flagged] = []
        self._base = 0

    def __enter__(self) -> PcapngTally:
        return self

    def __exit__(self, kind: type[BaseException] | None, value: BaseException | None,
                 trace: TracebackType | None) -> None:
        self.feed.close()

    def windows(self) -> Iterator[Window]:
        """As ``Tally.windows``; a file that shrinks while it is counted ends as in
        ``scan_capture`` (the walk's window loop is the same)."""
        pos, need, finished = 0, 0, False
        while True:
            first = self.feed.record = self.record
            buf, base, at_end = self.feed.window(pos, need)
            size = len(buf)
            try:
                window, resume, want, finished = self._window(
                    buf, pos - base, at_end and self.feed.error is None, base)
                self.feed.check(first)  # the walk read zeros where the file's bytes vanished
            finally:
                buf.release()
            yield window
            progressed = base + resume > pos
            pos = base + resume
            if finished or (at_end and (not progressed or resume >= size)):
                break
            need = want if progressed or want > size - resume \
                else size - resume + self.feed.length
        if self.feed.error is not None and not finished:  # the file was found shorter
            error = self.feed.error
            error.offset = pos
            yield Window((0,) * len(self.names), [], pos, error, self.record)

    def _window(self, buf: memoryview, start: int, final: bool, base: int
                ) -> tuple[Window, int, int, bool]:
        """One window: (what it added, where the walk stopped in ``buf``, bytes wanted from
        there, finished)."""
        self._counts, self._found, self._base = [0] * len(self.names), [], base
        walker = self.walker
        left: list[tuple[int, RawRecord]] = []  # (record number, raw) the walker read itself
        walker.bulk = self._bulk
        try:
            for raw in walker.walk(buf, start, len(buf), final, base):
                left.append((self.record, raw))
                self.record += 1
            resume, want, finished = walker.resume, walker.want, walker.finished
        except _Paused as paused:
            resume, want, finished = paused.stop, 0, False
        finally:
            walker.bulk = None
        if left:
            self._scan_left(buf, base, left)
        found = sorted(self._found, key=lambda f: f.record)
        return (Window(tuple(self._counts), found, base + resume, None, self.record), resume,
                want, finished)

    def _interfaces(self) -> list[tuple[int, int, int]]:
        """The counting walk's rules for the section's interfaces: (snaplen, link, header),
        header -1 for a link type whose records it does not read (ERF)."""
        key = tuple(self.walker.interfaces)  # by value: a new section may reuse a list's id
        if key not in self._rules:
            headers = self.engine.HEADERS
            self._rules[key] = [
                (face.snaplen, direct_link_codes().get(face.linktype, LINK_OTHER),
                 headers.index(kind) if (kind := header_kind(face.linktype)) in headers else -1)
                for face in key]
        return self._rules[key]

    def _bulk(self, view: memoryview, pos: int, end: int) -> int:
        """The walker's hook at an EPB: count the run of plain EPBs from ``pos`` in C; return
        where it stopped (``pos``: the walker reads that block itself)."""
        faces = self._interfaces()
        swapped = self.walker.order != tally._NATIVE
        engine_ = self.engine

        def check(buf: Any, start: int, stop: int) -> tuple[Any, ...]:
            return engine_.check_pcapng(buf, start, stop, swapped, MAX_CAPLEN, faces,
                                        tally.FLAGGED_CAP)

        def sync(buf: Any, start: int, stop: int) -> int:
            guess: int = engine_.pcapng_sync(buf, start + ((stop - start) // 2 & ~3), stop,
                                             swapped, MAX_CAPLEN, tally.SYNC_DEPTH,
                                             tally.SYNC_SEARCH)
            return guess

        counts, flagged, stop, status = split_walk(check, sync, self.threads, view, pos, end)
        self._counts = [a + b for a, b in zip(self._counts, counts, strict=True)]
        self._found += [self._flagged(view, self.record + r, at) for r, at in flagged]
        self.record += counts[0]
        if status == 1:  # the flagged records fill a window
            raise _Paused(stop)
        return int(stop)

    def _flagged(self, view: memoryview, record: int, at: int) -> Flagged:
        """A failed EPB of the C walk, as the walker and the scanner have it (the section's
        interfaces are the walker's: the run crossed no other block)."""
        face_id, high, low, caplen, orig = struct.unpack_from(
            (self.walker.order or "<") + "IIIII", view, at + 8)
        face = self.walker.interfaces[face_id]
        timestamp_ns = clock(*timestamp_rule(face.tsresol))(high << 32 | low) + \
            face.tsoffset_s * _NS_PER_S
        return located(view, self._base, record, at + 28, at + 28 + caplen, timestamp_ns, orig,
                       face.linktype, None)

    def _scan_left(self, buf: memoryview, base: int, left: list[tuple[int, RawRecord]]) -> None:
        """Scan and count the records the walker read itself, as ``scan_capture`` does."""
        import numpy as np

        from ibwire.pcap.index import _Columns
        from ibwire.scan.batch import NOT_IB, cut_counts, scan_index

        columns = _Columns()
        for _record, raw in left:
            columns.add_raw(raw, buf, base)
        batch = scan_index(columns.finish(buf), 0, ())
        c = batch.columns
        failed, error = batch.failed(), c["error"]
        counts = (len(left), int(np.count_nonzero(batch.is_ib())),
                  int(np.count_nonzero(error == NOT_IB)), int(np.count_nonzero(failed)),
                  int(np.count_nonzero(c["icrc_ok"] == 0)),
                  int(np.count_nonzero(c["vcrc_ok"] == 0)),
                  int(np.count_nonzero((error > NOT_IB) & ~batch.cut_header())),
                  *cut_counts(batch, c["frame.len"]))
        self._counts = [a + b for a, b in zip(self._counts, counts, strict=True)]
        for row in sorted({*np.flatnonzero(failed).tolist(), *batch.warnings}):
            error_: IbwireError | None = batch.errors.get(row)
            self._found.append(Flagged(
                left[row][0], base + int(c["frame.offset"][row]), int(c["timestamp_ns"][row]),
                int(c["frame.orig_len"][row]), bytes(batch.frame(row)), int(c["link"][row]),
                int(c["linktype"][row]), batch.warnings.get(row), error_))
        del batch, columns


def open_pcapng_tally(feed: MappedFeed, head: memoryview, at_end: bool, threads: int
                      ) -> PcapngTally | None:
    """A :class:`PcapngTally` of the file of ``feed`` whose first window is ``head``, None
    when its first section header cannot tell yet (the feed is then closed); a bad one raises
    ``CaptureError``."""
    if not check_first_section(head, at_end, feed.name):
        feed.close()
        return None
    return PcapngTally(feed, threads)
