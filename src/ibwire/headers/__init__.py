"""Every header ibwire knows, declared once with Construct (see :mod:`ibwire.headers.layout`)."""

from __future__ import annotations

from ibwire.headers.encap import ETHERNET, IPV4, IPV6, UDP, VLAN
from ibwire.headers.layout import Field, Header
from ibwire.headers.link import GRH, ICRC, LRH, VCRC
from ibwire.headers.mad import MAD, RMPP
from ibwire.headers.transport import (
    AETH,
    ATOMIC_ACK_ETH,
    ATOMIC_ETH,
    BTH,
    CNP_PAD,
    DETH,
    EXTENDED,
    FETH,
    IETH,
    IMM_DT,
    RDETH,
    RETH,
    XRCETH,
)

#: Every fixed-size header, by key prefix.
ALL: dict[str, Header] = {
    h.name: h
    for h in (ETHERNET, VLAN, IPV4, IPV6, UDP, LRH, GRH, BTH, *EXTENDED.values(), MAD, RMPP)
}

__all__ = [
    "AETH", "ALL", "ATOMIC_ACK_ETH", "ATOMIC_ETH", "BTH", "CNP_PAD", "DETH", "ETHERNET",
    "EXTENDED", "FETH", "GRH", "ICRC", "IETH", "IMM_DT", "IPV4", "IPV6", "LRH", "MAD",
    "RDETH", "RETH", "RMPP", "UDP", "VCRC", "VLAN", "XRCETH", "Field", "Header",
]
