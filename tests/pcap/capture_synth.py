"""Builders of small synthetic captures, byte by byte from the format specs (independent of
ibwire's writers, so they can also build lies: wrong lengths, bad magics, odd options)."""

from __future__ import annotations

import struct

from ibwire.errors import IbwireError
from ibwire.pcap import LINK_CODES, CaptureRecord, index_buffer

NS = 1_000_000_000
T0 = 1_700_000_000 * NS + 123_456_789


# ----------------------------------------------------------------------------- frames
def ethernet_frame(payload: bytes = b"\x45" + bytes(27), ethertype: int = 0x0800) -> bytes:
    return bytes.fromhex("020000000001" "020000000002") + struct.pack(">H", ethertype) + payload


def ib_frame(payload_len: int = 8, vl: int = 0, lnh: int = 2) -> bytes:
    """LRH + BTH + payload + ICRC + VCRC, with LRH PktLen consistent (CRCs are zeros)."""
    words = (8 + 12 + payload_len + 4) // 4
    assert (8 + 12 + payload_len + 4) % 4 == 0
    lrh = bytes([vl << 4, lnh]) + struct.pack(">HHH", 0x0001, words, 0x0002)
    bth = bytes([0x04, 0, 0xFF, 0xFF]) + struct.pack(">II", 0x11, 0x22)
    return lrh + bth + bytes(range(payload_len)) + bytes(4) + b"\xab\xcd"


def sll_header(protocol: int, arphrd: int = 1) -> bytes:
    return struct.pack(">HHH8sH", 0, arphrd, 6, b"\x02" * 6 + b"\0\0", protocol)


def sll2_header(protocol: int, arphrd: int = 1) -> bytes:
    return struct.pack(">HHIHBB8s", protocol, 0, 3, arphrd, 0, 6, b"\x02" * 6 + b"\0\0")


def erf_record(ts_ns: int, erf_type: int, payload: bytes, *, flags: int = 4,
               wlen: int | None = None, ext_headers: int = 0, rlen: int | None = None,
               eth_pad: bool | None = None, align: int = 8) -> bytes:
    seconds, rest = divmod(ts_ns, NS)
    fraction = ((rest << 32) + NS // 2) // NS
    pad = b"\0\0" if (erf_type in (2, 11, 16, 20) if eth_pad is None else eth_pad) else b""
    ext = b""
    for k in range(ext_headers):
        more = 0x80 if k < ext_headers - 1 else 0
        ext += bytes([more | 0x01]) + bytes(7)
    type_byte = erf_type | (0x80 if ext_headers else 0)
    body = 16 + len(ext) + len(pad) + len(payload)
    full = -(-body // align) * align
    header = struct.pack("<QBB", (seconds << 32) | fraction, type_byte, flags)
    header += struct.pack(">HHH", full if rlen is None else rlen, 0,
                          len(payload) if wlen is None else wlen)
    return header + ext + pad + payload + bytes(full - body)


# ----------------------------------------------------------------------------- pcap
def pcap_header(linktype: int = 1, *, order: str = "<", nanoseconds: bool = False,
                snaplen: int = 65535, version: tuple[int, int] = (2, 4)) -> bytes:
    magic = 0xA1B23C4D if nanoseconds else 0xA1B2C3D4
    return struct.pack(order + "IHHiIII", magic, *version, 0, 0, snaplen, linktype)


def pcap_record(ts_ns: int, data: bytes, *, orig_len: int | None = None, order: str = "<",
                nanoseconds: bool = False, caplen: int | None = None) -> bytes:
    seconds, rest = divmod(ts_ns, NS)
    fraction = rest if nanoseconds else rest // 1000
    return struct.pack(order + "IIII", seconds, fraction,
                       len(data) if caplen is None else caplen,
                       len(data) if orig_len is None else orig_len) + data


def pcap_file(frames: list[bytes], linktype: int = 1, *, order: str = "<",
              nanoseconds: bool = False, snaplen: int = 65535, step_ns: int = 1_000) -> bytes:
    out = pcap_header(linktype, order=order, nanoseconds=nanoseconds, snaplen=snaplen)
    for k, frame in enumerate(frames):
        out += pcap_record(T0 + k * step_ns, frame, order=order, nanoseconds=nanoseconds)
    return out


def record_key(record: CaptureRecord) -> tuple:
    """What must survive a round trip, frames as bytes (errors by type, offset, reason)."""
    if record.error is not None:
        error = record.error
        return ("error", type(error).__name__, error.offset, error.reason, record.index)
    return (record.index, record.timestamp_ns, record.linktype, record.link, bytes(record.frame),
            record.caplen, record.orig_len, bytes(record.record_data), record.record_orig_len,
            record.erf_type, record.erf_flags)


# ----------------------------------------------------------------------------- pcapng
def block(block_type: int, body: bytes, *, order: str = "<", length: int | None = None,
          trailing: int | None = None) -> bytes:
    body += bytes(-len(body) % 4)
    real = 12 + len(body)
    return struct.pack(order + "II", block_type, real if length is None else length) + body + \
        struct.pack(order + "I", (real if length is None else length) if trailing is None
                    else trailing)


def option(code: int, value: bytes, order: str = "<") -> bytes:
    return struct.pack(order + "HH", code, len(value)) + value + bytes(-len(value) % 4)


def end_of_options(order: str = "<") -> bytes:
    return struct.pack(order + "HH", 0, 0)


def shb(order: str = "<", *, major: int = 1, options: bytes = b"") -> bytes:
    return block(0x0A0D0D0A, struct.pack(order + "IHHq", 0x1A2B3C4D, major, 0, -1) + options,
                 order=order)


def idb(linktype: int = 1, snaplen: int = 0, *, order: str = "<", tsresol: int | None = None,
        tsoffset: int | None = None, extra_options: bytes = b"") -> bytes:
    options = extra_options
    if tsresol is not None:
        options += option(9, bytes([tsresol]), order)
    if tsoffset is not None:
        options += option(14, struct.pack(order + "q", tsoffset), order)
    if options:
        options += end_of_options(order)
    return block(1, struct.pack(order + "HHI", linktype, 0, snaplen) + options, order=order)


def epb(interface: int, ts_units: int, data: bytes, *, orig_len: int | None = None,
        order: str = "<", caplen: int | None = None) -> bytes:
    return block(6, struct.pack(order + "IIIII", interface, ts_units >> 32,
                                ts_units & 0xFFFFFFFF, len(data) if caplen is None else caplen,
                                len(data) if orig_len is None else orig_len) + data,
                 order=order)


def spb(data: bytes, *, orig_len: int | None = None, order: str = "<") -> bytes:
    return block(3, struct.pack(order + "I", len(data) if orig_len is None else orig_len) + data,
                 order=order)


def packet_block(interface: int, ts_units: int, data: bytes, *, order: str = "<") -> bytes:
    return block(2, struct.pack(order + "HHIIII", interface, 0, ts_units >> 32,
                                ts_units & 0xFFFFFFFF, len(data), len(data)) + data, order=order)


def pcapng_file(frames: list[bytes], linktype: int = 1, *, order: str = "<") -> bytes:
    """One section, one interface (microseconds), one EPB per frame."""
    out = shb(order) + idb(linktype, 65535, order=order)
    for k, frame in enumerate(frames):
        out += epb(0, T0 // 1000 + k, frame, order=order)
    return out


def warning_key(warning: IbwireError | None) -> tuple | None:
    return None if warning is None else (type(warning), warning.offset, warning.reason)


def assert_index_agrees(data: bytes, records: list[CaptureRecord]) -> None:
    """The index fast path over ``data`` has the same rows as the streaming ``records``."""
    index = index_buffer(data)
    assert len(index.offsets) == len(records)
    errors = iter(index.errors)
    warned = {w.record: w for w in index.warnings}  # the last one of a row wins, as in batches
    for row, record in enumerate(records):
        assert warning_key(warned.get(row)) == warning_key(record.warning), row
        assert index.link_codes[row] == LINK_CODES[record.link]
        assert index.lengths[row] == record.caplen
        if record.error is not None:
            error = next(errors)
            assert (type(error), error.record, error.offset, error.reason) == (
                type(record.error), row, record.error.offset, record.error.reason)
            continue
        start = int(index.offsets[row])
        assert data[start:start + record.caplen] == bytes(record.frame)
        assert index.timestamps_ns[row] == min(max(record.timestamp_ns, -(1 << 63)),
                                               (1 << 63) - 1)
        assert index.orig_lengths[row] == record.orig_len
        assert index.linktypes[row] == record.linktype
    assert next(errors, None) is None
