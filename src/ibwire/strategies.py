"""Hypothesis strategies that know the protocol: for fuzzing your own parser, and ours.

* :func:`header_values` -- field values of one header (any value its bit widths allow);
* :func:`packets` -- whole valid frames per encapsulation and opcode, with the values that
  built them alongside the bytes (:class:`GeneratedPacket`);
* :func:`mutated` -- frames broken on purpose: bit flips inside a chosen header, truncation,
  lying length fields, corrupted CRCs, and headers broken where the length fields still
  place the CRCs (a flipped opcode bit, a lying PadCnt, a broken GRH, a UDP length or PktLen
  that lies), either after the CRCs were computed (corrupted) or before (the sender built it
  so: ``Mutation.resealed``) (:class:`Mutation` says what was done);
* :func:`mad_fields` -- flat keys of a valid MAD of one declared attribute;
  :func:`mad_packets` -- frames carrying one; :func:`bad_mads` -- frames whose MAD lies
  (cut attribute, unknown attribute ID, RMPP, directed-route hops, SA AttributeOffset) with
  the error ibwire must give (:class:`BadMad`; :mod:`ibwire.mad_strategies`).

Everything derives from the Construct declarations and specs/opcodes.tsv, so a new opcode or
field is generated without touching this module.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from typing import Any

from hypothesis import strategies as st

from ibwire.builder import DEFAULT_LINK, DERIVED_KEYS, build
from ibwire.dissect import parse
from ibwire.headers import ALL, Header
from ibwire.headers.fields import display
from ibwire.headers.mad import carries_mad
from ibwire.headers.sa import SA_HEADER
from ibwire.mad_numbers import MAD_SIZE
from ibwire.mads import (
    DECODED,
    MAX_HOPS,
    RECORDS,
    RMPP_DATA,
    SMP_DIRECTED,
    TABLE_METHODS,
    plan,
    split_items,
)
from ibwire.tables import MadAttribute, mad_attributes, mad_classes, opcodes

ENCAPSULATIONS = tuple(DEFAULT_LINK)
#: Fields a valid frame must hold at one value (versions), besides the derived ones.
_PINNED = {"bth.tver": 0, "lrh.lver": 0, "ip.flags.mf": 0, "ip.frag_offset": 0,
           "ip.flags.rb": 0}
_PER_ENCAPSULATION = {
    "rocev2_ipv4": ("eth", "ip", "udp"),
    "rocev2_ipv6": ("eth", "ipv6", "udp"),
    "rocev1": ("eth", "grh"),
    "ib_local": ("lrh",),
    "ib_global": ("lrh", "grh"),
}


@dataclass(frozen=True)
class GeneratedPacket:
    """A valid frame and what it was built from."""

    frame: bytes
    link: str
    encapsulation: str
    opcode: int
    fields: dict[str, Any]
    payload: bytes


@dataclass(frozen=True)
class Mutation:
    """A frame broken on purpose, the valid packet it came from, and how it was broken."""

    frame: bytes
    link: str
    kind: str  # "bitflip", "truncate", "length", "crc", "placed"
    where: str  # header or field that was touched
    original: GeneratedPacket
    resealed: bool = False
    """The CRCs were computed over the broken bytes, where the length fields place them (a
    packet the sender built wrong); otherwise a broken packet keeps its old CRCs."""


def _field_value(header: Header, name: str) -> st.SearchStrategy[Any]:
    field = header.by_name[name]
    raw = st.integers(0, field.mask).map(lambda v: display(v, field))
    if field.fmt != "text":
        return raw
    size = field.bits // 8  # a string field: text that fits (mostly), or any bytes
    text = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\0"),
                   max_size=size).filter(lambda t: len(t.encode("utf-8")) <= size)
    return st.one_of(text, text, raw)


@cache  # built once per header: hypothesis validates a new strategy per draw
def header_values(header: Header, *, skip: frozenset[str] = frozenset()) -> st.SearchStrategy[
        dict[str, Any]]:
    """Any values for the fields of ``header`` (addresses as text, numbers as int)."""
    return st.fixed_dictionaries(
        {f.name: _field_value(header, f.name) for f in header.fields if f.name not in skip})


@cache
def _keyed(header: Header) -> st.SearchStrategy[dict[str, Any]]:
    """Values of a header as flat keys, without derived or pinned keys."""
    skip = frozenset(f.name for f in header.fields
                     if header.key(f.name) in DERIVED_KEYS or header.key(f.name) in _PINNED)
    return header_values(header, skip=skip).map(
        lambda values: {header.key(k): v for k, v in values.items()})


@st.composite
def ipv4_options(draw: st.DrawFn) -> bytes:
    """A valid IPv4 options area (RFC 791 3.1): up to 3 No Operation options (4 in a row look
    like options a router removed), Router Alerts (RFC 2113), then End of Option List padding
    to a multiple of 4 bytes, at most 40 bytes."""
    nops = draw(st.integers(0, 3))
    alerts = draw(st.integers(0, 9 if nops == 0 else 8))
    options = b"\x01" * nops + b"\x94\x04\x00\x00" * alerts
    return options + b"\x00" * (-len(options) % 4)


@st.composite
def packets(draw: st.DrawFn, encapsulation: str | None = None,
            opcode: int | None = None, max_payload: int = 64) -> GeneratedPacket:
    """A valid frame of ``encapsulation`` and ``opcode`` (drawn when None)."""
    enc = encapsulation or draw(st.sampled_from(ENCAPSULATIONS))
    op = opcodes()[opcode] if opcode is not None else draw(st.sampled_from(list(opcodes().values())))
    names = (*_PER_ENCAPSULATION[enc], "bth", *(ALL_BY_TITLE[h] for h in op.headers))
    fields: dict[str, Any] = {k: v for k, v in _PINNED.items() if k.split(".")[0] in names}
    for name in names:
        fields.update(draw(_keyed(ALL[name])))
    fields["bth.opcode"] = op.value
    if enc.startswith("rocev2") and draw(st.booleans()):
        fields["ip.options"] = draw(ipv4_options()) if enc == "rocev2_ipv4" else b""
        if not fields["ip.options"]:
            del fields["ip.options"]
    if "eth.src" in fields:  # a source address is never a group address (IEEE 802 9.2)
        octets = fields["eth.src"].split(":")
        fields["eth.src"] = ":".join([f"{int(octets[0], 16) & 0xFE:02x}", *octets[1:]])
    if enc.startswith("roce"):
        tags = draw(st.lists(_keyed(ALL["vlan"]), max_size=3))
        for key in ALL["vlan"].by_name:
            full = ALL["vlan"].key(key)
            if tags and full not in DERIVED_KEYS:
                fields[full] = tuple(t[full] for t in tags)
    if op.transport == "UD" and draw(st.integers(0, 3)) == 0:
        fields["bth.destqp"] = draw(st.sampled_from((0, 1)))
    elif op.transport != "UD" and fields["bth.destqp"] in (0, 1):
        fields["bth.destqp"] |= 2  # QP0 and QP1 (SMI, GSI) are UD queue pairs (IBA 13.5.1)
    if op.transport == "UD" and draw(st.integers(0, 7)) == 0:
        fields["deth.srcqp"] = draw(st.sampled_from((0, 1)))  # a response from QP0/QP1
    if carries_mad(op.transport, fields["bth.destqp"], fields.get("deth.srcqp")):
        fields.update(draw(mad_fields()))
    if op.name.endswith("ATOMIC_WRITE"):
        payload = draw(st.binary(min_size=8, max_size=8))
    elif "mad.mgmtclass" in fields:  # a MAD is the whole UD payload, 256 bytes (IBA 13.4.3)
        if fields["mad.mgmtclass"] in DECODED:
            payload = b""  # build() makes the body of the attribute
        else:  # the body of a MAD ibwire does not decode
            size = MAD_SIZE - ALL["mad"].size - (ALL["rmpp"].size if "rmpp.rmpptype" in fields
                                                 else 0)
            payload = draw(st.binary(min_size=size, max_size=size))
    else:
        payload = draw(st.binary(max_size=max_payload)) if op.payload else b""
    link = DEFAULT_LINK[enc]
    if enc.startswith("rocev2") and draw(st.integers(0, 3)) == 0:
        link = "ip"
        fields = {k: v for k, v in fields.items() if not k.startswith(("eth.", "vlan."))}
    frame = build(enc, fields, payload, link=link)
    return GeneratedPacket(frame, link, enc, op.value, fields, payload)


@st.composite
def mad_fields(draw: st.DrawFn, attribute: MadAttribute | None = None) -> dict[str, Any]:
    """Flat keys of a valid MAD: its common (and RMPP) header and, for the classes ibwire
    decodes, every field of one declared attribute (``attribute``, drawn when None), random
    values within the rules a MAD must keep (RMPP segments, directed-route hop counts, SA
    record offsets); other classes get random headers and their body is the payload."""
    fields = draw(_keyed(ALL["mad"]))
    if attribute is None and draw(st.integers(0, 3)):
        attribute = draw(st.sampled_from(list(mad_attributes().values())))
    if attribute is None:
        klass = draw(st.sampled_from(sorted(set(mad_classes()) - DECODED)))
        fields["mad.mgmtclass"] = klass
        if mad_classes()[klass][1]:
            fields.update(draw(_keyed(ALL["rmpp"])))
        return fields
    fields["mad.mgmtclass"] = attribute.mgmtclass
    fields["mad.attributeid"] = attribute.attribute
    if attribute.mgmtclass == SMP_DIRECTED:
        hops = draw(st.integers(0, MAX_HOPS))
        fields["mad.classspecific"] = draw(st.integers(0, hops + 1)) << 8 | hops
    rmpp = None
    if mad_classes()[attribute.mgmtclass][1]:
        fields.update(draw(_keyed(ALL["rmpp"])))
        record = RECORDS[attribute.record]
        table = draw(st.booleans())
        fields["mad.method"] = draw(st.sampled_from(sorted(TABLE_METHODS))) if table else \
            draw(st.sampled_from((0x01, 0x02, 0x12, 0x15)))
        active = draw(st.booleans())
        fields["rmpp.rmppflags"] = 0x7 if active else 0
        fields["rmpp.rmpptype"] = RMPP_DATA if active else draw(st.integers(0, 4))
        fields["rmpp.data1"] = 1 if active else fields["rmpp.data1"]
        if active:
            fields["rmpp.data2"] = draw(st.integers(SA_HEADER.size, 220))
        stride = -(-record.size // 8) + draw(st.integers(0, 2))
        fields["sa.attributeoffset"] = stride if table else draw(st.integers(0, 0xFFFF))
        rmpp = {"rmppflags": fields["rmpp.rmppflags"], "rmpptype": fields["rmpp.rmpptype"],
                "data1": fields["rmpp.data1"], "data2": fields.get("rmpp.data2", 0)}
    mad = {"mgmtclass": attribute.mgmtclass, "attributeid": attribute.attribute,
           "method": fields["mad.method"]}
    seen: dict[str, Any] = {k: v for k, v in fields.items() if k.startswith("sa.")}
    if attribute.record == "multipathrecord":
        seen["multipathrecord.sgidcount"] = draw(st.integers(0, 5))
        seen["multipathrecord.dgidcount"] = draw(st.integers(0, 6))
    for part in plan(mad, rmpp, seen):
        values = split_items(draw(header_values(part.header)))
        if part.entries:
            more = [values, *(split_items(draw(header_values(part.header)))
                              for _ in range(part.entries - 1))]
            values = {k: [v[k] for v in more] for k in values}
        else:
            values.update({k: v for k, v in seen.items() if k in part.header.by_name})
        seen.update(values)
        fields.update(values)
    return fields


#: Extended-header names of specs/opcodes.tsv -> key prefixes.
ALL_BY_TITLE = {h.title: h.name for h in ALL.values()}

_LENGTH_KEYS = {
    "rocev2_ipv4": ("ip.len", "udp.length", "ip.hdr_len", "bth.padcnt"),
    "rocev2_ipv6": ("ipv6.plen", "udp.length", "bth.padcnt"),
    "rocev1": ("grh.paylen", "bth.padcnt"),
    "ib_local": ("lrh.pktlen", "bth.padcnt"),
    "ib_global": ("lrh.pktlen", "grh.paylen", "bth.padcnt"),
}


@dataclass(frozen=True)
class CutPacket:
    """A valid packet as a capture with a snap length keeps it: ``frame`` its first
    ``snaplen`` bytes, ``wire_length`` the whole frame's length (the record's original
    length, as ``tcpdump -s`` writes it)."""

    frame: bytes
    link: str
    snaplen: int
    wire_length: int
    original: GeneratedPacket


@st.composite
def cut_packets(draw: st.DrawFn, base: st.SearchStrategy[GeneratedPacket] | None = None,
                snaplen: int | None = None) -> CutPacket:
    """A valid packet cut by a snap length (``snaplen``, or drawn from the lengths captures use
    and every length up to the frame's), the way headers-only captures hold RoCE traffic: a
    parser should read every header the bytes kept hold, and not call the packet broken."""
    good = draw(base if base is not None else packets())
    if snaplen is None:
        usual = [n for n in (64, 96, 128, 256) if n < len(good.frame)]
        snaplen = draw(st.sampled_from(usual) if usual and draw(st.booleans())
                       else st.integers(1, max(1, len(good.frame) - 1)))
    return CutPacket(good.frame[:snaplen], good.link, snaplen, len(good.frame), good)


@st.composite
def mutated(draw: st.DrawFn, base: st.SearchStrategy[GeneratedPacket] | None = None) -> Mutation:
    """A valid packet broken one way: bit flip in a header, truncation, a lying length, bad CRC."""
    good = draw(base if base is not None else packets())
    kind = draw(st.sampled_from(("bitflip", "truncate", "length", "crc", "placed")))
    frame = bytearray(good.frame)
    if kind == "placed":
        return draw(placed_mutations(good))
    if kind == "bitflip":
        packet = parse(good.frame, good.link)
        header = draw(st.sampled_from(packet.headers))
        bit = draw(st.integers(0, header.length * 8 - 1))
        frame[header.offset + bit // 8] ^= 0x80 >> (bit % 8)
        return Mutation(bytes(frame), good.link, kind, header.name, good)
    if kind == "truncate":
        cut = draw(st.integers(0, len(frame) - 1))
        return Mutation(bytes(frame[:cut]), good.link, kind, f"byte {cut}", good)
    if kind == "length":
        key = draw(st.sampled_from(_LENGTH_KEYS[good.encapsulation]))
        header = ALL[key.split(".")[0]]
        bad = draw(_field_value(header, key.split(".", 1)[1]))
        fields = {**good.fields, key: bad}
        frame = bytearray(build(good.encapsulation, fields, good.payload, link=good.link))
        return Mutation(bytes(frame), good.link, kind, key, good)
    key = draw(st.sampled_from(("icrc", "vcrc") if good.encapsulation.startswith("ib")
                               else ("icrc",)))
    fields = {**good.fields, key: draw(st.integers(0, 0xFFFF if key == "vcrc" else 0xFFFFFFFF))}
    frame = bytearray(build(good.encapsulation, fields, good.payload, link=good.link))
    return Mutation(bytes(frame), good.link, kind, key, good)


#: Fields whose lie breaks the headers while the length fields still place the CRCs (mostly;
#: a drawn value may also leave them unplaced, or break nothing), per encapsulation.
_PLACED_KEYS = {
    "rocev2_ipv4": ("bth.opcode", "bth.padcnt", "udp.length"),
    "rocev2_ipv6": ("bth.opcode", "bth.padcnt", "udp.length"),
    "rocev1": ("bth.opcode", "bth.padcnt", "grh.ipver", "grh.nxthdr"),
    "ib_local": ("bth.opcode", "bth.padcnt", "lrh.pktlen"),
    "ib_global": ("bth.opcode", "bth.padcnt", "grh.ipver", "grh.nxthdr", "grh.paylen",
                  "lrh.pktlen"),
}


@st.composite
def placed_mutations(draw: st.DrawFn, good: GeneratedPacket) -> Mutation:
    """``good`` broken where its CRCs are (mostly) still placed: one field of its
    encapsulation's ``_PLACED_KEYS`` changed in place (an opcode bit flipped, or another
    value); then, if drawn, its CRCs computed again where they are placed (``resealed``)."""
    from ibwire import crc
    from ibwire.errors import IbwireError

    key = draw(st.sampled_from(_PLACED_KEYS[good.encapsulation]))
    name, field_name = key.split(".", 1)
    header = ALL[name]
    field = header.by_name[field_name]
    found = parse(good.frame, good.link).header(name)
    assert found is not None
    frame = bytearray(good.frame)
    word = int.from_bytes(frame[found.offset:found.offset + header.size], "big")
    old = (word >> field.shift) & field.mask
    if key == "bth.opcode":
        new = old ^ (1 << draw(st.integers(0, field.bits - 1)))
    elif key == "lrh.pktlen":  # short of the transport, yet placing the VCRC in the frame
        new = draw(st.integers(0, max(0, min(old, len(frame) // 4) - 1)))
    else:
        new = draw(st.integers(0, field.mask).filter(lambda v: v != old))
    word = word & ~(field.mask << field.shift) | new << field.shift
    frame[found.offset:found.offset + header.size] = word.to_bytes(header.size, "big")
    resealed = draw(st.booleans())
    if resealed:
        try:
            crc.fix(frame, good.link, lenient=True)
        except IbwireError:
            resealed = False  # nothing placed: left as broken
    return Mutation(bytes(frame), good.link, "placed", key, good, resealed)




from ibwire.mad_strategies import BAD_KINDS as BAD_KINDS  # noqa: E402  (draws mad_fields)
from ibwire.mad_strategies import BadMad as BadMad  # noqa: E402
from ibwire.mad_strategies import MadPacket as MadPacket  # noqa: E402
from ibwire.mad_strategies import bad_mads as bad_mads  # noqa: E402
from ibwire.mad_strategies import mad_packets as mad_packets  # noqa: E402
