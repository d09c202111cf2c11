"""``parse()``: one frame in, one immutable :class:`~ibwire.packet.Packet` out.

The walk follows the encapsulation to the BTH, takes the chain of extended headers from the
opcode table in specs/, and finds the ICRC from the length fields (IPv4 total length, IPv6
payload length, GRH PayLen, LRH PktLen), never from the end of the frame.

A frame whose headers are broken where the length fields still place the ICRC (or, on native
IB, the VCRC) is not raised but returned with the fault in ``Packet.error``, so that its CRC
verdict can tell a corrupted packet (CRC bad) from one the sender built wrong (CRC good): an
extended header or MAD running past the ICRC (a flipped opcode bit), a PadCnt larger than
the payload, a GRH whose IPVer or next header is wrong, a UDP length that disagrees with the
IP length (the IP length places the ICRC: it is what delimits the datagram in a padded
Ethernet frame), a GRH PayLen that disagrees with the LRH PktLen (PktLen places both CRCs: the
link layer goes by it), a PktLen too short for the transport headers (it still places the
VCRC). The headers stop at the fault; the bytes from there to the ICRC are the payload. A
fault that leaves no CRC placed (a frame cut before its CRCs, a length pointing past the
frame or before the BTH) is raised; ``strict=True`` raises every fault.

A frame the capture cut (``wire``: its length on the wire, more than the bytes kept) is
checked against that length: cut after its headers it is a whole packet whose CRCs were not
kept, cut inside a header of an InfiniBand/RoCE packet it is a packet whose ``error`` is that
truncation, with every header before it (``Packet.wire_length``).
"""

from __future__ import annotations

from types import MappingProxyType
from typing import Any

from ibwire.errors import (
    IbwireError,
    MalformedError,
    TruncatedError,
    UnknownOpcodeError,
    UnsupportedError,
)
from ibwire.headers import (
    BTH,
    ETHERNET,
    EXTENDED,
    GRH,
    ICRC,
    IPV4,
    IPV6,
    LRH,
    MAD,
    RMPP,
    UDP,
    VCRC,
    VLAN,
)
from ibwire.headers.aeth import decode_syndrome
from ibwire.headers.encap import (
    ETHERTYPE_IPV4,
    ETHERTYPE_IPV6,
    IP_PROTO_UDP,
    IPV6_EXTENSIONS,
    TPIDS,
)
from ibwire.headers.layout import Header
from ibwire.headers.mad import carries_mad
from ibwire.mads import parse_body
from ibwire.packet import OTHER, HeaderValue, Packet
from ibwire.tables import Opcode, constants, mad_classes, opcode_status, opcodes

ICRC_SIZE, VCRC_SIZE = ICRC.sizeof(), VCRC.sizeof()  # Construct's sizeof() costs 6 us a call

LINKS = ("ethernet", "infiniband", "ip", "grh")
_C = constants()
GRH_NXTHDR = _C["GRH_NEXT_HEADER_IBA"]
ROCE_V1_ETHERTYPE = _C["ROCE_V1_ETHERTYPE"]
ROCE_V2_PORT = _C["ROCE_V2_UDP_PORT"]


class _Walk:
    """The state of one dissection: the frame, the headers so far, where the ICRC is."""

    def __init__(self, frame: bytes, link: str, strict: bool, wire: int | None = None) -> None:
        self.frame = frame
        self.link = link
        self.strict = strict
        self.wire = max(len(frame), wire or 0)
        """The frame's length on the wire: the bytes kept, or more where the capture cut it."""
        self.encapsulation: str | None = None
        """Set once the walk knows the frame carries InfiniBand (as the CRC walker's kind)."""
        self.icrc_at: int | None = None
        """Where the length fields put the ICRC, once the walk knows."""
        self.headers: list[HeaderValue] = []
        self.derived: dict[str, Any] = {}
        self.warnings: list[str] = []
        self.fault: IbwireError | None = None
        """The first fault found before the CRCs are placed, kept to see whether they are."""

    def broken(self, error: IbwireError) -> None:
        """A fault that the length fields may yet leave with its CRCs placed: raised at once
        in strict mode, else kept while the walk goes on to place them."""
        if self.strict:
            raise error
        if self.fault is None:
            self.fault = error

    def with_fault(self, error: IbwireError, encapsulation: str, icrc_at: int | None,
                   vcrc_at: int | None, opcode: Opcode | None = None) -> Packet:
        """A packet whose CRCs are placed although ``error`` broke its headers: the headers
        found before the fault, the bytes from there to the first CRC as the payload."""
        if self.strict:
            raise error
        frame = self.frame
        end = icrc_at if icrc_at is not None else vcrc_at
        assert end is not None
        start = min(end, max((h.offset + h.length for h in self.headers), default=0))
        tail = vcrc_at + VCRC_SIZE if vcrc_at is not None else end + ICRC_SIZE
        return Packet(
            frame, self.link, encapsulation, tuple(self.headers),
            payload=frame[start:end], payload_offset=start,
            icrc=self.kept(icrc_at, ICRC_SIZE), icrc_offset=icrc_at,
            vcrc=self.kept(vcrc_at, VCRC_SIZE), vcrc_offset=vcrc_at, trailer=frame[tail:],
            opcode=opcode, warnings=tuple(self.warnings), derived=MappingProxyType(self.derived),
            error=error, **self.cut(end - start))

    @property
    def is_cut(self) -> bool:
        return self.wire > len(self.frame)

    def kept(self, offset: int | None, size: int) -> bytes | None:
        """The CRC of ``size`` bytes at ``offset``, None where there is none or the capture
        cut it."""
        if offset is None or offset + size > len(self.frame):
            return None
        return self.frame[offset:offset + size]

    def cut(self, payload_length: int) -> dict[str, Any]:
        """The ``Packet`` arguments of a packet the capture cut (none if it did not): its
        length on the wire and its payload's, ``payload_length`` by the length fields."""
        if not self.is_cut:
            return {}
        return {"wire_length": self.wire, "wire_payload_length": payload_length + sum(
            h.length for h in self.headers if h.full_keys)}

    def cut_short(self, error: TruncatedError) -> Packet:
        """A packet whose header the capture cut: the headers before it, ``error`` that
        header's truncation, said to be the capture's."""
        assert self.encapsulation is not None
        frame = self.frame
        start = max((h.offset + h.length for h in self.headers), default=0)
        error.reason = (f"header cut by the capture ({len(frame)} of {self.wire} bytes kept): "
                        f"{error.reason}")
        error.args = (error._message(),)
        bth = next((h for h in self.headers if h.name == "bth"), None)
        op = None if bth is None else opcodes().get(bth.values["opcode"])
        payload = None
        if op is not None and self.icrc_at is not None:  # where the opcode's headers end
            start = max(start, bth.offset + BTH.size + sum(EXTENDED[name].size
                                                           for name in op.headers))
            if start + bth.values["padcnt"] <= self.icrc_at:
                payload = self.icrc_at - start - bth.values["padcnt"]
        return Packet(frame, self.link, self.encapsulation, tuple(self.headers),
                      payload=frame[start:] if payload is not None else b"",
                      payload_offset=start, warnings=tuple(self.warnings),
                      derived=MappingProxyType(self.derived), error=error, opcode=op,
                      wire_length=self.wire, wire_payload_length=payload or 0)

    def take(self, header: Header, offset: int, limit: int | None = None) -> dict[str, Any]:
        """Parse ``header`` at ``offset``; it must end by ``limit`` (the ICRC), else malformed."""
        end = offset + header.size
        if limit is not None and end > limit:
            raise MalformedError(
                f"{header.title} runs past the ICRC at byte {limit}: a length field is too small",
                header=header.name, offset=offset)
        values = header.parse(self.frame, offset)
        self.headers.append(HeaderValue(header.name, offset, header.size, MappingProxyType(values)))
        return values

    def other(self, offset: int, reason: str) -> Packet:
        """A frame that carries no InfiniBand transport packet."""
        return Packet(self.frame, self.link, OTHER, tuple(self.headers),
                      payload=self.frame[offset:], payload_offset=offset, unknown=reason,
                      derived=MappingProxyType(self.derived))


def parse(frame: bytes | bytearray | memoryview, link: str = "ethernet", *,
          strict: bool = False, wire: int | None = None) -> Packet:
    """Dissect one frame starting at ``link``: "ethernet", "infiniband" (LRH), "ip" or "grh".

    Returns a :class:`Packet`; frames of other protocols come back with encapsulation
    ``"other"``. Raises :class:`~ibwire.errors.TruncatedError` when the frame ends early and
    :class:`~ibwire.errors.MalformedError` when a field contradicts the rest; with
    ``strict=True`` also for reserved/vendor opcodes and non-zero LVer/TVer. ``wire``: the
    frame's length on the wire when a capture kept fewer bytes (its record's original
    length): a packet it cut is returned as the module says, not raised (unless ``strict``).
    """
    data = bytes(frame)
    if link not in _LINK_WALKS:
        raise ValueError(f"unknown link {link!r}; expected one of {LINKS}")
    walk = _Walk(data, link, strict, wire)
    try:
        return _LINK_WALKS[link](walk)
    except TruncatedError as exc:
        if not walk.is_cut or walk.encapsulation is None or strict:
            raise
        return walk.cut_short(exc)


def _ethernet(walk: _Walk) -> Packet:
    eth = walk.take(ETHERNET, 0)
    offset, ethertype = ETHERNET.size, eth["type"]
    while ethertype in TPIDS:
        tag = walk.take(VLAN, offset)
        offset += VLAN.size
        ethertype = tag["etype"]
    if ethertype in (ETHERTYPE_IPV4, ETHERTYPE_IPV6):
        return _ip(walk, offset, 4 if ethertype == ETHERTYPE_IPV4 else 6)
    if ethertype == ROCE_V1_ETHERTYPE:
        return _grh_roce_v1(walk, offset)
    return walk.other(offset, f"ethertype 0x{ethertype:04x}")


def _ip(walk: _Walk, offset: int, expected: int | None = None) -> Packet:
    """IPv4 or IPv6 by the version nibble; ``expected`` is the version the EtherType names
    (a raw IP link names none, and a version other than 4 or 6 there is other traffic)."""
    if offset >= len(walk.frame):
        raise TruncatedError("no IP header", header="ip", offset=offset)
    version = walk.frame[offset] >> 4
    if expected is not None and version != expected:
        name = "ip" if expected == 4 else "ipv6"
        raise MalformedError(f"IP version {version} under the IPv{expected} EtherType",
                             header=name, field="version", offset=offset)
    if version == 4:
        return _ipv4(walk, offset)
    if version == 6:
        return _ipv6(walk, offset)
    return walk.other(offset, f"IP version {version}")


def _ipv4(walk: _Walk, offset: int) -> Packet:
    ip = walk.take(IPV4, offset)
    ihl = ip["hdr_len"] * 4
    if ihl < IPV4.size:
        raise MalformedError(f"IHL {ip['hdr_len']} is below 5", header="ip", field="hdr_len",
                             offset=offset)
    if ip["proto"] != IP_PROTO_UDP:
        return walk.other(offset + ihl, f"IP protocol {ip['proto']}")
    if offset + ihl > len(walk.frame):
        raise TruncatedError("IPv4 options cut short", header="ip", field="options", offset=offset)
    if ihl > IPV4.size:
        walk.derived["ip.options"] = walk.frame[offset + IPV4.size:offset + ihl]
    if ip["frag_offset"]:
        return walk.other(offset + ihl, "IPv4 non-first fragment")
    # the lengths matter only once the port says RoCE: a TCP segmentation offload capture
    # shows total length 0, and that is other traffic, not a broken packet
    end = offset + ip["len"]
    udp = _udp(walk, offset + ihl, end, "ip", "len")
    if udp is None:
        return walk.other(offset + ihl + UDP.size, "not UDP port 4791")
    walk.encapsulation = "rocev2_ipv4"
    if ip["len"] < ihl:
        raise MalformedError(f"total length {ip['len']} is shorter than the header",
                             header="ip", field="len", offset=offset)
    if ip["flags.mf"]:
        raise UnsupportedError("fragmented RoCEv2 packet", header="ip", field="flags.mf",
                               offset=offset)
    return _transport(walk, offset + ihl + UDP.size, end, "rocev2_ipv4", lrh_end=None)


def _ipv6(walk: _Walk, offset: int) -> Packet:
    ip = walk.take(IPV6, offset)
    start = offset + IPV6.size
    nxt, upper = ip["nxt"], _skip_ipv6_extensions(walk.frame, ip["nxt"], start)
    if upper is None or upper[0] != IP_PROTO_UDP:
        return walk.other(start, f"IPv6 next header {nxt}")
    if upper[1] != start:  # RoCEv2 behind extension headers: the ICRC rules do not cover it
        port = walk.frame[upper[1] + 2:upper[1] + 4]
        if int.from_bytes(port, "big") == ROCE_V2_PORT:
            raise UnsupportedError(f"IPv6 extension header {nxt} before RoCEv2",
                                   header="ipv6", field="nxt", offset=offset)
        return walk.other(start, f"IPv6 next header {nxt}")
    end = start + ip["plen"]
    udp = _udp(walk, start, end, "ipv6", "plen")
    if udp is None:
        return walk.other(start + UDP.size, "not UDP port 4791")
    walk.encapsulation = "rocev2_ipv6"
    return _transport(walk, start + UDP.size, end, "rocev2_ipv6", lrh_end=None)


def _skip_ipv6_extensions(frame: bytes, nxt: int, offset: int) -> tuple[int, int] | None:
    """(upper-layer protocol, its offset) past any extension headers; None if unreadable."""
    for _ in range(16):
        if nxt not in IPV6_EXTENSIONS:
            return nxt, offset
        if nxt == 50 or offset + 8 > len(frame):  # ESP hides what follows
            return None
        if nxt == 44:
            length = 8
        elif nxt == 51:
            length = (frame[offset + 1] + 2) * 4
        else:
            length = (frame[offset + 1] + 1) * 8
        nxt, offset = frame[offset], offset + length
    return None


def _udp(walk: _Walk, offset: int, ip_end: int, header: str, field: str
         ) -> dict[str, Any] | None:
    """The UDP header, or None when it is not RoCEv2 (destination port 4791); ``header`` and
    ``field`` name the IP length that ``ip_end`` comes from."""
    udp = walk.take(UDP, offset)
    if udp["dstport"] != ROCE_V2_PORT:
        return None
    if offset + UDP.size > ip_end:
        raise MalformedError("IP length leaves no room for UDP", header=header, field=field,
                             offset=offset)
    if udp["length"] != ip_end - offset:  # the IP length may still place the ICRC
        walk.broken(MalformedError(f"UDP length {udp['length']} disagrees with the IP length "
                                   f"({ip_end - offset} bytes)", header="udp", field="length",
                                   offset=offset))
    return udp


def _grh_roce_v1(walk: _Walk, offset: int) -> Packet:
    walk.encapsulation = "rocev1"
    grh = _grh(walk, offset)
    end = offset + GRH.size + grh["paylen"]
    return _transport(walk, offset + GRH.size, end, "rocev1", lrh_end=None)


def _grh(walk: _Walk, offset: int) -> dict[str, Any]:
    """The GRH; a wrong next header or IPVer is a fault that its lengths may leave with the
    CRCs placed."""
    grh = walk.take(GRH, offset)
    if grh["nxthdr"] != GRH_NXTHDR:
        walk.broken(MalformedError(f"GRH next header 0x{grh['nxthdr']:02x} is not 0x1b (IBA "
                                   f"transport)", header="grh", field="nxthdr", offset=offset))
    if grh["ipver"] != 6:
        walk.broken(MalformedError(f"GRH IPVer {grh['ipver']} is not 6", header="grh",
                                   field="ipver", offset=offset))
    return grh


def _lrh(walk: _Walk) -> Packet:
    lrh = walk.take(LRH, 0)
    if walk.strict and lrh["lver"] != 0:
        raise MalformedError(f"LRH LVer {lrh['lver']}", header="lrh", field="lver", offset=0)
    vcrc_at = lrh["pktlen"] * 4
    if vcrc_at < LRH.size:
        raise MalformedError(f"PktLen {lrh['pktlen']} is shorter than the LRH", header="lrh",
                             field="pktlen", offset=0)
    if vcrc_at + VCRC_SIZE > walk.wire:
        raise TruncatedError(f"PktLen {lrh['pktlen']} needs {vcrc_at + 2} bytes, frame has "
                             f"{walk.wire}", header="lrh", field="pktlen", offset=0)
    if lrh["lnh"] < 2:  # raw and IPv6 packets: no BTH, no ICRC, but a VCRC
        frame = walk.frame
        return Packet(frame, walk.link, "ib_raw", tuple(walk.headers),
                      payload=frame[LRH.size:vcrc_at], payload_offset=LRH.size,
                      vcrc=walk.kept(vcrc_at, VCRC_SIZE), vcrc_offset=vcrc_at,
                      trailer=frame[vcrc_at + 2:], unknown=f"LNH {lrh['lnh']} (not IBA transport)",
                      **walk.cut(vcrc_at - LRH.size))
    encapsulation = "ib_global" if lrh["lnh"] == 3 else "ib_local"
    walk.encapsulation = encapsulation
    first = LRH.size + (GRH.size if lrh["lnh"] == 3 else 0)  # the BTH
    if vcrc_at < first + BTH.size + ICRC_SIZE:  # PktLen still places the VCRC
        if lrh["lnh"] == 3 and len(walk.frame) >= first:  # the GRH, as far as it is there
            walk.take(GRH, LRH.size)
        return walk.with_fault(MalformedError(
            f"PktLen {lrh['pktlen']} leaves no room for the "
            f"{'GRH, ' if lrh['lnh'] == 3 else ''}BTH and ICRC", header="lrh", field="pktlen",
            offset=0), encapsulation, None, vcrc_at)
    if lrh["lnh"] == 3:
        grh = _grh(walk, LRH.size)
        if grh["paylen"] != vcrc_at - LRH.size - GRH.size:  # PktLen places both CRCs
            walk.broken(MalformedError(f"GRH PayLen {grh['paylen']} disagrees with LRH PktLen "
                                       f"{lrh['pktlen']}", header="grh", field="paylen",
                                       offset=LRH.size + 4))
    return _transport(walk, first, vcrc_at, encapsulation, lrh_end=vcrc_at)


def _transport(walk: _Walk, offset: int, end: int, encapsulation: str,
               lrh_end: int | None) -> Packet:
    """BTH, extended headers, payload, pad and ICRC between ``offset`` and ``end``."""
    frame = walk.frame
    icrc_at = end - ICRC_SIZE
    if end > walk.wire:
        raise walk.fault or TruncatedError(f"the length fields put the ICRC end at byte {end}, "
                                           f"the frame has {walk.wire}", header="icrc",
                                           offset=icrc_at)
    if icrc_at < offset + BTH.size:
        raise walk.fault or MalformedError("the length fields leave no room for BTH and ICRC",
                                           header="bth", offset=offset)
    if walk.fault is not None:  # a broken header before the BTH, the CRCs placed all the same
        return walk.with_fault(walk.fault, encapsulation, icrc_at, lrh_end)
    walk.icrc_at = icrc_at
    op = None
    try:
        bth = walk.take(BTH, offset, icrc_at)
        if walk.strict and bth["tver"] != 0:
            raise MalformedError(f"BTH TVer {bth['tver']}", header="bth", field="tver",
                                 offset=offset)
        cursor = offset + BTH.size
        op = opcodes().get(bth["opcode"])
        unknown = None
        if op is None:
            unknown = f"{opcode_status(bth['opcode'])} opcode 0x{bth['opcode']:02x}"
            if walk.strict:
                raise UnknownOpcodeError(unknown, header="bth", field="opcode", offset=offset)
        else:
            cursor = _extended(walk, op, bth, cursor, icrc_at)
        payload_end = icrc_at
        pad = b""
        if unknown is None:
            padcnt = bth["padcnt"]
            if padcnt > icrc_at - cursor:
                raise MalformedError(f"PadCnt {padcnt} exceeds the {icrc_at - cursor} payload "
                                     f"bytes", header="bth", field="padcnt", offset=offset + 1)
            payload_end = icrc_at - padcnt
            pad = frame[payload_end:icrc_at]
            if op is not None and not op.payload and icrc_at > cursor:
                message = f"{op.name} carries no payload, found {icrc_at - cursor} bytes"
                if walk.strict:
                    raise MalformedError(message, header="bth", field="opcode", offset=cursor)
                walk.warnings.append(message)
    except MalformedError as exc:  # a broken transport: its CRCs are placed all the same
        return walk.with_fault(exc, encapsulation, icrc_at, lrh_end, op)
    vcrc_at = None
    tail = end
    if lrh_end is not None:
        vcrc_at = lrh_end
        tail = vcrc_at + VCRC_SIZE
    return Packet(
        frame, walk.link, encapsulation, tuple(walk.headers),
        payload=frame[cursor:payload_end], payload_offset=cursor, pad=pad,
        icrc=walk.kept(icrc_at, ICRC_SIZE), icrc_offset=icrc_at,
        vcrc=walk.kept(vcrc_at, VCRC_SIZE), vcrc_offset=vcrc_at,
        trailer=frame[tail:], opcode=op, unknown=unknown, warnings=tuple(walk.warnings),
        derived=MappingProxyType(walk.derived), **walk.cut(payload_end - cursor),
    )


def _extended(walk: _Walk, op: Opcode, bth: dict[str, Any], cursor: int, icrc_at: int) -> int:
    """The opcode's extended headers and its MAD, from ``cursor``; where they end."""
    srcqp = None
    for name in op.headers:
        header = EXTENDED[name]
        values = walk.take(header, cursor, icrc_at)
        if header.name == "aeth":
            walk.derived.update(decode_syndrome(values["syndrome"]))
        elif header.name == "deth":
            srcqp = values["srcqp"]
        cursor += header.size
    if carries_mad(op.transport, bth["destqp"], srcqp):
        cursor = _mad(walk, cursor, icrc_at)
    return cursor


def _mad(walk: _Walk, offset: int, limit: int) -> int:
    """The MAD (and RMPP) header of a UD SEND to or from QP0/QP1, when there is room for it,
    and the body of the classes ibwire decodes (:mod:`ibwire.mads`)."""
    if offset + MAD.size > limit:
        walk.warnings.append("a UD packet to QP0/QP1 too short for a MAD header")
        return offset
    mad = walk.take(MAD, offset, limit)
    offset += MAD.size
    klass = mad_classes().get(mad["mgmtclass"])
    rmpp = None
    if klass is not None and klass[1] and offset + RMPP.size <= limit:
        rmpp = walk.take(RMPP, offset, limit)
        offset += RMPP.size
    elif klass is not None and klass[1]:
        walk.warnings.append("a MAD too short for its RMPP header")
        return offset
    body = parse_body(walk.frame, offset, limit, mad, rmpp, walk.strict)
    walk.headers.extend(body.headers)
    walk.derived.update(body.derived)
    walk.warnings.extend(body.warnings)
    return body.end


_LINK_WALKS = {"ethernet": _ethernet, "infiniband": _lrh, "ip": lambda walk: _ip(walk, 0),
               "grh": lambda walk: _grh_roce_v1(walk, 0)}
