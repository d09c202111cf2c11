"""pcapng: a sequence of blocks ``type, total length, body, total length`` (32-bit words in the
byte order of their section), every block padded to 4 bytes.

Read here: Section Header (byte order, new interface list), Interface Description (link type,
snaplen, if_tsresol 10^-n or 2^-n, if_tsoffset), Enhanced Packet, Simple Packet (no timestamp:
``timestamp_ns`` is 0) and the obsolete Packet block. Every other block is skipped.

Error policy: a block whose length cannot be trusted (not a multiple of 4, < 12, > 256 MiB,
past the end of the file, trailing copy different) or a bad later section header ends the walk
with one error record. A block whose length is fine but whose contents are wrong (packet longer
than its block, unknown interface, options running past the block) gives one error record and
the walk goes on with the next block; an interface with bad options is still registered with
the options read before the bad one.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Iterator
from typing import NamedTuple

from ibwire.errors import CaptureError, IbwireError, MalformedError, TruncatedError
from ibwire.pcap.records import MAX_CAPLEN, Buffer, RawRecord, raw_error

BLOCK_SHB = 0x0A0D0D0A
BLOCK_IDB = 0x00000001
BLOCK_PB = 0x00000002
BLOCK_SPB = 0x00000003
BLOCK_EPB = 0x00000006
BYTE_ORDER_MAGIC = 0x1A2B3C4D
OPT_ENDOFOPT = 0
OPT_IF_TSRESOL = 9
OPT_IF_TSOFFSET = 14
SHB_MIN_LEN = 28
_FIXED_LEN = {BLOCK_IDB: 20, BLOCK_EPB: 32, BLOCK_PB: 32, BLOCK_SPB: 16}
_NS_PER_S = 1_000_000_000


def timestamp_rule(tsresol: int) -> tuple[int, int]:
    """if_tsresol byte -> (kind, param): nanoseconds are units times param (kind 0), units
    divided by param, floor (1), or units times 10**9 shifted right by param (2, binary)."""
    exponent = tsresol & 0x7F
    if tsresol & 0x80:
        return 2, exponent
    if exponent <= 9:
        return 0, 10 ** (9 - exponent)
    return 1, 10 ** (exponent - 9)


def check_clock(kind: int, param: int) -> None:
    """Refuse a (kind, param) that :func:`timestamp_rule` never gives (the C walk takes param
    as a uint64 and divides by it for kind 1)."""
    if kind not in (0, 1, 2) or not (kind == 1) <= param < 1 << 64:
        raise ValueError(f"bad pcapng clock: kind {kind}, param {param}")


def clock(kind: int, param: int) -> Callable[[int], int]:
    """(kind, param) of :func:`timestamp_rule` -> function from units to nanoseconds."""
    if kind == 2:
        return lambda units: (units * _NS_PER_S) >> param
    if kind == 0:
        return lambda units: units * param
    return lambda units: units // param


def timestamp_converter(tsresol: int) -> Callable[[int], int]:
    """if_tsresol byte -> function from timestamp units to nanoseconds (floor)."""
    return clock(*timestamp_rule(tsresol))


class Interface(NamedTuple):
    """An Interface Description Block: what its packets' link type and clock are."""

    linktype: int
    snaplen: int
    tsresol: int = 6
    tsoffset_s: int = 0

    @property
    def units_per_second(self) -> int:
        exponent = self.tsresol & 0x7F
        return int(2 ** exponent if self.tsresol & 0x80 else 10 ** exponent)


def read_options(view: Buffer, start: int, end: int, order: str, base: int
                 ) -> tuple[list[tuple[int, bytes]], IbwireError | None]:
    """Options in ``view[start:end]`` as (code, value); stops at opt_endofopt or at the first
    option that runs past ``end`` (returned as the error)."""
    options: list[tuple[int, bytes]] = []
    pos = start
    header = struct.Struct(order + "HH")
    while end - pos >= 4:
        code, length = header.unpack_from(view, pos)
        if code == OPT_ENDOFOPT:
            break
        value_end = pos + 4 + length
        if value_end > end:
            return options, MalformedError(f"option {code} length {length} runs past its block",
                                           header="pcapng option", offset=base + pos)
        options.append((code, bytes(view[pos + 4:value_end])))
        pos += 4 + (length + 3) // 4 * 4
    return options, None


def parse_interface(view: Buffer, start: int, end: int, order: str, base: int
                    ) -> tuple[Interface, IbwireError | None]:
    """The IDB body in ``view[start:end]`` (fixed fields, then options)."""
    linktype, _reserved, snaplen = struct.unpack_from(order + "HHI", view, start)
    options, error = read_options(view, start + 8, end, order, base)
    tsresol, tsoffset = 6, 0
    for code, value in options:
        if code == OPT_IF_TSRESOL and len(value) == 1:
            tsresol = value[0]
        elif code == OPT_IF_TSOFFSET and len(value) == 8:
            tsoffset = struct.unpack(order + "q", value)[0]
        elif code in (OPT_IF_TSRESOL, OPT_IF_TSOFFSET):
            error = error or MalformedError(f"option {code} has length {len(value)}",
                                            header="pcapng option", offset=base + start)
    return Interface(linktype, snaplen, tsresol, tsoffset), error


def check_first_section(head: Buffer, at_eof: bool, name: str) -> int:
    """Validate the Section Header Block at the start of a file; return its length (0 when
    ``head`` is too short to tell and more may come). Problems raise :class:`CaptureError`."""
    length = _shb_length(head, name) if len(head) >= 12 else 12
    if len(head) < length:
        if not at_eof:
            return 0
        raise CaptureError(f"{name}: truncated pcapng section header ({len(head)} of {length} "
                           "bytes)", header="pcapng SHB", offset=len(head))
    order = "<" if struct.unpack_from("<I", head, 8)[0] == BYTE_ORDER_MAGIC else ">"
    major = struct.unpack_from(order + "H", head, 12)[0]
    if major != 1:
        raise CaptureError(f"{name}: unsupported pcapng version {major}", header="pcapng SHB",
                           field="major", offset=12)
    if struct.unpack_from(order + "I", head, length - 4)[0] != length:
        raise CaptureError(f"{name}: pcapng section header trailing length differs",
                           header="pcapng SHB", offset=length - 4)
    return length


def _shb_length(head: Buffer, name: str) -> int:
    for order in "<>":
        if struct.unpack_from(order + "I", head, 8)[0] == BYTE_ORDER_MAGIC:
            length: int = struct.unpack_from(order + "I", head, 4)[0]
            if length < SHB_MIN_LEN or length % 4 or length > MAX_CAPLEN:
                raise CaptureError(f"{name}: bad pcapng section header length {length}",
                                   header="pcapng SHB", field="length", offset=4)
            return length
    raise CaptureError(f"{name}: bad pcapng byte-order magic", header="pcapng SHB",
                       field="byte_order_magic", offset=8)


class PcapngWalker:
    """Sans-IO walker over pcapng blocks; see the module docstring for the error policy."""

    def __init__(self) -> None:
        self.order: str | None = None
        self.interfaces: list[Interface] = []
        self.all_interfaces: list[Interface] = []
        # per interface of the section: (linktype, snaplen, units -> ns, offset ns)
        self._clocks: list[tuple[int, int, Callable[[int], int], int]] = []
        self._set_order("<")
        self.bulk: Callable[[Buffer, int, int], int] | None = None
        """A hook given (view, pos, end) at an Enhanced Packet Block: it may take the run of
        common-case EPBs from there itself and return where the run ends (the C walk
        ``ibwire.pcap.pcapng_epbs``, :meth:`ibwire.pcap.index._Columns.epb_hook`)."""
        self.resume = 0
        self.want = 0
        self.finished = False

    def _set_order(self, order: str) -> None:
        self._block_header = struct.Struct(order + "II")
        self._u32 = struct.Struct(order + "I")
        self._epb_fields = struct.Struct(order + "IIIII")

    def _stop(self, pos: int, error: IbwireError) -> RawRecord:
        self.finished = True
        return raw_error(pos, error)

    def walk(self, view: Buffer, start: int, end: int, final: bool, base: int
             ) -> Iterator[RawRecord]:
        pos = start
        self.want = 0
        while not self.finished:
            remaining = end - pos
            need = 12 if remaining >= 4 and self._u32.unpack_from(view, pos)[0] == BLOCK_SHB \
                else 8
            if remaining < need:
                if remaining and not final:
                    self.want = need
                elif remaining:
                    yield self._stop(pos, TruncatedError(
                        f"truncated block header: {remaining} trailing bytes",
                        header="pcapng block", offset=base + pos))
                else:
                    self.finished = final
                break
            if need == 12:
                order = {b"\x4d\x3c\x2b\x1a": "<", b"\x1a\x2b\x3c\x4d": ">"}.get(
                    bytes(view[pos + 8:pos + 12]))
                if order is None:
                    yield self._stop(pos, MalformedError("bad byte-order magic in section header",
                                                         header="pcapng SHB", offset=base + pos))
                    break
                self.order = order
                self._set_order(order)
            elif self.order is None:
                yield self._stop(pos, MalformedError("block before any section header",
                                                     header="pcapng block", offset=base + pos))
                break
            block_type, length = self._block_header.unpack_from(view, pos)
            if length < 12 or length & 3 or length > MAX_CAPLEN:
                yield self._stop(pos, MalformedError(
                    f"block length {length} (must be a multiple of 4, 12 to 256 MiB)",
                    header="pcapng block", field="length", offset=base + pos + 4))
                break
            if length > remaining:
                if not final:
                    self.want = length
                    break
                yield self._stop(pos, TruncatedError(
                    f"block length {length} runs past the end ({remaining} bytes left)",
                    header="pcapng block", field="length", offset=base + pos + 4))
                break
            if self._u32.unpack_from(view, pos + length - 4)[0] != length:
                yield self._stop(pos, MalformedError(
                    f"trailing block length differs from {length}", header="pcapng block",
                    field="length", offset=base + pos + length - 4))
                break
            if block_type == BLOCK_EPB and length >= 32:  # the common case, checked inline
                if self.bulk is not None:
                    moved = self.bulk(view, pos, end)
                    if moved != pos:
                        pos = moved
                        continue
                iface_id, ts_high, ts_low, caplen, orig_len = self._epb_fields.unpack_from(
                    view, pos + 8)
                if iface_id < len(self._clocks) and caplen <= length - 32 and caplen <= orig_len:
                    linktype, snaplen, to_ns, offset_ns = self._clocks[iface_id]
                    if caplen <= snaplen or not snaplen:
                        yield (pos, pos + 28, pos + 28 + caplen,
                               to_ns((ts_high << 32) | ts_low) + offset_ns, orig_len, linktype,
                               snaplen, iface_id, None, None)
                        pos += length
                        continue
                yield self._packet(view, pos, length, block_type, base)
            elif block_type == BLOCK_SHB:
                error = self._section(view, pos, length, base)
                if error is not None:
                    yield self._stop(pos, error)
                    break
            elif length < _FIXED_LEN.get(block_type, 12):
                yield raw_error(pos, MalformedError(
                    f"block type {block_type:#x} too short ({length} bytes)",
                    header="pcapng block", offset=base + pos))
            elif block_type == BLOCK_IDB:
                interface, error = parse_interface(view, pos + 8, pos + length - 4,
                                                   self.order, base)
                self.interfaces.append(interface)
                self.all_interfaces.append(interface)
                self._clocks.append((interface.linktype, interface.snaplen,
                                     timestamp_converter(interface.tsresol),
                                     interface.tsoffset_s * _NS_PER_S))
                if error is not None:
                    yield raw_error(pos, error)
            elif block_type in (BLOCK_PB, BLOCK_SPB):
                yield self._packet(view, pos, length, block_type, base)
            pos += length
        self.resume = pos

    def _section(self, view: Buffer, pos: int, length: int, base: int) -> IbwireError | None:
        """A Section Header Block (its byte order already set): a new list of interfaces."""
        major = -1
        if length >= SHB_MIN_LEN:
            major = struct.unpack_from((self.order or "<") + "H", view, pos + 12)[0]
        if length < SHB_MIN_LEN or major != 1:
            return MalformedError(f"bad section header (version {major}, length {length})",
                                  header="pcapng SHB", offset=base + pos)
        self.interfaces = []
        self._clocks = []
        return None

    def _packet(self, view: Buffer, pos: int, length: int, block_type: int, base: int
                ) -> RawRecord:
        """An EPB, PB or SPB, every check spelled out (the walk inlines the common EPB)."""
        order = self.order or "<"
        if block_type == BLOCK_EPB:
            iface_id, ts_high, ts_low, caplen, orig_len = struct.unpack_from(
                order + "IIIII", view, pos + 8)
            data, room = pos + 28, length - 32
        elif block_type == BLOCK_PB:
            iface_id, _drops, ts_high, ts_low, caplen, orig_len = struct.unpack_from(
                order + "HHIIII", view, pos + 8)
            data, room = pos + 28, length - 32
        else:
            iface_id, ts_high, ts_low = 0, 0, 0
            orig_len = struct.unpack_from(order + "I", view, pos + 8)[0]
            data, room = pos + 12, length - 16
            snap = self.interfaces[0].snaplen if self.interfaces else 0
            caplen = min(orig_len, snap) if snap else orig_len
        name = {BLOCK_EPB: "pcapng EPB", BLOCK_PB: "pcapng PB"}.get(block_type, "pcapng SPB")
        if iface_id >= len(self.interfaces):
            return raw_error(pos, MalformedError(f"packet on undeclared interface {iface_id}",
                                                 header=name, field="interface",
                                                 offset=base + pos + 8))
        if caplen > room:
            return raw_error(pos, MalformedError(f"captured length {caplen} exceeds its block "
                                                 f"({room} bytes)", header=name,
                                                 field="caplen", offset=base + pos))
        linktype, snaplen, to_ns, offset_ns = self._clocks[iface_id]
        warning = None
        if caplen > snaplen > 0:
            warning = MalformedError(f"caplen {caplen} > snaplen {snaplen}",
                                     header=name, field="caplen", offset=base + pos)
        elif caplen > orig_len:
            warning = MalformedError(f"caplen {caplen} > orig_len {orig_len}",
                                     header=name, field="caplen", offset=base + pos)
        timestamp_ns = 0
        if block_type != BLOCK_SPB:
            timestamp_ns = to_ns((ts_high << 32) | ts_low) + offset_ns
        return (pos, data, data + caplen, timestamp_ns, orig_len, linktype, snaplen, iface_id,
                warning, None)
