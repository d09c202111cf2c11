"""What the fault plan does to a frame's bytes, and the packets it forges.

Edits: a corrupted ICRC (the four ICRC bytes inverted, as ``ibwire gen``'s corrupt fault), a
CE mark (the ECN bits of the IPv4 TOS or IPv6 traffic class set to 11, RFC 3168; the IPv4
header checksum redone; the ICRC masks these bits, IBA Annex A17.3.3, so it stays right),
the TCP/UDP checksum a sender left to offload (``TP_STATUS_CSUMNOTREADY``) completed.
Forged packets (an ACK carrying a NAK or RNR NAK, a CNP) are built by :func:`ibwire.build`
(lengths, checksums and ICRC derived) with the addresses of the connection's latest answer,
or its latest request's turned around when no answer crossed yet.
"""

from __future__ import annotations

from typing import Any

from ibwire.builder import DERIVED_KEYS, build
from ibwire.headers.aeth import encode_syndrome
from ibwire.impair.state import Connection
from ibwire.rewrite import checksum
from ibwire.rewrite.edit import ETH_IPV4, ETH_IPV6, innermost_ethertype
from ibwire.transport.cnp import CNP_OPCODE

ACKNOWLEDGE = 0x11  # RC Acknowledge (IBA Table 38)
ECN_CE = 3
_ADDRESS_PREFIXES = ("eth.", "vlan.", "ip.", "ipv6.", "udp.", "lrh.", "grh.")
_SWAPS = (("eth.src", "eth.dst"), ("ip.src", "ip.dst"), ("ipv6.src", "ipv6.dst"),
          ("grh.sgid", "grh.dgid"), ("lrh.slid", "lrh.dlid"))


def corrupt(frame: bytearray, icrc_at: int) -> None:
    """Makes the ICRC at ``icrc_at`` wrong (every bit inverted)."""
    for i in range(icrc_at, icrc_at + 4):
        frame[i] ^= 0xFF


def mark_ce(frame: bytearray, network_at: int) -> bool:
    """Sets the ECN field of the IP header at ``network_at`` to CE; False when the frame has
    none (RoCEv1, native IB)."""
    version = frame[network_at] >> 4
    if version == 4:
        frame[network_at + 1] |= ECN_CE
        checksum.ipv4_header(frame, network_at)
        return True
    if version == 6 and innermost_ethertype(frame)[0] == ETH_IPV6:
        frame[network_at + 1] |= ECN_CE << 4
        return True
    return False


def complete_checksum(frame: bytearray) -> bool:
    """Fills in the TCP or UDP checksum of an Ethernet frame (IPv4 or IPv6 as its EtherType
    says, VLAN tags skipped) whose sender left it to offload (RFC 793, RFC 768, RFC 8200
    8.1; a UDP checksum that comes to 0 is sent as 0xFFFF); False when it is neither or its
    headers are cut short. A segment cut short keeps its checksum. The twin of
    ``relay_complete_checksum`` (pump.c)."""
    etype, l3 = innermost_ethertype(frame)
    if etype == ETH_IPV4 and len(frame) >= l3 + 20:
        ihl = (frame[l3] & 0x0F) * 4
        if ihl < 20:
            return False
        proto = frame[l3 + 9]
        length = int.from_bytes(frame[l3 + 2:l3 + 4], "big") - ihl
        l4 = l3 + ihl
    elif etype == ETH_IPV6 and len(frame) >= l3 + 40:
        proto = frame[l3 + 6]
        length = int.from_bytes(frame[l3 + 4:l3 + 6], "big")
        l4 = l3 + 40
    else:
        return False
    if proto not in (6, 17) or length <= 0:
        return False
    checksum.transport(frame, l3, l4, length, proto, ipv6=etype == ETH_IPV6,
                       keep_zero_udp=False)
    return True


def _template(c: Connection) -> tuple[str, dict[str, Any]]:
    """(encapsulation, address fields) of a packet from the responder to the requester."""
    from ibwire.dissect import parse

    turned = c.answer_frame is None
    packet = parse(c.request_frame if turned else c.answer_frame)
    fields = {k: v for k, v in packet.fields().items()
              if k.startswith(_ADDRESS_PREFIXES) and k not in DERIVED_KEYS}
    fields.pop("udp.checksum", None)
    fields["bth.p_key"] = packet.fields().get("bth.p_key", 0xFFFF)
    if turned:
        for a, b in _SWAPS:
            if a in fields and b in fields:
                fields[a], fields[b] = fields[b], fields[a]
    return packet.encapsulation, fields


def forged_nak(c: Connection, psn: int, code: int, rnr: bool = False) -> bytes:
    """An RC Acknowledge to ``c``'s requester naming ``psn``: a NAK with ``code`` (IBA
    Table 44: 0 PSN sequence error) or, ``rnr``, an RNR NAK with timer code ``code``; MSN the
    latest the responder sent (0 before any)."""
    encap, fields = _template(c)
    syndrome = encode_syndrome("RNR_NAK" if rnr else "NAK", code)
    fields.update({"bth.opcode": ACKNOWLEDGE, "bth.psn": psn, "bth.destqp": c.peer_qpn,
                   "aeth.syndrome": syndrome, "aeth.msn": c.msn or 0})
    return build(encap, fields)


def forged_cnp(c: Connection) -> bytes:
    """A CNP to ``c``'s requester (the QP whose packet the network would have marked), as
    ``ibwire gen`` builds them (BECN set, PSN 0; :func:`ibwire.transport.cnp_packet`)."""
    from ibwire.transport import cnp_packet

    encap, fields = _template(c)
    fields.update(cnp_packet(c.peer_qpn or 0).fields())
    fields["bth.opcode"] = CNP_OPCODE
    return build(encap, fields)
