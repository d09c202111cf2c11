"""tshark 4.0.17's known mistakes on IB/RoCE frames, each modelled (``DIVERGENCES``): where
one applies, the expected view is rewritten into tshark's wrong output, so a fixed tshark
shows up as a difference naming the entry to drop. ``TABLES`` joins them to the field mapping.

The reasons cite Wireshark's epan/dissectors/packet-infiniband.c (4.0.17) and the
measurements behind each entry.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from types import MappingProxyType
from typing import Any

from ibwire.fuzz.wireshark.attribute_divergences import DIVERGENCES as ATTRIBUTE_DIVERGENCES
from ibwire.fuzz.wireshark.compare import (
    DISSECTED_BY,
    MALFORMED,
    Divergence,
    Expected,
    NotModelled,
    Tables,
    View,
)
from ibwire.fuzz.wireshark.dissection import Dissection
from ibwire.fuzz.wireshark.fields import (
    CONDITIONAL_EXPERTS,
    EXPERTS,
    FIELDS,
    NOT_COMPARED,
    PAYLOAD_DISSECTORS,
    REFERENCE_DOC,
    fate,
    payload_dissector,
    send_reassembly,
    tshark_payload,
)
from ibwire.fuzz.wireshark.mad_fields import DIVERGENCES as MAD_DIVERGENCES
from ibwire.headers import EXTENDED
from ibwire.headers.aeth import decode_syndrome
from ibwire.packet import HeaderValue


def _transport_keys(expected: Expected) -> list[str]:
    """Expected-view keys of the transport packet (BTH on)."""
    return [k for k in expected
            if (k.startswith(("infiniband", "data/")) and not k.startswith(
                ("infiniband/infiniband.lrh", "infiniband.lrh/", "infiniband/infiniband.grh",
                 "infiniband.grh/")))]


def _drop(expected: Expected, *prefixes: str) -> None:
    for k in expected:
        if k.startswith(prefixes):
            expected[k] = []


PAYLOAD_KEYS = ("data/", "infiniband/infiniband.payload", "infiniband.payload/")
CRC_KEYS = ("infiniband/infiniband.invariant.crc", "infiniband/infiniband.variant.crc")


def tshark_layout(view: View, expected: Expected, *, bth: int, chain: Sequence[str],
                  payload: bool, skip: int = 0) -> None:
    """Rewrite the transport part of ``expected`` as dissect_infiniband_common() lays the
    bytes out: a BTH of ``bth`` bytes, the ``chain`` of extended headers (names of
    specs/headers.tsv), ``skip`` bytes passed over unseen (DCCETH), then -- if ``payload`` --
    parse_PAYLOAD(): 'Invalid Packet Length' (nothing shown) when the length left from the
    LRH/IP length does not fit the frame, else everything up to the CRCs is the payload (pad
    included). A header running past the frame raises (malformed, nothing more shown). The
    CRCs are shown when exactly 6 (ICRC+VCRC), 4 or 2 bytes are left."""
    p = view.packet
    frame, start, end = p.frame, view.transport_start, view.transport_end
    native = p.vcrc_offset is not None
    crclen = 6 if native else 4
    if native:
        length = view.fields["lrh.pktlen"] * 4 - 8 - (40 if "grh" in view else 0)
    else:
        length = end - start
    length -= bth
    headers = [h for h in p.headers if h.offset < start]
    headers.append(replace(p.header("bth"), length=bth))
    derived: dict[str, Any] = {}
    cursor, malformed = start + bth, False
    for name in chain:
        header = EXTENDED[name]
        if cursor + header.size > end:
            malformed = True
            break
        values = header.parse(frame, cursor)
        headers.append(HeaderValue(header.name, cursor, header.size, MappingProxyType(values)))
        if header.name == "aeth":
            derived.update(decode_syndrome(values["syndrome"]))
        if header.name == "deth" and values["srcqp"] in (0, 1):
            raise NotModelled("tshark_layout: a shifted DETH from QP0/1 (MAD): not modelled")
        cursor += header.size
        length -= header.size
    cursor += skip
    length = (length - skip) & 0xFFFF  # guint16 packetLength
    body, icrc, vcrc = b"", None, None
    if not malformed:
        if payload and cursor + length <= end:
            body = frame[cursor:max(cursor, end - crclen)]
            cursor = end - crclen
        left = end - cursor
        if left in (6, 4):
            icrc = frame[cursor:cursor + 4]
        if left in (6, 2):
            vcrc = frame[end - 2:end]
    model = replace(p, headers=tuple(headers), payload=body, pad=b"", icrc=icrc, vcrc=vcrc,
                    unknown=None, derived=MappingProxyType(derived))
    mirror = View(model)
    mirror.memo["fate"] = "data" if body else "none"
    if body and len(body) >= 4 and body[2:4] == b"\0\0":
        raise NotModelled("tshark_layout: payload may look EtherType-encapsulated")
    for k in _transport_keys(expected):
        expected[k] = FIELDS[k].get(mirror) if k in FIELDS else []
    expected[MALFORMED] = ["malformed"] if malformed else []


def as_vendor(view: View, expected: Expected, bth: int = 12) -> None:
    """parse_VENDOR(): after the BTH (of ``bth`` bytes), everything up to the end of the
    frame (ICRC and VCRC included) is 'Vendor Specific or Unknown' data."""
    start, end = view.transport_start + bth, view.transport_end
    for k in _transport_keys(expected):
        if not k.startswith("infiniband.bth/"):
            expected[k] = []
    frame = view.packet.frame
    expected["infiniband/infiniband.bth"] = [frame[start - bth:start]]
    expected[DISSECTED_BY] = []  # vendor data goes to no payload dissector
    if start > end:
        raise NotModelled("a 20-byte BTH past the end of the packet: not modelled")
    if start == end:  # measured: no bytes left for the vendor item: malformed
        expected[MALFORMED] = ["malformed"]
        return
    expected["infiniband/infiniband.vendor"] = [frame[start:start + 4]]
    expected["infiniband.vendor/infiniband.vendor"] = [frame[start:end]]


def _op(view: View) -> str:
    op = view.packet.opcode
    return "" if op is None else op.name


def _model_unknown(view: View, expected: Expected) -> None:
    as_vendor(view, expected, bth=20 if (view.opcode or 0) >> 5 == 2 else 12)


def _model_rd(view: View, expected: Expected) -> None:
    op = view.packet.opcode
    assert op is not None
    if op.name == "RD_ACKNOWLEDGE":  # RDETH_AETH: the AETH is parsed, the RDETH is not
        tshark_layout(view, expected, bth=20, chain=["AETH"], payload=False)
    elif op.name == "RD_RESYNC":  # dctConnect (SE bit clear): DCCETH skipped, else payload
        dct_connect = view.fields["bth.se"] == 0
        tshark_layout(view, expected, bth=20, chain=[], payload=True,
                      skip=16 if dct_connect else 0)
    else:
        tshark_layout(view, expected, bth=20, chain=op.headers,
                      payload=op.payload or op.name.endswith("READ_REQUEST"))


def _model_pad(view: View, expected: Expected) -> None:
    for key_ in ("data/data.data", "infiniband/infiniband.payload"):
        if expected[key_]:
            expected[key_] = [expected[key_][0] + view.packet.pad]
    if expected["data/data.len"]:
        expected["data/data.len"] = [expected["data/data.len"][0] + len(view.packet.pad)]


def _model_raise(view: View, expected: Expected) -> None:
    """A payload dissector raised: tshark stops, the frame is malformed, no CRC shown."""
    _drop(expected, *PAYLOAD_KEYS, *CRC_KEYS)
    expected[MALFORMED] = ["malformed"]


def _model_swallow(view: View, expected: Expected) -> None:
    _drop(expected, *PAYLOAD_KEYS)


def _model_reassembly(view: View, expected: Expected) -> None:
    _drop(expected, *PAYLOAD_KEYS)
    expected[DISSECTED_BY] = ["rpcordma.fragments"]


def _check_reassembly(view: View, dissection: Dissection) -> str | None:
    parts = [*(send_reassembly(view) or []), view]
    message = b"".join(tshark_payload(part) for part in parts)
    shown = dissection.inner.get("inner:rpcordma.fragments/rpcordma.reassembled.data", [""])
    count = dissection.inner.get("inner:rpcordma.fragments/rpcordma.fragment.count", [""])
    if shown[0].replace(":", "") != message.hex() or count[0] != str(len(parts)):
        return (f"reassembled {count[0]} fragments, {len(shown[0]) // 3 + 1} bytes; ibwire: "
                f"{len(parts)} fragments, {len(message)} bytes")
    return None


def _model_eoib(view: View, expected: Expected) -> None:
    _drop(expected, *PAYLOAD_KEYS)
    expected[DISSECTED_BY] = ["infiniband.eoib"]
    if fate(view) == "eoib-short":  # measured: the Ethernet dissector after it raises
        _drop(expected, *CRC_KEYS)
        expected[MALFORMED] = ["malformed"]


def _model_ethertype_short(view: View, expected: Expected) -> None:
    body = expected["infiniband/infiniband.payload"][0]
    if len(body) < 6:
        raise NotModelled("EtherType-encapsulated payload under 6 bytes: not modelled")
    expected["infiniband/infiniband.payload"] = [body[:-6]]


def _rmpp_byte(view: View) -> int:
    return view.fields["rmpp.rresptime"] << 3 | view.fields["rmpp.rmppflags"]


def _model_rmpp_split(view: View, expected: Expected) -> None:
    byte = _rmpp_byte(view)
    expected["infiniband.rmpp/infiniband.rmpp.rresptime"] = [byte >> 4]
    expected["infiniband.rmpp/infiniband.rmpp.rmppflags"] = [byte & 0x0F]


def _mad_class(view: View) -> int | None:
    return view.fields.get("mad.mgmtclass")


def _raw_mad_class(klass: int | None) -> bool:
    """Vendor (0x09-0x0F, 0x30-0x4F) and application (0x10-0x2F) classes, as tshark 4.0.17's
    parse_PAYLOAD ranges them."""
    return klass is not None and (0x09 <= klass <= 0x4F)


def _reserved_mad_class(klass: int | None) -> bool:
    return klass is not None and (klass in (0x00, 0x02) or 0x50 <= klass <= 0x80
                                  or klass >= 0x82)


def _model_raw_mad(view: View, expected: Expected) -> None:
    _drop(expected, "infiniband/infiniband.rmpp", "infiniband.rmpp/", *CRC_KEYS)


def _model_reserved_mad(view: View, expected: Expected) -> None:
    _drop(expected, "infiniband/infiniband.rmpp", "infiniband.rmpp/", *CRC_KEYS)
    expected[MALFORMED] = ["malformed"]


def _model_raw_vcrc(view: View, expected: Expected) -> None:
    expected["infiniband/infiniband.variant.crc"] *= 2


TSHARK_UNKNOWN = frozenset({0x1C, 0x1D, 0x5C, 0x81, *range(0xA0, 0xB8)})
"""Opcodes of specs/opcodes.tsv that tshark 4.0.17 has no header sequence for."""


def _normal_layout(view: View) -> bool:
    """tshark lays out the headers as ibwire does (not RD, not an opcode it lacks)."""
    return view.opcode not in TSHARK_UNKNOWN and not _op(view).startswith("RD_") \
        and view.packet.unknown is None


#: tshark's known mistakes, applied in this order where they apply (``applies`` reads only
#: ibwire's dissection). Each model rewrites the expected view into tshark's wrong output.
DIVERGENCES: tuple[Divergence, ...] = (
    Divergence(
        "CNP as unknown",
        f"{REFERENCE_DOC} 'CNP (0x81)': tshark's name table has CNP at 0x80, so 0x81 is "
        "'Unknown (129)' and the 16 pad bytes and the ICRC end up in infiniband.vendor",
        lambda v: v.opcode == 0x81, _model_unknown),
    Divergence(
        "XRC, FLUSH, ATOMIC WRITE as unknown",
        f"{REFERENCE_DOC} 'XRC 0xA4, FLUSH 0x1C, ATOMIC WRITE 0x1D': no header sequence "
        "(XRCETH is never parsed; FETH, FLUSH, ATOMIC WRITE exist only in 4.7-dev): "
        "everything after the BTH goes to infiniband.vendor, no ICRC shown. Also RD_FLUSH "
        "(0x5C), which tshark has no entry for either (and whose BTH it takes for 20 bytes, "
        "see 'RD as DC')",
        lambda v: v.opcode in TSHARK_UNKNOWN and v.opcode != 0x81, _model_unknown),
    Divergence(
        "unknown opcode: CRCs in vendor data",
        f"{REFERENCE_DOC} section 1 (parse_VENDOR): for a reserved or manufacturer opcode "
        "tshark shows all bytes after the BTH as vendor data, ICRC (and VCRC) included, and "
        "no CRC field; ibwire keeps them apart (its payload, and icrc/vcrc)",
        lambda v: v.packet.unknown is not None and "bth" in v, _model_unknown),
    Divergence(
        "RD as DC",
        f"{REFERENCE_DOC} 'RD SEND_ONLY (0x44)' and 'RD ACK': every RD opcode is taken for "
        "Mellanox DCT ((opCode >> 5) == 0x2: bthSize += 8), so the BTH item is 20 bytes and "
        "RDETH/DETH/... are read 8 bytes late; RD ACK parses its AETH but not its RDETH; "
        "headers that then run past the frame raise (malformed). RD_RESYNC (0x55) is taken "
        "for DC Connect: with SE clear 16 bytes (DCCETH) are skipped and the length check "
        "fails ('Invalid Packet Length', no payload, no ICRC), with SE set the bytes after "
        "the 20-byte BTH are payload",
        lambda v: _op(v).startswith("RD_") and v.opcode not in TSHARK_UNKNOWN, _model_rd),
    Divergence(
        "pad in payload",
        f"{REFERENCE_DOC} 'PadCnt=2' (measured: every PadCnt, raw data and IPoIB alike): "
        "parse_PAYLOAD() hands everything up to the CRCs to the payload dissectors, so the "
        "pad bytes stay in the payload; ibwire's payload excludes the PadCnt bytes",
        lambda v: bool(v.packet.pad) and _normal_layout(v)
        and fate(v) in ("data", "ethertype"), _model_pad),
    Divergence(
        "RPCoRDMA reads 16 bytes",
        f"{REFERENCE_DOC} 'SEND_ONLY(_INVAL) with payload < 16 B' (measured: also "
        "SEND_LAST(_INVAL), and payload+pad < 16 B, empty included): packet_is_rpcordma() "
        "reads the message type at offset 12 before its length check; the exception makes "
        "the frame '[Malformed Packet: RPCoRDMA]' and the ICRC is not shown",
        lambda v: _normal_layout(v) and fate(v) == "rpcordma-raise", _model_raise),
    Divergence(
        "RPCoRDMA swallows",
        "NEW (measured, packet-rpcrdma.c): an RC SEND_ONLY/LAST(_INVAL) payload whose bytes "
        "12-15 are 1, 3 or 4 (RDMA_NOMSG/DONE/ERROR), or 0/2 (RDMA_MSG/MSGP) with empty "
        "chunk lists and a repeated XID, is claimed by the RPC-over-RDMA heuristic; with a "
        "version other than 1 dissect_rpcrdma() adds nothing, so tshark shows no payload at "
        "all (e.g. rping's all-zero 56-byte SENDs in linlinw5 rdma_cm.pcap)",
        lambda v: _normal_layout(v) and fate(v) == "rpcordma-swallow", _model_swallow),
    Divergence(
        "RPCoRDMA send reassembly",
        "NEW (measured, packet-rpcrdma.c add_send_fragment): tshark 4.0 reassembles every RC "
        "SEND_FIRST..SEND_LAST message as an RPC-over-RDMA message, even when it is not one; "
        "the SEND_LAST frame shows the reassembled message (rpcordma.fragments and the whole "
        "message as data) instead of its own payload. Checked: the reassembled bytes are the "
        "payloads and pads of the SEND_FIRST..LAST frames",
        lambda v: _normal_layout(v) and fate(v) == "rpcordma-reassembly", _model_reassembly,
        _check_reassembly),
    Divergence(
        "EoIB guess",
        "NEW (measured, dissect_mellanox_eoib): any UD payload whose first byte is "
        "0xC0-0xCF is taken for a Mellanox EoIB encapsulation header (a 4-bit signature); "
        "the payload is shown as EoIB and Ethernet, not as raw data; a first segment (MS "
        "and segment offset 0) under 18 bytes (pad included) makes the Ethernet dissector "
        "raise: malformed, no ICRC",
        lambda v: _normal_layout(v) and fate(v) in ("eoib", "eoib-short"), _model_eoib),
    Divergence(
        "EoIB reads an empty payload",
        "NEW (measured, dissect_mellanox_eoib): the heuristic reads the first payload byte "
        "before checking the length; a UD SEND with no payload raises: malformed, no ICRC",
        lambda v: _normal_layout(v) and fate(v) == "eoib-raise", _model_raise),
    Divergence(
        "EtherType payload 6 bytes short",
        "NEW (measured, dissect_eth_over_ib): the 'IBA Payload - appears to be EtherType "
        "encapsulated' item (infiniband.payload) is tvb_reported_length - 6 bytes long, "
        "although parse_PAYLOAD() already took the CRCs off: the item misses the last 6 "
        "payload bytes (every IPoIB frame of the ERF capture)",
        lambda v: _normal_layout(v) and fate(v) == "ethertype", _model_ethertype_short),
    Divergence(
        "RMPP RRespTime/RMPPFlags split",
        "NEW (tshark -G fields: rresptime mask 0xf0, rmppflags mask 0x0f): IBA 13.6.2.1 and "
        "Linux ib_mad.h (ib_get_rmpp_resptime: >> 3, flags & 0x7) have a 5-bit RRespTime "
        "and 3-bit RMPPFlags; tshark splits the byte 4/4",
        lambda v: "rmpp" in v and not _raw_mad_class(_mad_class(v)) and _rmpp_byte(v) >= 8,
        _model_rmpp_split),
    Divergence(
        "vendor/application MAD: no ICRC",
        "NEW (measured): for MAD classes 0x09-0x4F tshark 4.0.17 shows the common MAD header "
        "and a blob (parse_VENDOR_MANAGEMENT / parse_APPLICATION_MANAGEMENT) but does not "
        "move its offset past the MAD, so the ICRC (and VCRC) is not shown; it also treats "
        "0x10-0x2F as one 'application' range, so BIS (0x12) gets no RMPP header, which "
        "Linux ib_is_mad_class_rmpp() and ibwire give it",
        lambda v: "mad" in v and _raw_mad_class(_mad_class(v)), _model_raw_mad),
    Divergence(
        "reserved MAD class: malformed",
        "NEW (measured, parse_RESERVED_MANAGEMENT): a MAD of a reserved class (0x00, 0x02, "
        "0x50-0x80, 0x82-0xFF) raises: malformed, no ICRC",
        lambda v: "mad" in v and _reserved_mad_class(_mad_class(v)), _model_reserved_mad),
)

DIVERGENCES += (
    Divergence(
        "raw packet: VCRC twice",
        f"{REFERENCE_DOC} 'Raw (LNH=0): VCRC added twice': parse_RWH() shows the VCRC, and "
        "dissect_infiniband_common() shows it again since 2 bytes are left",
        lambda v: v.packet.encapsulation == "ib_raw" and v.fields["lrh.lnh"] == 0,
        _model_raw_vcrc),
)

DIVERGENCES += MAD_DIVERGENCES + ATTRIBUTE_DIVERGENCES

TABLES = Tables(FIELDS, NOT_COMPARED, EXPERTS, PAYLOAD_DISSECTORS, DIVERGENCES,
                payload_dissector, CONDITIONAL_EXPERTS)

