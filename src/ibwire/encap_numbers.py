"""The numbers the encapsulations are told apart by (EtherTypes, VLAN TPIDs, IP protocols),
apart from :mod:`ibwire.headers.encap` and its Construct declarations: ``show``'s summary
lines classify frames by them without loading the declarations."""

from __future__ import annotations

TPIDS = (0x8100, 0x88A8, 0x9100)
ETHERTYPE_IPV4 = 0x0800
ETHERTYPE_IPV6 = 0x86DD
IP_PROTO_UDP = 17
#: IPv6 next-header values that are extension headers (RFC 8200 and the IANA registry).
IPV6_EXTENSIONS = frozenset({0, 43, 44, 50, 51, 60, 135, 139, 140, 253, 254})
