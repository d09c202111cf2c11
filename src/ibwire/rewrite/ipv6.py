"""Where the upper-layer header of an IPv6 packet is: behind the extension headers that
``ibwire rewrite`` walks as tcprewrite does (tcpreplay ``src/common/get.c``,
``get_layer4_v6``): hop-by-hop options, routing, destination options (RFC 8200 §4.3-4.6:
``(Hdr Ext Len + 1) * 8`` bytes) and the Authentication Header (RFC 4302 §2.2:
``(Payload Len + 2) * 4`` bytes).

A Fragment header (RFC 8200 §4.5) ends the walk with no upper layer: a non-first fragment
holds no TCP/UDP header, and a first fragment's TCP/UDP checksum covers data it does not
hold (tcprewrite 4.4 maps no port and fixes no checksum behind it either). So do ESP (50),
No Next Header (59) and a walk the frame cuts short.
"""

from __future__ import annotations

HEADER = 40
WALKED = {0: 8, 43: 8, 60: 8, 51: 4}
"""Extension header Next Header value -> unit of its length byte (the AH counts 32-bit
words less 2, the others 64-bit words less 1)."""
FRAGMENT = 44
NO_L4 = -1


def upper_layer(frame: bytes | bytearray | memoryview, l3: int) -> tuple[int, int]:
    """(protocol, offset) of the header after the extension headers of the IPv6 header at
    ``l3`` (which the frame holds whole); protocol ``NO_L4`` where there is none (a
    fragment, or headers running past the frame or the payload length)."""
    nh, at = frame[l3 + 6], l3 + HEADER
    end = min(len(frame), l3 + HEADER + int.from_bytes(frame[l3 + 4:l3 + 6], "big"))
    while nh in WALKED:
        if at + 8 > end:
            return NO_L4, at
        unit = WALKED[nh]
        nh, at = frame[at], at + (frame[at + 1] + (2 if unit == 4 else 1)) * unit
    if nh == FRAGMENT or at > end:
        return NO_L4, at
    return nh, at
