"""The MAD part of the tshark mapping for SMP, SA and PerfMgt: class headers and attribute
fields, derived from the declarations (src/ibwire/headers/{smp,sa,perf,mad}.py), whose
field names are Wireshark's.

tshark 4.0.17 (packet-infiniband.c) puts an attribute's fields under one parent item per
class: ``infiniband.smplid.smpdata`` for SMP attributes (LID-routed and directed-route) and
any Notice, ``infiniband.sa.drdlid`` (sic) for the SA header and records, the top
``infiniband`` item for PerfMgt ClassPortInfo and ``infiniband.portcounters(_ext)`` for the
PerfMgt counters; its names repeat once per entry of a table (P_Key blocks, SA
GetTableResp records), as ibwire's lists do. The declared fields tshark does not show
(reserved bits, fields later than its decoder) are listed in ``NOT_SHOWN``; where tshark
shows them wrong, :mod:`.attribute_divergences` models it.
"""

from __future__ import annotations

from collections.abc import Iterable
from functools import cache
from typing import Any

from ibwire.fuzz.wireshark.compare import Field, View
from ibwire.headers import perf, sa, smp
from ibwire.headers.layout import Record
from ibwire.headers.mad import CLASS_PORT_INFO, NOTICE, NOTICE_GS, TRAP_DETAILS
from ibwire.mad_numbers import PERF, SA_CLASS, SMP_DIRECTED, SMP_LID
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
        return mad_bytes(view, at, 64)
    return Field(f"smpdirected.{name} (MAD bytes {at}-{at + 63})", "bytes", get)


def mad_bytes(view: View, at: int, size: int) -> list[bytes]:
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
