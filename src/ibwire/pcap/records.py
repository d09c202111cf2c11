"""What the capture readers hand out: one immutable record per packet (or per problem).

A reader never raises in the middle of a file. Each packet becomes a :class:`CaptureRecord`;
a packet-level problem becomes a record whose ``error`` is set (and whose frame is empty), so
a caller can count problems and still see everything read before them. A problem that leaves
the record usable (``caplen > snaplen``, an ERF record cut short by the pcap record) is a
``warning`` on an otherwise normal record.

The walkers of each format yield :data:`RawRecord` tuples (positions inside the buffer they
were given, no copies); :mod:`ibwire.pcap.source` turns them into records and
:mod:`ibwire.pcap.index` into numpy columns.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import NamedTuple, Protocol

from ibwire.errors import IbwireError

Buffer = bytes | bytearray | memoryview
"""Anything ``struct.unpack_from`` and slicing accept (an mmap is used through a memoryview)."""

LINK_CODES: dict[str, int] = {"ethernet": 0, "infiniband": 1, "ip": 2, "grh": 3, "other": 255}
"""Where ibwire's dissector starts, as the uint8 code of the index fast path."""
LINK_NAMES: dict[int, str] = {code: name for name, code in LINK_CODES.items()}
LINK_OTHER = LINK_CODES["other"]

INT64_MIN, INT64_MAX = -(1 << 63), (1 << 63) - 1
"""The range of timestamp columns (a reader's nanoseconds are Python ints, columns clamp)."""
MAX_CAPLEN = 256 * 1024 * 1024
"""A record (or pcapng block) longer than this is taken as a lying length, not a packet."""

# RawRecord: (offset, data_start, data_end, timestamp_ns, record_orig_len, linktype, snaplen,
#             interface, warning, error); offsets are positions in the walked buffer.
RawRecord = tuple[int, int, int, int, int, int, int, int, "IbwireError | None", "IbwireError | None"]


def raw_error(offset: int, error: IbwireError) -> RawRecord:
    """The RawRecord of a problem found at buffer position ``offset``."""
    return (offset, offset, offset, 0, 0, 0, 0, 0, None, error)


class CaptureRecord(NamedTuple):
    """One record of a capture file.

    ``frame`` starts where ``link`` says ibwire's dissector should start (Linux SLL/SLL2 and
    ERF headers removed); ``record_data`` is the record exactly as stored (what a writer
    writes back). ``caplen`` is ``len(frame)`` and ``orig_len`` the frame's length on the wire,
    so ``caplen < orig_len`` means the frame was truncated by the capture.
    """

    index: int  # type: ignore[assignment]  # shadows tuple.index(), on purpose
    """0-based position in the iteration (error records included)."""
    offset: int
    """Byte offset of the record (or pcapng block) header in the (decompressed) file."""
    timestamp_ns: int
    """Nanoseconds since the epoch (from the ERF header for ERF records; 0 for a pcapng SPB)."""
    linktype: int
    """The pcap/pcapng LINKTYPE_ number of the record."""
    link: str
    """'ethernet', 'infiniband' (frame starts at the LRH), 'ip', 'grh' (RoCEv1 without
    Ethernet) or 'other'."""
    frame: Buffer
    caplen: int
    orig_len: int
    interface: int
    """pcapng interface id within its section; 0 for other formats."""
    record_data: Buffer
    record_orig_len: int
    """The original-length field of the file's record (link-layer headers included)."""
    snaplen: int
    """The snapshot length of the file or interface (0: none given)."""
    erf_type: int | None = None
    """ERF record type (low 7 bits) for LINKTYPE_ERF records, else None."""
    erf_flags: int | None = None
    warning: IbwireError | None = None
    error: IbwireError | None = None

    @property
    def truncated(self) -> bool:
        """True when the capture holds less of the frame than the wire carried."""
        return self.caplen < self.orig_len


def error_record(index: int, offset: int, error: IbwireError) -> CaptureRecord:
    """The record that stands for a problem: empty frame, link 'other', ``error`` set."""
    return CaptureRecord(index, offset, 0, 0, "other", b"", 0, 0, 0, b"", 0, 0, None, None,
                         None, error.at_record(index))


class Walker(Protocol):
    """A sans-IO format walker: yields RawRecords for what ``view[start:end]`` holds.

    After the generator is exhausted: ``finished`` (no more records will come: end of data
    with ``final``, or a terminal error), else ``resume`` (where to start next time) and
    ``want`` (bytes needed from ``resume`` to make progress).
    """

    resume: int
    want: int
    finished: bool

    def walk(self, view: Buffer, start: int, end: int, final: bool, base: int
             ) -> Iterator[RawRecord]: ...
