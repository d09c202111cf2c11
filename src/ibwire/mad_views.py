"""Views of MAD fields that Wireshark gives beside the declared ones, and their inverses
(:mod:`ibwire.mads` applies them when it parses and builds a body).

* the RMPP data words by RMPP type (IBA 13.6.2.1);
* a CM REQ's IPv4-mapped GIDs as IPv4 addresses (RFC 4291 2.5.5.2);
* PortInfo's CapabilityMask bits (IBA 14.2.5.6, ``specs/port_capability_mask.tsv``);
* a generic Notice's DataDetails by trap number (IBA 14.2.5.1, ``headers.mad.TRAP_DETAILS``);
* fields that are lists of fixed-size items (SA ServiceData, ``headers.sa.ITEMS``);
* a MultiPathRecord table's GIDs, which follow each record within its AttributeOffset.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping
from typing import Any

from ibwire.errors import BuildError
from ibwire.headers import sa
from ibwire.headers.layout import Record
from ibwire.headers.mad import TRAP_DETAILS
from ibwire.mad_numbers import RMPP_DATA
from ibwire.tables import port_capability_bits

#: What an RMPP header's two data words are, by RMPP type (IBA 13.6.2.1 tables 172-175;
#: Wireshark's infiniband.rmpp.* names): DATA's segment number and payload length, ACK's
#: segment number and new window last; STOP's and ABORT's are reserved.
RMPP_WORDS = {RMPP_DATA: ("rmpp.segmentnumber", "rmpp.payloadlength"),
              2: ("rmpp.segmentnumber", "rmpp.newwindowlast")}


def rmpp_words(rmpp: Mapping[str, Any] | None) -> dict[str, Any]:
    """``rmpp.data1`` and ``rmpp.data2`` under the names their RMPP type gives them."""
    names = RMPP_WORDS.get(rmpp["rmpptype"]) if rmpp is not None else None
    return {} if names is None else {names[0]: rmpp["data1"], names[1]: rmpp["data2"]}


def trap_details(values: Mapping[str, Any]) -> dict[str, Any]:
    """A generic Notice's DataDetails decoded by its trap number (``headers.mad.TRAP_DETAILS``,
    IBA 14.2.5.1 table 155), reserved bits left out; nothing for a vendor notice (IsGeneric
    0: the word is a DeviceID), another trap, or a Notice in an SA table."""
    details = values.get("notice.datadetails")
    if not isinstance(details, bytes) or values.get("notice.isgeneric") != 1:
        return {}
    record = TRAP_DETAILS.get(values["notice.trapnumberdeviceid"])
    if record is None:
        return {}
    return {k: v for k, v in record.parse(details).items() if ".reserved" not in k}


def trap_bytes(values: Mapping[str, Any]) -> bytes:
    """A Notice's DataDetails built from ``trap.*`` keys, laid out by its trap number."""
    number = values.get("notice.trapnumberdeviceid")
    record = TRAP_DETAILS.get(number) if isinstance(number, int) else None
    if record is None:
        raise BuildError("trap.* keys need notice.trapnumberdeviceid, one of the traps "
                         f"ibwire lays out ({', '.join(map(str, sorted(TRAP_DETAILS)))})",
                         header="notice", field="trapnumberdeviceid")
    return record.build({k: v for k, v in values.items() if k in record.by_name})


def ipv4_mapped(gid: str) -> str | None:
    """The IPv4 address of an IPv4-mapped GID (``::ffff:a.b.c.d``, RFC 4291 2.5.5.2: what
    rdma_cm puts in a REQ over RoCE/IPv4), else None."""
    mapped = ipaddress.IPv6Address(gid).ipv4_mapped
    return None if mapped is None else str(mapped)


#: The keys of a Notice's trap details (built into notice.datadetails when it is not given).
TRAP_KEYS = frozenset(f.name for r in TRAP_DETAILS.values() for f in r.fields)


#: PortInfo's CapabilityMask bit keys (specs/port_capability_mask.tsv).
CAPABILITY_KEYS = frozenset(f"portinfo.capabilitymask.{name}"
                            for name in port_capability_bits().values())


def capability_bits(values: Mapping[str, Any]) -> dict[str, Any]:
    """PortInfo's CapabilityMask bits by name (one list entry a record in an SA table)."""
    mask = values.get("portinfo.capabilitymask")
    if mask is None:
        return {}
    return {f"portinfo.capabilitymask.{name}": [m >> bit & 1 for m in mask]
            if isinstance(mask, list) else mask >> bit & 1
            for bit, name in port_capability_bits().items()}


#: Fields given as lists of fixed-size items (``sa.ITEMS``): name -> item size.
ITEMS: dict[str, int] = {**sa.ITEMS}


def split_items(values: dict[str, Any]) -> dict[str, Any]:
    """``values`` with each field of :data:`ITEMS` as its list of items."""
    for name, size in ITEMS.items():
        value = values.get(name)
        if isinstance(value, (bytes, bytearray)):
            values[name] = [bytes(value[i:i + size]) for i in range(0, len(value), size)]
    return values


def build_record(header: Record, values: Mapping[str, Any]) -> bytes:
    """``header.build``, a field of :data:`ITEMS` given as its list of items or as bytes."""
    joined = dict(values)
    for name, size in ITEMS.items():
        value = joined.get(name)
        if isinstance(value, (list, tuple)):
            if not all(isinstance(v, (bytes, bytearray)) and len(v) == size for v in value):
                raise BuildError(f"{name} items are {size} bytes each", **header.where(name))
            joined[name] = b"".join(value)
    return header.build(joined)


def gids_of_gaps(values: dict[str, Any]) -> None:
    """A MultiPathRecord table's GIDs (15.2.5.20: SGIDCount + DGIDCount follow each record,
    within its AttributeOffset): ``multipathrecord.sdgid``, a list of GIDs a record, as many
    as the record's room holds; ``multipathrecord.gap`` keeps the bytes after them."""
    gids, rests = [], []
    for sgids, dgids, gap in zip(values["multipathrecord.sgidcount"],
                                 values["multipathrecord.dgidcount"],
                                 values["multipathrecord.gap"], strict=True):
        count = min(sgids + dgids, len(gap) // 16)
        gids.append([str(ipaddress.IPv6Address(gap[16 * k:16 * k + 16]))
                     for k in range(count)])
        rests.append(gap[16 * count:])
    values["multipathrecord.sdgid"], values["multipathrecord.gap"] = gids, rests


def gaps_of_gids(entries: int, gap: int, values: Mapping[str, Any]) -> list[bytes]:
    """The gaps of a MultiPathRecord table from its GIDs and the bytes after them (the inverse
    of :func:`gids_of_gaps`)."""
    gids = values["multipathrecord.sdgid"]
    if not isinstance(gids, (list, tuple)) or len(gids) != entries:
        raise BuildError(f"multipathrecord.sdgid needs a list of {entries} GID lists",
                         header="multipathrecord", field="sdgid")
    rests = values.get("multipathrecord.gap")
    out = []
    for i, record in enumerate(gids):
        packed = b"".join(ipaddress.IPv6Address(g).packed for g in record)
        rest = bytes(rests[i]) if rests is not None else bytes(max(gap - len(packed), 0))
        out.append(packed + rest)
    return out
