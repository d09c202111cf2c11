"""Every InfiniBand layer, by the key prefix ibwire.parse gives its header.

Link and network (:mod:`ibwire.scapy.link`): LRH, GRH. Transport
(:mod:`ibwire.scapy.transport`): BTH, RDETH, DETH, XRCETH, RETH, AtomicETH, AtomicAckETH,
AETH, ImmDt, IETH, FETH, CNPPadding, MAD, RMPP. Their common base is
:mod:`ibwire.scapy.base`.
"""

from __future__ import annotations

from ibwire.scapy.base import IBHeader, LinkHeader
from ibwire.scapy.link import GRH, GRH_NXTHDR, LNH_GLOBAL, LNH_LOCAL, LRH
from ibwire.scapy.transport import (
    AETH,
    BTH,
    CHAIN_SIZES,
    CHAINS,
    DETH,
    EXTENDED_LAYERS,
    FETH,
    IETH,
    MAD,
    RDETH,
    RETH,
    RMPP,
    XRCETH,
    AtomicAckETH,
    AtomicETH,
    CNPPadding,
    ExtendedHeader,
    ImmDt,
    link_start,
    next_in_chain,
)

#: Every layer, with the key prefix ibwire.parse gives its header.
LAYERS: dict[str, type[IBHeader]] = {
    layer.header.name: layer for layer in (LRH, GRH, BTH, *EXTENDED_LAYERS.values(), MAD, RMPP)
}

__all__ = [
    "AETH", "BTH", "CHAINS", "CHAIN_SIZES", "DETH", "EXTENDED_LAYERS", "FETH", "GRH",
    "GRH_NXTHDR", "IETH", "LAYERS", "LNH_GLOBAL", "LNH_LOCAL", "LRH", "MAD", "RDETH", "RETH",
    "RMPP", "XRCETH", "AtomicAckETH", "AtomicETH", "CNPPadding", "ExtendedHeader", "IBHeader",
    "ImmDt", "LinkHeader", "link_start", "next_in_chain",
]
