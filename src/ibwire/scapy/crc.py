"""Glue between the scapy layers and the CRC engine :mod:`ibwire.crc` (no CRC code here).

Where each CRC is computed at build time, by the outermost layer that knows its bytes:

* native InfiniBand: ``LRH.post_build`` has LRH .. ICRC and passes them with
  ``link="infiniband"`` (ICRC, then the VCRC over the result);
* RoCEv1 (GRH not under an LRH): ``GRH.post_build`` passes GRH .. ICRC with ``link="grh"``;
* RoCEv2: the IP and UDP layers are scapy's, and scapy builds a non-explicit packet on a
  throw-away copy, so no layer of ours sees the final frame. ``BTH.post_build`` therefore
  hands ``link="ip"`` the IP and UDP headers exactly as scapy is about to emit them
  (their ``self_build()``, packed at once where the values allow: see
  :func:`ibwire.scapy.packing.packed`) with the lengths that IP/UDP ``post_build`` will
  write (IHL, total length, payload length, UDP length) and its own bytes. The checksums
  that ``post_build`` fills later are masked by the ICRC, and Ethernet/VLAN headers are not
  covered, so the value is that of the final frame wherever the build started.

Length fields given explicitly and wrong do not change the CRCs: they are computed over the
frame with honest lengths (as :func:`ibwire.build` does), every other byte as emitted.
"""

from __future__ import annotations

from scapy.error import warning
from scapy.layers.inet import IP, UDP
from scapy.layers.inet6 import IPv6
from scapy.packet import Packet

from ibwire import crc as engine
from ibwire.crc import CrcVerdict
from ibwire.errors import IbwireError
from ibwire.scapy.packing import packed

ICRC_SIZE = 4
VCRC_SIZE = 2
UDP_SIZE = 8


def icrc_value(frame: bytes | bytearray, link: str) -> int | None:
    """The ICRC value of ``frame`` starting at ``link``, or None (with a warning) if it has none."""
    try:
        return engine.icrc(frame, link)
    except IbwireError as exc:
        warning("ibwire: ICRC not computed, left as zeros: %s", exc)
        return None


def vcrc_value(frame: bytes | bytearray) -> int | None:
    """The VCRC value of a native InfiniBand frame (starting at the LRH), or None."""
    try:
        return engine.vcrc(frame, "infiniband")
    except IbwireError as exc:
        warning("ibwire: VCRC not computed, left as zeros: %s", exc)
        return None


def verify(start: Packet, link: str) -> CrcVerdict | None:
    """The CRC verdict of the frame built from layer ``start``; None when it cannot be checked."""
    try:
        return engine.verify(bytes(start), link)
    except IbwireError:
        return None


def _ipv4_header(ip: IP, ip_payload: int) -> bytearray:
    """The IPv4 header as IP.post_build emits it: options padded, IHL and total length set."""
    header = bytearray(packed(ip))
    if len(header) % 4:
        header += bytes(-len(header) % 4)
    header[0] = (header[0] & 0xF0) | (len(header) // 4)
    header[2:4] = (len(header) + ip_payload).to_bytes(2, "big")
    return header


def roce_v2_icrc(udp: UDP, transport: bytes | bytearray) -> int | None:
    """The ICRC of a RoCEv2 packet whose BTH .. ICRC bytes are ``transport``, below ``udp``."""
    ip = udp.underlayer
    udp_length = UDP_SIZE + len(transport)
    if isinstance(ip, IP):
        frame = _ipv4_header(ip, udp_length)
    elif isinstance(ip, IPv6):
        frame = bytearray(packed(ip))
        frame[4:6] = udp_length.to_bytes(2, "big")
    else:
        warning("ibwire: ICRC not computed, left as zeros: UDP is not directly over IP/IPv6 "
                "(%s)", type(ip).__name__ if ip is not None else "nothing")
        return None
    at = len(frame)
    frame += packed(udp)
    frame[at + 4:at + 6] = udp_length.to_bytes(2, "big")
    frame += transport
    return icrc_value(frame, "ip")
