"""scapy layers for InfiniBand and RoCE, derived from ibwire's header declarations.

``from ibwire.scapy import *`` gives the layers, the value names and :func:`rdpcap`::

    pkt = (Ether() / IP(src="192.0.2.1", dst="192.0.2.2") / UDP(dport=4791)
           / BTH(opcode="RC_RDMA_WRITE_ONLY", destqp=17, psn=5) / RETH(va=0x1000, dmalen=8)
           / Raw(b"8 bytes!"))
    raw(pkt)                       # PadCnt, pad, lengths and the ICRC filled in
    Ether(raw(pkt))[BTH].icrc_ok   # True

Conventions:

* Field names are the Construct names of :mod:`ibwire.headers` (``destqp``, ``p_key``,
  ``padcnt``, ``psn``, ``va``, ...), not scapy.contrib.roce's (``dqpn``, ``pkey``, ...).
* The trailers are fields of the layer that owns them: ``BTH.pad`` and ``BTH.icrc``,
  ``LRH.vcrc``. None means computed at build; a dissected packet keeps the values it had, so
  after changing a field, ``del pkt[BTH].icrc`` (and ``del pkt[LRH].vcrc``) to recompute.
* ``icrc``/``vcrc`` hold the CRC *value*, sent least-significant byte first, as everywhere in
  ibwire (scapy.contrib.roce's ``icrc`` is the wire bytes read big-endian).
* ``pkt[BTH].icrc_ok`` and ``pkt[LRH].vcrc_ok`` are True, False, or None when the frame
  cannot be checked (no IP/GRH/LRH start, truncated capture); ``crc_verdict()`` gives the
  whole :class:`ibwire.crc.CrcVerdict`, and ``show()`` prints the verdict next to each CRC.

Importing binds the layers into scapy as its contrib modules do (``bind_layers``-style
entries, UDP port 4791 put first; see :mod:`ibwire.scapy.bindings`) and registers
LINKTYPE_INFINIBAND (247) and LINKTYPE_ERF (197) for ``rdpcap`` where scapy has no layer for
them; it replaces no method of any scapy class. ibwire's own layers copy, clone and build
cheaply; for scapy's Ethernet, 802.1Q, SLL, IP, IPv6 and UDP classes above them, faster
copies and builds are an opt-in that does replace their methods (process-wide, undone
exactly; see :mod:`ibwire.scapy.carriers`)::

    fast_paths(True)           # or fast_paths(False) to take them off again
    with fast_paths():         # on for the block, the previous setting back after it
        frames = [raw(make(i)) for i in range(100_000)]
"""

from __future__ import annotations

from ibwire.scapy import bindings, pcap
from ibwire.scapy.attributes import ATTRIBUTE_LAYERS
from ibwire.scapy.carriers import fast_paths
from ibwire.scapy.enums import (
    AETH_SYNDROMES,
    AETH_TYPES,
    ERF_TYPES,
    LNH_NAMES,
    MAD_CLASSES,
    MAD_METHODS,
    NAK_CODES,
    OPCODES,
)
from ibwire.scapy.layers import (
    AETH,
    BTH,
    CHAINS,
    DETH,
    FETH,
    GRH,
    IETH,
    LAYERS,
    LRH,
    MAD,
    RDETH,
    RETH,
    RMPP,
    XRCETH,
    AtomicAckETH,
    AtomicETH,
    CNPPadding,
    ImmDt,
)
from ibwire.scapy.pcap import ERF, rdpcap, read_erf

bindings.install()
pcap.install()
globals().update(ATTRIBUTE_LAYERS)  # CM_REQ, PortInfo, PathRecord ... (generated classes)

__all__ = [
    "AETH", "AETH_SYNDROMES", "AETH_TYPES", "BTH", "CHAINS", "DETH", "ERF", "ERF_TYPES", "FETH",
    "GRH", "IETH", "LAYERS", "LNH_NAMES", "LRH", "MAD", "MAD_CLASSES", "MAD_METHODS",
    "NAK_CODES", "OPCODES", "RDETH", "RETH", "RMPP", "XRCETH", "AtomicAckETH", "AtomicETH",
    "CNPPadding", "ImmDt", "fast_paths", "rdpcap", "read_erf", *sorted(ATTRIBUTE_LAYERS),
]
