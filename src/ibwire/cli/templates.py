"""The templates of ``ibwire show``'s outputs, one per row shape (``ibwire.cli.shapes``).

For each output (summary line, JSON object, header tree) a shape becomes a list of
``ibwire.scan.text`` ops: literal text and the value columns of the row, laid out from the
header declarations (``ibwire.scan.program``) and the formats of ``ibwire.cli.show``
(``_NAMES``, ``_KEY_FIELDS``, ``_ADDRESSES``, ``field_text``...), so that a template writes
what ``show.summary``, ``show.tree`` and ``json_line(Inspection.fields())`` write. The parts
that many shapes share (a header's fields, a line's head) are :class:`Block` s made once.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from functools import cache
from typing import Any

from ibwire.cli.shapes import (
    CRC_WORDS,
    CUT,
    ETHERNET_LEN,
    FIELD_NAMES,
    IB,
    KEPT_NOTE,
    NOT_PARSED,
    RAW,
    REASONS,
    TAG_LEN,
    Shape,
    address_bits,
    line_slots,
)
from ibwire.scan.program import SLOT, SLOTS, column, opcode_chains
from ibwire.scan.text import LITERAL, SECONDS, SMALL, TEXT, Block, Op, number_op
from ibwire.tables import opcode_status, opcodes


class Template:
    """A template being put together (``ibwire.scan.text`` ops)."""

    def __init__(self) -> None:
        self.ops: list[Op | Block] = []

    def text(self, literal: str) -> None:
        self.ops.append((LITERAL, literal, 0, 0))

    def number(self, name: str, fmt: str = "{}") -> None:
        """Integer column ``name`` placed by ``fmt`` (one integer field: ``"QP={:#08x}"``)."""
        self.ops.extend(number_op(fmt, name))

    def string(self, name: str) -> None:
        self.ops.append((TEXT, name, 0, 0))

    def small(self, name: str) -> None:
        """In decimal up to 9, else in hex (how the tree shows a number)."""
        self.ops.append((SMALL, name, 0, 0))

    def seconds(self, name: str, width: int) -> None:
        self.ops.append((SECONDS, name, width, 0))


# ---------------------------------------------------------------- templates


def _places(shape: Shape) -> list[tuple[int, int]]:
    """(slot, VLAN tag index) of the row's headers, in wire order."""
    chain, length, _flags = opcode_chains()
    after_bth = {int(s): i for i, s in enumerate(chain[shape.opcode][:length[shape.opcode]])} \
        if shape.known else {}
    bth = SLOT["bth"]
    slots = sorted((s for s in range(len(SLOTS)) if shape.headers >> s & 1),
                   key=lambda s: (bth, after_bth[s]) if s in after_bth else (s, -1))
    out = []
    for s in slots:
        out.extend((s, tag) for tag in range(shape.vlans if s == SLOT["vlan"] else 1))
    return out


def _offset(t: Template, shape: Shape, places: list[tuple[int, int]], at: int) -> None:
    """Where header ``places[at]`` starts."""
    slot, tag = places[at]
    name = SLOTS[slot].name
    if name in ("eth", "lrh"):
        t.text("0")
    elif name == "vlan":
        t.text(str(ETHERNET_LEN + TAG_LEN * tag))
    elif name in ("ip", "ipv6") or name == "grh" and not shape.has("lrh"):
        t.number("offset.network")
    elif name == "grh":
        t.text(str(SLOTS[SLOT["lrh"]].size))
    elif name == "udp":
        t.number("offset.udp")
    else:  # the BTH and what follows it
        bth = [s for s, _ in places].index(SLOT["bth"])
        t.number(f"offset.bth+{sum(SLOTS[s].size for s, _ in places[bth:at])}")


def _field(key: str, tag: int) -> str:
    """The column of a field of VLAN tag ``tag`` (the columns hold the outermost)."""
    return key if tag == 0 else key.replace(".", f"#{tag}.", 1)


def _address(t: Template, header_bits: int, which: int) -> None:
    from ibwire.cli.show import _ADDRESSES

    for pair in _ADDRESSES:
        key = pair[which]
        if header_bits >> column(key).slot & 1:
            if key.startswith("lrh."):
                t.number(key, "LID {:#x}")
            else:
                t.string(key)
            return
    t.text("?")


def _syndrome_line(d: dict[str, Any]) -> str:
    from ibwire.cli.show import _KEY_FIELDS

    return "".join(f" {label}={fmt.format(d[k])}" if label else f" {fmt.format(d[k])}"
                   for k, label, fmt in _KEY_FIELDS if k not in FIELD_NAMES and k in d)


def _syndrome_tree(d: dict[str, Any]) -> str:
    from ibwire.cli.show import derived_text

    return "".join(f"\n      {k} = {derived_text(v)}" for k, v in d.items())


SYNDROME_TEXTS: dict[str, Callable[[dict[str, Any]], str]] = {
    "line": _syndrome_line, "tree": _syndrome_tree,
    "json": lambda d: "".join(f", {json.dumps(k)}: {json.dumps(v)}" for k, v in d.items())}


#: ``when`` of a line whose time is the row's text in column "time" (``show_time.Clock``:
#: other formats than the C filler's relative seconds).
TIME_TEXT = "\0time"


@cache
def _head(address_bits: int, when: str | None) -> Block:
    """Number, time and addresses of a line whose headers are ``address_bits``."""
    t = Template()
    t.number("number", "{:6d}")
    t.text(" ")
    if when is None:
        t.seconds("when", 11)
    elif when == TIME_TEXT:
        t.string("time")
    else:
        t.text(when)
    t.text(" ")
    _address(t, address_bits, 0)
    t.text(" → ")
    _address(t, address_bits, 1)
    t.text(" ")
    return Block(t.ops)


@cache
def _key_fields(header_bits: int) -> Block:
    """The key fields a line shows of the headers ``header_bits``, from ``ETH`` on."""
    from ibwire.cli.show import _KEY_FIELDS

    t = Template()
    derived = [k for k, _label, _fmt in _KEY_FIELDS if k not in FIELD_NAMES]
    for key, label, fmt in _KEY_FIELDS:
        if key not in FIELD_NAMES:  # derived from the AETH syndrome: all at the first
            if key == derived[0] and header_bits >> SLOT["aeth"] & 1:
                t.string("aeth:line")
        elif header_bits >> column(key).slot & 1:
            t.text(f" {label}=" if label else " ")
            t.number(key, fmt)
    return Block(t.ops)


@cache
def opcode_names() -> list[str]:
    """Each of the 256 opcodes as a summary line names it."""
    names = []
    for value in range(256):
        op = opcodes().get(value)
        names.append(op.name if op else f"{opcode_status(value)} opcode 0x{value:02x}")
    return names


def line(t: Template, shape: Shape, when: str | None) -> None:
    """The summary line (``show.summary``); ``when`` a fixed time text, None for the row's
    seconds, TIME_TEXT for the row's time text."""
    from ibwire.cli.show import _NAMES

    t.ops.append(_head(shape.headers & address_bits(), when))
    if shape.category == NOT_PARSED:
        t.text("(not parsed)")
        return
    if shape.category == RAW:
        t.text(f"{_NAMES['ib_raw']} LNH ")
        t.number("lrh.lnh")
        t.text(f" (not IBA transport) VCRC {'ok' if shape.vcrc_ok == 1 else 'BAD'}")
        return
    if shape.category != IB:
        t.text(f"{_NAMES['other']} ")
        reason = REASONS[shape.category]
        if "{" in reason:
            t.number("reason", reason)
        else:
            t.text(reason)
        return
    t.text(f"{_NAMES.get(shape.encapsulation, shape.encapsulation)} ")
    t.string("opcode:line")  # the opcode's name: a line's shape does not depend on it
    t.text(" ")
    t.number("bth.destqp", "QP={:#08x}")
    t.number("bth.psn", " PSN={}")
    t.ops.append(_key_fields(shape.headers & line_slots()))
    if shape.has("mad"):
        t.text(" ")
        t.string("mad:line")
    if shape.payload:
        t.number("payload.length", " payload={}")
    t.text(f" ICRC {CRC_WORDS.get(shape.icrc_ok, 'BAD')}")
    if shape.vcrc_ok >= 0:
        t.text(f" VCRC {CRC_WORDS[shape.vcrc_ok]}")
    if shape.cut:
        _kept(t)


def _kept(t: Template) -> None:
    """A cut packet's bytes kept of those on the wire (``KEPT_NOTE``)."""
    before, middle, after = KEPT_NOTE.split("{}")
    t.number("frame.len", before + "{}")
    t.number("frame.orig_len", middle + "{}")
    t.text(after)


def _json_value(t: Template, key: str, tag: int) -> None:
    f = SLOTS[column(key).slot].by_name[column(key).field]
    if f.fmt is None:
        t.number(_field(key, tag))
    else:  # addresses' text and hex need no JSON escapes
        t.text('"')
        t.string(f"hex:{key}" if f.fmt == "bytes" else key)
        t.text('"')


@cache
def _json_fields(slot: int, tags: int) -> Block:
    """The JSON members of header ``slot`` (a stacked header's: lists of ``tags`` values)."""
    t = Template()
    header = SLOTS[slot]
    stacked = slot == SLOT["vlan"]
    for f in header.fields:
        key = header.key(f.name)
        t.text(f", {json.dumps(key)}: " + ("[" if stacked else ""))
        for i in range(tags):
            t.text(", " if i else "")
            _json_value(t, key, i)
        t.text("]" if stacked else "")
    return Block(t.ops)


def json_object(t: Template, shape: Shape) -> None:
    """The JSON object of ``show --json`` (``Inspection.fields`` through ``json_line``)."""
    verdict = {-1: "null", 0: "false", 1: "true", CUT: "null"}
    t.text('{"frame": ')
    t.number("number")
    t.number("timestamp_ns", ', "timestamp_ns": {}')
    t.text(f', "link": {json.dumps(shape.link_name)}')
    if shape.category != NOT_PARSED:
        t.text(f', "encapsulation": {json.dumps(shape.encapsulation)}')
        places = _places(shape)
        for slot, tag in places:
            if not tag:
                t.ops.append(_json_fields(slot, sum(1 for s, _ in places if s == slot)))
        if shape.options:
            t.text(', "ip.options": "')
            t.string("ip.options")
            t.text('"')
        if shape.has("aeth"):
            t.string("aeth:json")
        if shape.category == IB and shape.icrc_ok != CUT:
            t.number("icrc", ', "icrc": {}')
        if shape.vcrc_ok >= 0 and shape.vcrc_ok != CUT:
            t.number("vcrc", ', "vcrc": {}')
        if shape.known:
            t.text(f', "bth.opcode.name": {json.dumps(opcodes()[shape.opcode].name)}')
        t.number("json.payload", ', "payload.length": {}')
    t.text(f', "icrc_ok": {verdict[shape.icrc_ok]}, "vcrc_ok": {verdict[shape.vcrc_ok]}')
    if shape.cut:  # Inspection.fields' keys of a cut packet
        t.number("payload.captured", ', "payload.captured": {}')
        t.number("frame.len", ', "frame.len": {}')
        t.number("frame.orig_len", ', "frame.orig_len": {}, "cut": true')
    t.text(', "error": null}')


@cache
def _tree_fields(slot: int, tag: int, opcode: int | None) -> Block:
    """The tree's lines of the fields of header ``slot`` (VLAN tag ``tag``; a BTH's
    ``opcode``), each number with its name beside it as ``names.describe`` gives it."""
    from ibwire.names import DECIMAL, NAME_COLUMNS, describe

    t = Template()
    header = SLOTS[slot]
    for f in header.fields:
        key = header.key(f.name)
        t.text(f"\n      {key} = ")
        if f.fmt is None and key in DECIMAL:
            t.number(_field(key, tag))
        elif f.fmt is None:  # show.tree's rule for numbers, as the SMALL op writes them
            t.small(_field(key, tag))
        elif f.fmt == "bytes":
            t.string(f"hex:{key}")
        else:
            t.string(key)
        if key == "bth.opcode" and opcode is not None:  # the shape's own opcode
            t.text(f" ({describe(key, opcode, {})})")
        elif key in NAME_COLUMNS:
            t.string(f"name:{key}")
    return Block(t.ops)


def header_tree(t: Template, shape: Shape, when: str | None = None) -> None:
    """The header tree of ``show -V`` (``show.tree``), under the packet's line."""
    line(t, shape, when)
    places = _places(shape)
    for at, (slot, tag) in enumerate(places):
        header = SLOTS[slot]
        t.text(f"\n  {header.title} (offset ")
        _offset(t, shape, places, at)
        t.text(f", {header.size} bytes)")
        t.ops.append(_tree_fields(slot, tag, shape.opcode if slot == SLOT["bth"] else None))
    if shape.options:
        t.text("\n      ip.options = ")
        t.string("ip.options")
    if shape.has("aeth"):
        t.string("aeth:tree")
    if shape.category == IB:
        t.number("payload.length", "\n  Payload ({}")
        t.number("offset.payload", " bytes at {}")
        if shape.known:
            t.number("bth.padcnt", "), pad {}")
        else:
            t.text("), pad 0")
        if shape.icrc_ok == CUT:
            t.text("\n  ICRC cut by the capture")
            _kept(t)
        else:
            t.number("icrc.wire", "\n  ICRC {:08x}")
            t.text(f" ({'ok' if shape.icrc_ok == 1 else 'BAD'})")
    if shape.vcrc_ok == CUT:
        t.text("\n  VCRC cut by the capture")
        _kept(t)
    elif shape.vcrc_ok >= 0:
        t.number("vcrc.wire", "\n  VCRC {:04x}")
        t.text(f" ({'ok' if shape.vcrc_ok == 1 else 'BAD'})")


_OUTPUTS: dict[str, Callable[[Template, Shape, str | None], None]] = {
    "line": line, "json": lambda t, shape, _when: json_object(t, shape), "tree": header_tree}


def compile_shape(mode: str, key: int, time_text: bool = False) -> list[Op | Block]:
    """The template of ``mode`` for the rows of shape ``key``; ``time_text``: their time from
    column "time" (TIME_TEXT), else the C filler's seconds."""
    t = Template()
    _OUTPUTS[mode](t, Shape.of(key), TIME_TEXT if time_text else None)
    return t.ops


