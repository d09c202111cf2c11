"""Packet addresses as two 64-bit words per row, and back to text.

RoCEv2 over IPv4: the IPv4 address, kept as the IPv4-mapped IPv6 address ::ffff:a.b.c.d;
RoCEv2 over IPv6: the IPv6 address; RoCEv1 and native IB with a GRH: the GID (an IPv6
address in form, IBA 8.3.1); native IB without a GRH: the LID (LRH SLID/DLID), tagged so it
cannot meet an IP address. Text as the issue's QP analysis reports it: IP text for RoCE,
the GID as IPv6 text, the LID as an integer.
"""

from __future__ import annotations

import ipaddress

import numpy as np

from ibwire.scan.program import slot_bit

#: Fields the analysis needs from the scanner for addresses.
FIELDS = ("ip.src", "ip.dst", "ipv6.src", "ipv6.dst", "grh.sgid", "grh.dgid", "lrh.slid",
          "lrh.dlid")
MAPPED = 0xFFFF << 32
#: The high word of a LID (ff00::/8 is multicast: no unicast GID or address has it whole).
LID_TAG = np.uint64(0xFFFF_FFFF_FFFF_FFFF)


def _words(gids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    w = np.ascontiguousarray(gids).view(">u8").reshape(-1, 2).astype(np.uint64)
    return w[:, 0], w[:, 1]


def row_addresses(cols: dict[str, np.ndarray], rows: np.ndarray
                  ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(src_hi, src_lo, dst_hi, dst_lo) of ``rows``."""
    headers = cols["headers"][rows]
    n = len(rows)
    ip = (headers & slot_bit("ip")) != 0
    if ip.all():  # RoCEv2 over IPv4 only: the usual capture
        src = cols["ip.src"] if n == len(cols["headers"]) else cols["ip.src"][rows]
        dst = cols["ip.dst"] if n == len(cols["headers"]) else cols["ip.dst"][rows]
        zero = np.zeros(n, np.uint64)
        return (zero, src.astype(np.uint64) | np.uint64(MAPPED), zero.copy(),
                dst.astype(np.uint64) | np.uint64(MAPPED))
    out = [np.zeros(n, np.uint64) for _ in range(4)]
    lrh = (headers & slot_bit("lrh")) != 0
    if lrh.any():
        out[0][lrh] = out[2][lrh] = LID_TAG
        out[1][lrh] = cols["lrh.slid"][rows][lrh]
        out[3][lrh] = cols["lrh.dlid"][rows][lrh]
    for slot, src, dst in (("grh", "grh.sgid", "grh.dgid"), ("ipv6", "ipv6.src", "ipv6.dst")):
        has = (headers & slot_bit(slot)) != 0
        if has.any():
            out[0][has], out[1][has] = _words(cols[src][rows][has])
            out[2][has], out[3][has] = _words(cols[dst][rows][has])
    if ip.any():
        out[0][ip] = out[2][ip] = 0
        out[1][ip] = cols["ip.src"][rows][ip].astype(np.uint64) | np.uint64(MAPPED)
        out[3][ip] = cols["ip.dst"][rows][ip].astype(np.uint64) | np.uint64(MAPPED)
    return out[0], out[1], out[2], out[3]


def address_text(hi: int, lo: int) -> str | int:
    """An address as the QP analysis reports it (an int for a LID)."""
    if hi == int(LID_TAG):
        return lo
    if hi == 0 and lo >> 32 == 0xFFFF:
        return str(ipaddress.IPv4Address(lo & 0xFFFFFFFF))
    return str(ipaddress.IPv6Address(hi << 64 | lo))
