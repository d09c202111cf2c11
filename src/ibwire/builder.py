"""``build()``: frames from header values, with lengths, PadCnt, checksums and CRCs derived.

Values are given with the same flat keys that :meth:`Packet.fields` returns, so
``build(p.encapsulation, p.fields(), p.payload, pad=p.pad)`` gives the frame back. Any key
given explicitly wins over the derived value, lengths and CRCs included, so a test can build a
frame whose IP length, PadCnt or ICRC lies; the CRCs are then still those of the honest frame.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ibwire.errors import BuildError
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
    Header,
)
from ibwire.headers.aeth import encode_syndrome
from ibwire.headers.encap import ETHERTYPE_IPV4, ETHERTYPE_IPV6, IP_PROTO_UDP
from ibwire.headers.mad import carries_mad
from ibwire.mads import build_body, inferred, is_body_key
from ibwire.tables import constants, mad_classes, opcodes, opcodes_by_name

_C = constants()
#: Encapsulation -> the link its frames start at by default.
DEFAULT_LINK = {
    "rocev2_ipv4": "ethernet", "rocev2_ipv6": "ethernet", "rocev1": "ethernet",
    "ib_local": "infiniband", "ib_global": "infiniband",
}
_HEADERS: tuple[Header, ...] = (
    ETHERNET, VLAN, IPV4, IPV6, UDP, LRH, GRH, BTH, *EXTENDED.values(), MAD, RMPP)
_KEYS = {h.key(f.name): (h, f.name) for h in _HEADERS for f in h.fields}
_AETH_DERIVED = ("aeth.syndrome.opcode", "aeth.syndrome.type", "aeth.syndrome.credit_count",
                 "aeth.syndrome.timer", "aeth.syndrome.error_code", "aeth.syndrome.nak")
#: Keys the builder derives when they are not given (lengths, checksums, next-header links).
DERIVED_KEYS = frozenset({
    "eth.type", "vlan.etype", "ip.version", "ip.hdr_len", "ip.len", "ip.proto", "ip.checksum",
    "ipv6.version", "ipv6.plen", "ipv6.nxt", "udp.dstport", "udp.length", "grh.ipver",
    "grh.paylen", "grh.nxthdr", "lrh.lnh", "lrh.pktlen", "bth.padcnt", "icrc", "vcrc",
})
#: Values build() uses for fields that are not given (the scapy layers share them).
DEFAULTS: dict[str, Any] = {
    "eth.dst": "02:00:00:00:00:02", "eth.src": "02:00:00:00:00:01",
    "ip.ttl": 64, "ip.flags.df": 1, "ip.src": "192.0.2.1", "ip.dst": "192.0.2.2",
    "ipv6.hlim": 64, "ipv6.src": "2001:db8::1", "ipv6.dst": "2001:db8::2",
    "udp.srcport": 49152, "grh.hoplmt": 64,
    "bth.p_key": _C["DEFAULT_PKEY"],
}


def build(encapsulation: str, fields: Mapping[str, Any] | None = None, payload: bytes = b"", *,
          opcode: int | str | None = None, pad: bytes | None = None, link: str | None = None,
          trailer: bytes = b"") -> bytes:
    """One frame of ``encapsulation`` (rocev2_ipv4, rocev2_ipv6, rocev1, ib_local, ib_global).

    ``opcode`` (a number or a name such as ``"RC_RDMA_WRITE_ONLY"``) or ``fields["bth.opcode"]``
    picks the header chain from specs/opcodes.tsv. ``link="ip"`` leaves out the Ethernet header
    of RoCEv2; ``trailer`` is appended after the last InfiniBand byte (Ethernet padding, FCS).
    """
    if encapsulation not in DEFAULT_LINK:
        raise BuildError(f"cannot build encapsulation {encapsulation!r}; expected one of "
                         f"{sorted(DEFAULT_LINK)}")
    given = dict(fields or {})
    if opcode is not None:
        given["bth.opcode"] = _opcode_value(opcode)
    given = {**inferred(given), **given}
    if "bth.opcode" not in given:
        raise BuildError("no opcode: pass opcode= or fields['bth.opcode']", header="bth",
                         field="opcode")
    link = link or DEFAULT_LINK[encapsulation]
    if link == "ip" and not encapsulation.startswith("rocev2"):
        raise BuildError(f"link 'ip' only carries RoCEv2, not {encapsulation}")
    honest_frame = _Frame(encapsulation, link, given, bytes(payload), pad, lie=False)
    honest = honest_frame.assemble()
    unused = sorted(k for k in given if _KEYS.get(k, (None,))[0] is not None
                    and _KEYS[k][0].name not in honest_frame.used)
    unused += sorted(set(honest_frame.mad_body) - honest_frame.body_used)
    if unused:
        raise BuildError(f"field {unused[0]!r} has no header in a {encapsulation} frame "
                         f"of this opcode", field=unused[0])
    _fill_crcs(honest, link, given)
    liar = _Frame(encapsulation, link, given, bytes(payload), pad, lie=True).assemble()
    if liar != honest:  # a given length or link field differs from the derived one
        liar = _with_crcs_of(liar, honest)
    return bytes(liar) + bytes(trailer)


def _opcode_value(opcode: int | str) -> int:
    if isinstance(opcode, str):
        op = opcodes_by_name().get(opcode.upper())
        if op is None:
            raise BuildError(f"unknown opcode name {opcode!r}", header="bth", field="opcode")
        return op.value
    return opcode


class _Bytes(bytearray):
    """An assembled frame that remembers where its CRCs are."""

    icrc_at: int = -1
    vcrc_at: int = -1


def _fill_crcs(frame: _Bytes, link: str, given: Mapping[str, Any]) -> None:
    from ibwire import crc

    crc.fix(frame, link)
    if "icrc" in given:
        frame[frame.icrc_at:frame.icrc_at + 4] = ICRC.build(given["icrc"])
        if frame.vcrc_at >= 0:  # a switch computes the VCRC over the bytes it sends
            frame[frame.vcrc_at:frame.vcrc_at + 2] = VCRC.build(crc.vcrc(frame, link))
    if "vcrc" in given and frame.vcrc_at >= 0:
        frame[frame.vcrc_at:frame.vcrc_at + 2] = VCRC.build(given["vcrc"])


def _with_crcs_of(frame: _Bytes, honest: _Bytes) -> _Bytes:
    frame[frame.icrc_at:frame.icrc_at + 4] = honest[honest.icrc_at:honest.icrc_at + 4]
    if frame.vcrc_at >= 0:
        frame[frame.vcrc_at:frame.vcrc_at + 2] = honest[honest.vcrc_at:honest.vcrc_at + 2]
    return frame


class _Frame:
    """Values sorted by header, and the assembly of one frame from them."""

    def __init__(self, encapsulation: str, link: str, given: dict[str, Any], payload: bytes,
                 pad: bytes | None, lie: bool) -> None:
        self.encapsulation = encapsulation
        self.link = link
        self.payload = payload
        self.pad = pad
        self.given = given
        self.lie = lie
        self.values: dict[str, dict[str, Any]] = {h.name: {} for h in _HEADERS}
        self.vlans: list[dict[str, Any]] = []
        self.options = b""
        self.used: set[str] = set()
        self.mad_body: dict[str, Any] = {}
        self.body_used: set[str] = set()
        self._sort(given)

    def _sort(self, given: dict[str, Any]) -> None:
        for key, value in {**DEFAULTS, **given}.items():
            if key in ("icrc", "vcrc") or key in _AETH_DERIVED:
                continue
            if key == "ip.options":
                self.options = bytes(value)
                continue
            if is_body_key(key):
                self.mad_body[key] = value
                continue
            if key not in _KEYS:
                raise BuildError(f"unknown field {key!r}", field=key)
            if key in DERIVED_KEYS and key in given and not self.lie:
                continue  # the honest frame derives it
            header, name = _KEYS[key]
            if header is VLAN:
                tags = value if isinstance(value, (tuple, list)) else (value,)
                while len(self.vlans) < len(tags):
                    self.vlans.append({})
                for tag, v in zip(self.vlans, tags, strict=False):
                    tag[name] = v
            else:
                self.values[header.name][name] = value
        aeth = self.values["aeth"]
        if "syndrome" not in aeth and "aeth.syndrome.type" in given:
            value = next((given[k] for k in _AETH_DERIVED[2:5] if k in given), 0)
            aeth["syndrome"] = encode_syndrome(given["aeth.syndrome.type"], value)

    def _emit(self, header: Header, values: dict[str, Any]) -> bytes:
        self.used.add(header.name)
        return header.build(values)

    def _set(self, header: str, field: str, value: Any) -> None:
        """Set a derived value unless the caller gave one (and we honour lies)."""
        self.values[header].setdefault(field, value)

    def assemble(self) -> _Bytes:
        transport = self._transport()
        enc = self.encapsulation
        if enc.startswith("rocev2"):
            inner = self._udp_ip(transport, enc == "rocev2_ipv6")
            ethertype = ETHERTYPE_IPV6 if enc == "rocev2_ipv6" else ETHERTYPE_IPV4
        elif enc == "rocev1":
            inner = self._grh(transport)
            ethertype = _C["ROCE_V1_ETHERTYPE"]
        else:
            return self._lrh(transport)
        if self.link == "ip":
            out = _Bytes(inner)
        else:
            out = _Bytes(self._ethernet(ethertype) + inner)
        out.icrc_at = len(out) - ICRC.sizeof()
        return out

    def _transport(self) -> bytes:
        bth = self.values["bth"]
        op = opcodes().get(bth["opcode"]) if isinstance(bth["opcode"], int) else None
        parts = []
        if op is None:  # reserved or vendor opcode: the payload is everything after the BTH
            self._set("bth", "padcnt", 0)
            pad = b""
        else:
            padcnt = -len(self.payload) % 4
            self._set("bth", "padcnt", padcnt)
            for name in op.headers:
                header = EXTENDED[name]
                parts.append(self._emit(header, self.values[header.name]))
            if not op.payload and self.payload:
                raise BuildError(f"{op.name} carries no payload", header="bth", field="opcode")
            if carries_mad(op.transport, bth.get("destqp", 0),
                           self.values["deth"].get("srcqp", 0) if "DETH" in op.headers else None):
                parts.append(self._emit(MAD, self.values["mad"]))
                klass = mad_classes().get(self.values["mad"].get("mgmtclass", 0))
                rmpp = None
                if klass is not None and klass[1]:
                    parts.append(self._emit(RMPP, self.values["rmpp"]))
                    rmpp = RMPP.parse(parts[-1])
                body, self.body_used = build_body(MAD.parse(parts[-2 if rmpp else -1]), rmpp,
                                                  self.mad_body)
                parts.append(body)
            pad = self.pad if self.pad is not None else bytes(padcnt)
        return self._emit(BTH, bth) + b"".join(parts) + self.payload + pad + bytes(ICRC.sizeof())

    def _udp_ip(self, transport: bytes, v6: bool) -> bytes:
        self._set("udp", "dstport", _C["ROCE_V2_UDP_PORT"])
        self._set("udp", "length", UDP.size + len(transport))
        udp = self._emit(UDP, self.values["udp"]) + transport
        if v6:
            for name, value in (("version", 6), ("plen", len(udp)), ("nxt", IP_PROTO_UDP)):
                self._set("ipv6", name, value)
            return self._emit(IPV6, self.values["ipv6"]) + udp
        if len(self.options) % 4 or len(self.options) > 40:
            raise BuildError("IPv4 options must be a multiple of 4 bytes, at most 40",
                             header="ip", field="options")
        ihl = IPV4.size + len(self.options)
        for name, value in (("version", 4), ("hdr_len", ihl // 4), ("len", ihl + len(udp)),
                            ("proto", IP_PROTO_UDP)):
            self._set("ip", name, value)
        ip = self.values["ip"]
        if "checksum" not in ip:
            ip["checksum"] = 0
            ip["checksum"] = ipv4_checksum(IPV4.build(ip) + self.options)
        return self._emit(IPV4, ip) + self.options + udp

    def _grh(self, transport: bytes) -> bytes:
        for name, value in (("ipver", 6), ("paylen", len(transport)),
                            ("nxthdr", _C["GRH_NEXT_HEADER_IBA"])):
            self._set("grh", name, value)
        return self._emit(GRH, self.values["grh"]) + transport

    def _ethernet(self, ethertype: int) -> bytes:
        tpids = [0x88A8] + [0x8100] * (len(self.vlans) - 1) if len(self.vlans) > 1 else [0x8100]
        self._set("eth", "type", tpids[0] if self.vlans else ethertype)
        tags = b""
        for i, tag in enumerate(self.vlans):
            tag.setdefault("etype", tpids[i + 1] if i + 1 < len(self.vlans) else ethertype)
            tags += self._emit(VLAN, tag)
        return self._emit(ETHERNET, self.values["eth"]) + tags

    def _lrh(self, transport: bytes) -> _Bytes:
        routed = self.encapsulation == "ib_global"
        body = self._grh(transport) if routed else transport
        self._set("lrh", "lnh", 3 if routed else 2)
        self._set("lrh", "pktlen", (LRH.size + len(body)) // 4)
        out = _Bytes(self._emit(LRH, self.values["lrh"]) + body + bytes(VCRC.sizeof()))
        out.icrc_at = len(out) - VCRC.sizeof() - ICRC.sizeof()
        out.vcrc_at = len(out) - VCRC.sizeof()
        return out


def ipv4_checksum(header: bytes) -> int:
    """The Internet checksum (RFC 1071) of an IPv4 header whose checksum field is zero."""
    total = sum(int.from_bytes(header[i:i + 2], "big") for i in range(0, len(header), 2))
    while total >> 16:
        total = (total & 0xFFFF) + (total >> 16)
    return ~total & 0xFFFF
