"""Transport packets into frames: addressing per encapsulation, payload bytes, bad ICRCs.

Frames are built by :func:`ibwire.build` (lengths, PadCnt, checksums, ICRC and VCRC derived).
Payload bytes are a fixed pattern indexed by the packet's offset in its message, so the same
scenario always gives the same bytes.

Building a frame field by field costs ~100 us; a conversation repeats a few kinds of frame
thousands of times with only the PSN, AckReq, RETH VA, ImmDt, AETH MSN (and the IPv4 ID
with its header checksum) changing. So a
:class:`Framer` made with ``templates=True`` builds each kind once (:meth:`Framer.patch_points`
finds where those fields sit by building the frame again with each one changed), then copies
it, writes the changing fields in and recomputes the CRCs (:func:`ibwire.crc.fix`): the same
bytes as building it, ~100 times faster. Frames with a bad ICRC or an atomic's operands are
built whole (they are rare, and their values do not repeat).
"""

from __future__ import annotations

from typing import Any

from ibwire import crc
from ibwire.builder import build
from ibwire.gen.scenario import Endpoint, Scenario
from ibwire.transport import PSN_MASK, Packet

#: pcap link types: Ethernet (1) for RoCE, LINKTYPE_INFINIBAND (247) for native IB.
LINKTYPES = {"rocev2_ipv4": 1, "rocev2_ipv6": 1, "rocev1": 1, "ib_local": 247, "ib_global": 247}
#: Bytes an Ethernet frame costs on the wire besides itself: preamble+SFD 8, FCS 4, IFG 12.
ETHERNET_OVERHEAD = 24
_PATTERN = bytes(range(256)) * 17
ECN_CE = 3


def payload_of(packet: Packet) -> bytes:
    start = packet.offset & 0xFF
    return _PATTERN[start:start + packet.payload_len]


#: The fields a template frame has patched in: (name, width in bytes). ``word``: BTH's AckReq
#: bit and PSN (the reserved bits between them are 0); ``msn``: the AETH's MSN; ``ipid``:
#: the IPv4 identification, ``ipsum`` the IPv4 header checksum that follows from it.
PATCHED = {"word": 4, "va": 8, "imm": 4, "msn": 3, "ipid": 2, "ipsum": 2}


def ipv4_sum(frame: bytes, fields: dict[str, tuple[int, int]]) -> int:
    """The 16-bit words of ``frame``'s IPv4 header summed, but for its ID and checksum: the
    checksum of the header with ID ``i`` is then that sum plus ``i``, folded and inverted
    (RFC 1071)."""
    ipid, ipsum = fields["ipid"][0], fields["ipsum"][0]
    start = ipid - 4
    end = start + (frame[start] & 0xF) * 4
    return sum(int.from_bytes(frame[i:i + 2], "big") for i in range(start, end, 2)
               if i not in (ipid, ipsum))


def ipv4_checksum_with(total: int, ip_id: int) -> int:
    """The IPv4 header checksum for ID ``ip_id``, from :func:`ipv4_sum`'s ``total``."""
    total += ip_id
    total = (total & 0xFFFF) + (total >> 16)
    total = (total & 0xFFFF) + (total >> 16)
    return ~total & 0xFFFF


def _field_span(a: bytes, b: bytes, tail: int) -> tuple[int, int] | None:
    """(offset, length) of the bytes where ``a`` and ``b`` differ before the last ``tail``
    bytes (the CRCs), or None when they are not the same length or do not differ."""
    diff = [i for i in range(len(a) - tail) if a[i] != b[i]]
    if len(a) != len(b) or not diff:
        return None
    return diff[0], diff[-1] - diff[0] + 1


class _Kind:
    """A frame to copy and where its changing fields go."""

    __slots__ = ("frame", "word", "va", "imm", "msn", "ipid", "ipsum", "ip_total")

    def __init__(self, frame: bytes, fields: dict[str, tuple[int, int]]) -> None:
        self.frame = frame
        self.word = fields["word"][0]
        self.va = fields["va"][0] if "va" in fields else -1
        self.imm = fields["imm"][0] if "imm" in fields else -1
        self.msn = fields["msn"][0] if "msn" in fields else -1
        self.ipid = fields["ipid"][0] if "ipid" in fields else -1
        self.ipsum = fields["ipsum"][0] if "ipsum" in fields else -1
        self.ip_total = ipv4_sum(frame, fields) if "ipid" in fields else 0


class Framer:
    """Builds the frames of one scenario in one direction's addressing; with ``templates``,
    each kind of frame once, then by patching a copy (module docstring)."""

    def __init__(self, scenario: Scenario, *, templates: bool = False) -> None:
        self.templates = templates
        self._kinds: dict[tuple, _Kind | None] = {}
        self.encapsulation = scenario.encapsulation
        self.link = "infiniband" if self.encapsulation.startswith("ib_") else "ethernet"
        self.linktype = LINKTYPES[self.encapsulation]
        self.scenario = scenario
        fwd = self._addressing(scenario.requester, scenario.responder)
        rev = self._addressing(scenario.responder, scenario.requester)
        self._base = {"fwd": fwd, "rev": rev}

    def _addressing(self, src: Endpoint, dst: Endpoint) -> dict[str, Any]:
        s = self.scenario
        out: dict[str, Any] = {"bth.p_key": s.pkey}
        encap = self.encapsulation
        if self.link == "ethernet":
            out.update({"eth.src": src.mac, "eth.dst": dst.mac})
            if s.vlans:
                out.update({"vlan.id": tuple(v for v, _ in s.vlans),
                            "vlan.priority": tuple(p for _, p in s.vlans)})
        if encap == "rocev2_ipv4":
            out.update({"ip.src": src.ip, "ip.dst": dst.ip, "ip.dsfield.dscp": s.dscp,
                        "ip.dsfield.ecn": s.ecn})
        elif encap == "rocev2_ipv6":
            out.update({"ipv6.src": src.ip6, "ipv6.dst": dst.ip6,
                        "ipv6.tclass": s.dscp << 2 | s.ecn})
        elif encap in ("rocev1", "ib_global"):
            out.update({"grh.sgid": src.ip6, "grh.dgid": dst.ip6, "grh.tclass": s.dscp << 2})
        if encap.startswith("ib_"):
            out.update({"lrh.slid": src.lid, "lrh.dlid": dst.lid})
        return out

    def address(self, direction: str) -> tuple[str | int, str | int]:
        """(source, destination) address of ``direction`` (``fwd``: requester to
        responder), as the QP analysis reports addresses: IP or GID text, a LID as an int."""
        s = self.scenario
        a, b = ((s.requester, s.responder) if direction == "fwd" else (s.responder, s.requester))
        if self.encapsulation == "rocev2_ipv4":
            return a.ip, b.ip
        if self.encapsulation == "ib_local":
            return a.lid, b.lid
        return a.ip6, b.ip6

    def frame(self, packet: Packet, direction: str, udp_sport: int, *, ce: bool = False,
              bad_icrc: bool = False, dscp: int | None = None, ip_id: int = 0) -> bytes:
        """The frame of ``packet`` sent in ``direction`` (``fwd``: requester to responder)
        from UDP port ``udp_sport``: CE-marked (``ce``), with a bad ICRC (``bad_icrc``), with
        DSCP ``dscp`` instead of the scenario's, with IPv4 ID ``ip_id`` (RoCEv2 over IPv4)."""
        if self.templates and not bad_icrc and packet.atomic is None and (
                packet.atomic_ack is None):
            reth, aeth = packet.reth, packet.aeth
            key = (direction, packet.opcode, packet.payload_len, packet.offset & 0xFF,
                   packet.se, packet.becn, packet.dest_qp, packet.deth, packet.xrc_srq,
                   reth is None, reth and reth.r_key, reth and reth.dmalen,
                   packet.immdt is None, packet.ieth, aeth and aeth.syndrome, udp_sport, ce,
                   dscp)
            kind = self._kinds.get(key, False)
            if kind is False:
                kind = self._kinds[key] = self._kind(packet, direction, udp_sport, ce, dscp)
            if kind is not None:
                return self._patched(kind, packet, ip_id)
        return self.build(packet, direction, udp_sport, ce=ce, bad_icrc=bad_icrc, dscp=dscp,
                          ip_id=ip_id)

    def _kind(self, packet: Packet, direction: str, udp_sport: int, ce: bool,
              dscp: int | None) -> _Kind | None:
        found = self.patch_points(packet, direction, udp_sport, ce=ce, dscp=dscp)
        return None if found is None else _Kind(*found)

    def _patched(self, kind: _Kind, packet: Packet, ip_id: int) -> bytes:
        out = bytearray(kind.frame)
        if kind.ipid >= 0:
            out[kind.ipid:kind.ipid + 2] = ip_id.to_bytes(2, "big")
            out[kind.ipsum:kind.ipsum + 2] = ipv4_checksum_with(kind.ip_total, ip_id).to_bytes(
                2, "big")
        at = kind.word
        out[at:at + 4] = (packet.psn | packet.ackreq << 31).to_bytes(4, "big")
        if kind.va >= 0:
            out[kind.va:kind.va + 8] = packet.reth.va.to_bytes(8, "big")  # type: ignore[union-attr]
        if kind.imm >= 0:
            out[kind.imm:kind.imm + 4] = packet.immdt.to_bytes(4, "big")  # type: ignore[union-attr]
        if kind.msn >= 0:
            out[kind.msn:kind.msn + 3] = packet.aeth.msn.to_bytes(3, "big")  # type: ignore[union-attr]
        crc.fix(out, self.link)
        return bytes(out)

    def patch_points(self, packet: Packet, direction: str, udp_sport: int, *,
                     ce: bool = False, dscp: int | None = None
                     ) -> tuple[bytes, dict[str, tuple[int, int]]] | None:
        """``packet``'s frame and where each field of :data:`PATCHED` it carries sits
        (offset, width), found by building it again with that field changed; None when a
        field is not where a patch could write it (then frames of its kind are built)."""
        tail = 4 + (2 if self.link == "infiniband" else 0)
        base = self.build(packet, direction, udp_sport, ce=ce, dscp=dscp)
        variants: dict[str, Packet] = {
            "word": packet._replace(psn=packet.psn ^ PSN_MASK, ackreq=not packet.ackreq)}
        if packet.reth is not None and direction == "fwd":
            variants["va"] = packet._replace(reth=packet.reth._replace(
                va=packet.reth.va ^ (2**64 - 1)))
        if packet.immdt is not None:
            variants["imm"] = packet._replace(immdt=packet.immdt ^ 0xFFFFFFFF)
        if packet.aeth is not None:
            variants["msn"] = packet._replace(aeth=packet.aeth._replace(
                msn=packet.aeth.msn ^ PSN_MASK))
        fields = {}
        if self.encapsulation == "rocev2_ipv4":
            changed = self.build(packet, direction, udp_sport, ce=ce, dscp=dscp, ip_id=0x1234)
            span = _field_span(base, changed, tail)
            if span is None or span[1] != 8:     # ID, flags, TTL, protocol, checksum
                return None
            fields["ipid"], fields["ipsum"] = (span[0], 2), (span[0] + 6, 2)
        for name, variant in variants.items():
            changed = self.build(variant, direction, udp_sport, ce=ce, dscp=dscp)
            span = _field_span(base, changed, tail)
            if span is None:
                return None
            at, width = span
            if name == "word":
                at, width = span[0] + span[1] - 3 - 1, 4   # the A bit's byte, then the PSN
            if width > PATCHED[name] or name == "word" and base[at] & 0x7F:
                return None
            fields[name] = (at + width - PATCHED[name], PATCHED[name])
        return base, fields

    def build(self, packet: Packet, direction: str, udp_sport: int, *, ce: bool = False,
              bad_icrc: bool = False, dscp: int | None = None, ip_id: int = 0) -> bytes:
        """:meth:`frame`, built field by field (:func:`ibwire.build`)."""
        fields = {**self._base[direction], **packet.fields()}
        if self.encapsulation == "rocev2_ipv4":
            fields["ip.id"] = ip_id
        if self.encapsulation.startswith("rocev2"):
            fields["udp.srcport"] = udp_sport
            ecn = ECN_CE if ce else self.scenario.ecn
            if self.encapsulation == "rocev2_ipv4":
                fields["ip.dsfield.ecn"] = ecn
                if dscp is not None:
                    fields["ip.dsfield.dscp"] = dscp
            else:
                fields["ipv6.tclass"] = (self.scenario.dscp if dscp is None else dscp) << 2 | ecn
        payload = payload_of(packet)
        frame = build(self.encapsulation, fields, payload)
        if bad_icrc:
            honest = crc.icrc(frame, self.link)
            fields["icrc"] = honest ^ 0xFFFFFFFF
            frame = build(self.encapsulation, fields, payload)
        return frame

    def wire_bytes(self, frame: bytes) -> int:
        return len(frame) + (ETHERNET_OVERHEAD if self.link == "ethernet" else 0)
