"""ERF (Endace Extensible Record Format) records: inside LINKTYPE_ERF pcap/pcapng records, and
native ERF files (records back to back, no file header, as DAG tools write them).

An ERF record (all lengths big-endian, the timestamp little-endian)::

    0  timestamp   8  binary fixed point: high 32 bits seconds, low 32 bits fraction of a second
    8  type        1  record type in bits 0-6; bit 7: an extension header follows
    9  flags       1  bits 0-1 capture port, 2 varying length, 3 truncated, 4 rx error, 5 ds error
    10 rlen        2  record length: this 16-byte header, extension headers, payload, padding
    12 lctr/color  2
    14 wlen        2  length of the packet on the wire
    16 extension headers, 8 bytes each; bit 7 of each one's first byte: another one follows
       Ethernet types: 2 bytes (offset, pad) before the Ethernet header

Frame bytes = min(what the enclosing record holds, rlen - headers, wlen). A pcap record may
stop before ``rlen`` (Wireshark and ibdump write ``16 + wlen`` bytes and leave out the padding):
that is normal; only when the cut reaches into the frame is the record given a warning.
Record types and where their frame starts come from ``specs/link_types.tsv`` (family ``erf``).
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from functools import cache

from ibwire.errors import BuildError, IbwireError, MalformedError, TruncatedError
from ibwire.pcap.records import LINK_CODES, LINK_OTHER, Buffer, RawRecord, raw_error
from ibwire.tables import link_types

ERF_HEADER_LEN = 16
ERF_EXT_HEADER_LEN = 8
ERF_ETH_PAD_LEN = 2
ERF_TYPE_MIN = 1
ERF_TYPE_MAX = 48
ERF_TYPE_PAD = 48
ERF_FLAG_VLEN = 0x04
ERF_MAX_RLEN = 0xFFFF
LINKTYPE_ERF = 197

_TIMESTAMP = struct.Struct("<QBB")
_LENGTHS = struct.Struct(">HHH")
_NS_PER_S = 1_000_000_000
_FRACTION = 1 << 32

# (link code, frame start, frame end, wire length, timestamp_ns or None, erf type, erf flags,
#  warning, error): what a link-type locator says about one record.
FrameLocation = tuple[int, int, int, int, "int | None", "int | None", "int | None",
                      "IbwireError | None", "IbwireError | None"]


@cache
def erf_type_links() -> dict[int, tuple[int, int]]:
    """ERF record type -> (link code, pad bytes before the frame), from specs/link_types.tsv."""
    table = {}
    for (family, value), (_name, starts_at) in link_types().items():
        if family == "erf":
            code = LINK_CODES.get(starts_at, LINK_OTHER)
            table[value] = (code, ERF_ETH_PAD_LEN if starts_at == "ethernet" else 0)
    return table


def erf_timestamp_to_ns(erf_ts: int) -> int:
    """ERF 32.32 fixed-point seconds -> integer nanoseconds, rounded to nearest."""
    fraction_ns = ((erf_ts & 0xFFFFFFFF) * _NS_PER_S + (_FRACTION >> 1)) >> 32
    return (erf_ts >> 32) * _NS_PER_S + fraction_ns


def ns_to_erf_timestamp(timestamp_ns: int) -> int:
    """Integer nanoseconds -> ERF 32.32 fixed point (round trip through ns is exact)."""
    if timestamp_ns < 0 or timestamp_ns >= (1 << 32) * _NS_PER_S:
        raise BuildError(f"timestamp {timestamp_ns} ns does not fit an ERF timestamp",
                         header="ERF", field="ts")
    seconds, rest_ns = divmod(timestamp_ns, _NS_PER_S)
    fraction = ((rest_ns << 32) + _NS_PER_S // 2) // _NS_PER_S
    return (seconds << 32) | fraction


def _failed(error: IbwireError, start: int, end: int) -> FrameLocation:
    return (LINK_OTHER, start, start, 0, None, None, None, None, error)


def locate_erf_frame(view: Buffer, start: int, end: int, orig_len: int, base: int) -> FrameLocation:
    """Find the frame inside the ERF record held in ``view[start:end]``.

    ``orig_len`` (the enclosing record's) is unused: the ERF header's wlen is the wire length.
    """
    held = end - start
    if held < ERF_HEADER_LEN:
        return _failed(TruncatedError(f"ERF header truncated: {held} of 16 bytes", header="ERF",
                                      offset=base + start), start, end)
    erf_ts, type_byte, flags = _TIMESTAMP.unpack_from(view, start)
    rlen, _lctr, wlen = _LENGTHS.unpack_from(view, start + 10)
    header_len = ERF_HEADER_LEN
    more = type_byte & 0x80
    while more:
        if held < header_len + ERF_EXT_HEADER_LEN:
            return _failed(TruncatedError("ERF extension header truncated", header="ERF",
                                          offset=base + start + header_len), start, end)
        more = view[start + header_len] & 0x80
        header_len += ERF_EXT_HEADER_LEN
    erf_type = type_byte & 0x7F
    code, pad = erf_type_links().get(erf_type, (LINK_OTHER, 0))
    header_len += pad
    if rlen < header_len:
        return _failed(MalformedError(f"ERF rlen {rlen} shorter than its {header_len}-byte "
                                      "headers", header="ERF", field="rlen",
                                      offset=base + start + 10), start, end)
    declared = min(rlen - header_len, wlen)
    frame_len = min(held - header_len, declared)
    warning = None
    if frame_len < 0:
        return _failed(TruncatedError(f"ERF record cut inside its headers ({held} bytes held)",
                                      header="ERF", offset=base + start), start, end)
    if frame_len < declared and rlen > held:
        warning = TruncatedError(f"ERF record cut by its capture record: rlen {rlen}, "
                                 f"{held} bytes held", header="ERF", field="rlen",
                                 offset=base + start + 10)
    frame_start = start + header_len
    return (code, frame_start, frame_start + frame_len, wlen, erf_timestamp_to_ns(erf_ts),
            erf_type, flags, warning, None)


def build_erf_record(frame: Buffer, timestamp_ns: int, erf_type: int, *, wire_len: int | None = None,
                     flags: int = ERF_FLAG_VLEN, align: int = 8) -> bytes:
    """An ERF record holding ``frame`` (Ethernet types get their 2-byte pad).

    A whole frame is padded to ``align`` bytes; a truncated one (``wire_len`` > its length)
    is not, since a reader takes every byte before rlen as frame when wlen is larger.
    """
    _code, pad = erf_type_links().get(erf_type, (LINK_OTHER, 0))
    wlen = len(frame) if wire_len is None else wire_len
    body = ERF_HEADER_LEN + pad + len(frame)
    rlen = -(-body // align) * align if wlen <= len(frame) else body
    if rlen > ERF_MAX_RLEN or not 0 <= wlen <= 0xFFFF:
        raise BuildError(f"frame of {len(frame)} bytes (wire {wlen}) does not fit an ERF record",
                         header="ERF", field="rlen")
    if not ERF_TYPE_MIN <= erf_type <= 0x7F:
        raise BuildError(f"ERF type {erf_type} out of range", header="ERF", field="type")
    header = struct.pack("<QBB", ns_to_erf_timestamp(timestamp_ns), erf_type, flags & 0xFF)
    header += struct.pack(">HHH", rlen, 0, wlen)
    return header + bytes(pad) + bytes(frame) + bytes(rlen - body)


def looks_like_erf(head: Buffer, at_eof: bool) -> bool:
    """Heuristic for a native ERF file: its first records (up to 20, until one looks wrong)
    have sane types and lengths and timestamps within a day of each other; two such records
    are needed (or one that is the whole file). Random bytes pass with odds of about 1e-5."""
    pos = checked = 0
    first_second = -1
    while checked < 20 and pos + ERF_HEADER_LEN <= len(head):
        erf_ts, type_byte, _flags = _TIMESTAMP.unpack_from(head, pos)
        rlen = _LENGTHS.unpack_from(head, pos + 10)[0]
        second = erf_ts >> 32
        if not ERF_TYPE_MIN <= type_byte & 0x7F <= ERF_TYPE_MAX or rlen < ERF_HEADER_LEN \
                or second == 0 or pos + rlen > len(head):
            break
        if first_second >= 0 and abs(second - first_second) > 86_400:
            break
        first_second = second
        pos += rlen
        checked += 1
    return checked >= 2 or (checked == 1 and at_eof and pos == len(head))


class ErfWalker:
    """Sans-IO walker over a native ERF file: yields RawRecords (linktype 197) for the records
    held in a buffer; stops at the first record that is not all there, asking for ``want``
    bytes from ``resume`` unless ``final``. PAD records (type 48) are skipped."""

    def __init__(self) -> None:
        self.resume = 0
        self.want = 0
        self.finished = False

    def walk(self, view: Buffer, start: int, end: int, final: bool, base: int
             ) -> Iterator[RawRecord]:
        pos = start
        self.want = 0
        while True:
            remaining = end - pos
            if remaining == 0:
                self.finished = final
                break
            if remaining < ERF_HEADER_LEN:
                if not final:
                    self.want = ERF_HEADER_LEN
                    break
                self.finished = True
                yield raw_error(pos, TruncatedError(
                    f"trailing {remaining} bytes shorter than an ERF header", header="ERF",
                    offset=base + pos))
                break
            rlen = _LENGTHS.unpack_from(view, pos + 10)[0]
            if rlen < ERF_HEADER_LEN:
                self.finished = True
                yield raw_error(pos, MalformedError(f"ERF rlen {rlen} < 16", header="ERF",
                                                    field="rlen", offset=base + pos + 10))
                break
            if rlen > remaining:
                if not final:
                    self.want = rlen
                    break
                self.finished = True
                yield raw_error(pos, TruncatedError(
                    f"ERF record truncated: rlen {rlen}, {remaining} bytes left", header="ERF",
                    field="rlen", offset=base + pos))
                break
            if view[pos + 8] & 0x7F != ERF_TYPE_PAD:
                yield (pos, pos, pos + rlen, 0, rlen, LINKTYPE_ERF, 0, 0, None, None)
            pos += rlen
        self.resume = pos
