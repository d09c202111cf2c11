"""Hypothesis strategies for whole MADs, valid and lying (re-exported by :mod:`ibwire.strategies`).

* :func:`mad_packets` -- a frame carrying a valid MAD of one declared attribute (any, or the
  one given), in any encapsulation, with random values (:func:`ibwire.strategies.mad_fields`);
* :func:`bad_mads` -- a frame whose MAD lies one way, and the error ibwire must give for it
  (:class:`BadMad`): an attribute cut short by the ICRC, an unknown attribute ID, an RMPP
  segment number, First flag or PayloadLength that cannot be, a directed-route hop count
  past the 64-entry path or a hop pointer past the hops, SA records longer than their
  AttributeOffset. The frames are built so (their CRCs are good): what must fail is the MAD.

The expected error is read from the declarations and IBA's rules, not from the dissector:
the cut field is the first field of the cut part not wholly before the ICRC (IBA 13.4.3:
a MAD is 256 bytes), or ``gap`` when the cut falls between two records of an SA table; the RMPP rules are IBA 13.6.2.1, the hop rules 14.2.1.2 (a path has 64
entries, entry 0 unused), the AttributeOffset rule 15.2.1.1.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from hypothesis import assume
from hypothesis import strategies as st

from ibwire.builder import DEFAULT_LINK, build
from ibwire.headers.sa import SA_HEADER
from ibwire.mad_numbers import MAD_SIZE
from ibwire.mads import (
    MAX_HOPS,
    RECORDS,
    RMPP_ACTIVE,
    RMPP_DATA,
    RMPP_FIRST,
    RMPP_LAST,
    SA_CLASS,
    SMP_DIRECTED,
    TABLE_METHODS,
    Part,
    build_body,
    plan,
)
from ibwire.tables import MadAttribute, mad_attributes, mad_classes

#: Kinds of lie :func:`bad_mads` draws from.
BAD_KINDS = ("truncated", "unknown_attribute", "rmpp_segment", "rmpp_first", "rmpp_length",
             "hop_count", "hop_pointer", "sa_offset")
_SMI = (0x01, SMP_DIRECTED)


@dataclass(frozen=True)
class MadPacket:
    """A frame with a valid MAD, and the flat keys it was built from."""

    frame: bytes
    link: str
    encapsulation: str
    attribute: MadAttribute
    fields: dict[str, Any]


@dataclass(frozen=True)
class BadMad:
    """A frame whose MAD lies, and the error ibwire must give: ``header`` and ``field`` of a
    :class:`~ibwire.errors.MalformedError`, or (``warning``) a warning that becomes an
    :class:`~ibwire.errors.UnknownAttributeError` with ``strict=True``."""

    frame: bytes
    link: str
    kind: str
    header: str
    field: str | None
    warning: bool = False
    fields: dict[str, Any] = field(default_factory=dict)


def _carrier(klass: int) -> dict[str, Any]:
    """A UD SEND to QP0 (SMPs) or QP1 (GMPs), as MADs are sent (IBA 13.5.1)."""
    qp = 0 if klass in _SMI else 1
    return {"bth.opcode": 0x64, "bth.destqp": qp, "deth.srcqp": qp,
            "deth.q_key": 0 if qp == 0 else 0x80010000}


@st.composite
def mad_packets(draw: st.DrawFn, attribute: MadAttribute | None = None,
                encapsulation: str | None = None) -> MadPacket:
    """A frame carrying a valid MAD of ``attribute`` (drawn when None)."""
    from ibwire.strategies import mad_fields

    row = attribute or draw(st.sampled_from(list(mad_attributes().values())))
    enc = encapsulation or draw(st.sampled_from(tuple(DEFAULT_LINK)))
    fields = {**_carrier(row.mgmtclass), **draw(mad_fields(row))}
    return MadPacket(build(enc, fields), DEFAULT_LINK[enc], enc, row, fields)


def _split(fields: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """The MAD and RMPP header keys, and the body keys."""
    heads = {k: v for k, v in fields.items() if k.startswith(("mad.", "rmpp."))}
    return heads, {k: v for k, v in fields.items() if k not in heads}


def _short(heads: dict[str, Any], prefix: str) -> dict[str, Any]:
    return {k[len(prefix):]: v for k, v in heads.items() if k.startswith(prefix)}


def _body(heads: dict[str, Any], given: dict[str, Any]) -> bytes:
    rmpp = _short(heads, "rmpp.") or None
    body, _ = build_body(_short(heads, "mad."), rmpp, given)
    return body


def _frame(enc: str, heads: dict[str, Any], body: bytes) -> bytes:
    return build(enc, {**_carrier(heads["mad.mgmtclass"]), **heads}, body)


@st.composite
def bad_mads(draw: st.DrawFn, kind: str | None = None,
             encapsulation: str | None = None) -> BadMad:
    """A frame whose MAD lies the way ``kind`` says (one of :data:`BAD_KINDS`; drawn when
    None), built with good CRCs."""
    from ibwire.strategies import mad_fields

    kind = kind or draw(st.sampled_from(BAD_KINDS))
    enc = encapsulation or draw(st.sampled_from(tuple(DEFAULT_LINK)))
    link = DEFAULT_LINK[enc]
    rows = list(mad_attributes().values())
    if kind.startswith("rmpp") or kind == "sa_offset":
        rows = [r for r in rows if r.mgmtclass == SA_CLASS]
    elif kind.startswith("hop"):
        rows = [r for r in rows if r.mgmtclass == SMP_DIRECTED]
    row = draw(st.sampled_from(rows))
    if kind == "sa_offset":
        rows = [r for r in rows if RECORDS[r.record].size > 8]
        row = draw(st.sampled_from(rows))
    heads, given = _split(draw(mad_fields(row)))
    if kind == "truncated":
        return draw(_truncated(enc, heads, given))
    if kind == "unknown_attribute":
        known = {r.attribute for r in mad_attributes().values() if r.mgmtclass == row.mgmtclass}
        heads["mad.attributeid"] = draw(st.integers(0, 0xFFFF).filter(lambda a: a not in known))
        rmpp = mad_classes()[row.mgmtclass][1]
        if rmpp:
            heads["rmpp.rmppflags"] = 0
        size = MAD_SIZE - 24 - (12 if rmpp else 0)
        body = draw(st.binary(min_size=size, max_size=size))
        return BadMad(_frame(enc, heads, body), link, kind, "mad", "attributeid", True, heads)
    if kind.startswith("rmpp"):
        body = _body(heads, given)
        heads["rmpp.rmpptype"] = RMPP_DATA
        if kind == "rmpp_segment":
            heads["rmpp.rmppflags"] = RMPP_ACTIVE | draw(st.integers(0, 3)) << 1
            heads["rmpp.data1"] = 0
            expected = "segmentnumber"
        elif kind == "rmpp_first":
            first = draw(st.booleans())
            heads["rmpp.rmppflags"] = RMPP_ACTIVE | (RMPP_FIRST if first else 0) | \
                draw(st.sampled_from((0, RMPP_LAST)))
            heads["rmpp.data1"] = draw(st.integers(2, 0xFFFFFFFF)) if first else 1
            expected = "rmppflags"
        else:
            heads["rmpp.rmppflags"] = RMPP_ACTIVE | RMPP_FIRST | RMPP_LAST
            heads["rmpp.data1"] = 1
            heads["rmpp.data2"] = draw(st.integers(MAD_SIZE - 36 + 1, 0xFFFFFFFF))
            expected = "payloadlength"
        return BadMad(_frame(enc, heads, body), link, kind, "rmpp", expected, False, heads)
    if kind.startswith("hop"):
        body = _body(heads, given)
        if kind == "hop_count":
            hops, pointer = draw(st.integers(MAX_HOPS + 1, 0xFF)), draw(st.integers(0, 0xFF))
        else:
            hops = draw(st.integers(0, MAX_HOPS))
            pointer = draw(st.integers(hops + 2, 0xFF))
        heads["mad.classspecific"] = pointer << 8 | hops
        field_name = "hopcount" if kind == "hop_count" else "hoppointer"
        return BadMad(_frame(enc, heads, body), link, kind, "smpdirected", field_name, False,
                      heads)
    return draw(_sa_offset(enc, row, heads, given))


@st.composite
def _truncated(draw: st.DrawFn, enc: str, heads: dict[str, Any],
               given: dict[str, Any]) -> BadMad:
    """The MAD's body cut at a 4-byte boundary (no pad then: the ICRC follows the cut)."""
    body = _body(heads, given)
    assume(len(body) >= 4)
    cut = 4 * draw(st.integers(0, len(body) // 4 - 1))
    part, left = _part_at(heads, body, cut)
    header = part.header
    if left >= header.size:  # between two records of an SA table: in the gap
        where: dict[str, str | None] = {"header": header.name, "field": "gap"}
    else:
        first_cut = next(f for f in header.fields if header.size * 8 - f.shift > left * 8)
        where = header.where(first_cut.name)
    return BadMad(_frame(enc, heads, body[:cut]), DEFAULT_LINK[enc], "truncated",
                  str(where["header"]), where["field"], False, heads)


def _part_at(heads: dict[str, Any], body: bytes, cut: int) -> tuple[Part, int]:
    """The part of ``body`` that byte ``cut`` falls in, and how many of its bytes (of its
    entry, in a table) come before the cut."""
    seen: dict[str, Any] = {}
    offset = 0
    for part in plan(_short(heads, "mad."), _short(heads, "rmpp.") or None, seen):
        if cut < offset + part.size:
            left = cut - offset
            return part, left % part.stride if part.entries else left
        if not part.entries:
            seen.update(part.header.parse(body, offset))
        offset += part.size
    raise AssertionError("the cut is inside the body")


@st.composite
def _sa_offset(draw: st.DrawFn, enc: str, row: MadAttribute, heads: dict[str, Any],
               given: dict[str, Any]) -> BadMad:
    """An SA table whose AttributeOffset is shorter than one record (IBA 15.2.1.1)."""
    heads["mad.method"] = draw(st.sampled_from(sorted(TABLE_METHODS)))
    heads["rmpp.rmppflags"] = 0
    size = RECORDS[row.record].size
    body = bytearray(_body(heads, {"sa.attributeoffset": -(-size // 8)}))
    words = draw(st.integers(1, -(-size // 8) - 1))
    at = 8  # SA header: SM_Key (8 bytes), then AttributeOffset
    body[at:at + 2] = words.to_bytes(2, "big")
    assert SA_HEADER.parse(bytes(body))["sa.attributeoffset"] == words
    return BadMad(_frame(enc, heads, bytes(body)), DEFAULT_LINK[enc], "sa_offset", "sa",
                  "attributeoffset", False, heads)


__all__ = ["BAD_KINDS", "BadMad", "MadPacket", "bad_mads", "mad_packets"]
