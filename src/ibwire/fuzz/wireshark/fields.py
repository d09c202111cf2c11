"""The tshark field mapping: every field tshark 4.0.17 shows for an IB/RoCE frame, as
ibwire gives its value (``FIELDS``), what is not compared and why (``NOT_COMPARED``), the
expert items and payload dissectors that are not disagreements.

Keys are qualified tshark keys ``"<parent>/<field>"`` (see :mod:`.dissection`). Used by the
differential test against tshark and by ``ibwire fuzz --target wireshark``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from ibwire.fuzz.wireshark.attribute_fields import attribute_fields
from ibwire.fuzz.wireshark.compare import (
    Field,
    NotModelled,
    View,
    byte_of,
    computed,
    header_bytes,
    key,
    swapped,
    tags,
)
from ibwire.fuzz.wireshark.mad_fields import cm_fields, notice_trap_259, reserved_field

REFERENCE_DOC = "tshark 4.0.17 (epan/dissectors/packet-infiniband.c), measured:"


def _ip_flags(v: View) -> int | None:
    if "ip" not in v:
        return None
    f = v.fields
    return f["ip.flags.rb"] << 2 | f["ip.flags.df"] << 1 | f["ip.flags.mf"]


def _udp_payload(v: View) -> bytes | None:
    udp = v.packet.header("udp")
    if udp is None:
        return None
    return v.packet.frame[udp.offset + 8:udp.offset + udp["length"]]


def _mad_span(v: View, skip: int) -> bytes | None:
    """The 256-byte MAD (from ``skip`` bytes into it), as far as the ICRC allows."""
    mad = v.packet.header("mad")
    if mad is None or v.packet.icrc_offset is None:
        return None
    end = min(mad.offset + 256, v.packet.icrc_offset)
    return v.packet.frame[mad.offset + skip:end]


def _syndrome(fn: Callable[[int], int | None]) -> Callable[[View], int | None]:
    return lambda v: fn(v.fields["aeth.syndrome"]) if "aeth.syndrome" in v.fields else None


def _vendor_label(v: View) -> bytes | None:
    """tshark's 'Vendor Specific or Unknown Header Sequence' item spans the 4 bytes after the
    BTH (its subtree holds all of them)."""
    if v.packet.unknown is None or "bth" not in v:
        return None
    start = v.transport_start + 12
    return v.packet.frame[start:start + 4]


# -- what tshark does with a payload -------------------------------------------------------
#
# parse_PAYLOAD() offers every non-MAD payload to the heuristic dissectors of the
# infiniband.payload table (tshark -G heuristic-decodes: smc, smb_direct, rpcordma, nvme-rdma,
# lnet, iser, ethertype, infiniband.eoib, infiniband_sdp, fcoib; try_heuristic_first is TRUE),
# then to the raw-data dissector. The subtree tshark gives a payload therefore depends on its
# bytes: ``fate`` reproduces the three heuristics that fire on the frames used here, from
# ibwire's payload and pad (tshark hands both over: see 'pad in payload'). Generated payloads
# stay clear of them (the differential test's generator) except in the frames made to show each one.

RC_SEND_LAST, RC_SEND_ONLY, RC_SEND_LAST_INV, RC_SEND_ONLY_INV = 0x02, 0x04, 0x16, 0x17
RC_SEND_FIRST, RC_SEND_MIDDLE = 0x00, 0x01
#: Opcodes packet-rpcrdma.c (dissect_rpcrdma_ib_heur) checks for an RPC-over-RDMA header.
RPCORDMA_OPCODES = frozenset({RC_SEND_LAST, RC_SEND_ONLY, RC_SEND_LAST_INV, RC_SEND_ONLY_INV})
#: EtherTypes of IPoIB (RFC 4391) and the protocol tshark dissects them with.
ETHERTYPES = {0x0800: "ip", 0x0806: "arp", 0x86DD: "ipv6"}


def tshark_payload(v: View) -> bytes:
    """The bytes tshark hands to payload dissectors: ibwire's payload and pad."""
    return v.packet.payload + v.packet.pad


def _u32(data: bytes, offset: int) -> int:
    return int.from_bytes(data[offset:offset + 4], "big")


def _rpcordma_claims(tp: bytes) -> bool:
    """packet_is_rpcordma() of tshark 4.0.17 for a payload of at least 16 bytes: message type
    (bytes 12-15) NOMSG/DONE/ERROR always; MSG/MSGP when the read list, write list and reply
    chunk (RFC 5666) fit and are followed by the XID again."""
    msg_type = _u32(tp, 12)
    if msg_type in (1, 3, 4):
        return True
    if msg_type not in (0, 2) or len(tp) < (28 if msg_type == 0 else 36):
        return False
    end = _rpcordma_lists_end(tp, 16 if msg_type == 0 else 24)
    return end is not None and end + 4 <= len(tp) and _u32(tp, end) == _u32(tp, 0)


def _rpcordma_lists_end(tp: bytes, offset: int) -> int | None:
    """Where the read list, write list and reply chunk starting at ``offset`` end (None: they
    run past the payload)."""
    def word() -> int | None:
        nonlocal offset
        offset += 4
        return _u32(tp, offset - 4) if offset <= len(tp) else None

    while (follows := word()):  # read list: items of a position and a segment
        offset += 4 + 16
    if follows is None:
        return None
    while (follows := word()):  # write list: items of a segment count and segments
        count = word()
        if count is None:
            return None
        offset += 16 * count
    if follows is None or (follows := word()) is None:  # the optional reply chunk
        return None
    if follows:
        count = word()
        if count is None:
            return None
        offset += 16 * count
    return offset if offset <= len(tp) else None


def send_reassembly(v: View) -> list[View] | None:
    """The RC SEND_FIRST, SEND_MIDDLE... frames a SEND_LAST completes (same flow, consecutive
    PSNs), which tshark's RPC-over-RDMA reassembles; None if there are none."""
    flow = (v.fields.get("ip.src"), v.fields.get("ip.dst"), v.fields["bth.destqp"])
    psn, parts = v.fields["bth.psn"], []
    for earlier in reversed(v.history):
        f = earlier.fields
        if (f.get("ip.src"), f.get("ip.dst"), f.get("bth.destqp")) != flow:
            continue
        if f["bth.psn"] != (psn - 1) % (1 << 24) or f["bth.opcode"] not in (RC_SEND_FIRST,
                                                                         RC_SEND_MIDDLE):
            return None
        parts.insert(0, earlier)
        psn = f["bth.psn"]
        if f["bth.opcode"] == RC_SEND_FIRST:
            return parts
    return None


def fate(v: View) -> str:
    """What tshark's payload dissection does with this frame's payload: 'data' (raw data),
    'ethertype' (EtherType-encapsulated, IPoIB), 'eoib' (Mellanox EoIB), 'rpcordma-raise' /
    'eoib-raise' (the heuristic reads past the payload: exception), 'eoib-short' (EoIB, then
    the Ethernet dissector raises), 'rpcordma-swallow'
    (claimed, nothing shown), 'rpcordma-reassembly' (SEND_LAST completing a message), or
    'none' (tshark dissects no payload here: MADs, unknown opcodes, headers-only opcodes)."""
    if "fate" not in v.memo:
        v.memo["fate"] = _fate(v)
    return v.memo["fate"]


def _fate(v: View) -> str:
    op = v.packet.opcode
    if op is None or "mad" in v or not (op.payload or op.name.endswith("READ_REQUEST")):
        return "none"
    tp = tshark_payload(v)
    if op.value in (RC_SEND_LAST, RC_SEND_LAST_INV) and send_reassembly(v):
        return "rpcordma-reassembly"
    if op.value in RPCORDMA_OPCODES:
        if len(tp) < 16:
            return "rpcordma-raise"
        if _rpcordma_claims(tp):
            if _u32(tp, 4) == 1:
                raise NotModelled("an RPC-over-RDMA version 1 header: not modelled")
            return "rpcordma-swallow"
    if len(tp) >= 4 and tp[2:4] == b"\0\0" and int.from_bytes(tp[:2], "big") in ETHERTYPES:
        return "ethertype"
    if len(tp) >= 4 and tp[2:4] == b"\0\0" and int.from_bytes(tp[:2], "big") >= 0x0600:
        # dissect_eth_over_ib hands it to whatever tshark registers for that EtherType
        raise NotModelled("a payload that looks EtherType-encapsulated (an EtherType other "
                          "than IPv4, ARP, IPv6): not modelled")
    if op.transport == "UD":
        if not tp:
            return "eoib-raise"
        if tp[0] & 0xF0 == 0xC0 and len(tp) >= 4:
            # measured: a first segment (MS and segment offset 0) goes to the Ethernet
            # dissector, which raises under 14 bytes; other segments are raw data
            if tp[1] & 0x3F or len(tp) >= 18 + (4 if tp[1] & 0x40 else 0):
                return "eoib"
            if tp[1] & 0x40:
                raise NotModelled("a short EoIB segment with FCS: not modelled")
            return "eoib-short"
    return "data"


def _payload(v: View) -> bytes | None:
    """ibwire's payload, where tshark should show it as raw data: not for MADs (compared as
    infiniband.mad.data), unknown opcodes (vendor data) and EtherType-encapsulated payloads
    (infiniband.payload); the heuristics' mistakes are divergences."""
    if v.packet.encapsulation == "ib_raw":
        return v.packet.payload[4:] or None  # after the RWH
    return v.packet.payload or None if fate(v) not in ("none", "ethertype") else None


def _payload_len(v: View) -> int | None:
    payload = _payload(v)
    return None if payload is None else len(payload)


def _ethertype_payload(v: View, part: slice) -> bytes | None:
    return v.packet.payload[part] if fate(v) == "ethertype" else None


def payload_dissector(v: View) -> str | None:
    """The protocol tshark rightly hands the payload to (EtherType-encapsulated payloads)."""
    if fate(v) == "ethertype":
        return ETHERTYPES[int.from_bytes(tshark_payload(v)[:2], "big")]  # as fate() read it
    return None


def _raw(v: View, part: slice) -> bytes | None:
    """Bytes of a raw (LNH=0) packet's payload, which starts with the RWH (IBA 8.2.4)."""
    if v.packet.encapsulation != "ib_raw" or v.fields["lrh.lnh"] != 0:
        return None
    return v.packet.payload[part]


def _int_bytes(name: str, size: int) -> Callable[[View], bytes | None]:
    return lambda v: v.fields[name].to_bytes(size, "big") if name in v.fields else None


def _rmpp(name: str, types: Iterable[int]) -> Callable[[View], int | None]:
    """An RMPP data word, which tshark names after the RMPP type (IBA 13.6.2.1)."""
    wanted = frozenset(types)
    return lambda v: v.fields[name] if v.fields.get("rmpp.rmpptype") in wanted else None


def _rmpp_body(types: Iterable[int]) -> Callable[[View], bytes | None]:
    """The 220 bytes after the RMPP header (the segment), named after the RMPP type."""
    wanted = frozenset(types)
    return lambda v: _mad_span(v, 36) if v.fields.get("rmpp.rmpptype") in wanted else None


def _rmpp_reserved(v: View) -> list[bytes]:
    """ACK: the 220 reserved bytes; STOP/ABORT: data words 1 and 2 (reserved)."""
    rmpptype = v.fields.get("rmpp.rmpptype")
    if rmpptype == 2:
        body = _mad_span(v, 36)
        return [] if body is None else [body]
    if rmpptype in (3, 4):
        return [v.fields[k].to_bytes(4, "big") for k in ("rmpp.data1", "rmpp.data2")]
    return []


#: tshark field (``<parent>/<field>``, see dissection.py) -> ibwire's value.
FIELDS: dict[str, Field] = {
    # Ethernet and VLAN tags
    "eth/eth.dst": key("eth.dst", "mac"),
    "eth/eth.src": key("eth.src", "mac"),
    "eth/eth.type": key("eth.type"),
    "ieee8021ad/ieee8021ad.priority": tags("vlan.priority", outer=True),
    "ieee8021ad/ieee8021ad.dei": tags("vlan.dei", outer=True),
    "ieee8021ad/ieee8021ad.id": tags("vlan.id", outer=True),
    "ieee8021ad/ieee8021ah.etype": tags("vlan.etype", outer=True),
    "vlan/vlan.priority": tags("vlan.priority", outer=False),
    "vlan/vlan.dei": tags("vlan.dei", outer=False),
    "vlan/vlan.id": tags("vlan.id", outer=False),
    "vlan/vlan.etype": tags("vlan.etype", outer=False),
    # IPv4
    "ip/ip.version": key("ip.version"),
    "ip/ip.hdr_len": computed("ip.hdr_len x 4 (tshark: bytes, ibwire: 32-bit words)", "int",
                              lambda v: v.fields["ip.hdr_len"] * 4 if "ip" in v else None),
    "ip/ip.dsfield": computed("ip.dsfield.dscp << 2 | ip.dsfield.ecn", "int",
                              lambda v: v.fields["ip.dsfield.dscp"] << 2
                              | v.fields["ip.dsfield.ecn"] if "ip" in v else None),
    "ip.dsfield/ip.dsfield.dscp": key("ip.dsfield.dscp"),
    "ip.dsfield/ip.dsfield.ecn": key("ip.dsfield.ecn"),
    "ip/ip.len": key("ip.len"),
    "ip/ip.id": key("ip.id"),
    "ip/ip.flags": computed("ip.flags.rb << 2 | ip.flags.df << 1 | ip.flags.mf", "int",
                            _ip_flags),
    "ip.flags/ip.flags.rb": key("ip.flags.rb"),
    "ip.flags/ip.flags.df": key("ip.flags.df"),
    "ip.flags/ip.flags.mf": key("ip.flags.mf"),
    "ip/ip.frag_offset": key("ip.frag_offset"),
    "ip/ip.ttl": key("ip.ttl"),
    "ip/ip.proto": key("ip.proto"),
    "ip/ip.checksum": key("ip.checksum"),
    "ip/ip.src": key("ip.src", "ipv4"),
    "ip/ip.dst": key("ip.dst", "ipv4"),
    # IPv6 (tshark also puts the version under ip.version)
    "ipv6/ip.version": key("ipv6.version"),
    "ipv6/ipv6.version": key("ipv6.version"),
    "ipv6/ipv6.tclass": key("ipv6.tclass"),
    "ipv6.tclass/ipv6.tclass.dscp": computed("ipv6.tclass >> 2", "int",
                                             lambda v: v.fields["ipv6.tclass"] >> 2
                                             if "ipv6" in v else None),
    "ipv6.tclass/ipv6.tclass.ecn": computed("ipv6.tclass & 3", "int",
                                            lambda v: v.fields["ipv6.tclass"] & 3
                                            if "ipv6" in v else None),
    "ipv6/ipv6.flow": key("ipv6.flow"),
    "ipv6/ipv6.plen": key("ipv6.plen"),
    "ipv6/ipv6.nxt": key("ipv6.nxt"),
    "ipv6/ipv6.hlim": key("ipv6.hlim"),
    "ipv6/ipv6.src": key("ipv6.src", "ipv6"),
    "ipv6/ipv6.dst": key("ipv6.dst", "ipv6"),
    # UDP
    "udp/udp.srcport": key("udp.srcport"),
    "udp/udp.dstport": key("udp.dstport"),
    "udp/udp.length": key("udp.length"),
    "udp/udp.checksum": key("udp.checksum"),
    "udp/udp.payload": computed("the bytes after the UDP header, up to udp.length", "bytes",
                                _udp_payload),
    # LRH
    "infiniband/infiniband.lrh": header_bytes("lrh"),
    "infiniband.lrh/infiniband.lrh.vl": key("lrh.vl"),
    "infiniband.lrh/infiniband.lrh.lver": key("lrh.lver"),
    "infiniband.lrh/infiniband.lrh.sl": key("lrh.sl"),
    "infiniband.lrh/infiniband.lrh.reserved2": key("lrh.reserved2"),
    "infiniband.lrh/infiniband.lrh.lnh": key("lrh.lnh"),
    "infiniband.lrh/infiniband.lrh.dlid": key("lrh.dlid"),
    "infiniband.lrh/infiniband.lrh.reserved5": key("lrh.reserved5"),
    "infiniband.lrh/infiniband.lrh.pktlen": key("lrh.pktlen"),
    "infiniband.lrh/infiniband.lrh.slid": key("lrh.slid"),
    # GRH
    "infiniband/infiniband.grh": header_bytes("grh"),
    "infiniband.grh/infiniband.grh.ipver": key("grh.ipver"),
    "infiniband.grh/infiniband.grh.tclass": key("grh.tclass"),
    "infiniband.grh/infiniband.grh.flowlabel": key("grh.flowlabel"),
    "infiniband.grh/infiniband.grh.paylen": key("grh.paylen"),
    "infiniband.grh/infiniband.grh.nxthdr": key("grh.nxthdr"),
    "infiniband.grh/infiniband.grh.hoplmt": key("grh.hoplmt"),
    "infiniband.grh/infiniband.grh.sgid": key("grh.sgid", "ipv6"),
    "infiniband.grh/infiniband.grh.dgid": key("grh.dgid", "ipv6"),
    # BTH
    "infiniband/infiniband.bth": header_bytes("bth"),
    "infiniband.bth/infiniband.bth.opcode": key("bth.opcode"),
    "infiniband.bth/infiniband.bth.se": key("bth.se"),
    "infiniband.bth/infiniband.bth.m": key("bth.m"),
    "infiniband.bth/infiniband.bth.padcnt": key("bth.padcnt"),
    "infiniband.bth/infiniband.bth.tver": key("bth.tver"),
    "infiniband.bth/infiniband.bth.p_key": key("bth.p_key"),
    "infiniband.bth/infiniband.reserved": byte_of(
        "BTH byte 4: bth.fecn << 7 | bth.becn << 6 | bth.resv6a (tshark: 'Reserved' bytes)",
        "bth", ("bth.fecn", 7), ("bth.becn", 6), ("bth.resv6a", 0)),
    "infiniband.bth/infiniband.bth.destqp": key("bth.destqp"),
    "infiniband.bth/infiniband.bth.a": key("bth.a"),
    "infiniband.bth/infiniband.bth.reserved7": key("bth.reserved7"),
    "infiniband.bth/infiniband.bth.psn": key("bth.psn"),
    # RDETH, DETH
    "infiniband/infiniband.rdeth": header_bytes("rdeth"),
    "infiniband.rdeth/infiniband.reserved": byte_of("rdeth.reserved", "rdeth",
                                                    ("rdeth.reserved", 0)),
    "infiniband.rdeth/infiniband.rdeth.eecnxt": key("rdeth.eecnxt"),
    "infiniband/infiniband.deth": header_bytes("deth"),
    "infiniband.deth/infiniband.deth.q_key": key("deth.q_key"),
    "infiniband.deth/infiniband.reserved": byte_of("deth.reserved", "deth",
                                                   ("deth.reserved", 0)),
    "infiniband.deth/infiniband.deth.srcqp": key("deth.srcqp"),
    # RETH; AtomicETH (tshark names its VA and R_Key with the RETH's field names)
    "infiniband/infiniband.reth": header_bytes("reth"),
    "infiniband.reth/infiniband.reth.va": key("reth.va"),
    "infiniband.reth/infiniband.reth.r_key": key("reth.r_key"),
    "infiniband.reth/infiniband.reth.dmalen": key("reth.dmalen"),
    "infiniband/infiniband.atomiceth": header_bytes("atomiceth"),
    "infiniband.atomiceth/infiniband.reth.va": key("atomiceth.va"),
    "infiniband.atomiceth/infiniband.reth.r_key": key("atomiceth.r_key"),
    "infiniband.atomiceth/infiniband.atomiceth.swapdt": key("atomiceth.swapdt"),
    "infiniband.atomiceth/infiniband.atomiceth.cmpdt": key("atomiceth.cmpdt"),
    # AETH and its syndrome
    "infiniband/infiniband.aeth": header_bytes("aeth"),
    "infiniband.aeth/infiniband.aeth.syndrome": key("aeth.syndrome"),
    "infiniband.aeth/infiniband.aeth.msn": key("aeth.msn"),
    "infiniband.aeth.syndrome/infiniband.aeth.syndrome.reserved": computed(
        "aeth.syndrome >> 7", "int", _syndrome(lambda s: s >> 7)),
    "infiniband.aeth.syndrome/infiniband.aeth.syndrome.opcode": key("aeth.syndrome.opcode"),
    "infiniband.aeth.syndrome/infiniband.aeth.syndrome.credit_count":
        key("aeth.syndrome.credit_count"),
    "infiniband.aeth.syndrome/infiniband.aeth.syndrome.timer": key("aeth.syndrome.timer"),
    "infiniband.aeth.syndrome/infiniband.aeth.syndrome.error_code":
        key("aeth.syndrome.error_code"),
    "infiniband.aeth.syndrome/infiniband.aeth.syndrome.reserved_value": computed(
        "aeth.syndrome & 0x1f when aeth.syndrome.opcode is 2 (reserved type)", "int",
        _syndrome(lambda s: s & 0x1F if (s >> 5) & 3 == 2 else None)),
    "infiniband/infiniband.atomicacketh": header_bytes("atomicacketh"),
    "infiniband.atomicacketh/infiniband.atomicacketh.origremdt": key("atomicacketh.origremdt"),
    # ImmDt, IETH: tshark shows the 4 bytes, ibwire the number
    "infiniband/infiniband.immdt": header_bytes("immdt"),
    "infiniband.immdt/infiniband.immdt": computed("immdt as 4 big-endian bytes", "bytes",
                                                  _int_bytes("immdt", 4)),
    "infiniband/infiniband.ieth": header_bytes("ieth"),
    "infiniband.ieth/infiniband.ieth": computed("ieth as 4 big-endian bytes", "bytes",
                                                _int_bytes("ieth", 4)),
    # MAD common header, RMPP
    "infiniband/infiniband.mad": computed("the 256-byte MAD from ibwire's mad header", "bytes",
                                          lambda v: _mad_span(v, 0)),
    "infiniband.mad/infiniband.mad.baseversion": key("mad.baseversion"),
    "infiniband.mad/infiniband.mad.mgmtclass": key("mad.mgmtclass"),
    "infiniband.mad/infiniband.mad.classversion": key("mad.classversion"),
    "infiniband.mad/infiniband.mad.method": key("mad.method"),
    "infiniband.mad/infiniband.mad.status": key("mad.status"),
    "infiniband.mad/infiniband.mad.classspecific": key("mad.classspecific"),
    "infiniband.mad/infiniband.mad.transactionid": key("mad.transactionid"),
    "infiniband.mad/infiniband.mad.attributeid": key("mad.attributeid"),
    "infiniband.mad/infiniband.reserved": computed("mad.reserved as 2 bytes", "bytes",
                                                   _int_bytes("mad.reserved", 2)),
    "infiniband.mad/infiniband.mad.attributemodifier": key("mad.attributemodifier"),
    "infiniband.mad/infiniband.mad.data": computed(
        "the MAD after its 24-byte common header (RMPP header + ibwire's payload)", "bytes",
        lambda v: _mad_span(v, 24)),
    "infiniband/infiniband.rmpp": header_bytes("rmpp"),
    "infiniband.rmpp/infiniband.rmpp.rmppversion": key("rmpp.rmppversion"),
    "infiniband.rmpp/infiniband.rmpp.rmpptype": key("rmpp.rmpptype"),
    "infiniband.rmpp/infiniband.rmpp.rresptime": key("rmpp.rresptime"),
    "infiniband.rmpp/infiniband.rmpp.rmppflags": key("rmpp.rmppflags"),
    "infiniband.rmpp/infiniband.rmpp.rmppstatus": key("rmpp.rmppstatus"),
    "infiniband.rmpp/infiniband.rmpp.data1": computed("rmpp.data1 (RMPP type 0)", "int",
                                                      _rmpp("rmpp.data1", [0])),
    "infiniband.rmpp/infiniband.rmpp.data2": computed("rmpp.data2 (RMPP type 0)", "int",
                                                      _rmpp("rmpp.data2", [0])),
    "infiniband.rmpp/infiniband.rmpp.segmentnumber": key("rmpp.segmentnumber"),
    "infiniband.rmpp/infiniband.rmpp.payloadlength": key("rmpp.payloadlength"),
    "infiniband.rmpp/infiniband.rmpp.newwindowlast": key("rmpp.newwindowlast"),
    "infiniband.rmpp/infiniband.rmpp.transferreddata": computed(
        "the 220 bytes after the RMPP header (RMPP DATA)", "bytes", _rmpp_body([1])),
    "infiniband.rmpp/infiniband.rmpp.extendederrordata": computed(
        "the 220 bytes after the RMPP header (RMPP STOP, ABORT)", "bytes",
        _rmpp_body([3, 4])),
    "infiniband.rmpp/infiniband.reserved": Field(
        "RMPP ACK: the 220 bytes after the header; STOP/ABORT: rmpp.data1, rmpp.data2",
        "bytes", _rmpp_reserved),
    # payload: as raw data, or EtherType-encapsulated (IPoIB, RFC 4391) -- see fate()
    "data/data.data": computed("payload", "bytes", _payload),
    "data/data.len": computed("len(payload)", "int", _payload_len),
    "infiniband/infiniband.payload": computed("payload (EtherType-encapsulated)", "bytes",
                                              lambda v: _ethertype_payload(v, slice(None))),
    "infiniband.payload/infiniband.rwh.etype": computed(
        "payload[0:2] (IPoIB encapsulation header: EtherType)", "int",
        lambda v: int.from_bytes(_ethertype_payload(v, slice(0, 2)) or b"", "big")
        if fate(v) == "ethertype" else None),
    "infiniband.payload/infiniband.reserved": computed(
        "payload[2:4] (IPoIB encapsulation header: reserved)", "bytes",
        lambda v: _ethertype_payload(v, slice(2, 4))),
    "infiniband/infiniband.vendor": computed("the 4 bytes after the BTH, opcode unknown",
                                             "bytes", _vendor_label),
    "infiniband/infiniband.rwh": computed("payload[0:4] of a raw (LNH=0) packet: the RWH",
                                          "bytes", lambda v: _raw(v, slice(0, 4))),
    "infiniband.rwh/infiniband.reserved": computed("payload[0:2] of a raw packet", "bytes",
                                                   lambda v: _raw(v, slice(0, 2))),
    "infiniband.rwh/infiniband.rwh.etype": computed(
        "payload[2:4] of a raw packet (RWH EtherType)", "int",
        lambda v: int.from_bytes(_raw(v, slice(2, 4)) or b"", "big") if _raw(v, slice(2, 4))
        else None),
    "infiniband.vendor/infiniband.vendor": computed(
        "payload (the bytes after the BTH), opcode unknown", "bytes",
        lambda v: v.packet.payload if _vendor_label(v) is not None else None),
    "infiniband/infiniband.invariant.crc": swapped("icrc", 4),
    "infiniband/infiniband.variant.crc": swapped("vcrc", 2),
}

FIELDS.update(cm_fields())
FIELDS.update(attribute_fields())
FIELDS.update(reserved_field())

#: tshark fields not compared (fnmatch patterns on the qualified key), and why.
#: Not compared by ``ibwire fuzz`` besides NOT_COMPARED (frames only its mutations make).
FUZZ_NOT_COMPARED: dict[str, str] = {
    "*/*.trailer": "bytes after the IP packet (RoCEv2: IP's length ends the packet), which "
                   "tshark shows as the Ethernet or VLAN trailer; ibwire keeps them as "
                   "Packet.trailer and compares the packet before them",
}

NOT_COMPARED: dict[str, str] = {
    "eth.dst/*": "derived by tshark from eth.dst (I/G and U/L bits, OUI, names); eth.dst "
                 "itself is compared",
    "eth.src/*": "derived by tshark from eth.src (I/G and U/L bits, OUI, names); eth.src "
                 "itself is compared",
    "ip/ip.addr": "tshark's copy of ip.src/ip.dst for filtering; both are compared",
    "ip/ip.host": "tshark's copy of ip.src/ip.dst (name resolution is off)",
    "ip/ip.src_host": "tshark's copy of ip.src (name resolution is off)",
    "ip/ip.dst_host": "tshark's copy of ip.dst (name resolution is off)",
    "ip/ip.checksum.status": "tshark's checksum verdict (off by default: 'unverified'); "
                             "ibwire keeps the checksum value, compared as ip.checksum",
    "ip.opt*": "IPv4 options decoded one by one; ibwire keeps them as bytes (ip.options), "
               "their length is compared through ip.hdr_len and the UDP offset",
    "Options: *": "IPv4 options decoded one by one (see ip.opt*)",
    "ipv6/ipv6.addr": "tshark's copy of ipv6.src/ipv6.dst; both are compared",
    "ipv6/ipv6.host": "tshark's copy of ipv6.src/ipv6.dst (name resolution is off)",
    "ipv6/ipv6.src_host": "tshark's copy of ipv6.src",
    "ipv6/ipv6.dst_host": "tshark's copy of ipv6.dst",
    "udp/udp.port": "tshark's copy of udp.srcport/udp.dstport; both are compared",
    "udp/udp.stream": "tshark's conversation index, not a header field",
    "udp*/udp.checksum.status": "tshark's checksum verdict (off by default); the value is "
                                "compared as udp.checksum",
    "Timestamps/*": "capture times, not header fields",
    "erf*": "the ERF record header: ibwire's reader strips it (the shared capture), ibwire's "
            "converter wrote it (generated frames); not part of the IB packet",
    "raw/raw": "tshark's placeholder item for LINKTYPE_RAW, which has no link header",
    "infiniband/infiniband.smplid": "the SMP (LID-routed) item: the MAD's bytes, compared as "
                                    "infiniband.mad (its fields are compared one by one)",
    "infiniband/infiniband.smpdirected": "the directed-route SMP item: the MAD's bytes, "
                                         "compared as infiniband.mad",
    "infiniband/infiniband.smplid.smpdata": "the blob tshark labels smplid.smpdata for the "
                                            "classes it decodes no further (CM messages "
                                            "are compared field by field, mad_fields.py; "
                                            "PerfMgt samples, BM, DevMgt, SNMP, vendor): "
                                            "bytes compared as infiniband.mad.data",
    "*/infiniband.smplid.smpdata": "an SMP's or SA Notice's 64-byte data area, or the "
                                   "padding after an attribute: bytes compared as "
                                   "infiniband.mad.data, the attribute field by field",
    "infiniband/infiniband.sa.drdlid": "the SA item (sic, tshark's name): the MAD's bytes, "
                                       "compared as infiniband.mad",
    "infiniband.sa.drdlid/infiniband.sa.drdlid": "SA record bytes tshark shows as a blob (the "
                                                 "record, the bytes after it): compared as "
                                                 "infiniband.mad.data, the record field by "
                                                 "field",
    "infiniband/infiniband.classportinfo": "PerfMgt ClassPortInfo's empty label item; its "
                                           "fields are compared one by one",
    "infiniband.smplid/infiniband.reserved": "SMP reserved bytes (IBA 14.2.1.1): compared as "
                                             "infiniband.mad.data",
    "infiniband.smpdirected/infiniband.reserved": "directed-route SMP reserved bytes: compared "
                                                  "as infiniband.mad.data",
    "infiniband.sa.drdlid/infiniband.reserved": "SA header reserved bytes (IBA 15.2.1.1): "
                                                "compared as infiniband.mad.data",
    "infiniband.portcounters*/infiniband.reserved": "PortCounters(Extended) reserved bytes: "
                                                    "compared as infiniband.mad.data",
    "infiniband.smplid.smpdata/infiniband.p_keytable.p_keytableblock": (
        "the P_KeyTable block's bytes; its 32 entries are compared field by field"),
    "*/_ws.malformed": "tshark's malformation marker, compared as the 'tshark:malformed' "
                       "pseudo-field",
}

#: tshark expert items that may appear, and why they are not a disagreement.
EXPERTS: dict[str, str] = {
    "udp.checksum.zero": "tshark's note that a zero UDP checksum is not allowed over IPv6 "
                         "(RFC 8200); the checksum itself is compared",
    "ip.ttl.too_small": "tshark's opinion of a small TTL (generated frames draw any TTL); "
                        "the TTL itself is compared",
}

def _source_is_group(view: View) -> bool:
    src = view.fields.get("eth.src")
    return isinstance(src, str) and int(src[:2], 16) & 1 == 1


#: IPv4 options tshark has nothing to say about (RFC 791 3.1): No Operation, Router Alert.
_PLAIN_OPTIONS = {1: 1, 0x94: 4}


def _odd_ipv4_options(view: View) -> bool:
    """The IPv4 options are not only No Operation, Router Alert (length 4) and End of Option
    List padding: tshark may rightly flag them (the invalid and bytes modes break them)."""
    options = view.fields.get("ip.options")
    if not isinstance(options, bytes | bytearray):
        return False
    at = 0
    while at < len(options) and options[at] != 0:
        size = _PLAIN_OPTIONS.get(options[at])
        if size is None or (size > 1 and options[at + 1:at + 2] != bytes([size])):
            return True
        at += size
    return at > len(options) or any(options[at:])


def _four_nops(view: View) -> bool:
    options = view.fields.get("ip.options")
    return isinstance(options, bytes | bytearray) and b"\x01" * 4 in options


def _stray_string_bytes(view: View) -> bool:
    """A MAD string field (NodeDescription's NodeString, IBA 14.2.5.15; a ServiceName) with
    bytes after its first NUL, which tshark flags as trailing stray characters."""
    for name, value in view.fields.items():
        if name.endswith((".nodestring", ".servicename")) and isinstance(value, bytes):
            end = value.find(b"\0")
            if end >= 0 and any(value[end:]):
                return True
    return False


#: tshark expert items that are right for some frames, which the invalid and bytes modes make:
#: expert (an fnmatch pattern) -> (why, when it is right, whether tshark must then show it).
CONDITIONAL_EXPERTS: dict[str, tuple[str, Callable[[View], bool], bool]] = {
    "eth.src_not_group": ("a source MAC address with the group bit set (IEEE 802 9.2)",
                          _source_is_group, True),
    "_ws.string.trailing_stray_characters": (
        "a MAD string with bytes after its NUL (random strings in every mode)",
        _stray_string_bytes, False),
    "ip.nop": ("four No Operation options in a row (tshark: a router may have removed "
               "options)", _four_nops, False),
    "ip.opt.*": ("IPv4 options other than well-formed No Operation / Router Alert (RFC 791 3.1, "
                 "RFC 2113); what tshark says of each broken option is not modelled",
                 _odd_ipv4_options, False),
    "_ws.type_length.mismatch": ("a Notice of trap 259: tshark fetches a GID 2 bytes long "
                                 "(divergence 'Notice trap 259 details')",
                                 notice_trap_259, True),
}

#: Protocols tshark may show inside the IB payload (it dissects deeper than ibwire, which stops
#: at the transport headers), and why that is not a disagreement. The first one must be the one
#: expected (``payload_dissector``, or a divergence); the others only need to be listed here.
PAYLOAD_DISSECTORS: dict[str, str] = {
    "ip": "IPoIB (RFC 4391) IPv4: EtherType-encapsulated payload, see fate()",
    "ipv6": "IPoIB IPv6 (see ip)",
    "arp": "IPoIB ARP (see ip)",
    "icmp": "inside IPoIB IPv4",
    "icmpv6": "inside IPoIB IPv6",
    "udp": "inside IPoIB IP",
    "data": "the rest of a payload after the protocol before it",
    "infiniband.eoib": "Mellanox EoIB, tshark's guess from the first payload byte (divergence "
                       "'EoIB guess')",
    "rpcordma.fragments": "RPC-over-RDMA reassembly of RC SENDs (divergence 'RPCoRDMA send "
                          "reassembly')",
}


# -- models of tshark's mistakes ------------------------------------------------------------

