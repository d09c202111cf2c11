"""InfiniBand link and network layer: LRH, GRH, and the ICRC and VCRC trailers.

Layouts: Linux drivers/infiniband/core/ud_header.c (lrh_table, grh_table) and
include/rdma/ib_pack.h; the GRH has the IPv6 header's layout with NxtHdr 0x1B for IBA transport.
"""

from __future__ import annotations

import construct as cs

from ibwire.headers.layout import Header, bits, octets

LRH = Header("lrh", "LRH", cs.BitStruct(
    "vl" / bits(4),
    "lver" / bits(4),
    "sl" / bits(4),
    "reserved2" / bits(2),
    "lnh" / bits(2),
    "dlid" / bits(16),
    "reserved5" / bits(5),
    "pktlen" / bits(11),     # 4-byte words from the LRH up to, not including, the VCRC
    "slid" / bits(16),
))

GRH = Header("grh", "GRH", cs.BitStruct(
    "ipver" / bits(4),
    "tclass" / bits(8),
    "flowlabel" / bits(20),
    "paylen" / bits(16),     # bytes after the GRH, ICRC included
    "nxthdr" / bits(8),
    "hoplmt" / bits(8),
    "sgid" / octets(16),
    "dgid" / octets(16),
), formats={"sgid": "ipv6", "dgid": "ipv6"})

#: The trailers: CRC values stored least-significant byte first (IBA 7.8.1, 7.8.2).
ICRC = cs.Int32ul
VCRC = cs.Int16ul
