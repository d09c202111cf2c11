"""tshark 4.0.17's mistakes in SMP, SA and PerfMgt attribute fields, each modelled (see
:mod:`.divergences`): what it shows instead of the fields :mod:`.attribute_fields` maps.
Measured on generated MADs (tests/diff/test_tshark_mads.py); the reasons cite IBA and Linux.
"""

from __future__ import annotations

import copy
from types import MappingProxyType
from typing import Any

from ibwire.fuzz.wireshark.attribute_fields import (
    SA_DATA,
    SMP_DATA,
    TRAP_NAMES,
    attribute_fields,
    flat,
    mad_bytes,
    parent_of,
    tshark_text,
)
from ibwire.fuzz.wireshark.compare import Divergence, Expected, NotModelled, View
from ibwire.headers import sa
from ibwire.headers.mad import TRAP_DETAILS
from ibwire.mad_numbers import SA_CLASS, SMP_DIRECTED, TABLE_METHODS
from ibwire.mads import RECORDS, derived, split_items, trap_details
from ibwire.tables import mad_attributes


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


def _directed(view: View) -> bool:
    return view.fields.get("mad.mgmtclass") == SMP_DIRECTED and "smpdirected.d" in view.fields \
        and (view.fields["smpdirected.d"], view.fields["smpdirected.smpstatus"]) != (
            view.fields["mad.classspecific"] >> 15, view.fields["mad.status"])


def _model_directed(view: View, expected: Expected) -> None:
    directed = "infiniband.smpdirected/infiniband.smpdirected."
    expected[directed + "d"] = [view.fields["mad.classspecific"] >> 15]
    expected[directed + "smpstatus"] = [view.fields["mad.status"]]


def _sa_header_shown(view: View) -> bool:
    """An SA RMPP ACK, STOP or ABORT (no SA header, IBA 13.6.2.1: their data is reserved or
    error data) that is long enough for tshark to show one."""
    f = view.fields
    return f.get("mad.mgmtclass") == SA_CLASS and "rmpp.rmpptype" in f and "sa" not in view \
        and bool(mad_bytes(view, 36, sa.SA_HEADER.size))


def _model_sa_header(view: View, expected: Expected) -> None:
    values = sa.SA_HEADER.parse(mad_bytes(view, 36, sa.SA_HEADER.size)[0])
    for name in ("smkey", "attributeoffset", "componentmask"):
        expected[f"{SA_DATA}/infiniband.sa.{name}"] = [values[f"sa.{name}"]]
    if (SA_CLASS, view.fields["mad.attributeid"]) in mad_attributes():
        _model_sa_table(view, expected)  # and one record, as in a table


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
    Divergence(
        "directed-route D bit and status",
        "NEW (tshark -G fields: smpdirected.d FT_UINT64 mask 0x8000, smpstatus FT_UINT16 no "
        "mask; measured): IBA 14.2.1.2 puts the D bit at the top of the common header's "
        "Status and the SMP status in its other 15 bits; tshark 4.0.17 reads D from the "
        "64-bit word at MAD byte 0 (bit 15: the top bit of the hop pointer) and shows the "
        "whole Status word as the status",
        _directed, _model_directed),
    Divergence(
        "SA header in RMPP ACK/STOP/ABORT",
        "NEW (measured on generated SA MADs): IBA 13.6.2.1 gives an RMPP ACK 220 reserved "
        "bytes and a STOP/ABORT error data after the RMPP header (ib_mad.h: no class header "
        "in them); tshark 4.0.17 shows an SA header there all the same, and one record of "
        "the attribute as in 'SA table: one record'",
        _sa_header_shown, _model_sa_header),
    Divergence(
        "vendor Notice decoded as a trap",
        "NEW (measured: IsGeneric 0, DeviceID 65, 129, 256 ...): IBA 14.2.5.1 has a vendor "
        "notice's DataDetails vendor-defined and the word at Notice byte 4 a DeviceID; "
        "tshark 4.0.17 decodes the details by that word as a trap number all the same",
        _vendor_notice_as_trap, _model_vendor_notice),
)
