"""Internet checksums (RFC 1071) of the headers ``ibwire rewrite`` edits: the IPv4 header
checksum, and the TCP/UDP checksum over the IPv4 (RFC 768/793) or IPv6 (RFC 8200 §8.1)
pseudo-header. A zero UDP checksum over IPv4 means "none" and stays zero (RFC 768)."""

from __future__ import annotations

import struct


def ones_sum(data: bytes | bytearray | memoryview, start: int = 0) -> int:
    """The 16-bit ones'-complement sum of ``data`` (odd length padded with a zero byte)."""
    raw = bytes(data)
    if len(raw) % 2:
        raw += b"\0"
    total = start + sum(struct.unpack(f"!{len(raw) // 2}H", raw))
    while total >> 16:
        total = (total & 0xFFFF) + (total >> 16)
    return total


def finish(total: int) -> int:
    return ~total & 0xFFFF


def ipv4_header(frame: bytearray, l3: int) -> None:
    """Writes the IPv4 header checksum of the header at ``l3``."""
    ihl = (frame[l3] & 0x0F) * 4
    frame[l3 + 10:l3 + 12] = b"\0\0"
    frame[l3 + 10:l3 + 12] = finish(ones_sum(frame[l3:l3 + ihl])).to_bytes(2, "big")


def transport(frame: bytearray, l3: int, l4: int, l4_len: int, proto: int, *,
              ipv6: bool | None = None, keep_zero_udp: bool = True) -> None:
    """Writes the TCP (6) or UDP (17) checksum of the segment at ``l4`` (``l4_len`` bytes,
    as far as the frame holds them), over the pseudo-header of the IP header at ``l3``
    (IPv6's when ``ipv6``; None: as its version says). A zero UDP checksum ("none") is left
    at zero unless ``keep_zero_udp`` is False; a UDP sum that comes to 0 is sent as 0xFFFF."""
    where = l4 + (16 if proto == 6 else 6)
    if where + 2 > len(frame) or l4 + l4_len > len(frame):
        return  # a segment the capture cut short keeps its checksum
    if keep_zero_udp and proto == 17 and frame[where:where + 2] == b"\0\0":
        return
    if not (frame[l3] >> 4 == 6 if ipv6 is None else ipv6):
        pseudo = bytes(frame[l3 + 12:l3 + 20]) + struct.pack("!BBH", 0, proto, l4_len)
    else:
        pseudo = bytes(frame[l3 + 8:l3 + 40]) + struct.pack("!IxxxB", l4_len, proto)
    frame[where:where + 2] = b"\0\0"
    value = finish(ones_sum(frame[l4:l4 + l4_len], ones_sum(pseudo)))
    if proto == 17 and value == 0:
        value = 0xFFFF
    frame[where:where + 2] = value.to_bytes(2, "big")
