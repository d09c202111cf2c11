"""The MAD part of the tshark mapping for SMP, SA and PerfMgt: class headers and attribute
fields, derived from the declarations (src/ibwire/headers/{smp,sa,perf,mad}.py), whose
field names are Wireshark's.

tshark 4.0.17 (packet-infiniband.c) puts an attribute's fields under one parent item per
class: ``infiniband.smplid.smpdata`` for SMP attributes (LID-routed and directed-route) and
any Notice, ``infiniband.sa.drdlid`` (sic) for the SA header and records, the top
``infiniband`` item for PerfMgt ClassPortInfo and ``infiniband.portcounters(_ext)`` for the
PerfMgt counters; its names repeat once per entry of a table (P_Key blocks, SA
GetTableResp records), as ibwire's lists do. The declared fields tshark does not show
(reserved bits, fields later than its decoder) are listed in ``NOT_SHOWN``.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable
from functools import cache
from types import MappingProxyType
from typing import Any

from ibwire.fuzz.wireshark.compare import Divergence, Expected, Field, NotModelled, View
from ibwire.headers import perf, sa, smp
from ibwire.headers.layout import Record
from ibwire.headers.mad import CLASS_PORT_INFO, NOTICE, NOTICE_GS, TRAP_DETAILS
from ibwire.mad_numbers import PERF, SA_CLASS, SMP_DIRECTED, SMP_LID, TABLE_METHODS
from ibwire.mads import RECORDS, derived, split_items, trap_details
from ibwire.tables import mad_attributes, port_capability_bits

SMP_DATA = "infiniband.smplid.smpdata"
SA_DATA = "infiniband.sa.drdlid"

#: The records of each class family whose fields are compared.
SMP_RECORDS = (NOTICE, smp.NODE_DESCRIPTION, smp.NODE_INFO, smp.SWITCH_INFO, smp.GUID_INFO,
               smp.PORT_INFO, smp.P_KEY_TABLE, smp.SL_TO_VL, smp.VL_ARBITRATION,
               smp.LINEAR_FORWARDING, smp.SM_INFO)
SA_RECORDS = (CLASS_PORT_INFO, NOTICE_GS, sa.PATH_RECORD, sa.MC_MEMBER_RECORD, sa.NODE_RECORD,
              sa.PORT_INFO_RECORD, sa.SERVICE_RECORD, sa.INFORM_INFO, sa.LINK_RECORD,
              sa.MULTI_PATH_RECORD, sa.MULTI_PATH_GID)
PERF_RECORDS = (CLASS_PORT_INFO, perf.PORT_COUNTERS, perf.PORT_COUNTERS_EXT)

#: Declared fields tshark 4.0.17 does not show as fields of their own, besides reserved
#: ones (``*.reserved*``: tshark shows no reserved bits, and reserved bytes as
#: ``infiniband.reserved`` items): fields later than its decoder (IBA 1.2.1 / 1.3), or shown
#: under another name (mapped by hand below); their bytes are compared as infiniband.mad.data.
NOT_SHOWN = frozenset({
    "pathrecord.serviceid",                      # IBA 1.2.1: tshark shows reserved bytes
    "portinfo.capabilitymask2", "portinfo.linkspeedextactive",
    "portinfo.linkspeedextsupported", "portinfo.linkspeedextenabled",
    "portinfo.mcastpkeytrapsuppressionenabled",  # IBA 1.2.1 / 1.3 PortInfo fields
    "switchinfo.multicastfdbtop",                # IBA 1.3 SwitchInfo field
    "pathrecord.qosclass", "multipathrecord.qosclass",  # IBA 1.2.1: tshark shows reserved
    "notice.issuergid",                          # tshark's SA Notice stops at the details
    "portcounters.counterselect2", "portcounters.portxmitwait",  # IBA 1.2.1 (ib_pma.h)
    "classportinfo.traphl", "classportinfo.reserved",  # both 'reserved' (see below)
    "p_keytable.membershiptype", "p_keytable.p_keybase",  # under a block item (see below)
})


def _shown(name: str) -> bool:
    return name not in NOT_SHOWN and ".reserved" not in name


def _kind(fmt: str | None) -> str:
    return "int" if fmt is None else {"ipv6": "ipv6", "ipv4": "ipv4", "text": "text"}.get(
        fmt, "bytes")


def parent_of(view: View) -> str | None:
    """The tshark item holding the attribute fields of this frame's MAD (None: none)."""
    f = view.fields
    klass, attribute = f.get("mad.mgmtclass"), f.get("mad.attributeid")
    row = mad_attributes().get((klass, attribute))
    if row is None:
        return None
    if row.record in ("notice", "notice_gs"):
        return SMP_DATA
    if klass in (SMP_LID, SMP_DIRECTED):
        return SMP_DATA
    if klass == SA_CLASS:
        return SA_DATA
    if klass == PERF:
        return "infiniband" if row.record == "classportinfo" else f"infiniband.{row.record}"
    return None


def flat(value: Any) -> list[Any]:
    """A field's values as tshark lists them: one per table entry, and per item of a list
    field (ServiceData) or GID of a record (MultiPathRecord), in wire order."""
    if not isinstance(value, (list, tuple)):
        return [value]
    return [v for item in value for v in flat(item)]


def attribute_field(parent: str, name: str, kind: str) -> Field:
    """ibwire's ``name`` where this frame's attribute sits under ``parent``."""
    def get(view: View) -> list[Any]:
        if name not in view.fields or parent_of(view) != parent:
            return []
        values = flat(view.fields[name])
        return [tshark_text(v) for v in values] if kind == "text" else values
    return Field(name, kind, get)


def tshark_text(value: str | bytes) -> str:
    """A NUL-padded string field as tshark shows it: up to its first NUL, ASCII (a byte past
    0x7F is U+FFFD: divergence 'MAD string read as ASCII'). ibwire's value is text, or the
    bytes when they are not NUL-padded UTF-8; for text, the model of the divergence, else the
    mapping."""
    raw = value.encode("utf-8") if isinstance(value, str) else value
    if isinstance(value, str) and not value.isascii():
        return value  # the divergence's model rewrites it
    raw = raw.split(b"\0", 1)[0]
    return "".join(chr(b) if b < 0x80 else "\ufffd" for b in raw)


def capability_field(name: str) -> Field:
    """A PortInfo CapabilityMask bit (specs/port_capability_mask.tsv) of a PortInfo or an SA
    PortInfoRecord."""
    key = f"portinfo.capabilitymask.{name}"

    def get(view: View) -> list[Any]:
        return flat(view.fields[key]) if key in view.fields and parent_of(view) else []
    return Field(key, "int", get)


def _records(parent: str, records: Iterable[Record]) -> dict[str, Field]:
    out: dict[str, Field] = {}
    for record in records:
        for f in record.fields:
            if _shown(f.name):
                out[f"{parent}/infiniband.{f.name}"] = attribute_field(parent, f.name,
                                                                       _kind(f.fmt))
    return out


def _class_field(parent: str, classes: tuple[int, ...], name: str, kind: str = "int") -> Field:
    """ibwire's ``name`` in a MAD of one of ``classes`` (a class header's field)."""
    def get(view: View) -> list[Any]:
        if view.fields.get("mad.mgmtclass") not in classes or name not in view.fields:
            return []
        return flat(view.fields[name])
    return Field(name, kind, get)


def _path_field(name: str, at: int) -> Field:
    """A directed-route SMP's 64-byte path at MAD byte ``at`` (IBA 14.2.1.2), whatever the
    attribute (ibwire keeps an unknown attribute's bytes, paths included, as payload)."""
    def get(view: View) -> list[Any]:
        if view.fields.get("mad.mgmtclass") != SMP_DIRECTED:
            return []
        if f"smpdirected.{name}" in view.fields:
            return [view.fields[f"smpdirected.{name}"]]
        return _mad_bytes(view, at, 64)
    return Field(f"smpdirected.{name} (MAD bytes {at}-{at + 63})", "bytes", get)


def _mad_bytes(view: View, at: int, size: int) -> list[bytes]:
    """``size`` bytes at MAD byte ``at``, when they lie before the ICRC."""
    mad, end = view.packet.header("mad"), view.packet.icrc_offset
    if mad is None or end is None or mad.offset + at + size > end:
        return []
    return [view.packet.frame[mad.offset + at:mad.offset + at + size]]


def _class_port_info_reserved(parent: str) -> Field:
    """tshark shows ClassPortInfo's reserved byte and TrapHL (IBA 13.4.8.1) both as
    ``classportinfo.reserved``."""
    def get(view: View) -> list[Any]:
        if parent_of(view) != parent or "classportinfo.traphl" not in view.fields:
            return []
        pairs = zip(flat(view.fields["classportinfo.reserved"]),
                    flat(view.fields["classportinfo.traphl"]), strict=True)
        return [v for pair in pairs for v in pair]
    return Field("classportinfo.reserved, classportinfo.traphl", "int", get)


def header_fields() -> dict[str, Field]:
    """The SMP and SA class headers (IBA 14.2.1, 15.2.1.1) and directed-route views."""
    lid, directed = "infiniband.smplid", "infiniband.smpdirected"
    out = {f"{lid}/infiniband.smplid.mkey": _class_field(lid, (SMP_LID,), "smplid.mkey")}
    out[f"{directed}/infiniband.smplid.mkey"] = _class_field(directed, (SMP_DIRECTED,),
                                                             "smplid.mkey")
    for name in ("d", "smpstatus", "hoppointer", "hopcount", "drslid", "drdlid"):
        out[f"{directed}/infiniband.smpdirected.{name}"] = _class_field(
            directed, (SMP_DIRECTED,), f"smpdirected.{name}")
    for name, at in (("initialpath", 128), ("returnpath", 192)):
        out[f"{directed}/infiniband.smpdirected.{name}"] = _path_field(name, at)
    for name in ("smkey", "attributeoffset", "componentmask"):
        out[f"{SA_DATA}/infiniband.sa.{name}"] = _class_field(SA_DATA, (SA_CLASS,),
                                                              f"sa.{name}")
    block = "infiniband.p_keytable.p_keytableblock"
    for name in ("membershiptype", "p_keybase"):
        out[f"{block}/infiniband.p_keytable.{name}"] = attribute_field(
            SMP_DATA, f"p_keytable.{name}", "int")
    for parent in (SA_DATA, "infiniband"):
        out[f"{parent}/infiniband.classportinfo.reserved"] = _class_port_info_reserved(parent)
    mask = "infiniband.portinfo.capabilitymask"
    for name in port_capability_bits().values():
        out[f"{mask}/{mask}.{name}"] = capability_field(name)
    return out


#: The trap details' keys tshark shows (reserved bits aside), and how each is shown; trap
#: 259's own (DataValid, P_Key, the switch's LID) never: tshark raises on its details
#: (divergence 'Notice trap 259 details').
TRAP_KINDS = {f.name: _kind(f.fmt) for n, r in TRAP_DETAILS.items() if n != 259
              for f in r.fields if ".reserved" not in f.name}
TRAP_NAMES = tuple(TRAP_KINDS)


@cache
def attribute_fields() -> dict[str, Field]:
    out = header_fields()
    for name in TRAP_NAMES:
        out[f"{SMP_DATA}/infiniband.{name}"] = attribute_field(SMP_DATA, name,
                                                               TRAP_KINDS[name])
    out.update(_records(SMP_DATA, SMP_RECORDS))
    out.update(_records(SA_DATA, (r for r in SA_RECORDS if r is not NOTICE_GS)))
    out.update(_records(SMP_DATA, (NOTICE_GS,)))
    out.update(_records("infiniband", (CLASS_PORT_INFO,)))
    for record in PERF_RECORDS[1:]:
        out.update(_records(f"infiniband.{record.name}", (record,)))
    return out


# -- tshark's mistakes in these fields -------------------------------------------------------

def _non_ascii_string(view: View) -> bool:
    value = view.fields.get("nodedescription.nodestring")
    return parent_of(view) is not None and any(
        isinstance(v, str) and not v.isascii() for v in flat(value if value is not None else []))


def _model_ascii(view: View, expected: Expected) -> None:
    for parent in (SMP_DATA, SA_DATA):
        qkey = f"{parent}/infiniband.nodedescription.nodestring"
        expected[qkey] = [tshark_text(v.encode("utf-8")) if isinstance(v, str) else v
                          for v in expected.get(qkey, [])]


def _sa_table(view: View) -> bool:
    """An SA GetTableResp/GetMultiResp of a decoded attribute whose records are not exactly
    one, or a MultiPathRecord whose GIDs tshark reads past its AttributeOffset (tshark shows
    one record, and a MultiPathRecord's GIDs up to the MAD's end: see the divergence)."""
    f = view.fields
    if f.get("mad.mgmtclass") != SA_CLASS or f.get("mad.method") not in TABLE_METHODS:
        return False
    row = mad_attributes().get((SA_CLASS, f.get("mad.attributeid")))
    if row is None or "sa" not in view:
        return False
    first = RECORDS[row.record].fields[0].name
    if len(f.get(first, ())) != 1:
        return True
    return row.record == "multipathrecord" and f.get("multipathrecord.sdgid", [[]])[0] != \
        _first_record(view)["multipathrecord.sdgid"]


def _first_record(view: View) -> dict[str, Any]:
    """The first record of an SA table as tshark reads it, from the first bytes after the SA
    header (a MultiPathRecord with its GIDs up to the MAD's end)."""
    row = mad_attributes()[(SA_CLASS, view.fields["mad.attributeid"])]
    record = RECORDS[row.record]
    start = view.packet.header("mad").offset + SA_RECORDS_AT
    if view.packet.icrc_offset is None or start + record.size > view.packet.icrc_offset:
        raise NotModelled("an SA table whose first record runs into the ICRC: not modelled")
    values = split_items(record.parse(view.packet.frame, start))
    if record is sa.MULTI_PATH_RECORD:
        at = start + record.size
        end = min(view.packet.header("mad").offset + 256, view.packet.icrc_offset)
        count = min(values["multipathrecord.sgidcount"] + values["multipathrecord.dgidcount"],
                    (end - at) // 16)
        values["multipathrecord.sdgid"] = [sa.MULTI_PATH_GID.parse(
            view.packet.frame, at + 16 * k)["multipathrecord.sdgid"] for k in range(count)]
    return values


SA_HEADER_KEYS = frozenset(f"{SA_DATA}/infiniband.{f.name}" for f in sa.SA_HEADER.fields)
#: Where an SA MAD's data (its records) starts: after the MAD, RMPP and SA headers (15.2.1.1).
SA_RECORDS_AT = 24 + 12 + sa.SA_HEADER.size


def _model_sa_table(view: View, expected: Expected) -> None:
    values = _first_record(view)
    first = copy.copy(view)
    first.fields = {**{k: v for k, v in view.fields.items() if not isinstance(v, list)},
                    **values, **derived(MappingProxyType({"mgmtclass": SA_CLASS}), values)}
    for qkey, field in attribute_fields().items():
        if qkey.startswith((f"{SA_DATA}/", f"{SMP_DATA}/infiniband.notice",
                            f"{SMP_DATA}/infiniband.trap.",
                            "infiniband.portinfo.capabilitymask/")) \
                and qkey not in SA_HEADER_KEYS:
            expected[qkey] = field.get(first)


DIVERGENCES = (
    Divergence(
        "MAD string read as ASCII",
        "NEW (measured: 'héllo' shows as 'h\\ufffd\\ufffdllo'): IBA 14.2.5.15 NodeString is UTF-8; "
        "tshark 4.0.17 reads it as ASCII, each byte past 0x7F a replacement character",
        _non_ascii_string, _model_ascii),
    Divergence(
        "SA table: one record",
        "NEW (measured on random tables): in an SA GetTableResp/GetMultiResp tshark 4.0.17 "
        "decodes one record, from the first bytes after the SA header, whatever the "
        "AttributeOffset and RMPP PayloadLength say (IBA 15.2.1.1: the records repeat every "
        "AttributeOffset words), a MultiPathRecord with SGIDCount + DGIDCount GIDs read up "
        "to the MAD's end, past the record's AttributeOffset (then it raises: see 'MAD "
        "attribute decoder: no ICRC'); ibwire gives every record the payload holds (none "
        "when the first does not fit), a MultiPathRecord's GIDs within its record",
        _sa_table, _model_sa_table),
)


def _directed(view: View) -> bool:
    return view.fields.get("mad.mgmtclass") == SMP_DIRECTED and "smpdirected.d" in view.fields \
        and (view.fields["smpdirected.d"], view.fields["smpdirected.smpstatus"]) != (
            view.fields["mad.classspecific"] >> 15, view.fields["mad.status"])


def _model_directed(view: View, expected: Expected) -> None:
    directed = "infiniband.smpdirected/infiniband.smpdirected."
    expected[directed + "d"] = [view.fields["mad.classspecific"] >> 15]
    expected[directed + "smpstatus"] = [view.fields["mad.status"]]


DIVERGENCES += (
    Divergence(
        "directed-route D bit and status",
        "NEW (tshark -G fields: smpdirected.d FT_UINT64 mask 0x8000, smpstatus FT_UINT16 no "
        "mask; measured): IBA 14.2.1.2 puts the D bit at the top of the common header's "
        "Status and the SMP status in its other 15 bits; tshark 4.0.17 reads D from the "
        "64-bit word at MAD byte 0 (bit 15: the top bit of the hop pointer) and shows the "
        "whole Status word as the status",
        _directed, _model_directed),
)


def _sa_header_shown(view: View) -> bool:
    """An SA RMPP ACK, STOP or ABORT (no SA header, IBA 13.6.2.1: their data is reserved or
    error data) that is long enough for tshark to show one."""
    f = view.fields
    return f.get("mad.mgmtclass") == SA_CLASS and "rmpp.rmpptype" in f and "sa" not in view \
        and bool(_mad_bytes(view, 36, sa.SA_HEADER.size))


def _model_sa_header(view: View, expected: Expected) -> None:
    values = sa.SA_HEADER.parse(_mad_bytes(view, 36, sa.SA_HEADER.size)[0])
    for name in ("smkey", "attributeoffset", "componentmask"):
        expected[f"{SA_DATA}/infiniband.sa.{name}"] = [values[f"sa.{name}"]]
    if (SA_CLASS, view.fields["mad.attributeid"]) in mad_attributes():
        _model_sa_table(view, expected)  # and one record, as in a table


DIVERGENCES += (
    Divergence(
        "SA header in RMPP ACK/STOP/ABORT",
        "NEW (measured on generated SA MADs): IBA 13.6.2.1 gives an RMPP ACK 220 reserved "
        "bytes and a STOP/ABORT error data after the RMPP header (ib_mad.h: no class header "
        "in them); tshark 4.0.17 shows an SA header there all the same, and one record of "
        "the attribute as in 'SA table: one record'",
        _sa_header_shown, _model_sa_header),
)


def _vendor_notice_as_trap(view: View) -> bool:
    """A vendor notice (IsGeneric 0) whose DeviceID is a trap number tshark decodes (but 259:
    'Notice trap 259 details')."""
    f = view.fields
    return parent_of(view) == SMP_DATA and f.get("notice.isgeneric") == 0 \
        and isinstance(f.get("notice.datadetails"), bytes) \
        and f.get("notice.trapnumberdeviceid") in TRAP_DETAILS \
        and f["notice.trapnumberdeviceid"] != 259


def _model_vendor_notice(view: View, expected: Expected) -> None:
    generic = copy.copy(view)
    generic.fields = {**view.fields, "notice.isgeneric": 1}
    generic.fields.update(trap_details(generic.fields))
    for name in TRAP_NAMES:
        qkey = f"{SMP_DATA}/infiniband.{name}"
        expected[qkey] = attribute_fields()[qkey].get(generic)


DIVERGENCES += (
    Divergence(
        "vendor Notice decoded as a trap",
        "NEW (measured: IsGeneric 0, DeviceID 65, 129, 256 ...): IBA 14.2.5.1 has a vendor "
        "notice's DataDetails vendor-defined and the word at Notice byte 4 a DeviceID; "
        "tshark 4.0.17 decodes the details by that word as a trap number all the same",
        _vendor_notice_as_trap, _model_vendor_notice),
)
