"""MAD bodies: what follows the common MAD header (and RMPP header) up to byte 256.

Each class ibwire decodes lays its 256 bytes out in fixed parts (IBA Vol. 1 13.4.3, 14.2.1,
15.2.1.1, 16.1.1, 12.6): a class header, a data area filled by the attribute that
``specs/mad_attributes.tsv`` names for (MgmtClass, AttributeID), and a tail. :func:`plan` gives
the parts in wire order; :func:`parse_body` (the dissector) and :func:`build_body` (the
builder) walk the same plan, so what one reads the other writes back byte for byte. What an
attribute leaves of its area is kept as ``<attribute>.padding``; an SA GetTableResp's records,
and the entries of SMP tables (P_Key, GUIDInfo, forwarding ...), are lists in wire order.

An attribute ibwire does not know keeps its bytes in the packet's payload with a warning (an
:class:`~ibwire.errors.UnknownAttributeError` with ``strict=True``); a MAD whose fields lie (an
attribute cut by the ICRC, an RMPP segment number or payload length that cannot be, a
directed-route hop count past the 64-entry path) raises :class:`~ibwire.errors.MalformedError`
naming the field.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterator, Mapping
from functools import cache
from types import MappingProxyType
from typing import Any, NamedTuple

import construct as cs

from ibwire.errors import BuildError, MalformedError, UnknownAttributeError
from ibwire.headers import cm, perf, sa, smp
from ibwire.headers.layout import Record, display, octets
from ibwire.headers.mad import CLASS_PORT_INFO, NOTICE, NOTICE_GS
from ibwire.mad_numbers import (
    CM_CLASS,
    DECODED,
    MAD_SIZE,
    MAX_HOPS,
    PERF,
    RMPP_ACTIVE,
    RMPP_DATA,
    RMPP_FIRST,
    RMPP_LAST,
    SA_CLASS,
    SMP_DIRECTED,
    SMP_LID,
    TABLE_METHODS,
)
from ibwire.mad_views import (
    CAPABILITY_KEYS,
    TRAP_KEYS,
    build_record,
    capability_bits,
    gaps_of_gids,
    gids_of_gaps,
    ipv4_mapped,
    rmpp_words,
    split_items,
    trap_bytes,
    trap_details,
)
from ibwire.packet import HeaderValue
from ibwire.tables import MadAttribute, mad_attributes

#: Every attribute declaration, by the name specs/mad_attributes.tsv gives it.
RECORDS: dict[str, Record] = {r.name: r for r in (
    *cm.CM_MESSAGES, CLASS_PORT_INFO, NOTICE, NOTICE_GS,
    smp.NODE_DESCRIPTION, smp.NODE_INFO, smp.SWITCH_INFO, smp.GUID_INFO, smp.PORT_INFO,
    smp.P_KEY_TABLE, smp.SL_TO_VL, smp.VL_ARBITRATION, smp.LINEAR_FORWARDING, smp.SM_INFO,
    sa.PATH_RECORD, sa.MC_MEMBER_RECORD, sa.NODE_RECORD, sa.PORT_INFO_RECORD,
    sa.SERVICE_RECORD, sa.INFORM_INFO, sa.LINK_RECORD, sa.MULTI_PATH_RECORD,
    perf.PORT_COUNTERS, perf.PORT_COUNTERS_EXT, perf.PORT_SAMPLES_CONTROL,
    perf.PORT_SAMPLES_RESULT,
)}
#: Class headers and tails, and the parts only some attributes have.
FRAMES: tuple[Record, ...] = (smp.SMP_LID, smp.SMP_LID_TAIL, smp.SMP_DIRECTED,
                              smp.SMP_DIRECTED_PATHS, sa.SA_HEADER, perf.PERF_HEADER,
                              sa.MULTI_PATH_GID)


#: Titles of the parts, by name (fillers are titled 'reserved').
TITLES: dict[str, str] = {r.name: r.title for r in (*RECORDS.values(), *FRAMES)}


class Part(NamedTuple):
    """One part of a MAD body: ``entries`` 0 is one record (values are scalars), n > 0 is n
    records ``stride`` bytes apart (values are lists; the bytes between records are
    ``<name>.gap``)."""

    header: Record
    entries: int = 0
    stride: int = 0

    @property
    def size(self) -> int:
        return self.header.size if not self.entries else self.entries * self.stride

    @property
    def gap(self) -> int:
        return self.stride - self.header.size if self.entries else 0


@cache
def filler(name: str, size: int) -> Record:
    """Reserved bytes kept under one key (an attribute's ``.padding``)."""
    return Record(name, "reserved", cs.BitStruct(name / octets(size)))


def attribute_of(mad: Mapping[str, Any]) -> MadAttribute | None:
    return mad_attributes().get((mad["mgmtclass"], mad["attributeid"]))


def _area(record: Record, entries: int, area: int) -> Iterator[Part]:
    """An attribute of ``entries`` (0: one) filling ``area`` bytes, then its padding."""
    part = Part(record, entries if entries > 1 else 0, record.size if entries > 1 else 0)
    yield part
    if area > part.size:
        yield Part(filler(f"{record.name}.padding", area - part.size))


def plan(mad: Mapping[str, Any], rmpp: Mapping[str, Any] | None,
         seen: Mapping[str, Any]) -> Iterator[Part]:
    """The parts of a MAD body in wire order; ``seen`` holds the values of the parts already
    walked (the SA header's AttributeOffset sizes a table's records)."""
    klass, row = mad["mgmtclass"], attribute_of(mad)
    if klass == CM_CLASS:
        if row is not None:
            yield from _area(RECORDS[row.record], row.entries, MAD_SIZE - 24)
    elif klass in (SMP_LID, SMP_DIRECTED):
        lid = klass == SMP_LID
        yield Part(smp.SMP_LID if lid else smp.SMP_DIRECTED)
        if row is not None:
            yield from _area(RECORDS[row.record], row.entries, smp.SMP_DATA)
            yield Part(smp.SMP_LID_TAIL if lid else smp.SMP_DIRECTED_PATHS)
    elif klass == PERF:
        yield Part(perf.PERF_HEADER)
        if row is not None:
            yield from _area(RECORDS[row.record], row.entries, perf.PERF_DATA)
    elif klass == SA_CLASS and _sa_data(rmpp):
        yield Part(sa.SA_HEADER)
        if row is not None and _rmpp_first(rmpp):
            yield from _sa_records(mad, rmpp, RECORDS[row.record], seen)


def _sa_data(rmpp: Mapping[str, Any] | None) -> bool:
    """An SA MAD carries its SA header unless it is an RMPP ACK, STOP or ABORT."""
    return rmpp is None or not rmpp["rmppflags"] & RMPP_ACTIVE or rmpp["rmpptype"] == RMPP_DATA


def _rmpp_first(rmpp: Mapping[str, Any] | None) -> bool:
    """Records start in a MAD that is not segmented, or in the first segment."""
    return rmpp is None or not rmpp["rmppflags"] & RMPP_ACTIVE or rmpp["data1"] == 1


def _sa_records(mad: Mapping[str, Any], rmpp: Mapping[str, Any] | None, record: Record,
                seen: Mapping[str, Any]) -> Iterator[Part]:
    if mad["method"] not in TABLE_METHODS:
        if record is sa.MULTI_PATH_RECORD:
            yield Part(record)
            count = seen.get("multipathrecord.sgidcount", 0) + seen.get(
                "multipathrecord.dgidcount", 0)
            room = (sa.SA_DATA - record.size) // sa.MULTI_PATH_GID.size
            if count > room:
                raise MalformedError(f"MultiPathRecord counts {count} GIDs, {room} fit",
                                     header="multipathrecord", field="sgidcount")
            used = record.size + count * sa.MULTI_PATH_GID.size
            if count:
                yield Part(sa.MULTI_PATH_GID, count, sa.MULTI_PATH_GID.size)
            if used < sa.SA_DATA:
                yield Part(filler(f"{record.name}.padding", sa.SA_DATA - used))
            return
        yield from _area(record, 1, sa.SA_DATA)
        return
    stride = seen.get("sa.attributeoffset", 0) * 8
    count = 0
    if stride:
        if stride < record.size:
            raise MalformedError(f"AttributeOffset {stride // 8} words is shorter than a "
                                 f"{record.title} ({record.size} bytes)",
                                 header="sa", field="attributeoffset")
        total = sa.SA_DATA
        if rmpp is not None and rmpp["rmppflags"] & RMPP_ACTIVE:
            total = min(total, rmpp["data2"] - sa.SA_HEADER.size)
        count = max(total, 0) // stride
    if count:
        yield Part(record, count, stride)
    if count * stride < sa.SA_DATA:
        yield Part(filler("sa.padding", sa.SA_DATA - count * stride))


def check_rmpp(rmpp: Mapping[str, Any], offset: int) -> None:
    """An RMPP DATA segment whose segment number or payload length cannot be (13.6.2)."""
    if not rmpp["rmppflags"] & RMPP_ACTIVE or rmpp["rmpptype"] != RMPP_DATA:
        return
    segment, length = rmpp["data1"], rmpp["data2"]
    if segment == 0:
        raise MalformedError("RMPP DATA segment number 0 (segments count from 1)",
                             header="rmpp", field="segmentnumber", offset=offset + 4)
    first = rmpp["rmppflags"] & RMPP_FIRST
    if bool(first) != (segment == 1):
        raise MalformedError(f"RMPP segment {segment} {'has' if first else 'lacks'} the First "
                             "flag", header="rmpp", field="rmppflags", offset=offset + 2)
    if first and rmpp["rmppflags"] & RMPP_LAST and length > MAD_SIZE - 36:
        raise MalformedError(f"RMPP PayloadLength {length} of a single segment exceeds its "
                             f"{MAD_SIZE - 36} bytes", header="rmpp", field="payloadlength",
                             offset=offset + 8)


def check_directed(mad: Mapping[str, Any], offset: int) -> None:
    hops, pointer = mad["classspecific"] & 0xFF, mad["classspecific"] >> 8
    if hops > MAX_HOPS:
        raise MalformedError(f"directed-route hop count {hops} runs past the {MAX_HOPS}-hop "
                             "path", header="smpdirected", field="hopcount", offset=offset + 7)
    if pointer > hops + 1:
        raise MalformedError(f"hop pointer {pointer} is past hop count {hops} + 1",
                             header="smpdirected", field="hoppointer", offset=offset + 6)


class Body(NamedTuple):
    headers: list[HeaderValue]
    derived: dict[str, Any]
    warnings: list[str]
    end: int


def parse_body(frame: bytes, offset: int, limit: int, mad: Mapping[str, Any],
               rmpp: Mapping[str, Any] | None, strict: bool = False) -> Body:
    """The parts of the MAD body at ``offset`` (after the MAD and RMPP headers), which must end
    by ``limit`` (the ICRC). A frame the capture cut (``limit`` past its end) gives the parts
    and fields it kept, and a warning naming the first field missing."""
    warnings: list[str] = []
    klass = mad["mgmtclass"]
    if klass not in DECODED:
        return Body([], rmpp_words(rmpp), warnings, offset)
    start = offset - 24 - (12 if rmpp is not None else 0)
    if rmpp is not None:
        check_rmpp(rmpp, start + 24)
    if klass == SMP_DIRECTED:
        check_directed(mad, start)
    if attribute_of(mad) is None:
        reason = (f"unknown attribute 0x{mad['attributeid']:04x} of MAD class 0x{klass:02x}: "
                  "its bytes are kept as payload")
        if strict:
            raise UnknownAttributeError(reason, header="mad", field="attributeid",
                                        offset=start + 16)
        warnings.append(reason)
    headers: list[HeaderValue] = []
    seen: dict[str, Any] = {}
    for part in plan(mad, rmpp, seen):
        if offset + part.size > limit:
            raise _cut(part, offset, limit, start)
        if offset + part.size > len(frame):  # the capture cut it: the fields it kept
            values, missing = _kept_fields(part, frame, offset)
            if values:
                headers.append(HeaderValue(part.header.name, offset, part.size,
                                           MappingProxyType(values), full_keys=True))
            warnings.append(f"MAD body cut by the capture: {missing} onwards missing")
            end = offset + part.size if values else offset
            return Body(headers, derived(mad, seen, rmpp), warnings, end)  # of whole parts only
        values = parse_part(part, frame, offset)
        seen.update(values)
        headers.append(HeaderValue(part.header.name, offset, part.size,
                                   MappingProxyType(values), full_keys=True))
        offset += part.size
    return Body(headers, derived(mad, seen, rmpp), warnings, offset)


def parse_part(part: Part, frame: bytes, offset: int) -> dict[str, Any]:
    header = part.header
    if not part.entries:
        return split_items(header.parse(frame, offset))
    entries = [split_items(header.parse(frame, offset + i * part.stride))
               for i in range(part.entries)]
    values: dict[str, Any] = {f.name: [e[f.name] for e in entries] for f in header.fields}
    if part.gap:
        values[f"{header.name}.gap"] = [
            frame[offset + i * part.stride + header.size:offset + (i + 1) * part.stride]
            for i in range(part.entries)]
        if header is sa.MULTI_PATH_RECORD:
            gids_of_gaps(values)
    return values


def _kept_fields(part: Part, frame: bytes, offset: int) -> tuple[dict[str, Any], str]:
    """The values of the fields of ``part`` wholly in the bytes a capture kept (a table: its
    whole records), and the name of the first field missing."""
    header = part.header
    left = len(frame) - offset
    if part.entries:
        whole = min(part.entries, max(left, 0) // part.stride)
        missing = f"{header.name} record {whole}"
        if not whole:
            return {}, missing
        return parse_part(part._replace(entries=whole), frame, offset), missing
    padded = frame[offset:] + bytes(header.size - left)
    values = parse_part(part, padded, 0)
    kept = {f.name for f in header.fields if header.size * 8 - f.shift <= left * 8}
    first = next((f.name for f in header.fields if f.name not in kept), header.name)
    return {k: v for k, v in values.items() if k in kept}, header.key(first)


def _cut(part: Part, offset: int, limit: int, start: int) -> MalformedError:
    """The error for a part that runs past the ICRC: it names the first field cut."""
    header = part.header
    left = limit - offset
    if part.entries:
        left %= part.stride
    cut = next((f for f in header.fields if header.size * 8 - f.shift > left * 8), None)
    # no field cut: the cut falls in the gap after a table record (SA AttributeOffset)
    where = header.where(cut.name) if cut is not None else {"header": header.name,
                                                            "field": "gap"}
    return MalformedError(f"{header.title} runs past the end of the MAD: {part.size} bytes "
                          f"needed at MAD byte {offset - start}, the ICRC follows "
                          f"{limit - start} bytes in", **where, offset=offset)


def derived(mad: Mapping[str, Any], values: Mapping[str, Any],
            rmpp: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Keys Wireshark shows that are views of other fields: the RMPP data words by RMPP type,
    a REQ's service ID split and RDMA-CM IP private data (in the RDMA IP CM service ID range
    only, as Wireshark), a REQ's IPv4-mapped primary GIDs as IPv4 addresses, a
    directed-route SMP's D bit, status and hops, PortInfo's CapabilityMask bits (one list
    entry a record in an SA table)."""
    out: dict[str, Any] = rmpp_words(rmpp)
    out.update(trap_details(values))
    out.update(capability_bits(values))
    for side in ("local", "remote"):
        gid = values.get(f"cm.req.prim_{side}gid")
        address = None if gid is None else ipv4_mapped(gid)
        if address is not None:
            out[f"cm.req.prim_{side}gid_ipv4"] = address
    if mad["mgmtclass"] == SMP_DIRECTED:
        out["smpdirected.d"] = mad["status"] >> 15
        out["smpdirected.smpstatus"] = mad["status"] & 0x7FFF
        out["smpdirected.hoppointer"] = mad["classspecific"] >> 8
        out["smpdirected.hopcount"] = mad["classspecific"] & 0xFF
    if "cm.req.serviceid" in values and values["cm.req.serviceid"] >> 24 == cm.IP_CM_PREFIX:
        sid = values["cm.req.serviceid"]
        out["cm.req.serviceid.prefix"] = (sid >> 24).to_bytes(5, "big")
        out["cm.req.serviceid.protocol"] = (sid >> 16) & 0xFF
        out["cm.req.serviceid.dport"] = sid & 0xFFFF
        out.update(ip_cm(values["cm.req.private"]))
    return out


def ip_cm(private: bytes) -> dict[str, Any]:
    """RDMA-CM's IP header in a REQ's private data; addresses as IPv4 text when its IP
    version is 4 (the last 4 of their 16 bytes), else as IPv6 text."""
    values = cm.IP_CM.parse(private)
    out = {k: v for k, v in values.items() if not k.endswith(("sip6", "dip6"))}
    for end in ("sip", "dip"):
        text = values[f"cm.req.ip_cm.{end}6"]
        if values["cm.req.ip_cm.ipv"] == 4:
            out[f"cm.req.ip_cm.{end}4"] = str(ipaddress.IPv4Address(
                ipaddress.IPv6Address(text).packed[12:]))
        else:
            out[f"cm.req.ip_cm.{end}6"] = text
    return out


# -- building ------------------------------------------------------------------------------

#: Keys a MAD body may be built from: declared fields, gaps, paddings and derived views.
IP_CM_KEYS = frozenset({f.name for f in cm.IP_CM.fields} | {"cm.req.ip_cm.sip4",
                                                            "cm.req.ip_cm.dip4"})
DERIVED_KEYS = frozenset({
    "smpdirected.d", "smpdirected.smpstatus", "smpdirected.hoppointer", "smpdirected.hopcount",
    "cm.req.serviceid.prefix", "cm.req.serviceid.protocol", "cm.req.serviceid.dport",
    "cm.req.prim_localgid_ipv4", "cm.req.prim_remotegid_ipv4", "rmpp.segmentnumber",
    "rmpp.payloadlength", "rmpp.newwindowlast", *IP_CM_KEYS, *TRAP_KEYS,
    *CAPABILITY_KEYS})


def is_body_key(key: str) -> bool:
    return key in body_keys() or key in DERIVED_KEYS or key.endswith((".padding", ".gap"))


@cache
def body_keys() -> frozenset[str]:
    return frozenset(f.name for r in (*RECORDS.values(), *FRAMES) for f in r.fields)


#: What a MAD built from an attribute's keys gets by default: the class version Linux sends
#: (ib_cm.h IB_CM_CLASS_VERSION 2, ib_sa.h IB_SA_CLASS_VERSION 2, SMP and PerfMgt 1), the
#: method (CM messages are SENDs, the others GETs), QP1 (QP0 for SMPs) with the GSI Q_Key
#: (IBA 13.5.1, ib_mad.h IB_QP1_QKEY).
CLASS_DEFAULTS = {CM_CLASS: (2, 0x03), SA_CLASS: (2, 0x01), PERF: (1, 0x01),
                   SMP_LID: (1, 0x01), SMP_DIRECTED: (1, 0x01)}
QP1_QKEY = 0x80010000


def inferred(given: Mapping[str, Any]) -> dict[str, Any]:
    """Defaults for a frame given keys of a MAD attribute (``cm.req.localqpn`` ...) but no
    ``mad.attributeid``: the class and attribute the keys belong to, when only one has them,
    and the MAD's addressing. Empty when nothing is to be inferred."""
    if "mad.attributeid" in given or given.keys().isdisjoint(body_keys()):
        return {}
    names = {r.name for r in RECORDS.values() if any(f.name in given for f in r.fields)}
    rows = [row for row in mad_attributes().values() if row.record in names]
    klass = given.get("mad.mgmtclass")
    if klass is not None:
        rows = [row for row in rows if row.mgmtclass == klass]
    if len({(row.mgmtclass, row.attribute) for row in rows}) != 1:
        return {}
    row = rows[0]
    version, method = CLASS_DEFAULTS[row.mgmtclass]
    return {"mad.mgmtclass": row.mgmtclass, "mad.attributeid": row.attribute,
            "mad.baseversion": 1, "mad.classversion": version, "mad.method": method,
            **carrier(row.mgmtclass)}


def carrier(mgmtclass: int) -> dict[str, int]:
    """The packet a MAD of class ``mgmtclass`` travels in: UD SEND only between QP0s with
    Q_Key 0 for SMPs, else between QP1s with the GSI Q_Key (IBA 13.5.1)."""
    smi = mgmtclass in (SMP_LID, SMP_DIRECTED)
    return {"bth.opcode": 0x64, "bth.destqp": 0 if smi else 1, "deth.srcqp": 0 if smi else 1,
            "deth.q_key": 0 if smi else QP1_QKEY}


def build_body(mad: Mapping[str, Any], rmpp: Mapping[str, Any] | None,
               given: Mapping[str, Any]) -> tuple[bytes, set[str]]:
    """The bytes of a MAD body from flat keys (missing fields are 0), and the keys used.
    Nothing when no key of the body is given: the caller's payload is then the body."""
    if not given:
        return b"", set()
    values = dict(given)
    if "cm.req.private" not in values and IP_CM_KEYS & values.keys():
        values["cm.req.private"] = _ip_cm_bytes(values)
    if "notice.datadetails" not in values and TRAP_KEYS & values.keys():
        values["notice.datadetails"] = trap_bytes(values)
    used = set(given) & DERIVED_KEYS
    out = bytearray()
    seen: dict[str, Any] = {}
    parts = plan(mad, rmpp, seen)
    while True:
        try:
            part = next(parts, None)
        except MalformedError as exc:  # a layout the values contradict (AttributeOffset ...)
            raise BuildError(exc.reason, header=exc.header, field=exc.field) from exc
        if part is None:
            break
        header = part.header
        if not part.entries:
            mine = {f.name: values[f.name] for f in header.fields if f.name in values}
            out += build_record(header, mine)
            seen.update(header.parse(out, len(out) - header.size))
        else:
            out += build_entries(part, values)
        used.update(k for k in values if k in header.by_name or k == f"{header.name}.gap")
        if part.entries and header is sa.MULTI_PATH_RECORD:
            used.update(k for k in values if k == "multipathrecord.sdgid")
    return bytes(out), used


def build_entries(part: Part, values: Mapping[str, Any]) -> bytes:
    header, out = part.header, bytearray()
    lists = {f.name: values[f.name] for f in header.fields if f.name in values}
    for name, value in lists.items():
        if not isinstance(value, (list, tuple)) or len(value) != part.entries:
            raise BuildError(f"{name} needs a list of {part.entries} values",
                             **header.where(name))
    gaps = values.get(f"{header.name}.gap", [bytes(part.gap)] * part.entries)
    if header is sa.MULTI_PATH_RECORD and "multipathrecord.sdgid" in values:
        gaps = gaps_of_gids(part.entries, part.gap, values)
    for i in range(part.entries):
        out += build_record(header, {k: v[i] for k, v in lists.items()})
        gap = bytes(gaps[i])
        if len(gap) != part.gap:
            raise BuildError(f"{header.name}.gap entries are {part.gap} bytes",
                             header=header.name, field="gap")
        out += gap
    return bytes(out)


def _ip_cm_bytes(values: Mapping[str, Any]) -> bytes:
    mine = {k: v for k, v in values.items() if k in cm.IP_CM.by_name}
    mine.setdefault("cm.req.ip_cm.ipv", 6 if "cm.req.ip_cm.sip6" in values else 4)
    for end in ("sip", "dip"):
        if f"cm.req.ip_cm.{end}4" in values:
            v4 = ipaddress.IPv4Address(values[f"cm.req.ip_cm.{end}4"]).packed
            mine[f"cm.req.ip_cm.{end}6"] = bytes(12) + v4
    return cm.IP_CM.build(mine)


__all__ = ["Body", "Part", "RECORDS", "build_body", "build_record", "split_items", "derived", "display", "parse_body", "plan"]
