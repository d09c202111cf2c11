"""The Ethernet and IP headers that carry RoCE: Ethernet, 802.1Q/802.1ad tags, IPv4, IPv6, UDP.

Field names are Wireshark's (``eth.dst``, ``vlan.id``, ``ip.dsfield.ecn``, ``udp.dstport``).
IPv4 options are not a field of :data:`IPV4`: they are the ``ip.options`` bytes the dissector
takes from the IHL.
"""

from __future__ import annotations

import construct as cs

from ibwire.encap_numbers import (
    ETHERTYPE_IPV4,
    ETHERTYPE_IPV6,
    IP_PROTO_UDP,
    IPV6_EXTENSIONS,
    TPIDS,
)
from ibwire.headers.layout import Header, bits, octets

ETHERNET = Header("eth", "Ethernet", cs.BitStruct(
    "dst" / octets(6),
    "src" / octets(6),
    "type" / bits(16),
), formats={"dst": "mac", "src": "mac"})

#: One 802.1Q or 802.1ad tag; its TPID is the type field of the header before it.
VLAN = Header("vlan", "802.1Q", cs.BitStruct(
    "priority" / bits(3),
    "dei" / bits(1),
    "id" / bits(12),
    "etype" / bits(16),
))

IPV4 = Header("ip", "IPv4", cs.BitStruct(
    "version" / bits(4),
    "hdr_len" / bits(4),     # in 4-byte words (IHL)
    "dsfield.dscp" / bits(6),
    "dsfield.ecn" / bits(2),
    "len" / bits(16),
    "id" / bits(16),
    "flags.rb" / bits(1),
    "flags.df" / bits(1),
    "flags.mf" / bits(1),
    "frag_offset" / bits(13),
    "ttl" / bits(8),
    "proto" / bits(8),
    "checksum" / bits(16),
    "src" / octets(4),
    "dst" / octets(4),
), formats={"src": "ipv4", "dst": "ipv4"})

IPV6 = Header("ipv6", "IPv6", cs.BitStruct(
    "version" / bits(4),
    "tclass" / bits(8),
    "flow" / bits(20),
    "plen" / bits(16),
    "nxt" / bits(8),
    "hlim" / bits(8),
    "src" / octets(16),
    "dst" / octets(16),
), formats={"src": "ipv6", "dst": "ipv6"})

UDP = Header("udp", "UDP", cs.BitStruct(
    "srcport" / bits(16),
    "dstport" / bits(16),
    "length" / bits(16),
    "checksum" / bits(16),
))

__all__ = ["ETHERNET", "ETHERTYPE_IPV4", "ETHERTYPE_IPV6", "IPV4", "IPV6", "IPV6_EXTENSIONS",
           "IP_PROTO_UDP", "TPIDS", "UDP", "VLAN"]
