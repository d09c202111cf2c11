"""The classic pcap format: a 24-byte global header, then 16-byte record headers and data.

Global header: magic 0xA1B2C3D4 (microsecond timestamps) or 0xA1B23C4D (nanosecond), written
in the writer's byte order; version 2.4; thiszone; sigfigs; snaplen; link type (low 16 bits;
the high bits may carry an FCS length, ignored here). Record header: seconds, fraction
(us or ns), captured length, original length.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from typing import TYPE_CHECKING, NamedTuple

from ibwire.errors import CaptureError, IbwireError, MalformedError, TruncatedError
from ibwire.pcap.records import MAX_CAPLEN, Buffer, RawRecord, raw_error

if TYPE_CHECKING:
    import numpy as np

PCAP_MAGIC_US = 0xA1B2C3D4
PCAP_MAGIC_NS = 0xA1B23C4D
PCAP_MAGIC_MODIFIED = 0xA1B2CD34
GLOBAL_HEADER_LEN = 24
RECORD_HEADER_LEN = 16
_NS_PER_S = 1_000_000_000


def pcap_magic(head: Buffer) -> tuple[str, bool] | None:
    """(byte order '<' or '>', nanoseconds) if ``head`` starts with a pcap magic, else None."""
    if len(head) < 4:
        return None
    for order in "<>":
        magic = struct.unpack_from(order + "I", head, 0)[0]
        if magic in (PCAP_MAGIC_US, PCAP_MAGIC_NS):
            return order, magic == PCAP_MAGIC_NS
    return None


def is_modified_pcap(head: Buffer) -> bool:
    return len(head) >= 4 and PCAP_MAGIC_MODIFIED in struct.unpack_from("<I", head) + \
        struct.unpack_from(">I", head)


class PcapHeader(NamedTuple):
    """The global header of a pcap file."""

    byte_order: str
    nanoseconds: bool
    version: tuple[int, int]
    snaplen: int
    linktype: int


def parse_pcap_header(head: Buffer, name: str) -> PcapHeader:
    """Parse the global header; any problem is a file-level :class:`CaptureError`."""
    found = pcap_magic(head)
    if found is None:
        raise CaptureError(f"{name}: not a pcap file (bad magic)", header="pcap", field="magic",
                           offset=0)
    order, nanoseconds = found
    if len(head) < GLOBAL_HEADER_LEN:
        raise CaptureError(f"{name}: truncated pcap global header ({len(head)} of 24 bytes)",
                           header="pcap", offset=len(head))
    major, minor, _zone, _sigfigs, snaplen, linktype_field = struct.unpack_from(
        order + "HHiIII", head, 4)
    if major != 2 or minor > 4:
        raise CaptureError(f"{name}: unknown pcap version {major}.{minor}", header="pcap",
                           field="version", offset=4)
    return PcapHeader(order, nanoseconds, (major, minor), snaplen, linktype_field & 0xFFFF)


def caplen_warning(caplen: int, orig_len: int, snaplen: int, record_at: int
                   ) -> MalformedError | None:
    """The warning of a usable record whose caplen exceeds the snaplen or its orig_len
    (``record_at``: where its record header is)."""
    if caplen > snaplen > 0:
        text = f"caplen {caplen} > snaplen {snaplen}"
    elif caplen > orig_len:
        text = f"caplen {caplen} > orig_len {orig_len}"
    else:
        return None
    return MalformedError(text, header="pcap record", field="caplen", offset=record_at + 8)


def caplen_warnings(caplen: np.ndarray, orig_len: np.ndarray, snaplen: int,
                    frame_at: np.ndarray, base: int) -> list[MalformedError]:
    """:func:`caplen_warning` for many records at once (``frame_at``: where each frame
    starts, ``base`` added to offsets); ``record`` = the row."""
    import numpy as np

    suspect = (caplen > orig_len) | ((caplen > snaplen) if snaplen > 0 else False)
    out = []
    for row in np.flatnonzero(suspect).tolist():
        warning = caplen_warning(int(caplen[row]), int(orig_len[row]), snaplen,
                                 base + int(frame_at[row]) - RECORD_HEADER_LEN)
        if warning is not None:
            warning.record = row
            out.append(warning)
    return out


class PcapWalker:
    """Sans-IO walker over pcap records in a buffer (after the global header).

    Yields RawRecords; stops at a record that is not all there and, unless ``final``, asks
    for ``want`` bytes from ``resume``. Any lying length ends the walk with one error.
    """

    def __init__(self, header: PcapHeader) -> None:
        self.header = header
        self.record_header = struct.Struct(header.byte_order + "IIII")
        self.fraction_ns = 1 if header.nanoseconds else 1000
        self.resume = GLOBAL_HEADER_LEN
        self.want = 0
        self.finished = False

    def walk(self, view: Buffer, start: int, end: int, final: bool, base: int
             ) -> Iterator[RawRecord]:
        unpack = self.record_header.unpack_from
        fraction_ns = self.fraction_ns
        snaplen = self.header.snaplen
        linktype = self.header.linktype
        pos = start
        self.want = 0
        while True:
            remaining = end - pos
            if remaining < RECORD_HEADER_LEN:
                if remaining and not final:
                    self.want = RECORD_HEADER_LEN
                elif remaining:
                    self.finished = True
                    yield raw_error(pos, TruncatedError(
                        f"truncated record header: {remaining} trailing bytes, a header needs 16",
                        header="pcap record", offset=base + pos))
                else:
                    self.finished = final
                break
            seconds, fraction, caplen, orig_len = unpack(view, pos)
            if caplen > MAX_CAPLEN:
                self.finished = True
                yield raw_error(pos, MalformedError(
                    f"absurd caplen {caplen} (more than 256 MiB)", header="pcap record",
                    field="caplen", offset=base + pos + 8))
                break
            if caplen > remaining - RECORD_HEADER_LEN:
                if not final:
                    self.want = RECORD_HEADER_LEN + caplen
                    break
                self.finished = True
                yield raw_error(pos, TruncatedError(
                    f"truncated record data: caplen {caplen}, "
                    f"{remaining - RECORD_HEADER_LEN} bytes left", header="pcap record",
                    field="caplen", offset=base + pos + 8))
                break
            warning = caplen_warning(caplen, orig_len, snaplen, base + pos)
            data = pos + RECORD_HEADER_LEN
            pos = data + caplen
            yield (data - RECORD_HEADER_LEN, data, pos, seconds * _NS_PER_S + fraction * fraction_ns,
                   orig_len, linktype, snaplen, 0, warning, None)
        self.resume = pos


def pcap_stop(walker: PcapWalker, buf: Buffer, stop: int, status: int, final: bool,
               base: int) -> tuple[IbwireError | None, int, bool]:
    """Why a C record walk (``ibwire.scan``'s ``pcap_records``, ``check_pcap``) stopped at
    ``stop`` with ``status``: (the error that ends the file, bytes wanted from ``stop`` to go
    on, finished)."""
    end = len(buf)
    if status == 1 or (status == 2 and final):
        for raw in walker.walk(buf, stop, end, True, base):
            return raw[9], 0, True  # the walk from here is one error record
        return None, 0, True
    if status == 2:
        want = RECORD_HEADER_LEN
        if end - stop >= RECORD_HEADER_LEN:
            want += struct.unpack_from(walker.header.byte_order + "I", buf, stop + 8)[0]
        return None, want, False
    return None, 0, final and stop == end  # the data ended, or a batch's rows were taken
