"""Reading a capture in windows: a fresh read-only map of each window of a regular file
(unmapped when the next one is made, so resident memory stays near one window), a read
buffer for a pipe, standard input, gzip data or a live capture. Needs no numpy: ``ibwire
check`` reads through it before anything else is loaded.

A regular file's windows come from ``ibwire.pcap.filemap``, so a file that shrinks while it is
read never kills the process with SIGBUS: a window found shorter ends the data with a
TruncatedError (``error``, as corrupt gzip data does), and bytes that vanished under a window
being read raise CaptureError (``check``)."""

from __future__ import annotations

import mmap
import os
import stat
import sys
import weakref
from typing import TYPE_CHECKING, Any, BinaryIO, Protocol

from ibwire.errors import CaptureError, IbwireError
from ibwire.pcap.filemap import faulted, map_window, maps, shrunk_error, vanished_error
from ibwire.pcap.gunzip import GZIP_MAGIC, GunzipStream, PrefixedStream, read_upto

if TYPE_CHECKING:
    from ibwire.pcap.source import Source


PIPE_READ = 1 << 20
"""The most a live capture's pipe holds (Linux's default /proc/sys/fs/pipe-max-size)."""
#: How far a walk of a mapped window goes between two lets-go of the pages behind it
#: (``MappedFeed.let_go_every``).
LET_GO_EVERY = 4 << 20


class Feed(Protocol):
    name: str
    error: IbwireError | None
    record: int
    """The record the reader is at (it keeps it up to date), for the messages."""

    def window(self, pos: int, need: int) -> tuple[memoryview, int, bool]:
        """A buffer from absolute offset ``base`` <= ``pos`` holding at least ``need`` bytes
        from ``pos`` unless the data ends first: (buffer, base, no data after it). When
        ``error`` is set, the data was cut short by it."""
        ...

    def check(self, record: int) -> None:
        """Raise CaptureError if bytes of a window handed out vanished (the file shrank under
        it) while they were read; ``record``: the first record read from it."""
        ...

    def close(self) -> None: ...


class MappedFeed:
    """Windows of a regular file, each its own read-only map (``ibwire.pcap.filemap``)."""

    def __init__(self, handle: BinaryIO, size: int, name: str, length: int) -> None:
        self.handle, self.size, self.name, self.length = handle, size, name, length
        self.error: IbwireError | None = None
        self.record = 0
        self.map: Any = None
        #: Let a window's pages go when the next is mapped (``CaptureMap.release``): for
        #: readers that rarely look at a batch's frames once it is scanned.
        self.release = False
        self.maps: list[tuple[weakref.ref[Any], int]] = []
        """The maps handed out that may still be read (a batch holds a view of one), with
        where each ends in the file."""

    def let_go_every(self) -> int:
        """With ``release``, the bytes after which a walk of a window lets the pages it
        passed go (``ibwire.scan.scan_pcap``'s ``release_every``), so that memory holds a
        few MiB of the window, not all of it; 0 where windows are not maps (the pure-Python
        twin reads them into memory)."""
        return LET_GO_EVERY if self.release and maps() else 0

    def window(self, pos: int, need: int) -> tuple[memoryview, int, bool]:
        if self.release and self.map is not None:
            self.map.release()
        self._unmap()
        self.check(self.record)
        now = os.fstat(self.handle.fileno()).st_size
        if now < self.size:
            self._shrank(now, pos)
        start = pos - pos % mmap.ALLOCATIONGRANULARITY
        length = max(0, min(self.size - start, max(self.length, pos - start + need)))
        self.map = map_window(self.handle.fileno(), start, length, self.name)
        self.maps = [*((ref, end) for ref, end in self.maps if ref() is not None),
                     (weakref.ref(self.map), start + len(self.map))]
        if len(self.map) < length:  # the pure-Python twin reads: a shrink is a short read
            self._shrank(start + len(self.map), pos)
        return memoryview(self.map), start, start + len(self.map) >= self.size

    def _shrank(self, now: int, pos: int) -> None:
        """The file is now ``now`` bytes long: the data ends there (a TruncatedError in
        ``error``), or, if that is before ``pos``, where the reader already is, it cannot be
        read on."""
        if now < pos:
            raise vanished_error(self.name, now, self.record, pos)
        if self.error is None:
            self.error = shrunk_error(self.name, self.size, now, now)
        self.size = now

    def check(self, record: int) -> None:
        """Bytes vanished from a live map if it faulted, or if the file now ends before the
        map does (the last page of a file reads zeros past its end, with no fault)."""
        if not self.maps or self.handle.closed:
            return
        now = os.fstat(self.handle.fileno()).st_size
        for ref, end in self.maps:
            found = ref()
            if found is not None and (end > now or faulted(found)):
                raise vanished_error(self.name, now, record, None)

    def _unmap(self) -> None:
        if self.map is not None:
            self.map.close()  # at once, or when the last batch holding a view of it goes
            self.map = None

    def close(self) -> None:
        self._unmap()
        self.handle.close()


class StreamFeed:
    """Windows of a byte stream (a pipe, standard input, gzip data). ``arrived`` (a live
    capture): a window is what has arrived, and is read only when it holds less than
    ``need`` bytes, so that records are handed out as soon as they are whole."""

    def __init__(self, stream: BinaryIO | GunzipStream | PrefixedStream, name: str, length: int,
                 compressed: bool, owned: BinaryIO | None, arrived: bool = False) -> None:
        self.stream, self.name, self.length = stream, name, length
        self.compressed, self.owned, self.arrived = compressed, owned, arrived
        self.data, self.base, self.eof = b"", 0, False
        self.error: IbwireError | None = None
        self.record = 0

    def window(self, pos: int, need: int) -> tuple[memoryview, int, bool]:
        self.data, self.base = self.data[pos - self.base:], pos
        want = max(self.length, need) - len(self.data)
        if self.arrived:  # a pipe holds at most PIPE_READ bytes: no bigger buffer to read into
            want = min(want, max(need - len(self.data), PIPE_READ))
        if want > 0 and not self.eof and (not self.arrived or len(self.data) < need):
            more, self.eof, error = read_upto(self.stream, want, self.compressed, self.arrived)
            self.error = error or self.error
            self.data += more
        return memoryview(self.data), self.base, self.eof

    def check(self, record: int) -> None:
        """Nothing is mapped: a stream's bytes cannot vanish."""

    def close(self) -> None:
        if self.owned is not None:
            self.owned.close()


def open_feed(source: Source, length: int) -> Feed:
    if source == "-":
        stream: BinaryIO = sys.stdin.buffer
        name, owned = "<stdin>", None
    elif isinstance(source, (str, os.PathLike)):
        name = os.fspath(source)
        try:
            handle = open(source, "rb")
            info = os.fstat(handle.fileno())
        except OSError as exc:
            raise CaptureError(f"{name}: cannot open ({exc.strerror})") from exc
        if stat.S_ISREG(info.st_mode) and info.st_size == 0:
            handle.close()
            raise CaptureError(f"{name}: empty file", offset=0)
        if stat.S_ISREG(info.st_mode) and handle.read(2) != GZIP_MAGIC:
            return MappedFeed(handle, info.st_size, name, length)
        handle.seek(0)
        stream, owned = handle, handle
    else:
        from ibwire.pcap.live import LiveCapture  # only a stream object can be one

        if isinstance(source, LiveCapture):
            return StreamFeed(source.stream, source.name, length, False, None, arrived=True)
        stream, owned = source, None
        found = getattr(source, "name", None)
        name = found if isinstance(found, str) else repr(source)
    try:
        head = stream.read(2)
    except OSError as exc:
        raise CaptureError(f"{name}: cannot read ({exc.strerror})") from exc
    if head == GZIP_MAGIC:
        return StreamFeed(GunzipStream(PrefixedStream(head, stream)), name, length, True, owned)
    return StreamFeed(PrefixedStream(head, stream), name, length, False, owned)
