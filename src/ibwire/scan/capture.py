"""Scanning whole captures in windows: bounded memory whatever the file size.

A capture is read one window at a time (16 MiB by default, more when one record needs it)
through ``ibwire.scan.feed``. The format's sans-IO walker (``ibwire.pcap``) finds the records of each
window; classic pcap takes a C fast path (``pcap_records``), and so do runs of plain pcapng
Enhanced Packet Blocks (``ibwire.pcap.pcapng_epbs``, through the walker's ``bulk`` hook). Each window's
frames are then scanned in one call and come out as a :class:`~ibwire.scan.batch.ScanBatch`.
"""

from __future__ import annotations

import sys
from collections import deque
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from typing import Any

import numpy as np

from ibwire.errors import CaptureError
from ibwire.pcap.index import CaptureIndex, _Columns, error_index, locate_frames
from ibwire.pcap.linktypes import direct_link_codes, header_kind
from ibwire.pcap.pcap import PcapWalker, caplen_warnings, pcap_stop
from ibwire.pcap.pcapng import PcapngWalker
from ibwire.pcap.records import LINK_OTHER, MAX_CAPLEN, Walker
from ibwire.pcap.source import (
    HEAD_LEN,
    Source,
    detect_format,
    make_walker,
)
from ibwire.scan.batch import ScanBatch, make_batch, scan_index
from ibwire.scan.feed import Feed, MappedFeed, StreamFeed, open_feed
from ibwire.scan.program import Unverified

Item = CaptureIndex | ScanBatch
"""A window's records: to be scanned, or scanned as they were walked."""
WINDOW = 16 * 1024 * 1024
BATCH_ROWS = 1 << 16
"""Rows per batch at most on the pcap fast path: the columns stay in cache."""
FIRST_ROWS = 1 << 13
"""Rows of the first batch at most on the pcap fast path, doubled batch by batch up to
BATCH_ROWS: the caller starts on a batch soon, while the next ones are scanned."""
START_AHEAD = 4
"""Windows of a file scanned before the caller takes the first batch, while it sets itself
up (``scan_capture``'s ``meanwhile``): with the ramp (FIRST_ROWS doubling), up to 120k rows,
scanned while an export imports pyarrow."""
_NATIVE = "<" if sys.byteorder == "little" else ">"


class _RowGuess:
    """How many rows to make room for before walking a window (the fused path fills its
    columns as it walks): the window's bytes over the mean record size seen so far, with a
    margin. Too few ends the batch early (the next one goes on); too many costs memory.
    ``cap``: the rows of this window's batch at most: BATCH_ROWS, or with ``ramp`` from
    FIRST_ROWS doubling (``grow``)."""

    def __init__(self, ramp: bool = True) -> None:
        self.records, self.size = 0, 0
        self.cap = min(FIRST_ROWS, BATCH_ROWS) if ramp else BATCH_ROWS

    def rows(self, window: int) -> int:
        mean = self.size / self.records if self.records else 64
        return min(self.cap, max(256, int(window / mean * 1.25) + 64))

    def saw(self, records: int, size: int) -> None:
        self.records += records
        self.size += size

    def grow(self) -> None:
        self.cap = min(self.cap * 2, BATCH_ROWS)


def _pcap_rows(walker: PcapWalker, buf: memoryview, start: int, final: bool, base: int,
               record: int, fields: object, guess: _RowGuess, let_go: int = 0
               ) -> tuple[list[Item], int, int, bool]:
    """Classic pcap records of one window through the fast path; (items, resume, want,
    finished) as the streaming walkers report them. Frames that start right at the record
    (Ethernet, raw IP, LRH, or a link ibwire does not read) are scanned as they are walked,
    letting the pages passed go every ``let_go`` bytes (``MappedFeed.let_go_every``)."""
    from ibwire.scan import pcap_records, scan_pcap

    header = walker.header
    swapped = header.byte_order != _NATIVE
    code = direct_link_codes().get(header.linktype)
    if header_kind(header.linktype) is None:
        offs, caplen, orig, ts, stop, status, cols = scan_pcap(
            buf, start, len(buf), swapped, walker.fraction_ns, MAX_CAPLEN,
            guess.rows(len(buf) - start), LINK_OTHER if code is None else code, fields,
            let_go)
        guess.saw(len(offs), stop - start)
        tail, want, finished = pcap_stop(walker, buf, stop, status, final, base)
        warnings = caplen_warnings(caplen, orig, header.snaplen, offs, base)
        items: list[Item] = []
        if len(offs):
            items.append(make_batch(cols, record, ts, np.full(len(offs), header.linktype),
                                    orig, (), warnings, buf))
        if tail is not None:
            items.append(error_index(tail))
        return items, stop, want, finished
    offs, caplen, orig, ts, stop, status = pcap_records(
        buf, start, len(buf), swapped, walker.fraction_ns, MAX_CAPLEN, guess.cap)
    tail, want, finished = pcap_stop(walker, buf, stop, status, final, base)
    count = len(offs)
    rows = count + (tail is not None)
    offsets = np.zeros(rows, np.int64)
    lengths = np.zeros(rows, np.uint32)
    timestamps = np.zeros(rows, np.int64)
    wire = np.zeros(rows, np.uint32)
    offsets[:count], lengths[:count], timestamps[:count], wire[:count] = offs, caplen, ts, orig
    codes = np.full(rows, LINK_OTHER if code is None else code, np.uint8)
    linktypes = np.full(rows, header.linktype, np.uint16)
    warnings = caplen_warnings(lengths[:count], wire[:count], header.snaplen, offsets[:count],
                               base)
    errors, link_warnings = locate_frames(buf, header.linktype, count, offsets, lengths,
                                          timestamps, codes, wire)
    for error in [*errors, *link_warnings]:  # the locators count from the window, messages
        if error.offset is not None:         # from the file
            error.offset += base
    warnings = [*link_warnings, *warnings]  # a caplen warning wins, as in the reader
    failed_rows = {error.record for error in errors}
    warnings = [w for w in warnings if w.record not in failed_rows]
    if tail is not None:
        errors.append(tail.at_record(count))
        codes[count] = LINK_OTHER
    for error in errors:
        linktypes[error.record] = 0
    return ([CaptureIndex(buf, offsets, lengths, timestamps, codes, linktypes, wire,
                          tuple(errors), tuple(warnings))], stop, want, finished)


def _walker_rows(walker: Walker, buf: memoryview, start: int, final: bool, base: int,
                 record: int, fields: object, guess: _RowGuess
                 ) -> tuple[list[Item], int, int, bool]:
    """Records of one window through the format's walker (pcapng, ERF); runs of plain pcapng
    EPBs through the C walk (``_Columns.epb_hook``)."""
    columns = _Columns()
    if isinstance(walker, PcapngWalker):
        walker.bulk = columns.epb_hook(walker)
    try:
        for raw in walker.walk(buf, start, len(buf), final, base):
            columns.add_raw(raw, buf, base)
    finally:
        if isinstance(walker, PcapngWalker):
            walker.bulk = None
    index = columns.finish(buf)
    return [index] if len(index.offsets) else [], walker.resume, walker.want, walker.finished


def scan_capture(source: Source, *, window: int = WINDOW, fields: object = None,
                 threads: int = 2, release: bool = False, verdicts: bool = True,
                 meanwhile: Callable[[], object] | None = None) -> Iterator[ScanBatch]:
    """Scan a capture (path, '-' for standard input, or a binary file object), one batch per
    window; ``fields`` picks the header-field columns (default all, see
    ``ibwire.scan.program.select``).

    File-level problems raise :class:`CaptureError` before the first batch; a record that
    cannot be read is a row with error ``capture``, as in ``ibwire.pcap``. A batch's
    ``buffer`` (its frames) is valid until the next batch is asked for. With ``threads`` 2
    a second thread finds and scans the records of the next window while the caller works
    on this one (the C loops run without the GIL); 1 does everything in the calling thread, as does a live
    capture (``ibwire.pcap.live``: each batch is handed out as soon as its records arrived).

    Without ``verdicts``, the CRCs are read but not checked (``ibwire.scan.program.Unverified``).
    With ``release``, a mapped window's pages leave the process's memory once the next
    window is mapped (``ibwire.scan.feed.MappedFeed``): memory then holds about one window,
    and a batch's frames read later come from the page cache again, for callers that rarely
    read them.

    ``meanwhile``, the caller's own setting up (its imports, its output), is called once in
    the calling thread before the first batch is handed out; with a second thread, while
    the first START_AHEAD windows of a file are scanned there.

    A file that shrinks while it is scanned ends as a capture cut short (a last row whose
    error says so) when the scan finds it shorter before reading on, or raises CaptureError
    when bytes vanished under a window being read (``ibwire.pcap.filemap``)."""
    if not verdicts:
        fields = Unverified(fields)
    feed = open_feed(source, max(window, 1))
    if isinstance(feed, MappedFeed):
        feed.release = release
    live = isinstance(feed, StreamFeed) and feed.arrived
    pool = ThreadPoolExecutor(1, thread_name_prefix="ibwire-scan") \
        if threads > 1 and not live else None
    # batches hold their maps: windows of a file scanned ahead stay readable
    ahead = START_AHEAD if meanwhile is not None and isinstance(feed, MappedFeed) else 1
    try:
        yield from _batches(feed, max(window, 1), fields, pool, ahead, meanwhile)
        feed.check(feed.record)  # the last batch's frames, read by the caller
    finally:
        if pool is not None:
            pool.shutdown(wait=True, cancel_futures=True)
        feed.close()


def _scanned(items: Iterator[tuple[Item, int]], fields: object,
             pool: ThreadPoolExecutor | None, ahead: int = 1,
             meanwhile: Callable[[], object] | None = None) -> Iterator[ScanBatch]:
    """Scan each (index, first record) not scanned yet; with a pool, the next window is
    walked and scanned in the pool's thread while the caller works on this one (the C
    loops run without the GIL), and the first ``ahead`` while ``meanwhile`` runs; without,
    each is handed out before the next is looked for. ``scan_index`` raises if a window's
    bytes vanished while it was scanned."""
    if pool is None:
        if meanwhile is not None:
            meanwhile()
        for item, record in items:
            yield item if isinstance(item, ScanBatch) else scan_index(item, record, fields)
        return
    queue = deque(pool.submit(_next_batch, items, fields) for _ in range(max(ahead, 1)))
    if meanwhile is not None:
        meanwhile()
    while (batch := queue.popleft().result()) is not None:
        if not queue:  # then one window ahead of the caller, as it works on this one
            queue.append(pool.submit(_next_batch, items, fields))
        yield batch


def _next_batch(items: Iterator[tuple[Item, int]], fields: object) -> ScanBatch | None:
    """The next window's batch, None after the last (run in the pool's one thread)."""
    found = next(items, None)
    if found is None:
        return None
    item, record = found
    return item if isinstance(item, ScanBatch) else scan_index(item, record, fields)


def _batches(feed: Feed, window: int, fields: object, pool: ThreadPoolExecutor | None,
             ahead: int = 1, meanwhile: Callable[[], object] | None = None
             ) -> Iterator[ScanBatch]:
    # small first batches only help where the next ones are scanned meanwhile
    yield from _scanned(_items(feed, window, fields, pool is not None), fields, pool, ahead,
                        meanwhile)


def _items(feed: Feed, window: int, fields: object, ramp: bool = True
           ) -> Iterator[tuple[Item, int]]:
    """The records of each window, as (index or scanned batch, number of its first record);
    with ``ramp``, the first batches start small (FIRST_ROWS)."""
    buf, base, final = feed.window(0, HEAD_LEN)
    fmt = detect_format(buf, final, feed.name)
    if fmt == "gzip":
        raise CaptureError(f"{feed.name}: gzip inside gzip is not supported", offset=0)
    need = HEAD_LEN
    while (started := make_walker(fmt, buf, final, feed.name)) is None:
        need *= 2
        buf, base, final = feed.window(0, need)
    feed.check(0)
    walker, pos, _header = started
    rows_of: Any = _walker_rows
    if isinstance(walker, PcapWalker):
        let_go = feed.let_go_every() if isinstance(feed, MappedFeed) else 0
        rows_of = partial(_pcap_rows, let_go=let_go)
    record, need, finished = 0, 0, False
    guess = _RowGuess(ramp)
    while True:
        feed.record = record
        buf, base, at_end = feed.window(pos, need)
        final = at_end and feed.error is None
        items, resume, want, finished = rows_of(walker, buf, pos - base, final, base,
                                                record, fields, guess)
        feed.check(record)  # the walk read zeros where the file's bytes vanished
        guess.grow()
        for item in items:
            yield item, record
            record += len(item) if isinstance(item, ScanBatch) else len(item.offsets)
        del items
        progressed = base + resume > pos
        pos = base + resume
        if finished or (at_end and (not progressed or resume >= len(buf))):
            break
        need = want if progressed or want > len(buf) - resume else len(buf) - resume + window
    if feed.error is not None and not finished:
        error = feed.error
        error.offset = pos
        yield error_index(error), record
