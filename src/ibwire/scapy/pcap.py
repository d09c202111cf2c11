"""Reading InfiniBand captures with scapy: the ERF record layer and :func:`rdpcap`.

scapy 2.8 knows neither LINKTYPE_INFINIBAND (247) nor LINKTYPE_ERF (197), and its own ERF
reader (``rderf``/``ERFEthernetReader``) only reads bare ERF files of Ethernet records: it
refuses InfiniBand records (type 21). So this module

* registers :class:`ERF`, a layer for one ERF record, as ``conf.l2types`` 197 (only if scapy
  has no layer for 197; see :func:`ibwire.scapy.bindings.register_link_type`): scapy's own
  ``rdpcap`` then dissects pcap/pcapng files of ERF records, InfiniBand records going on to
  :class:`~ibwire.scapy.layers.LRH` (Ethernet, IPv4 and IPv6 records to scapy's layers);
  LINKTYPE_INFINIBAND is registered by :mod:`ibwire.scapy.bindings`;
* provides :func:`rdpcap`: scapy's ``rdpcap`` for pcap and pcapng files (plain or gzip), and
  for a bare ERF file (no pcap header at all) a record-by-record read into :class:`ERF` layers.

The ERF record types and what follows them come from specs/link_types.tsv (family ``erf``).
"""

from __future__ import annotations

import gzip
import os
from pathlib import Path

from scapy.config import conf
from scapy.error import Scapy_Exception
from scapy.fields import (
    ByteEnumField,
    ConditionalField,
    LELongField,
    ShortField,
    StrField,
    XByteField,
    XShortField,
)
from scapy.layers.inet import IP
from scapy.layers.inet6 import IPv6
from scapy.layers.l2 import Ether
from scapy.packet import Packet
from scapy.plist import PacketList
from scapy.utils import rdpcap as scapy_rdpcap

from ibwire.scapy.bindings import register_link_type
from ibwire.scapy.enums import ERF_TYPES
from ibwire.scapy.layers import LRH
from ibwire.tables import link_types

ERF_HEADER_SIZE = 16
ERF_EXTENSION_SIZE = 8
ERF_EXTENSION_BIT = 0x80
ERF_TYPE_INFINIBAND = 21
#: ERF record type -> where its frame starts (specs/link_types.tsv).
ERF_STARTS: dict[int, str] = {value: starts for (family, value), (_, starts) in link_types().items()
                              if family == "erf"}
#: Ethernet records carry 2 bytes (offset, pad) before the frame.
ERF_ETHERNET = frozenset(value for value, starts in ERF_STARTS.items() if starts == "ethernet")
LINKTYPE_ERF = next(value for (family, value), (name, _) in link_types().items()
                    if family == "pcap" and name == "ERF")
_PCAP_MAGICS = frozenset({b"\xa1\xb2\xc3\xd4", b"\xd4\xc3\xb2\xa1", b"\xa1\xb2\x3c\x4d",
                          b"\x4d\x3c\xb2\xa1", b"\x0a\x0d\x0d\x0a"})
_GZIP_MAGIC = b"\x1f\x8b"


class _ExtensionHeaders(StrField):
    """ERF extension headers: 8 bytes each, while the previous one has its top bit set."""

    def getfield(self, pkt: Packet, s: bytes) -> tuple[bytes, bytes]:
        if not pkt.type & ERF_EXTENSION_BIT:
            return s, b""
        end = 0
        while end + ERF_EXTENSION_SIZE <= len(s):
            end += ERF_EXTENSION_SIZE
            if not s[end - ERF_EXTENSION_SIZE] & ERF_EXTENSION_BIT:
                break
        return s[end:], s[:end]


class ERF(Packet):
    """One ERF record header (Endace Extensible Record Format); ``ts`` is little-endian."""

    name = "ERF"
    fields_desc = [
        LELongField("ts", 0),
        ByteEnumField("type", ERF_TYPE_INFINIBAND, ERF_TYPES),  # bit 7: extension headers
        XByteField("flags", 0x04),  # 0x04: varying-length record
        ShortField("rlen", None),
        ShortField("lctr", 0),
        ShortField("wlen", None),
        _ExtensionHeaders("extensions", b""),
        ConditionalField(XShortField("eth_pad", 0),
                         lambda pkt: pkt.type & 0x7F in ERF_ETHERNET),
    ]

    def _header_size(self) -> int:
        eth = 2 if self.type & 0x7F in ERF_ETHERNET else 0
        return ERF_HEADER_SIZE + len(self.extensions or b"") + eth

    def extract_padding(self, s: bytes) -> tuple[bytes, bytes | None]:
        size = len(s)
        if self.rlen is not None:
            size = min(size, self.rlen - self._header_size())
        if self.wlen is not None:
            size = min(size, self.wlen)
        size = max(size, 0)
        return s[:size], s[size:]

    def post_build(self, p: bytes, pay: bytes) -> bytes:
        frame = bytearray(p + pay)
        if self.rlen is None:
            frame[10:12] = len(frame).to_bytes(2, "big")
        if self.wlen is None:
            frame[14:16] = len(pay).to_bytes(2, "big")
        return bytes(frame)

    def guess_payload_class(self, payload: bytes) -> type[Packet]:
        starts = ERF_STARTS.get(self.type & 0x7F)
        if starts == "ethernet":
            return Ether
        if starts == "infiniband":
            return LRH
        if starts == "ip" and payload:
            return IPv6 if payload[0] >> 4 == 6 else IP
        return conf.raw_layer

    @property
    def erf_time(self) -> float:
        """The record's timestamp in seconds (ERF: 32.32 fixed point)."""
        return (self.ts >> 32) + (self.ts & 0xFFFFFFFF) / 2**32


def rdpcap(filename: str | os.PathLike[str], count: int = -1) -> PacketList:
    """Packets of a pcap, pcapng or bare ERF file, dissected with the InfiniBand layers.

    pcap and pcapng (gzip too) go to scapy's own ``rdpcap``, which finds LRH for link type
    247 and :class:`ERF` for 197 through ``conf.l2types``. A bare ERF file is read record by
    record (``packet.time`` from the ERF timestamp). Anything else raises ``Scapy_Exception``.
    """
    path = Path(filename)
    with open(path, "rb") as fh:
        head = fh.read(4)
    if head[:2] == _GZIP_MAGIC:
        with gzip.open(path, "rb") as fh:
            head = fh.read(4)
        if head in _PCAP_MAGICS:
            return scapy_rdpcap(str(path), count=count)
        with gzip.open(path, "rb") as fh:
            return read_erf(fh.read(), count, name=path.name)
    if head in _PCAP_MAGICS:
        return scapy_rdpcap(str(path), count=count)
    return read_erf(path.read_bytes(), count, name=path.name)


def read_erf(data: bytes, count: int = -1, name: str = "ERF") -> PacketList:
    """The records of a bare ERF file as :class:`ERF` packets."""
    packets: list[Packet] = []
    offset = 0
    while offset < len(data) and len(packets) != count:
        header = data[offset:offset + ERF_HEADER_SIZE]
        rlen = int.from_bytes(header[10:12], "big") if len(header) == ERF_HEADER_SIZE else 0
        if rlen < ERF_HEADER_SIZE or (header[8] & 0x7F) not in ERF_STARTS:
            raise Scapy_Exception(
                f"{name}: not a pcap, pcapng or ERF file (no ERF record of a known type at "
                f"byte {offset}; ERF types read: {sorted(ERF_STARTS)})")
        packet = ERF(data[offset:offset + rlen])
        packet.time = packet.erf_time
        packets.append(packet)
        offset += rlen
    return PacketList(packets, name=name)


def install() -> None:
    """Register :class:`ERF` as LINKTYPE_ERF (197) where scapy has no layer for it (done on
    import of :mod:`ibwire.scapy`)."""
    register_link_type(LINKTYPE_ERF, ERF)
