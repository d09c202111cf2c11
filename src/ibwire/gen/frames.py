"""Transport packets into frames: addressing per encapsulation, payload bytes, bad ICRCs.

Frames are built by :func:`ibwire.build` (lengths, PadCnt, checksums, ICRC and VCRC derived).
Payload bytes are a fixed pattern indexed by the packet's offset in its message, so the same
scenario always gives the same bytes.
"""

from __future__ import annotations

from typing import Any

from ibwire import crc
from ibwire.builder import build
from ibwire.gen.scenario import Endpoint, Scenario
from ibwire.transport import Packet

#: pcap link types: Ethernet (1) for RoCE, LINKTYPE_INFINIBAND (247) for native IB.
LINKTYPES = {"rocev2_ipv4": 1, "rocev2_ipv6": 1, "rocev1": 1, "ib_local": 247, "ib_global": 247}
#: Bytes an Ethernet frame costs on the wire besides itself: preamble+SFD 8, FCS 4, IFG 12.
ETHERNET_OVERHEAD = 24
_PATTERN = bytes(range(256)) * 17
ECN_CE = 3


def payload_of(packet: Packet) -> bytes:
    start = packet.offset & 0xFF
    return _PATTERN[start:start + packet.payload_len]


class Framer:
    """Builds the frames of one scenario in one direction's addressing."""

    def __init__(self, scenario: Scenario) -> None:
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
              bad_icrc: bool = False, dscp: int | None = None) -> bytes:
        fields = {**self._base[direction], **packet.fields()}
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
