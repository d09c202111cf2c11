"""Reading a capture in windows: a fresh read-only map of each window of a regular file
(unmapped when the next one is made, so resident memory stays near one window), a read
buffer for a pipe, standard input, gzip data or a live capture. Needs no numpy: ``ibwire check`` reads
through it before anything else is loaded."""

from __future__ import annotations

import mmap
import os
import stat
import sys
from typing import TYPE_CHECKING, BinaryIO, Protocol

from ibwire.errors import CaptureError, IbwireError
from ibwire.pcap.gunzip import GZIP_MAGIC, GunzipStream, PrefixedStream, read_upto

if TYPE_CHECKING:
    from ibwire.pcap.source import Source


PIPE_READ = 1 << 20
"""The most a live capture's pipe holds (Linux's default /proc/sys/fs/pipe-max-size)."""


class Feed(Protocol):
    name: str
    error: IbwireError | None

    def window(self, pos: int, need: int) -> tuple[memoryview, int, bool]:
        """A buffer from absolute offset ``base`` <= ``pos`` holding at least ``need`` bytes
        from ``pos`` unless the data ends first: (buffer, base, no data after it). When
        ``error`` is set, the data was cut short by it."""
        ...

    def close(self) -> None: ...


class MappedFeed:
    """Windows of a regular file, each its own read-only map."""

    def __init__(self, handle: BinaryIO, size: int, name: str, length: int) -> None:
        self.handle, self.size, self.name, self.length = handle, size, name, length
        self.error: IbwireError | None = None
        self.map: mmap.mmap | None = None

    def window(self, pos: int, need: int) -> tuple[memoryview, int, bool]:
        self._unmap()
        start = pos - pos % mmap.ALLOCATIONGRANULARITY
        length = min(self.size - start, max(self.length, pos - start + need))
        self.map = mmap.mmap(self.handle.fileno(), length, offset=start, access=mmap.ACCESS_READ)
        if hasattr(self.map, "madvise"):
            self.map.madvise(mmap.MADV_SEQUENTIAL)
        return memoryview(self.map), start, start + length >= self.size

    def _unmap(self) -> None:
        if self.map is not None:
            try:
                self.map.close()
            except BufferError:
                pass  # a batch still holds a view of it: it goes when that does
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
