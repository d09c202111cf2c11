"""Capture writers: pcap (micro- or nanosecond, any link type) and pcapng (one Section Header,
one Interface Description per (link type, snaplen), Enhanced Packet Blocks).

Both write atomically: into a temporary file in the target's directory, renamed over the
target by ``close()`` (or a clean ``with`` exit), so no reader ever sees a part of an output
under its name. On an exception, or ``abort()``, the temporary file is removed and the target
is untouched. The file is not forced to the disk before the rename (tcpdump, tshark -w,
tcprewrite and editcap do not either: an fsync of a 1 GB capture costs seconds); set
``IBWIRE_FSYNC=1`` in the environment, or pass ``durable=True`` to :class:`AtomicFile`, to
have it survive a power loss once written. Values that cannot be written (a
negative timestamp, a frame longer than the 32-bit fields) raise :class:`BuildError`.
"""

from __future__ import annotations

import mmap
import os
import struct
from collections.abc import Iterator
from contextlib import contextmanager
from types import TracebackType
from typing import TypeVar

from ibwire.errors import BuildError
from ibwire.pcap.atomic import FSYNC_ENV, AtomicFile, durable_default
from ibwire.pcap.pcap import PCAP_MAGIC_NS, PCAP_MAGIC_US
from ibwire.pcap.pcapng import (
    BLOCK_EPB,
    BLOCK_IDB,
    BLOCK_SHB,
    BYTE_ORDER_MAGIC,
    OPT_IF_TSRESOL,
)
from ibwire.pcap.records import Buffer, CaptureRecord

DEFAULT_SNAPLEN = 262144
_NS_PER_S = 1_000_000_000
_OPT_SHB_USERAPPL = 4
WriterT = TypeVar("WriterT", bound="_Writer")
__all__ = ["DEFAULT_SNAPLEN", "FSYNC_ENV", "AtomicFile", "PcapWriter", "PcapngWriter",
           "durable_default"]  # the atomic file's names kept here for their users


class _Writer:
    """Shared life cycle: atomic file, context manager, record counting."""

    def __init__(self, path: str | os.PathLike[str], big_endian: bool) -> None:
        self.order = ">" if big_endian else "<"
        self.records_written = 0
        self._file = AtomicFile(path)
        self.path = self._file.path

    def _check(self, data: Buffer, timestamp_ns: int, orig_len: int | None) -> int:
        if timestamp_ns < 0:
            raise BuildError(f"negative timestamp {timestamp_ns} cannot be written",
                             field="timestamp_ns")
        orig = len(data) if orig_len is None else orig_len
        if not len(data) <= orig <= 0xFFFFFFFF:
            raise BuildError(f"orig_len {orig} must be >= caplen {len(data)} and fit 32 bits",
                             field="orig_len")
        return orig

    def close(self) -> None:
        """Finish the file and move it into place."""
        if not self._file.done:
            self._finish()
        self._file.commit()

    def _finish(self) -> None:
        pass

    def abort(self) -> None:
        """Drop everything written; the target is left as it was."""
        self._file.abort()

    def __del__(self) -> None:
        file = getattr(self, "_file", None)
        if file is not None and not file.done:
            file.abort()

    def __enter__(self: WriterT) -> WriterT:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 traceback: TracebackType | None) -> None:
        if exc_type is None:
            self.close()
        else:
            self.abort()


class PcapWriter(_Writer):
    """A pcap file of one link type. ``snaplen=None`` writes the larger of 262144 and the
    longest record."""

    def __init__(self, path: str | os.PathLike[str], linktype: int, *, nanoseconds: bool = False,
                 snaplen: int | None = None, big_endian: bool = False) -> None:
        if not 0 <= linktype <= 0xFFFF or not 0 <= (snaplen or 0) <= 0xFFFFFFFF:
            raise BuildError(f"link type {linktype} / snaplen {snaplen} out of range")
        super().__init__(path, big_endian)
        self.linktype = linktype
        self.nanoseconds = nanoseconds
        self.snaplen = DEFAULT_SNAPLEN if snaplen is None else snaplen
        self._grow_snaplen = snaplen is None
        self.longest_record = 0
        self._record_header = struct.Struct(self.order + "IIII")
        self._file.file.write(self._global_header())

    def _global_header(self) -> bytes:
        magic = PCAP_MAGIC_NS if self.nanoseconds else PCAP_MAGIC_US
        return struct.pack(self.order + "IHHiIII", magic, 2, 4, 0, 0, self.snaplen,
                           self.linktype)

    def write(self, data: Buffer, timestamp_ns: int, orig_len: int | None = None) -> None:
        """Append one record: ``data`` as stored (link-layer header included)."""
        orig = self._check(data, timestamp_ns, orig_len)
        seconds, rest_ns = divmod(timestamp_ns, _NS_PER_S)
        if seconds > 0xFFFFFFFF:
            raise BuildError(f"timestamp {timestamp_ns} ns beyond pcap's 32-bit seconds",
                             field="timestamp_ns")
        fraction = rest_ns if self.nanoseconds else rest_ns // 1000
        self.longest_record = max(self.longest_record, len(data))
        if len(data) > self.snaplen and self._grow_snaplen:
            self.snaplen = len(data)
        out = self._file.file
        out.write(self._record_header.pack(seconds, fraction, len(data), orig))
        out.write(data)
        self.records_written += 1

    def write_prepared(self, data: Buffer, records: int, longest: int) -> None:
        """Append ``records`` records already laid out in ``data`` (16-byte headers in this
        file's byte order and timestamp resolution, each frame at most ``longest`` bytes):
        for writers that build many records at once."""
        self.longest_record = max(self.longest_record, longest)
        if longest > self.snaplen and self._grow_snaplen:
            self.snaplen = longest
        self._file.file.write(data)
        self.records_written += records

    @contextmanager
    def appending(self, size: int, records: int, longest: int) -> Iterator[memoryview]:
        """A writable view of the next ``size`` bytes of the file, for ``records`` records
        laid out as :meth:`write_prepared` takes them, filled in place: the file's pages
        mapped (no copy of the records through ``write``), or, where the file cannot be
        mapped or its blocks reserved, a buffer written when the block ends. The view must
        not be kept."""
        out = self._file.file
        out.flush()
        start = out.tell()
        mapped = None
        reserve = getattr(os, "posix_fallocate", None)  # not on macOS: no mapping there
        if size and reserve is not None:
            fd = out.fileno()
            base = start - start % mmap.ALLOCATIONGRANULARITY
            try:
                # blocks reserved first: a full disk is then this OSError (and the write
                # below fails with it), never a SIGBUS on a mapped page
                reserve(fd, start, size)
                mapped = mmap.mmap(fd, start + size - base, offset=base)
            except (OSError, ValueError):
                os.ftruncate(fd, start)
        if mapped is None:
            buffer = bytearray(size)
            with memoryview(buffer) as view:
                yield view
            self.write_prepared(buffer, records, longest)
            return
        try:
            with memoryview(mapped) as whole, whole[start - base:] as view:
                yield view
        finally:
            mapped.close()
        out.seek(start + size)
        self.write_prepared(b"", records, longest)

    def write_record(self, record: CaptureRecord) -> None:
        """Append a record read from a capture (its ``record_data`` and ``record_orig_len``)."""
        if record.error is not None:
            raise BuildError(f"record {record.index + 1} is an error record, nothing to write")
        if record.linktype != self.linktype:
            raise BuildError(f"record {record.index + 1} has link type {record.linktype}, "
                             f"this file {self.linktype}", field="linktype")
        self.write(record.record_data, record.timestamp_ns,
                   max(record.record_orig_len, len(record.record_data)))

    def _finish(self) -> None:
        out = self._file.file
        out.seek(0)
        out.write(self._global_header())
        out.seek(0, os.SEEK_END)


class PcapngWriter(_Writer):
    """A pcapng file: one section, an interface per (link type, snaplen), EPBs with
    nanosecond (default) or microsecond timestamps."""

    def __init__(self, path: str | os.PathLike[str], *, nanoseconds: bool = True,
                 big_endian: bool = False, application: str = "ibwire") -> None:
        super().__init__(path, big_endian)
        self.nanoseconds = nanoseconds
        self._interfaces: dict[tuple[int, int], int] = {}
        self._epb_header = struct.Struct(self.order + "IIIIIII")
        options = self._option(_OPT_SHB_USERAPPL, application.encode()) + bytes(4)
        body = struct.pack(self.order + "IHHq", BYTE_ORDER_MAGIC, 1, 0, -1) + options
        self._block(BLOCK_SHB, body)

    def _option(self, code: int, value: bytes) -> bytes:
        return struct.pack(self.order + "HH", code, len(value)) + value + bytes(-len(value) % 4)

    def _block(self, block_type: int, body: bytes) -> None:
        length = 12 + len(body)
        self._file.file.write(struct.pack(self.order + "II", block_type, length) + body +
                              struct.pack(self.order + "I", length))

    def interface(self, linktype: int, snaplen: int = 0) -> int:
        """The interface id for (linktype, snaplen), describing it first if it is new."""
        key = (linktype, snaplen)
        if key not in self._interfaces:
            if not 0 <= linktype <= 0xFFFF or not 0 <= snaplen <= 0xFFFFFFFF:
                raise BuildError(f"link type {linktype} / snaplen {snaplen} out of range")
            options = b""
            if self.nanoseconds:
                options = self._option(OPT_IF_TSRESOL, bytes([9])) + bytes(4)
            self._block(BLOCK_IDB, struct.pack(self.order + "HHI", linktype, 0, snaplen) +
                        options)
            self._interfaces[key] = len(self._interfaces)
        return self._interfaces[key]

    def write(self, data: Buffer, timestamp_ns: int, linktype: int,
              orig_len: int | None = None, snaplen: int = 0) -> None:
        """Append one packet (``data`` as stored, link-layer header included)."""
        orig = self._check(data, timestamp_ns, orig_len)
        units = timestamp_ns if self.nanoseconds else timestamp_ns // 1000
        if units >> 64:
            raise BuildError(f"timestamp {timestamp_ns} ns beyond pcapng's 64 bits",
                             field="timestamp_ns")
        interface = self.interface(linktype, snaplen)
        pad = -len(data) % 4
        length = 32 + len(data) + pad
        out = self._file.file
        out.write(self._epb_header.pack(BLOCK_EPB, length, interface, units >> 32,
                                        units & 0xFFFFFFFF, len(data), orig))
        out.write(data)
        out.write(struct.pack(f"{self.order}{pad}xI", length))
        self.records_written += 1

    def write_record(self, record: CaptureRecord) -> None:
        """Append a record read from a capture, keeping its link type and snaplen."""
        if record.error is not None:
            raise BuildError(f"record {record.index + 1} is an error record, nothing to write")
        self.write(record.record_data, record.timestamp_ns, record.linktype,
                   max(record.record_orig_len, len(record.record_data)), record.snaplen)
