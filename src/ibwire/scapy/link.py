"""The link and network layers of native InfiniBand: LRH (with the VCRC trailer) and GRH.

The GRH also carries RoCEv1 (Ethernet type 0x8915). Each computes the ICRC at build time over
the frame it starts (see :mod:`ibwire.scapy.crc`), the LRH the VCRC after it.
"""

from __future__ import annotations

from scapy.packet import Packet

from ibwire import headers as hdr
from ibwire.builder import DEFAULTS
from ibwire.crc import CrcVerdict
from ibwire.scapy import crc as glue
from ibwire.scapy.base import LinkHeader, mark_no_trailer, no_trailer
from ibwire.scapy.enums import LNH_NAMES
from ibwire.scapy.fields import CrcField, fields_of, patch
from ibwire.scapy.transport import BTH
from ibwire.tables import constants

GRH_NXTHDR = constants()["GRH_NEXT_HEADER_IBA"]
LNH_LOCAL, LNH_GLOBAL = 2, 3


class LRH(LinkHeader):
    """Local Route Header; ``vcrc`` is the VCRC trailer after the ICRC (None: computed)."""

    name = "LRH"
    header = hdr.LRH
    fields_desc = [
        *fields_of(hdr.LRH, defaults={"lnh": LNH_LOCAL, "pktlen": None},
                   enums={"lnh": LNH_NAMES}),
        CrcField("vcrc", glue.VCRC_SIZE, lambda pkt: pkt.vcrc_ok),
    ]

    def transport(self) -> BTH | None:
        """The BTH this LRH carries (directly or behind a GRH), if any."""
        layer = self.payload
        if isinstance(layer, GRH):
            layer = layer.payload
        return layer if isinstance(layer, BTH) else None

    def post_dissect(self, s: bytes) -> bytes:
        self.raw_packet_cache = None  # the VCRC is written by post_build
        return s

    def extract_padding(self, s: bytes) -> tuple[bytes, bytes | None]:
        end = (self.pktlen or 0) * 4 - self.header.size
        if end < 0 or end + glue.VCRC_SIZE > len(s):
            mark_no_trailer(self)
            return s, None
        self.fields["vcrc"] = int.from_bytes(s[end:end + glue.VCRC_SIZE], "little")
        return s[:end], s[end + glue.VCRC_SIZE:]

    def post_build(self, p: bytes, pay: bytes) -> bytes:
        if no_trailer(self):
            return p + pay
        frame = bytearray(p + pay + bytes(glue.VCRC_SIZE))
        honest = (len(frame) - glue.VCRC_SIZE) // 4
        if self.pktlen is None:
            patch(frame, hdr.LRH, "pktlen", honest)
        crc_frame = bytearray(frame)  # with honest lengths
        patch(crc_frame, hdr.LRH, "pktlen", honest)
        if isinstance(self.payload, GRH):
            paylen = len(frame) - glue.VCRC_SIZE - hdr.LRH.size - hdr.GRH.size
            patch(crc_frame, hdr.GRH, "paylen", paylen, offset=hdr.LRH.size)
        icrc_at = len(frame) - glue.VCRC_SIZE - glue.ICRC_SIZE
        bth = self.transport()
        if bth is not None and bth.icrc is None and self.lnh in (LNH_LOCAL, LNH_GLOBAL):
            value = glue.icrc_value(crc_frame, "infiniband")
            if value is not None:
                wire = value.to_bytes(glue.ICRC_SIZE, "little")
                frame[icrc_at:icrc_at + glue.ICRC_SIZE] = wire
                crc_frame[icrc_at:icrc_at + glue.ICRC_SIZE] = wire
        vcrc = self.vcrc if self.vcrc is not None else glue.vcrc_value(crc_frame)
        if vcrc is not None:
            frame[-glue.VCRC_SIZE:] = (vcrc & 0xFFFF).to_bytes(glue.VCRC_SIZE, "little")
        return bytes(frame)

    def transport_size(self) -> int | None:
        return (self.pktlen or 0) * 4 - hdr.LRH.size

    def crc_start(self) -> tuple[Packet, str]:
        return self, "infiniband"

    def crc_verdict(self) -> CrcVerdict | None:
        """ICRC and VCRC verdict of the frame built from this LRH (None: cannot be checked)."""
        return glue.verify(self, "infiniband")

    @property
    def vcrc_ok(self) -> bool | None:
        verdict = self.crc_verdict()
        return None if verdict is None else verdict.vcrc_ok

    def mysummary(self) -> str:
        return self.sprintf("LRH %LRH.slid% > %LRH.dlid% %LRH.lnh%")


class GRH(LinkHeader):
    """Global Route Header: after an LRH with LNH 3, or after Ethernet type 0x8915 (RoCEv1)."""

    name = "GRH"
    header = hdr.GRH
    fields_desc = fields_of(hdr.GRH, defaults={"ipver": 6, "nxthdr": GRH_NXTHDR, "hoplmt": DEFAULTS["grh.hoplmt"],
                                               "paylen": None},
                            hexa={"tclass", "flowlabel", "nxthdr"})

    def extract_padding(self, s: bytes) -> tuple[bytes, bytes | None]:
        if isinstance(self.underlayer, LRH) or self.paylen is None:
            return s, None  # under an LRH, PktLen places the ICRC (as ibwire.parse does)
        return s[:self.paylen], s[self.paylen:]

    def post_build(self, p: bytes, pay: bytes) -> bytes:
        frame = bytearray(p + pay)
        if self.paylen is None:
            patch(frame, hdr.GRH, "paylen", len(pay))
        bth = self.payload
        if (isinstance(bth, BTH) and bth.icrc is None and not no_trailer(bth)
                and not isinstance(self.underlayer, LRH)):
            crc_frame = bytearray(frame)
            patch(crc_frame, hdr.GRH, "paylen", len(pay))
            value = glue.icrc_value(crc_frame, "grh")
            if value is not None:
                frame[-glue.ICRC_SIZE:] = value.to_bytes(glue.ICRC_SIZE, "little")
        return bytes(frame)

    def transport_size(self) -> int | None:
        lrh = self.underlayer
        if isinstance(lrh, LRH):
            return lrh.transport_size() - hdr.GRH.size
        return self.paylen

    def crc_start(self) -> tuple[Packet, str]:
        lrh = self.underlayer
        return (lrh, "infiniband") if isinstance(lrh, LRH) else (self, "grh")

    def mysummary(self) -> str:
        return self.sprintf("GRH %GRH.sgid% > %GRH.dgid%")
