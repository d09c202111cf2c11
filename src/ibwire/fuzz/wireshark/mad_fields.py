"""The MAD part of the tshark mapping: CM messages field by field, from the declarations.

tshark 4.0.17 decodes CM REQ, REP, RTU, REJ, DREQ and DREP (packet-infiniband.c
parse_CM_*) under the ``infiniband.smplid.smpdata`` item, with the field names ibwire's
declarations use (src/ibwire/headers/cm.py), so the mapping is derived from them: every
declared field is one tshark field, except those tshark shows as a ``Reserved`` item. The
IP CM service ID split and private data sit in subtrees of their own. What tshark gets wrong
in a REQ is modelled in ``DIVERGENCES`` below (packet-infiniband.c parse_CM_Req, tshark 4.0.17).
"""

from __future__ import annotations

import ipaddress
from typing import Any

from ibwire.fuzz.wireshark.compare import Divergence, Expected, Field, View, computed, key
from ibwire.headers import cm, sa

CM_PARENT = "infiniband.smplid.smpdata"
#: The CM messages tshark decodes field by field.
DECODED = (cm.CM_REQ, cm.CM_REP, cm.CM_RTU, cm.CM_REJ, cm.CM_DREQ, cm.CM_DREP)
#: Declared fields tshark shows as 'Reserved' bytes (compared through infiniband.mad.data).
AS_RESERVED = frozenset({
    "cm.req.reserved4", "cm.req.vendorid", "cm.req.reserved24", "cm.rep.vendorid_h",
    "cm.rep.vendorid_m", "cm.rep.vendorid_l", "cm.dreq.reserved",
    # shown under the alt_reserved1 name (see below)
    "cm.req.sap_supported", "cm.req.alt_reserved2",
})
#: Fields mapped by hand below (GIDs as IPv4 or bytes, private data or IP CM data).
SPECIAL = frozenset({"cm.req.prim_localgid", "cm.req.prim_remotegid", "cm.req.alt_localgid",
                     "cm.req.alt_remotegid", "cm.req.alt_reserved1", "cm.req.private"})


def _kind(fmt: str | None) -> str:
    return "int" if fmt is None else {"ipv6": "ipv6", "ipv4": "ipv4"}.get(fmt, "bytes")


def _ip_cm(view: View) -> bool:
    return "cm.req.ip_cm.ipv" in view.fields


def _gid(name: str, ipv4: bool) -> Field:
    """tshark shows a REQ's primary GIDs as IPv4 addresses (``..._ipv4``) when the frame came
    over RoCEv2/IPv4, else as IPv6 (FT_IPv6); ibwire gives ``..._ipv4`` for an IPv4-mapped
    GID (a GID that is not is divergence 'CM REQ GID as IPv4')."""
    def fn(view: View) -> Any:
        if name not in view.fields or (view.packet.encapsulation == "rocev2_ipv4") != ipv4:
            return None
        return view.fields.get(f"{name}_ipv4") if ipv4 else view.fields[name]
    return computed(f"{name}_ipv4" if ipv4 else name, "ipv4" if ipv4 else "ipv6", fn)


def _gid_bytes(name: str) -> Field:
    return computed(f"{name} as 16 bytes (tshark: FT_BYTES)", "bytes",
                    lambda v: ipaddress.IPv6Address(v.fields[name]).packed
                    if name in v.fields else None)


def _alt_reserved1(view: View) -> list[Any]:
    """One tshark name for two fields: byte 138's 3 reserved bits and byte 139's last 3
    (SAP Supported and 2 reserved bits)."""
    f = view.fields
    if "cm.req.alt_reserved1" not in f:
        return []
    return [f["cm.req.alt_reserved1"], f["cm.req.sap_supported"] << 2 | f["cm.req.alt_reserved2"]]


def cm_fields() -> dict[str, Field]:
    out: dict[str, Field] = {}
    for record in DECODED:
        for f in record.fields:
            if f.name in AS_RESERVED or f.name in SPECIAL:
                continue
            out[f"{CM_PARENT}/infiniband.{f.name}"] = key(f.name, _kind(f.fmt))
    for side in ("local", "remote"):
        name = f"cm.req.prim_{side}gid"
        out[f"{CM_PARENT}/infiniband.{name}"] = _gid(name, ipv4=False)
        out[f"{CM_PARENT}/infiniband.{name}_ipv4"] = _gid(name, ipv4=True)
        alt = f"cm.req.alt_{side}gid"
        out[f"{CM_PARENT}/infiniband.{alt}"] = _gid_bytes(alt)
    out[f"{CM_PARENT}/infiniband.cm.req.alt_reserved1"] = Field(
        "cm.req.alt_reserved1, then cm.req.sap_supported << 2 | cm.req.alt_reserved2", "int",
        _alt_reserved1)
    out[f"{CM_PARENT}/infiniband.cm.req.private"] = computed(
        "cm.req.private (no IP CM service ID)", "bytes",
        lambda v: v.fields.get("cm.req.private") if not _ip_cm(v) else None)
    out[f"{CM_PARENT}/infiniband.cm.req.ip_cm"] = computed(
        "cm.req.private (IP CM service ID)", "bytes",
        lambda v: v.fields["cm.req.private"] if _ip_cm(v) else None)
    sid = "infiniband.cm.req.serviceid"
    out[f"{sid}/{sid}.prefix"] = key("cm.req.serviceid.prefix", "bytes")
    out[f"{sid}/{sid}.protocol"] = key("cm.req.serviceid.protocol")
    out[f"{sid}/{sid}.dport"] = key("cm.req.serviceid.dport")
    ip = "infiniband.cm.req.ip_cm"
    for name, kind in (("majv", "int"), ("minv", "int"), ("ipv", "int"), ("reserved", "int"),
                       ("sport", "int"), ("sip4", "ipv4"), ("dip4", "ipv4"), ("sip6", "ipv6"),
                       ("dip6", "ipv6"), ("private", "bytes")):
        out[f"{ip}/{ip}.{name}"] = key(f"cm.req.ip_cm.{name}", kind)
    return out


def _reserved_bytes(view: View) -> list[bytes]:
    """The bytes tshark shows as 'Reserved' items in a CM message (see AS_RESERVED)."""
    for record, spans in (("cm.req", ((4, 8), (24, 28))), ("cm.rep", ((15, 16), (19, 20),
                                                                       (23, 24))),
                          ("cm.dreq", ((11, 12),))):
        h = view.packet.header(record)
        if h is not None:
            return [view.packet.frame[h.offset + a:h.offset + b] for a, b in spans]
    return []


def reserved_field() -> dict[str, Field]:
    return {f"{CM_PARENT}/infiniband.reserved": Field(
        "reserved bytes of CM REQ (4-7, 24-27), REP (vendor ID bytes 15, 19, 23), DREQ (11)",
        "bytes", _reserved_bytes)}


def _misread(view: View) -> dict[str, int]:
    """What tshark shows for a REQ's path words: see the divergence below."""
    out = {}
    for side in ("prim", "alt"):
        label = view.fields[f"cm.req.{side}_flowlabel"]
        first = label >> 12  # the word's first byte
        out[f"cm.req.{side}_flowlabel"] = label >> 8
        out[f"cm.req.{side}_reserved0"] = first >> 6
        out[f"cm.req.{side}_pktrate"] = first & 0x3F
    return out


def _path_word_misread(view: View) -> bool:
    return "cm.req.prim_flowlabel" in view.fields and any(
        view.fields[k] != v for k, v in _misread(view).items())


def _model_path_word(view: View, expected: Expected) -> None:
    for name, value in _misread(view).items():
        expected[f"{CM_PARENT}/infiniband.{name}"] = [value]


def _model_rej_reserved0(view: View, expected: Expected) -> None:
    expected[f"{CM_PARENT}/infiniband.cm.rej.reserved0"] = [view.fields["cm.rej.reserved0"] & 3]


#: (MgmtClass, AttributeID) whose tshark decoder does not move its offset to the end of the
#: MAD, so that the ICRC (and VCRC) is not shown (measured on the generated MADs).
NO_CRC = frozenset({(0x03, 0x0011), (0x03, 0x0012),
                    (0x03, 0x0020), (0x03, 0x0031), (0x03, 0x0038), (0x03, 0x003A),
                    (0x04, 0x0001), (0x04, 0x0012), (0x04, 0x001D)})
CRC_KEYS = ("infiniband/infiniband.invariant.crc", "infiniband/infiniband.variant.crc")


def _attribute(view: View) -> tuple[int, int] | None:
    f = view.fields
    return (f["mad.mgmtclass"], f["mad.attributeid"]) if "mad.attributeid" in f else None


def _decoded_body(view: View) -> bool:
    """ibwire decoded the attribute (an SA record of a later RMPP segment is not)."""
    return any(h.full_keys and h.name not in ("sa", "smplid", "smpdirected", "perfmgt")
               for h in view.packet.headers)


def _table(view: View) -> bool:
    return view.fields["mad.method"] in (0x92, 0x94)


def _no_crc(view: View) -> bool:
    attribute = _attribute(view)
    if attribute == (0x03, 0x003A):  # MultiPathRecord: a table whose GIDs run past the MAD
        return _table(view) and _decoded_body(view) and _gids_run_past(view)
    return attribute in NO_CRC and _decoded_body(view)


def _gids_run_past(view: View) -> bool:
    """A MultiPathRecord table whose first record's SGIDCount + DGIDCount GIDs, which tshark
    reads after it (divergence 'SA table: one record'), run past the MAD's end."""
    mad, end = view.packet.header("mad"), view.packet.icrc_offset
    start = mad.offset + 24 + 12 + sa.SA_HEADER.size
    if end is None or start + sa.MULTI_PATH_RECORD.size > end:
        return True
    record = sa.MULTI_PATH_RECORD.parse(view.packet.frame, start)
    room = (min(mad.offset + 256, end) - start - sa.MULTI_PATH_RECORD.size) // 16
    return record["multipathrecord.sgidcount"] + record["multipathrecord.dgidcount"] > room


def _model_no_crc(view: View, expected: Expected) -> None:
    expected[CRC_KEYS[0]] = []
    if _attribute(view) != (0x03, 0x0012):  # PortInfoRecord: the VCRC is still shown
        expected[CRC_KEYS[1]] = []
    if _attribute(view) == (0x03, 0x003A):
        expected["tshark:malformed"] = ["malformed"]


#: Classes whose Notice (attribute 0x0002) tshark decodes: SMP LID-routed, directed-route, SA.
NOTICE_CLASSES = (0x01, 0x81, 0x03)
BAD_KEY_TRAP = 259  # Bad P_Key or Q_Key (IBA 14.2.5.1 table 155)


def notice_trap_259(view: View) -> bool:
    """A decoded Notice whose 16-bit word at Notice byte 4 (TrapNumber, or DeviceID when
    IsGeneric is 0) is 259: see the divergence 'Notice trap 259 details'."""
    attribute = _attribute(view)
    return attribute is not None and attribute[1] == 0x0002 \
        and attribute[0] in NOTICE_CLASSES and _decoded_body(view) \
        and view.fields.get("notice.trapnumberdeviceid") == BAD_KEY_TRAP


def _model_notice_259(view: View, expected: Expected) -> None:
    for crc in CRC_KEYS:
        expected[crc] = []
    for k in expected:  # it raises before showing the details
        if k.startswith(("infiniband.smplid.smpdata/infiniband.notice.datadetails",
                         "infiniband.notice.datadetails/", "infiniband.smplid.smpdata/"
                         "infiniband.trap.", "infiniband.smpdirected/infiniband."
                         "smpdirected.initialpath", "infiniband.smpdirected/infiniband."
                         "smpdirected.returnpath")):
            expected[k] = []
    expected["tshark:malformed"] = ["malformed"]


def _unmapped_gid_as_ipv4(view: View) -> bool:
    return view.packet.encapsulation == "rocev2_ipv4" and any(
        f"cm.req.prim_{side}gid" in view.fields and
        f"cm.req.prim_{side}gid_ipv4" not in view.fields for side in ("local", "remote"))


def _model_gid_as_ipv4(view: View, expected: Expected) -> None:
    for side in ("local", "remote"):
        name = f"cm.req.prim_{side}gid"
        if f"{name}_ipv4" not in view.fields:
            packed = ipaddress.IPv6Address(view.fields[name]).packed
            expected[f"{CM_PARENT}/infiniband.{name}_ipv4"] = [
                str(ipaddress.IPv4Address(packed[12:]))]


DIVERGENCES = (
    Divergence(
        "CM REQ GID as IPv4",
        "packet-infiniband.c parse_CM_Req (confirmed here on random values): over RoCEv2/IPv4 "
        "tshark 4.0.17 shows a REQ's primary GIDs as IPv4 addresses, the last 4 of their 16 "
        "bytes, whether or not the GID is IPv4-mapped (::ffff:a.b.c.d, RFC 4291 2.5.5.2); "
        "for any other GID those 4 bytes are no address",
        _unmapped_gid_as_ipv4, _model_gid_as_ipv4),
    Divergence(
        "Notice trap 259 details",
        "NEW (measured: that word 0-599 and 65535, IsGeneric 0 and 1, classes 0x01, 0x81 "
        "and 0x03): tshark 4.0.17 decodes a Notice's DataDetails by the word at Notice byte "
        "4 whether or not IsGeneric is set (for a vendor notice it is the DeviceID), and its "
        "decoder of trap 259 (Bad P_Key or Q_Key) fetches a GID as an IPv6 address 2 bytes "
        "long: expert '_ws.type_length.mismatch', malformed, no ICRC or VCRC",
        notice_trap_259, _model_notice_259),
    Divergence(
        "CM REJ reserved bits",
        "NEW (tshark -G fields: cm.rej.msgrej mask 0xc0, cm.rej.reserved0 mask 0x03): IBA "
        "table 108 / ibta_vol1_c12.h CM_REJ_MESSAGE_REJECTED has 2 bits then 6 reserved; "
        "tshark shows only the low 2 of the 6",
        lambda v: "cm.rej.reserved0" in v.fields and v.fields["cm.rej.reserved0"] > 3,
        _model_rej_reserved0),
    Divergence(
        "MAD attribute decoder: no ICRC",
        "NEW (measured on random values): tshark 4.0.17's decoders of SA NodeRecord, PortInfoRecord, LinkRecord, ServiceRecord, MCMemberRecord, "
        "MultiPathRecord and PerfMgt ClassPortInfo, PortCounters(Extended) leave the offset "
        "short of the MAD's end, so the ICRC (and VCRC, except after a PortInfoRecord) is not "
        "shown; a MultiPathRecord table (GetTableResp) whose GIDs run past the MAD's end "
        "raises: malformed",
        _no_crc, _model_no_crc),
    Divergence(
        "CM REQ path word misread",
        "packet-infiniband.c parse_CM_Req (confirmed here on random values): "
        "IBA 12.6.5 / ibta_vol1_c12.h CM_REQ_PRIMARY_FLOW_LABEL is the top 20 bits of the word "
        "at REQ byte 88 (132 for the alternate path), then 6 reserved bits and the 6-bit "
        "packet rate; tshark 4.0.17 reads the flow label from 3 bytes under a 32-bit mask "
        "(the label shifted right by 8) and the reserved bits and packet rate from the "
        "word's first byte",
        _path_word_misread, _model_path_word),
)
