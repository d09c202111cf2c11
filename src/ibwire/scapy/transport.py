"""The transport layers: BTH (with its pad and ICRC trailers), the extended transport
headers, and the management headers MAD and RMPP.

Which header follows the BTH is read from specs/opcodes.tsv (:data:`CHAINS`), never from a
hand-written list: the BTH and each extended header ask :func:`next_in_chain`. A UD packet to
or from QP0/QP1 carries a MAD after its ETHs, and an RMPP header follows the MAD when
specs/mad_classes.tsv says the class has one (the rule of :func:`ibwire.parse`).

The ICRC is the ibwire convention: the CRC value, on the wire least-significant byte first
(scapy.contrib.roce's ``BTH.icrc`` shows the wire bytes read big-endian instead).
"""

from __future__ import annotations

from scapy.config import conf
from scapy.error import warning
from scapy.layers.inet import IP, UDP
from scapy.layers.inet6 import IPv6
from scapy.packet import Packet

from ibwire import headers as hdr
from ibwire.crc import CrcVerdict
from ibwire.headers.aeth import decode_syndrome
from ibwire.headers.mad import carries_mad
from ibwire.scapy import crc as glue
from ibwire.scapy.base import IBHeader, LinkHeader, mark_no_trailer, no_trailer
from ibwire.scapy.enums import AETH_SYNDROMES, MAD_CLASSES, MAD_METHODS, OPCODES
from ibwire.scapy.fields import CrcField, PadField, fields_of, patch
from ibwire.tables import constants, mad_classes, opcodes

_C = constants()


class BTH(IBHeader):
    """Base Transport Header, with the pad and ICRC trailers of the transport packet.

    At build, None means computed: ``padcnt`` from the payload length, ``pad`` as PadCnt
    zero bytes, ``icrc`` over the whole frame. At dissection the pad and ICRC are taken off
    the end; ``icrc_ok`` and :meth:`crc_verdict` check them against the frame.
    """

    name = "BTH"
    header = hdr.BTH
    fields_desc = [
        *fields_of(hdr.BTH, defaults={"p_key": _C["DEFAULT_PKEY"], "padcnt": None},
                   enums={"opcode": OPCODES}, hexa={"p_key"}),
        PadField("pad"),
        CrcField("icrc", glue.ICRC_SIZE, lambda pkt: pkt.icrc_ok),
    ]

    def _expected_size(self) -> int | None:
        """Bytes from the BTH to the end of the ICRC, as the length fields below say."""
        under = self.underlayer
        if isinstance(under, UDP):
            length = under.fields.get("len")
            return None if length is None else length - glue.UDP_SIZE
        if isinstance(under, LinkHeader):
            return under.transport_size()
        return None

    def post_dissect(self, s: bytes) -> bytes:
        self.raw_packet_cache = None  # the pad and ICRC are written by post_build
        fields = self.fields  # all dissected: read them without scapy's attribute lookup
        expected = self._expected_size()
        if len(s) < glue.ICRC_SIZE or (expected is not None
                                       and len(s) + self.header.size < expected):
            mark_no_trailer(self)
            return s
        fields["icrc"] = int.from_bytes(s[-glue.ICRC_SIZE:], "little")
        body = s[:-glue.ICRC_SIZE]
        room = CHAIN_SIZES.get(fields["opcode"])
        if room is None:
            return body  # reserved or vendor opcode: no pad rule, as ibwire.parse
        padcnt = fields["padcnt"]
        if padcnt > len(body) - room:
            fields["pad"] = b""  # malformed PadCnt: keep the bytes in the payload
            return body
        if padcnt:
            pad = body[-padcnt:]
            if any(pad):
                fields["pad"] = pad
            body = body[:-padcnt]
        return body

    def post_build(self, p: bytes, pay: bytes) -> bytes:
        if no_trailer(self):
            return p + pay
        values = {**self.default_fields, **self.overloaded_fields, **self.fields}
        frame = bytearray(p)
        for name, value in mad_carrier(self, ("opcode", "destqp")).items():
            patch(frame, hdr.BTH, name, value)
            values[name] = value
        known = values["opcode"] in CHAINS
        padcnt = values["padcnt"]
        if padcnt is None:
            padcnt = -len(pay) % 4 if known else 0
            patch(frame, hdr.BTH, "padcnt", padcnt)
        pad = values["pad"]
        frame += pay
        frame += pad if pad is not None else bytes(padcnt if known else 0)
        icrc = values["icrc"]
        if icrc is not None:
            frame += (icrc & 0xFFFFFFFF).to_bytes(glue.ICRC_SIZE, "little")
            return bytes(frame)
        frame += bytes(glue.ICRC_SIZE)
        under = self.underlayer
        if isinstance(under, UDP):
            crc = glue.roce_v2_icrc(under, frame)
            if crc is not None:
                frame[-glue.ICRC_SIZE:] = crc.to_bytes(glue.ICRC_SIZE, "little")
        elif not isinstance(under, LinkHeader):  # LRH, GRH: over the whole frame
            warning("ibwire: BTH without UDP, GRH or LRH below: ICRC left as zeros")
        return bytes(frame)

    def guess_payload_class(self, payload: bytes) -> type[Packet]:
        if self.getfieldval("opcode") not in CHAINS:
            return super().guess_payload_class(payload)  # bind_layers() for vendor opcodes
        return next_in_chain(self, 0, payload)

    def crc_verdict(self) -> CrcVerdict | None:
        """The CRC verdict of the frame this BTH is in (None: no IP, GRH or LRH start below)."""
        start = link_start(self)
        return None if start is None else glue.verify(*start)

    @property
    def icrc_ok(self) -> bool | None:
        verdict = self.crc_verdict()
        return None if verdict is None else verdict.icrc_ok

    def mysummary(self) -> str:
        return self.sprintf("BTH %BTH.opcode% qp=%BTH.destqp% psn=%BTH.psn%")


def mad_carrier(layer: Packet, names: tuple[str, ...]) -> dict[str, int]:
    """For the fields ``names`` of ``layer`` (a BTH or DETH) that were left to their
    defaults: the values a MAD above it needs (:func:`ibwire.mads.carrier` of the class the
    MAD's layers say); nothing when no MAD is above or every field was given."""
    unset = [n for n in names if n not in layer.fields and n not in layer.overloaded_fields]
    if not unset:
        return {}
    mad = layer.getlayer(MAD)
    if mad is None:
        return {}
    from ibwire.mads import carrier
    from ibwire.scapy.attributes import mad_values

    prefix = f"{layer.name.lower()}."
    found = carrier(mad_values(mad)["mgmtclass"])
    return {n: found[prefix + n] for n in unset}


def link_start(bth: BTH) -> tuple[Packet, str] | None:
    """The layer a CRC check of ``bth``'s frame starts at, and its ``ibwire.crc`` link name."""
    under = bth.underlayer
    if isinstance(under, UDP):
        ip = under.underlayer
        return (ip, "ip") if isinstance(ip, (IP, IPv6)) else None
    if isinstance(under, LinkHeader):
        return under.crc_start()
    return None


class ExtendedHeader(IBHeader):
    """An extended transport header: what follows it is read from the opcode's chain."""

    def guess_payload_class(self, payload: bytes) -> type[Packet]:
        index, layer = 1, self.underlayer
        while layer is not None and not isinstance(layer, BTH):
            index, layer = index + 1, layer.underlayer
        if layer is None:
            return conf.raw_layer
        return next_in_chain(layer, index, payload, self)


class RDETH(ExtendedHeader):
    name = "RDETH"
    header = hdr.RDETH
    fields_desc = fields_of(hdr.RDETH)


class DETH(ExtendedHeader):
    """Datagram ETH. Under a MAD, a Q_Key and source QPN left to their defaults are the MAD's
    (QP1 and the GSI Q_Key, QP0 and 0 for SMPs), as the BTH's opcode and destination QP."""

    name = "DETH"
    header = hdr.DETH
    fields_desc = fields_of(hdr.DETH, hexa={"q_key"})

    def post_build(self, p: bytes, pay: bytes) -> bytes:
        found = mad_carrier(self, ("q_key", "srcqp"))
        if found:
            frame = bytearray(p)
            for name, value in found.items():
                patch(frame, hdr.DETH, name, value)
            p = bytes(frame)
        return p + pay


class XRCETH(ExtendedHeader):
    name = "XRCETH"
    header = hdr.XRCETH
    fields_desc = fields_of(hdr.XRCETH)


class RETH(ExtendedHeader):
    name = "RETH"
    header = hdr.RETH
    fields_desc = fields_of(hdr.RETH, hexa={"va", "r_key"})


class AtomicETH(ExtendedHeader):
    name = "AtomicETH"
    header = hdr.ATOMIC_ETH
    fields_desc = fields_of(hdr.ATOMIC_ETH, hexa={"va", "r_key", "swapdt", "cmpdt"})


class AtomicAckETH(ExtendedHeader):
    name = "AtomicAckETH"
    header = hdr.ATOMIC_ACK_ETH
    fields_desc = fields_of(hdr.ATOMIC_ACK_ETH, hexa={"origremdt"})


class AETH(ExtendedHeader):
    """ACK Extended Transport Header; ``syndrome`` takes names such as ``NAK_INVALID_REQUEST``."""

    name = "AETH"
    header = hdr.AETH
    fields_desc = fields_of(hdr.AETH, enums={"syndrome": AETH_SYNDROMES}, hexa={"syndrome"})

    @property
    def syndrome_type(self) -> str:
        """ACK, RNR_NAK, RESERVED or NAK."""
        return decode_syndrome(self.syndrome)["aeth.syndrome.type"]

    @property
    def syndrome_value(self) -> int:
        """The low 5 bits: credit count (ACK), timer (RNR NAK) or NAK code."""
        return self.syndrome & 0x1F


class ImmDt(ExtendedHeader):
    name = "ImmDt"
    header = hdr.IMM_DT
    fields_desc = fields_of(hdr.IMM_DT, hexa={"immdt"})


class IETH(ExtendedHeader):
    name = "IETH"
    header = hdr.IETH
    fields_desc = fields_of(hdr.IETH, hexa={"ieth"})


class FETH(ExtendedHeader):
    name = "FETH"
    header = hdr.FETH
    fields_desc = fields_of(hdr.FETH)


class CNPPadding(ExtendedHeader):
    """The 16 reserved bytes of a RoCEv2 CNP (opcode 0x81)."""

    name = "CNPPadding"
    header = hdr.CNP_PAD
    fields_desc = fields_of(hdr.CNP_PAD)


class MAD(IBHeader):
    """Common MAD header (UD SEND to or from QP0/QP1); RMPP follows for RMPP classes, then
    the body's layers (:mod:`ibwire.scapy.attributes`). MgmtClass, ClassVersion, Method and
    AttributeID left None are filled at build from the body's layers above (0 without any).
    """

    name = "MAD"
    header = hdr.MAD
    fields_desc = fields_of(hdr.MAD, defaults={"baseversion": 1, "mgmtclass": None,
                                               "classversion": None, "method": None,
                                               "attributeid": None},
                            enums={"mgmtclass": MAD_CLASSES, "method": MAD_METHODS},
                            hexa={"mgmtclass", "method", "status", "classspecific",
                                  "transactionid", "attributeid", "attributemodifier"})

    def post_build(self, p: bytes, pay: bytes) -> bytes:
        from ibwire.scapy.attributes import COMPUTED, computed

        if len(p) < hdr.MAD.size:
            return p + pay
        unset = [name for name in COMPUTED if self.getfieldval(name) is None]
        if unset:
            found = computed(self)
            frame = bytearray(p)
            for name in unset:
                patch(frame, hdr.MAD, name, found[name])
            p = bytes(frame)
        return p + pay

    def guess_payload_class(self, payload: bytes) -> type[Packet]:
        from ibwire.scapy.attributes import first_layer

        klass = mad_classes().get(self.mgmtclass)
        if klass is not None and klass[1]:
            return RMPP if len(payload) >= RMPP.header.size else conf.raw_layer
        return first_layer(self, None, payload) or conf.raw_layer


class RMPP(IBHeader):
    name = "RMPP"
    header = hdr.RMPP
    fields_desc = fields_of(hdr.RMPP, hexa={"rmppflags"})

    def guess_payload_class(self, payload: bytes) -> type[Packet]:
        from ibwire.scapy.attributes import first_layer

        mad = self.underlayer
        if not isinstance(mad, MAD):
            return conf.raw_layer
        return first_layer(mad, self, payload) or conf.raw_layer


#: Extended header layers by the names specs/opcodes.tsv uses.
EXTENDED_LAYERS: dict[str, type[ExtendedHeader]] = {
    layer.header.title: layer
    for layer in (RDETH, DETH, XRCETH, RETH, AtomicETH, AtomicAckETH, AETH, ImmDt, IETH, FETH,
                  CNPPadding)
}
_missing = {name for op in opcodes().values() for name in op.headers} - EXTENDED_LAYERS.keys()
if _missing:
    raise ImportError(f"ibwire.scapy has no layer for extended header(s) {sorted(_missing)}")
#: Opcode -> its extended header layers, in wire order (specs/opcodes.tsv).
CHAINS: dict[int, tuple[type[ExtendedHeader], ...]] = {
    value: tuple(EXTENDED_LAYERS[name] for name in op.headers) for value, op in opcodes().items()
}
#: Opcode -> bytes of its extended headers.
CHAIN_SIZES: dict[int, int] = {value: sum(layer.header.size for layer in chain)
                               for value, chain in CHAINS.items()}
_UD_OPCODES = frozenset(value for value, op in opcodes().items() if op.transport == "UD")


def next_in_chain(bth: BTH, index: int, payload: bytes, last: Packet | None = None
                  ) -> type[Packet]:
    """The layer after the first ``index`` extended headers of ``bth``'s opcode (``last``:
    the last of them, whose DETH says the source QP)."""
    opcode = bth.getfieldval("opcode")
    chain = CHAINS.get(opcode)
    if chain is None:
        return conf.raw_layer
    if index < len(chain):
        layer = chain[index]
        return layer if len(payload) >= layer.header.size else conf.raw_layer
    srcqp = None
    while last is not None and last is not bth:
        if last.header is hdr.DETH:
            srcqp = last.getfieldval("srcqp")
            break
        last = last.underlayer
    if (carries_mad("UD" if opcode in _UD_OPCODES else "", bth.getfieldval("destqp"), srcqp)
            and len(payload) >= MAD.header.size):
        return MAD
    return conf.raw_layer
