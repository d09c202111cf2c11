"""``--unique-ip``: new addresses on every loop, with every CRC right.

tcpreplay's ``fast_edit_packet()`` (src/send_packets.c) moves the source address down and
the destination up by the same amount so that the ones'-complement L4 checksum stays right;
the RoCE ICRC is a CRC-32 and does not survive that, so every looped RoCE packet would be
dropped. Here loop k moves the IPv4 source down by k and the destination up by k (the last
32 bits of IPv6 addresses likewise), fixes the IPv4 header and TCP/UDP checksums (a zero UDP
checksum stays zero) and recomputes the ICRC of RoCE packets.
"""

from __future__ import annotations

from ibwire import crc
from ibwire.errors import IbwireError
from ibwire.rewrite import checksum
from ibwire.rewrite.edit import ETH_IPV4, ETH_IPV6, innermost_ethertype


def _l3(frame: bytearray, link: str) -> tuple[int, int]:
    if link == "ip":
        return (ETH_IPV4 if frame[0] >> 4 == 4 else ETH_IPV6), 0
    return innermost_ethertype(frame)


def _shift(frame: bytearray, at: int, delta: int) -> None:
    value = (int.from_bytes(frame[at:at + 4], "big") + delta) & 0xFFFFFFFF
    frame[at:at + 4] = value.to_bytes(4, "big")


def unique_frame(frame: bytes, link: str, k: int) -> bytes:
    """``frame`` as loop ``k`` sends it (k = 0: unchanged)."""
    if k == 0 or link not in ("ethernet", "ip") or len(frame) < 34:
        return frame
    out = bytearray(frame)
    etype, l3 = _l3(out, link)
    if etype == ETH_IPV4 and len(out) >= l3 + 20:
        src, size, l4 = l3 + 12, 4, l3 + (out[l3] & 0x0F) * 4
        l4_len = int.from_bytes(out[l3 + 2:l3 + 4], "big") - (l4 - l3)
        proto = out[l3 + 9]
    elif etype == ETH_IPV6 and len(out) >= l3 + 40:
        src, size, l4 = l3 + 8, 16, l3 + 40
        l4_len = int.from_bytes(out[l3 + 4:l3 + 6], "big")
        proto = out[l3 + 6]
    else:
        return frame
    _shift(out, src + size - 4, -k)
    _shift(out, src + 2 * size - 4, k)
    try:
        if crc.verify(frame, link).icrc_ok is not None:
            crc.fix(out, link)
    except IbwireError:
        pass
    if proto in (6, 17):
        checksum.transport(out, l3, l4, l4_len, proto)
    if etype == ETH_IPV4:
        checksum.ipv4_header(out, l3)
    return bytes(out)
