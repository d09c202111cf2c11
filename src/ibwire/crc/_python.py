"""Pure-Python twin of the C engine: the same names, the same answers, the same errors.

The frame walker (:func:`_walk`) follows ``kernel.c`` check for check, so both twins report
every fault at the same (error code, header, field, offset). CRC-32 comes from :mod:`zlib`
(identical parameters); the VCRC CRC-16 is table driven.
"""

from __future__ import annotations

import zlib

import numpy as np

from ibwire.crc._common import (
    CUT_HEADER,
    CUT_ICRC,
    CUT_VCRC,
    ERROR_NAMES,
    KIND_NAMES,
    LINK_CODES,
    MALFORMED,
    NOT_IB,
    SITE,
    TRUNCATED,
    UNSUPPORTED,
    BatchVerdict,
    Buffer,
    CrcVerdict,
    IcrcSpan,
    batch_arrays,
    fault,
    first_outside,
    link_code,
    no_icrc,
    no_vcrc,
    outside_error,
)
from ibwire.errors import IbwireError

__all__ = [
    "ERROR_NAMES",
    "KIND_NAMES",
    "LINK_CODES",
    "BatchVerdict",
    "CrcVerdict",
    "IcrcSpan",
    "crc16",
    "crc32",
    "fix",
    "fix_batch",
    "icrc",
    "locate",
    "vcrc",
    "verify",
    "verify_batch",
]

ROCE_PORT = 4791
GRH_NEXT_HEADER_IBA = 0x1B
VLAN_TYPES = (0x8100, 0x88A8, 0x9100)
IPV6_EXTENSIONS = frozenset((0, 43, 60, 135, 139, 140, 253, 254))
_KIND = {name: code for code, name in enumerate(KIND_NAMES)}
_PSEUDO_LRH = b"\xff" * 8


def _crc16_table() -> tuple[int, ...]:
    table = []
    for i in range(256):
        c = i
        for _ in range(8):
            c = (c >> 1) ^ 0xD008 if c & 1 else c >> 1
        table.append(c)
    return tuple(table)


_T16 = _crc16_table()


def crc32(data: Buffer, value: int = 0) -> int:
    """CRC-32 with zlib's parameters (the ICRC CRC); ``value`` continues a previous result."""
    return zlib.crc32(data, value)


def crc16(data: Buffer) -> int:
    """The VCRC CRC-16: poly 0x100B reflected, init 0xFFFF, xorout 0xFFFF."""
    c = 0xFFFF
    t = _T16
    for b in memoryview(data).cast("B"):
        c = (c >> 8) ^ t[(c ^ b) & 0xFF]
    return c ^ 0xFFFF


class _Fault(Exception):
    """Internal: a walker fault with the encapsulation known so far, and the span when the
    length fields still place the CRCs (see ``kernel.h``, ``ibw_locate``)."""

    def __init__(self, code: int, site: str, offset: int, kind: int,
                 span: IcrcSpan | None = None) -> None:
        super().__init__(code, site, offset, kind)
        self.code, self.site, self.offset, self.kind = code, SITE[site], offset, kind
        self.span = span

    def error(self) -> IbwireError:
        return fault(self.code, self.site, self.offset)


def _be16(b: memoryview, i: int) -> int:
    return b[i] << 8 | b[i + 1]


def _grh_masks(g: int) -> list[tuple[int, int]]:
    return [(g, 0x0F), (g + 1, 0xFF), (g + 2, 0xFF), (g + 3, 0xFF), (g + 7, 0xFF)]


def _span(kind: int, start: int, masks: list[tuple[int, int]], bth: int, icrc: int,
          vcrc: int = -1, pseudo: bool = True) -> IcrcSpan:
    masks.append((bth + 4, 0xFF))  # BTH FECN, BECN, Resv6a
    return IcrcSpan(KIND_NAMES[kind], start, pseudo, tuple(masks), bth, icrc, vcrc)


def _grh(b: memoryview, n: int, w: int, g: int) -> IcrcSpan:
    k = _KIND["rocev1"]
    if n - g < 40:
        raise _Fault(TRUNCATED, "GRH.header", g, k)
    paylen = _be16(b, g + 4)
    placed = 16 <= paylen <= w - g - 40  # PayLen alone places the ICRC
    span = _span(k, g, _grh_masks(g), g + 40, g + 40 + paylen - 4) if placed else None
    if b[g] >> 4 != 6:
        raise _Fault(MALFORMED, "GRH.ipver", g, k, span)
    if b[g + 6] != GRH_NEXT_HEADER_IBA:
        raise _Fault(MALFORMED, "GRH.next_header", g + 6, k, span)
    if paylen < 16:
        raise _Fault(MALFORMED, "GRH.payload_length", g + 4, k)
    if span is None:
        raise _Fault(TRUNCATED, "GRH.payload_length", g + 4, k)
    return span


def _ipv4(b: memoryview, n: int, w: int, o: int) -> IcrcSpan:
    k = _KIND["none"]
    if n - o < 20:
        raise _Fault(TRUNCATED, "IPv4.header", o, k)
    if b[o] >> 4 != 4:
        raise _Fault(MALFORMED, "IPv4.version", o, k)
    ihl = (b[o] & 0x0F) * 4
    if ihl < 20:
        raise _Fault(MALFORMED, "IPv4.ihl", o, k)
    if b[o + 9] != 17:
        raise _Fault(NOT_IB, "IPv4.protocol", o + 9, k)
    if _be16(b, o + 6) & 0x1FFF:  # a later fragment: no UDP header to tell what it is
        raise _Fault(NOT_IB, "IPv4.fragment", o + 6, k)
    if n - o < ihl:
        raise _Fault(TRUNCATED, "IPv4.ihl", o, k)
    u = o + ihl
    if n - u < 8:
        raise _Fault(TRUNCATED, "UDP.header", u, k)
    if _be16(b, u + 2) != ROCE_PORT:
        raise _Fault(NOT_IB, "UDP.dst_port", u + 2, k)
    k = _KIND["rocev2_ipv4"]
    if b[o + 6] & 0x20:  # MF: the first fragment of a RoCEv2 packet
        raise _Fault(UNSUPPORTED, "IPv4.fragment", o + 6, k)
    total = _be16(b, o + 2)
    if total < ihl + 8 + 16:
        raise _Fault(MALFORMED, "IPv4.total_length", o + 2, k)
    udp_lies = _be16(b, u + 4) != total - ihl
    if total > w - o:  # the UDP length's lie, if any, is the first fault
        if udp_lies:
            raise _Fault(MALFORMED, "UDP.length", u + 4, k)
        raise _Fault(TRUNCATED, "IPv4.total_length", o + 2, k)
    masks = [(o + 1, 0xFF), (o + 8, 0xFF), (o + 10, 0xFF), (o + 11, 0xFF),
             (u + 6, 0xFF), (u + 7, 0xFF)]
    span = _span(k, o, masks, u + 8, o + total - 4)
    if udp_lies:  # the IP total length still places the ICRC
        raise _Fault(MALFORMED, "UDP.length", u + 4, k, span)
    return span


def _ipv6_ext(b: memoryview, n: int, o: int) -> IcrcSpan:
    """Extension headers: only followed to tell RoCE (unsupported) from other traffic."""
    k = _KIND["none"]
    nh, q = b[o + 6], o + 40
    while True:
        if nh in IPV6_EXTENSIONS or nh == 51:
            if n - q < 8:  # cut short: nothing says what follows, so not RoCE
                raise _Fault(NOT_IB, "IPv6.extension_header", q, k)
            nh, q = b[q], q + ((b[q + 1] + 2) * 4 if nh == 51 else (b[q + 1] + 1) * 8)
        elif nh == 44:
            if n - q < 8:
                raise _Fault(NOT_IB, "IPv6.extension_header", q, k)
            if b[q] == 17:
                raise _Fault(UNSUPPORTED, "IPv6.extension_header", q, k)
            raise _Fault(NOT_IB, "IPv6.next_header", o + 6, k)
        elif nh == 17:
            if n - q < 8:
                raise _Fault(TRUNCATED, "UDP.header", q, k)
            if _be16(b, q + 2) != ROCE_PORT:
                raise _Fault(NOT_IB, "UDP.dst_port", q + 2, k)
            raise _Fault(UNSUPPORTED, "IPv6.next_header", o + 6, _KIND["rocev2_ipv6"])
        else:
            raise _Fault(NOT_IB, "IPv6.next_header", o + 6, k)


def _ipv6(b: memoryview, n: int, w: int, o: int) -> IcrcSpan:
    k = _KIND["none"]
    if n - o < 40:
        raise _Fault(TRUNCATED, "IPv6.header", o, k)
    if b[o] >> 4 != 6:
        raise _Fault(MALFORMED, "IPv6.version", o, k)
    if b[o + 6] != 17:
        return _ipv6_ext(b, n, o)
    u = o + 40
    if n - u < 8:
        raise _Fault(TRUNCATED, "UDP.header", u, k)
    if _be16(b, u + 2) != ROCE_PORT:
        raise _Fault(NOT_IB, "UDP.dst_port", u + 2, k)
    k = _KIND["rocev2_ipv6"]
    plen = _be16(b, o + 4)
    if plen < 8 + 16:
        raise _Fault(MALFORMED, "IPv6.payload_length", o + 4, k)
    udp_lies = _be16(b, u + 4) != plen
    if plen > w - u:
        if udp_lies:
            raise _Fault(MALFORMED, "UDP.length", u + 4, k)
        raise _Fault(TRUNCATED, "IPv6.payload_length", o + 4, k)
    masks = [*_grh_masks(o), (u + 6, 0xFF), (u + 7, 0xFF)]
    span = _span(k, o, masks, u + 8, u + plen - 4)
    if udp_lies:  # as IPv4: the IP payload length places the ICRC
        raise _Fault(MALFORMED, "UDP.length", u + 4, k, span)
    return span


def _ethernet(b: memoryview, n: int, w: int) -> IcrcSpan:
    if n < 14:
        raise _Fault(TRUNCATED, "Ethernet.ethertype", 12, 0)
    etype, o = _be16(b, 12), 14
    while etype in VLAN_TYPES:
        if n - o < 4:
            raise _Fault(TRUNCATED, "VLAN.ethertype", o + 2, 0)
        etype, o = _be16(b, o + 2), o + 4
    if etype == 0x0800:
        return _ipv4(b, n, w, o)
    if etype == 0x86DD:
        return _ipv6(b, n, w, o)
    if etype == 0x8915:
        return _grh(b, n, w, o)
    raise _Fault(NOT_IB, "Ethernet.ethertype", o - 2, 0)


def _ip(b: memoryview, n: int, w: int) -> IcrcSpan:
    if n < 1:
        raise _Fault(TRUNCATED, "IP.version", 0, 0)
    version = b[0] >> 4
    if version == 4:
        return _ipv4(b, n, w, 0)
    if version == 6:
        return _ipv6(b, n, w, 0)
    raise _Fault(NOT_IB, "IP.version", 0, 0)


_LNH_KIND = (_KIND["ib_raw"], _KIND["ib_ip"], _KIND["ib_lrh"], _KIND["ib_grh"])
_LNH_LEAST = (8, 8, 8 + 12 + 4, 8 + 40 + 12 + 4)


def _lrh(b: memoryview, n: int, w: int) -> IcrcSpan:
    if n < 8:
        raise _Fault(TRUNCATED, "LRH.header", 0, 0)
    lnh = b[1] & 3
    length = (_be16(b, 4) & 0x7FF) * 4  # PktLen: word 1, bits 5..15
    k = _LNH_KIND[lnh]
    if length < _LNH_LEAST[lnh]:  # no room for the transport, but the VCRC is placed
        vcrc_only = IcrcSpan(KIND_NAMES[k], 0, False, (), -1, -1, length) \
            if 8 <= length and length + 2 <= w else None
        raise _Fault(MALFORMED, "LRH.packet_length", 4, k, vcrc_only)
    if length + 2 > w:
        raise _Fault(TRUNCATED, "LRH.packet_length", 4, k)
    if lnh < 2:
        return IcrcSpan(KIND_NAMES[k], 0, False, (), -1, -1, length)
    if lnh == 2:
        return _span(k, 0, [(0, 0xF0)], 8, length - 4, length, pseudo=False)  # VL
    g = 8  # LNH 3: the whole LRH is variant (8 x 0xFF), then the GRH; PktLen places both CRCs
    span = _span(k, g, _grh_masks(g), g + 40, length - 4, length)
    if n - g < 40:  # PktLen is within the wire length, but the capture cut the GRH
        raise _Fault(TRUNCATED, "GRH.header", g, k, span)
    if b[g] >> 4 != 6:
        raise _Fault(MALFORMED, "GRH.ipver", g, k, span)
    if b[g + 6] != GRH_NEXT_HEADER_IBA:
        raise _Fault(MALFORMED, "GRH.next_header", g + 6, k, span)
    if _be16(b, g + 4) != length - 48:
        raise _Fault(MALFORMED, "GRH.payload_length", g + 4, k, span)
    return span


_WALKERS = (_ethernet, _lrh, _ip, lambda b, n, w: _grh(b, n, w, 0))


def _walk(b: memoryview, link: int, wire: int = -1) -> IcrcSpan:
    """The frame walker: where the ICRC region is, or a _Fault. ``wire``: the frame's length
    on the wire when the capture kept fewer bytes (its original length; the C
    ``ibw_locate_wire``): the length fields are checked against it, the headers read from
    the bytes kept."""
    return _WALKERS[link](b, len(b), max(wire, len(b)))


_LENGTH_SITES = frozenset(SITE[name] for name in (
    "IPv4.total_length", "IPv6.payload_length", "GRH.payload_length", "LRH.packet_length"))


def fault_cut(f: _Fault, kept: int, wire: int) -> int:
    """``cut_of`` for a walk that faulted: also ``CUT_HEADER`` when the capture cut a header
    of an InfiniBand/RoCE packet (a truncation not at a length field, which would be its lie)."""
    bits = cut_of(f.span, kept) if f.span is not None else 0
    if f.code == TRUNCATED and kept < wire and f.kind != 0 and f.site not in _LENGTH_SITES:
        bits |= CUT_HEADER
    return bits


def cut_of(span: IcrcSpan, kept: int) -> int:
    """Which CRCs ``span`` places past the ``kept`` bytes of a frame the capture cut:
    ``CUT_ICRC | CUT_VCRC`` bits (the C span's ``cut``)."""
    if 0 <= span.vcrc and span.vcrc + 2 > kept:  # a frame cut at all: no CRC is verified
        return CUT_VCRC | (CUT_ICRC if span.icrc >= 0 else 0)
    return CUT_ICRC if 0 <= span.icrc and span.icrc + 4 > kept else 0


def _view(frame: Buffer) -> memoryview:
    view = memoryview(frame)
    return view if view.format == "B" and view.ndim == 1 else view.cast("B")


def _icrc_of(b: memoryview, s: IcrcSpan) -> int:
    cut = s.bth + 5
    prefix = bytearray(b[s.start:cut])
    for off, bits in s.masks:
        prefix[off - s.start] |= bits
    c = zlib.crc32(prefix, zlib.crc32(_PSEUDO_LRH) if s.pseudo_lrh else 0)
    return zlib.crc32(b[cut:s.icrc], c)


def _locate(b: memoryview, link: str, lenient: bool = False) -> IcrcSpan:
    try:
        return _walk(b, link_code(link))
    except _Fault as f:
        if lenient and f.span is not None:
            return f.span
        raise f.error() from None


def locate(frame: Buffer, link: str = "ethernet") -> IcrcSpan:
    """Where the ICRC region of ``frame`` is; raises an ibwire error if it has none."""
    return _locate(_view(frame), link)


def icrc(frame: Buffer, link: str = "ethernet") -> int:
    """The ICRC value of ``frame``; on the wire it is ``value.to_bytes(4, "little")``."""
    b = _view(frame)
    s = _locate(b, link)
    if s.icrc < 0:
        raise no_icrc()
    return _icrc_of(b, s)


def vcrc(frame: Buffer, link: str = "infiniband") -> int:
    """The VCRC value of a native InfiniBand frame (LRH .. ICRC); LSB first on the wire."""
    b = _view(frame)
    s = _locate(b, link)
    if s.vcrc < 0:
        raise no_vcrc()
    return crc16(b[:s.vcrc])


def _verdict(b: memoryview, s: IcrcSpan, compute: bool = True) -> CrcVerdict:
    """The CRCs ``s`` places, as on the wire, and (``compute``) checked (the C ``ibw_verify``;
    without, ``ibw_place``: no verdict)."""
    icrc_ok = icrc_wire = icrc_computed = vcrc_ok = vcrc_wire = vcrc_computed = None
    cut = cut_of(s, len(b))  # a CRC past the bytes the capture kept: no verdict
    if s.icrc >= 0 and not cut & CUT_ICRC:
        icrc_wire = int.from_bytes(b[s.icrc:s.icrc + 4], "little")
        if compute:
            icrc_computed = _icrc_of(b, s)
            icrc_ok = icrc_wire == icrc_computed
    if s.vcrc >= 0 and not cut & CUT_VCRC:
        vcrc_wire = int.from_bytes(b[s.vcrc:s.vcrc + 2], "little")
        if compute:
            vcrc_computed = crc16(b[:s.vcrc])
            vcrc_ok = vcrc_wire == vcrc_computed
    return CrcVerdict(icrc_ok, vcrc_ok, icrc_wire, icrc_computed, vcrc_wire, vcrc_computed)


def verify(frame: Buffer, link: str = "ethernet", *, lenient: bool = False) -> CrcVerdict:
    """Checks the ICRC (and the VCRC on native IB) against the bytes on the wire.

    A frame with a fault raises it, unless ``lenient`` and the length fields still place its
    CRCs (a broken GRH or a UDP length that disagrees with the IP length, for instance): it
    then gets the verdict of the CRCs they place (``ibwire.parse`` reports the fault). A good
    CRC over a broken header says the sender built it so; a bad one, that it was corrupted.
    """
    b = _view(frame)
    return _verdict(b, _locate(b, link, lenient))


def fix(buf: bytearray, link: str = "ethernet", *, lenient: bool = False) -> None:
    """Writes the correct ICRC, and on native IB then the VCRC, into ``buf`` in place
    (``lenient``: also the CRCs a fault leaves placed, as ``verify``: a packet built wrong
    on purpose)."""
    b = _view(buf)
    if b.readonly:
        raise TypeError("fix() needs a writable buffer such as a bytearray")
    s = _locate(b, link, lenient)
    if s.icrc >= 0:
        b[s.icrc:s.icrc + 4] = _icrc_of(b, s).to_bytes(4, "little")
    if s.vcrc >= 0:
        b[s.vcrc:s.vcrc + 2] = crc16(b[:s.vcrc]).to_bytes(2, "little")


def verify_batch(buf: Buffer, offsets: np.ndarray, lengths: np.ndarray,
                 links: str | np.ndarray = "ethernet") -> BatchVerdict:
    """Verifies many records of one buffer; per-record problems become error codes (with the
    verdicts of the CRCs they leave placed, as ``verify(lenient=True)``)."""
    data = _view(buf)
    offs, lens, codes = batch_arrays(offsets, lengths, links)
    bad = first_outside(len(data), offs, lens)
    if bad >= 0:
        raise outside_error(bad, int(offs[bad]), int(lens[bad]), len(data))
    n = offs.size
    icrc_ok = np.full(n, -1, dtype=np.int8)
    vcrc_ok = np.full(n, -1, dtype=np.int8)
    error = np.zeros(n, dtype=np.uint8)
    kind = np.zeros(n, dtype=np.uint8)
    link_list = codes.tolist() if codes.size == n else codes.tolist() * n
    for i, (off, length, link) in enumerate(zip(offs.tolist(), lens.tolist(), link_list, strict=True)):
        b = data[off:off + length]
        try:
            s = _walk(b, link)
        except _Fault as f:
            error[i], kind[i] = f.code, f.kind
            if f.span is None:
                continue
            s = f.span  # a fault that leaves the CRCs placed: verdicts too
        v = _verdict(b, s)
        kind[i] = KIND_NAMES.index(s.kind)
        if v.icrc_ok is not None:
            icrc_ok[i] = v.icrc_ok
        if v.vcrc_ok is not None:
            vcrc_ok[i] = v.vcrc_ok
    return BatchVerdict(icrc_ok, vcrc_ok, error, kind)


def fix_batch(buf: Buffer, offsets: np.ndarray, lengths: np.ndarray,
              links: str | np.ndarray = "ethernet") -> np.ndarray:
    """Writes the ICRC (and the VCRC after it) of many records of one writable buffer in
    place, as ``fix`` does each; a record with a fault is left as it is (never an exception).
    Returns int8 per record: 1 its CRCs on the wire were already right, 0 they were
    rewritten, -1 nothing was written (a fault)."""
    data = _view(buf)
    if data.readonly:
        raise TypeError("fix_batch() needs a writable buffer such as a bytearray")
    offs, lens, codes = batch_arrays(offsets, lengths, links)
    bad = first_outside(len(data), offs, lens)
    if bad >= 0:
        raise outside_error(bad, int(offs[bad]), int(lens[bad]), len(data))
    n = offs.size
    was_right = np.full(n, -1, dtype=np.int8)
    link_list = codes.tolist() if codes.size == n else codes.tolist() * n
    for i, (off, length, link) in enumerate(zip(offs.tolist(), lens.tolist(), link_list,
                                                strict=True)):
        b = data[off:off + length]
        try:
            s = _walk(b, link)
        except _Fault:
            continue
        same = True
        if s.icrc >= 0:
            value = _icrc_of(b, s).to_bytes(4, "little")
            same = b[s.icrc:s.icrc + 4] == value
            b[s.icrc:s.icrc + 4] = value
        if s.vcrc >= 0:
            value = crc16(b[:s.vcrc]).to_bytes(2, "little")
            same = same and b[s.vcrc:s.vcrc + 2] == value
            b[s.vcrc:s.vcrc + 2] = value
        was_right[i] = same
    return was_right
