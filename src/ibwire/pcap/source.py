"""Opening captures: files (through mmap), gzip-compressed files, standard input, file objects
and in-memory bytes; format detection; turning the walkers' RawRecords into CaptureRecords.

A regular uncompressed file is mapped (``ibwire.pcap.filemap``), and its records' frames are
memoryviews into the map (no copies; they stay valid after ``close()``, which only drops the
reader's reference). Gzip data, pipes and file objects are read in chunks through a window that
holds one chunk plus at most one record; their frames are bytes; so is a regular file where
the map's C engine is not there (``IBWIRE_NO_EXTENSIONS=1``: it is read, not mapped). Either
way memory does not grow with the file.

A file that shrinks while it is read: read in chunks, the data ends early and a last
TruncatedError record says the file shrank; mapped, the bytes that vanished under the map
read as zeros (no SIGBUS) and the iteration raises CaptureError at the next record.

A live capture (``ibwire.pcap.live``) is read as a pipe whose records are handed out as soon
as they have arrived.

File-level problems (cannot open, empty, bad magic, truncated or unknown header) raise
:class:`CaptureError` when the capture is opened. After that iteration never raises: a
packet-level problem is a record with ``error`` set (see ``records.py``); corrupt or truncated
gzip data ends the iteration with one such record.
"""

from __future__ import annotations

import io
import os
import stat
import sys
from collections.abc import Iterator
from types import TracebackType
from typing import TYPE_CHECKING, Any, BinaryIO, Union

from ibwire.errors import CaptureError, IbwireError
from ibwire.pcap import filemap
from ibwire.pcap.erf import ErfWalker, looks_like_erf
from ibwire.pcap.gunzip import GZIP_MAGIC, GunzipStream, PrefixedStream, read_upto
from ibwire.pcap.linktypes import direct_link_codes
from ibwire.pcap.locators import locator_for
from ibwire.pcap.pcap import PcapHeader, PcapWalker, is_modified_pcap, parse_pcap_header, pcap_magic
from ibwire.pcap.pcapng import Interface, PcapngWalker, check_first_section
from ibwire.pcap.records import (
    LINK_NAMES,
    Buffer,
    CaptureRecord,
    RawRecord,
    Walker,
    error_record,
)

if TYPE_CHECKING:
    from ibwire.pcap.live import LiveCapture

PCAPNG_MAGIC = b"\n\r\r\n"
HEAD_LEN = 128 * 1024
CHUNK_LEN = 1024 * 1024
Source = Union[str, os.PathLike[str], BinaryIO, "LiveCapture"]


def detect_format(head: Buffer, at_eof: bool, name: str) -> str:
    """'pcap', 'pcapng', 'erf' (native) or 'gzip' from the first bytes of a capture."""
    if len(head) == 0:
        raise CaptureError(f"{name}: empty file", offset=0)
    if bytes(head[:2]) == GZIP_MAGIC:
        return "gzip"
    if pcap_magic(head):
        return "pcap"
    if bytes(head[:4]) == PCAPNG_MAGIC:
        return "pcapng"
    if is_modified_pcap(head):
        raise CaptureError(f"{name}: modified (Kuznetzov) pcap is not supported", offset=0)
    if looks_like_erf(head, at_eof):
        return "erf"
    raise CaptureError(f"{name}: not a pcap, pcapng, gzip or ERF capture (starts with "
                       f"{bytes(head[:4]).hex()})", header="file", field="magic", offset=0)


def make_walker(fmt: str, head: Buffer, at_eof: bool, name: str
                ) -> tuple[Walker, int, PcapHeader | None] | None:
    """(walker, where records start, pcap header); None if ``head`` is too short to tell."""
    if fmt == "pcap":
        if len(head) < 24 and not at_eof:
            return None
        header = parse_pcap_header(head, name)
        return PcapWalker(header), 24, header
    if fmt == "pcapng":
        if not check_first_section(head, at_eof, name):
            return None
        return PcapngWalker(), 0, None
    return ErfWalker(), 0, None


class RecordMaker:
    """Numbers RawRecords and finds their frames; ``copy`` makes frames bytes, not views."""

    def __init__(self, copy: bool) -> None:
        self.index = 0
        self.copy = copy

    def records(self, raws: Iterator[RawRecord], view: memoryview, base: int
                ) -> Iterator[CaptureRecord]:
        direct = direct_link_codes()
        copy = self.copy
        for offset, start, end, timestamp_ns, record_orig_len, linktype, snaplen, interface, \
                warning, error in raws:
            index = self.index
            self.index = index + 1
            if error is not None:
                yield error_record(index, base + offset, error)
                continue
            code = direct.get(linktype)
            if code is not None:
                frame_start, frame_end, wire_len = start, end, record_orig_len
                erf_type = erf_flags = None
            else:
                code, frame_start, frame_end, wire_len, erf_timestamp, erf_type, erf_flags, \
                    link_warning, link_error = locator_for(linktype)(
                        view, start, end, record_orig_len, base)
                if link_error is not None:
                    yield error_record(index, base + offset, link_error)
                    continue
                if erf_timestamp is not None:
                    timestamp_ns = erf_timestamp
                warning = warning or link_warning
            data: Buffer = bytes(view[start:end]) if copy else view[start:end]
            if frame_start == start and frame_end == end:
                frame = data
            else:
                frame = data[frame_start - start:frame_end - start]
            yield CaptureRecord(index, base + offset, timestamp_ns, linktype, LINK_NAMES[code],
                                frame, frame_end - frame_start, wire_len, interface, data,
                                record_orig_len, snaplen, erf_type, erf_flags,
                                None if warning is None else warning.at_record(index), None)


def iter_capture_bytes(data: Buffer, name: str = "<bytes>") -> Iterator[CaptureRecord]:
    """The records of a whole capture held in memory (sans-IO; frames are views into it).

    File-level problems raise :class:`CaptureError` at the first ``next()``.
    """
    view = memoryview(data).cast("B")
    fmt = detect_format(view, True, name)
    if fmt == "gzip":
        with CaptureReader(io.BytesIO(view), name=name) as reader:
            yield from reader
        return
    started = make_walker(fmt, view, True, name)
    assert started is not None
    walker, start, _header = started
    yield from RecordMaker(copy=False).records(walker.walk(view, start, len(view), True, 0),
                                               view, 0)


class CaptureReader:
    """An open capture: iterate it for :class:`CaptureRecord` s; use it as a context manager.

    ``format`` is 'pcap', 'pcapng' or 'erf'; ``compressed`` says gzip; ``header`` is the pcap
    global header (None for other formats); ``interfaces`` lists the pcapng interfaces seen so
    far (all sections). A mapped file can be iterated again; a stream only once.
    """

    def __init__(self, source: Source, *, chunk_size: int = CHUNK_LEN,
                 name: str | None = None) -> None:
        if name is not None:
            self.name = name
        elif source == "-":
            self.name = "<stdin>"
        elif isinstance(source, (str, os.PathLike)):
            self.name = os.fspath(source)
        else:
            name = getattr(source, "name", None)
            self.name = name if isinstance(name, str) else repr(source)
        self.chunk_size = max(1, chunk_size)
        self.compressed = False
        self._map: Any = None
        self._size: int | None = None
        """A regular file read in chunks: its size when opened (a shrink is then seen)."""
        self._handle: BinaryIO | None = None
        self._consumed = 0
        self._arrived = False  # a live capture: reads hand out what has arrived
        self._stream: BinaryIO | GunzipStream | None = None
        self._owned: list[BinaryIO] = []
        self._head = b""
        self._eof = False
        self._stream_error: IbwireError | None = None
        self._iterated = False
        self._walker: Walker | None = None
        try:
            self._open(source)
        except BaseException:
            self.close()
            raise

    def _open(self, source: Source) -> None:
        if source == "-":
            self._stream = sys.stdin.buffer
        elif isinstance(source, (str, os.PathLike)):
            try:
                handle = open(source, "rb")  # closed in close()
                self._owned.append(handle)
                info = os.fstat(handle.fileno())
            except OSError as exc:
                raise CaptureError(f"{self.name}: cannot open ({exc.strerror})") from exc
            if stat.S_ISREG(info.st_mode):
                if info.st_size == 0:
                    raise CaptureError(f"{self.name}: empty file", offset=0)
                gzipped = handle.read(2) == GZIP_MAGIC
                if not gzipped and filemap.maps():
                    self._map = filemap.map_window(handle.fileno(), 0, info.st_size, self.name)
                    self._handle = handle  # kept open: its size is checked as records are read
                    self.format = detect_format(memoryview(self._map), True, self.name)
                    self._start(memoryview(self._map), True)
                    return
                handle.seek(0)
                if not gzipped:  # read in chunks: can be read again from the start
                    self._size, self._handle = info.st_size, handle
            self._stream = handle
        else:
            from ibwire.pcap.live import LiveCapture  # only a stream object can be one

            if isinstance(source, LiveCapture):
                self._stream, self._arrived = source.stream, True
            else:
                self._stream = source
        self._open_stream()

    def _open_stream(self) -> None:
        self._head = self._read(HEAD_LEN)
        if detect_format(self._head, self._eof, self.name) == "gzip":
            self.compressed = True
            self._stream = GunzipStream(PrefixedStream(self._head, self._stream))
            self._eof = False
            self._head = self._read(HEAD_LEN)
            if not self._head and self._stream_error is not None:
                raise CaptureError(f"{self.name}: {self._stream_error.reason}", offset=0)
            if not self._head:
                raise CaptureError(f"{self.name}: empty file (after gzip decompression)",
                                   offset=0)
        self.format = detect_format(self._head, self._eof, self.name)
        while not self._start(self._head, self._eof):
            self._head += self._read(HEAD_LEN)

    def _start(self, head: Buffer, at_eof: bool) -> bool:
        if self.format == "gzip":
            raise CaptureError(f"{self.name}: gzip inside gzip is not supported", offset=0)
        started = make_walker(self.format, head, at_eof, self.name)
        if started is None:
            return False
        self._walker, self._records_start, self.header = started
        return True

    def _read(self, size: int) -> bytes:
        """Up to ``size`` bytes (fewer only at the end); decompression errors end the data."""
        if self._stream is None:
            raise CaptureError(f"{self.name}: read after close")
        if self._eof:
            return b""
        data, self._eof, error = read_upto(self._stream, size, self.compressed, self._arrived)
        self._stream_error = error or self._stream_error
        self._consumed += len(data)
        if self._eof and self._size is not None and self._consumed < self._size:
            self._stream_error = self._stream_error or filemap.shrunk_error(
                self.name, self._size, self._consumed, self._consumed)
        return data

    @property
    def interfaces(self) -> list[Interface]:
        return list(getattr(self._walker, "all_interfaces", []))

    def __iter__(self) -> Iterator[CaptureRecord]:
        if self._map is not None:
            if self._walker is None or self._iterated:
                self._start(memoryview(self._map), True)
            self._iterated = True
            return self._iter_mapped()
        if self._iterated and self._handle is not None and self._stream is not None:
            self._handle.seek(0)  # a regular file read in chunks: from the start again
            self._head, self._eof, self._stream_error, self._consumed = b"", False, None, 0
            self._open_stream()
        elif self._iterated:
            raise CaptureError(f"{self.name}: a stream can be read only once")
        self._iterated = True
        return self._iter_stream()

    def _iter_mapped(self) -> Iterator[CaptureRecord]:
        assert self._map is not None and self._walker is not None
        view = memoryview(self._map)
        raws = self._walker.walk(view, self._records_start, len(view), True, 0)
        yield from RecordMaker(copy=False).records(self._unshrunk(raws, self._map), view, 0)

    def _unshrunk(self, raws: Iterator[RawRecord], mapped: Any) -> Iterator[RawRecord]:
        """The walker's records of the map, each checked before it is made a record: raise
        CaptureError if the file now ends before it does (its bytes past the end read as
        zeros, with no fault in the file's last page) or a fault was caught in the map. The
        size is looked up once per page of records."""
        assert self._handle is not None
        fstat, fileno = os.fstat, self._handle.fileno()
        checked = 0
        for index, raw in enumerate(raws):
            end = max(raw[0] + 1, raw[2])  # the record's data end (its start for an error)
            if end > checked:
                now = fstat(fileno).st_size
                if now < end or mapped.faulted:
                    raise filemap.vanished_error(self.name, now, index, raw[0])
                checked = min(end | 4095, now)
            elif mapped.faulted:
                raise filemap.vanished_error(self.name, None, index, raw[0])
            yield raw

    def _iter_stream(self) -> Iterator[CaptureRecord]:
        assert self._walker is not None
        walker = self._walker
        maker = RecordMaker(copy=True)
        window, self._head = self._head, b""
        base, pos = 0, self._records_start
        while True:
            final = self._eof and self._stream_error is None
            yield from maker.records(walker.walk(memoryview(window), pos, len(window), final,
                                                 base), memoryview(window), base)
            if walker.finished or self._eof:
                break
            keep = walker.resume
            more = self._read(max(self.chunk_size, walker.want - (len(window) - keep)))
            base += keep
            window = window[keep:] + more
            pos = 0
        if self._stream_error is not None and not walker.finished:
            error = self._stream_error
            error.offset = base + walker.resume
            yield error_record(maker.index, error.offset, error)

    def copy_to(self, target: BinaryIO) -> IbwireError | None:
        """Copy the (decompressed) bytes of a stream capture that was not iterated to
        ``target``; return the error that cut the data short, if any."""
        if self._map is not None or self._iterated:
            raise CaptureError(f"{self.name}: copy_to needs a stream that was not read")
        self._iterated = True
        target.write(self._head)
        self._head = b""
        while not self._eof:
            target.write(self._read(self.chunk_size))
        return self._stream_error

    def close(self) -> None:
        """Release the file; frames already handed out stay valid."""
        if self._map is not None:
            self._map.close()  # at once, or when the last record holding a view of it goes
            self._map = None
        self._handle = None
        while self._owned:
            self._owned.pop().close()
        self._stream = None

    def __enter__(self) -> CaptureReader:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 traceback: TracebackType | None) -> None:
        self.close()


def open_capture(source: Source, *, chunk_size: int = CHUNK_LEN, name: str | None = None
                 ) -> CaptureReader:
    """Open a capture file (path, '-' for standard input, a binary file object, or a
    :class:`~ibwire.pcap.live.LiveCapture`);
    ``name`` is what messages call it (default: the path)."""
    return CaptureReader(source, chunk_size=chunk_size, name=name)


def read_capture(source: Source) -> Iterator[CaptureRecord]:
    """Every record of a capture, the file closed when the iteration ends."""
    with open_capture(source) as reader:
        yield from reader
