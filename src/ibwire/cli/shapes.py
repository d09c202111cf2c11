"""``ibwire show``'s output written from the scanner's columns, a batch at a time.

What show writes for a row is a fixed text with the row's values in it, and which text depends
only on the row's *shape*: its link, encapsulation, headers (the ``headers`` bitmap and the
VLAN tag count), opcode, CRC verdicts, whether it has a payload or IPv4 options, and, for
other traffic, why it is not InfiniBand. Each shape met is compiled once, for each output
(summary line, JSON object, header tree), into a ``str.format`` template and the value columns
it takes, from the header declarations (``ibwire.scan.program``) and the formats of
``ibwire.cli.show``; the rows of a batch that share a shape are then written by one
``map(template.format, *columns)``: no dissection and no dict per packet.

A row whose output the columns cannot tell is dissected (``ibwire.inspect``) and written as
show writes any dissection: errors, VLAN stacks under other traffic, IPv6 extension headers,
packets the dissector warns about, links other than Ethernet and raw IP for other traffic.
Tests compare both ways byte for byte on every capture they have.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from functools import cache
from typing import TYPE_CHECKING, Any

import numpy as np

from ibwire.crc._common import KIND_NAMES
from ibwire.headers.aeth import decode_syndrome
from ibwire.headers.encap import (
    ETHERTYPE_IPV4,
    ETHERTYPE_IPV6,
    IP_PROTO_UDP,
    IPV6_EXTENSIONS,
    TPIDS,
)
from ibwire.pcap.records import LINK_NAMES, LINK_OTHER
from ibwire.scan import program
from ibwire.scan.batch import distinct_rows
from ibwire.scan.program import SLOT, SLOTS, column, columns, opcode_chains
from ibwire.scan.text import (
    LITERAL,
    SECONDS,
    SMALL,
    TEXT,
    Block,
    Op,
    Templates,
    fill,
    number_op,
)
from ibwire.tables import constants, opcode_status, opcodes

if TYPE_CHECKING:
    import argparse

    from ibwire.scan import ScanBatch


# Row categories: how a row is written. DISSECT: by a dissection.
DISSECT, IB, RAW, NOT_PARSED, ETHERTYPE, IP_PROTOCOL, FRAGMENT, NOT_ROCE, IPV6_NEXT = range(9)
_ROCE_PORT = constants()["ROCE_V2_UDP_PORT"]
_ROCEV1_ETHERTYPE = constants()["ROCE_V1_ETHERTYPE"]
#: Why other traffic is not InfiniBand, as ``ibwire.dissect`` words it (its value: ``{}``).
_REASONS = {ETHERTYPE: "ethertype 0x{:04x}", IP_PROTOCOL: "IP protocol {}",
            FRAGMENT: "IPv4 non-first fragment", NOT_ROCE: f"not UDP port {_ROCE_PORT}",
            IPV6_NEXT: "IPv6 next header {}"}
_IB_KINDS = tuple(KIND_NAMES.index(k) for k in ("ib_lrh", "ib_grh", "rocev1", "rocev2_ipv4",
                                                 "rocev2_ipv6"))
_RAW_KINDS = tuple(KIND_NAMES.index(k) for k in ("ib_raw", "ib_ip"))
_MAX_TAGS = 15
_ETHERNET_LEN, _TAG_LEN = SLOTS[SLOT["eth"]].size, SLOTS[SLOT["vlan"]].size
_NOT_IB = program.ERROR_NAMES.index("not_ib")

#: Header-field columns the classification reads (more for the output itself).
CLASSIFY_KEYS = ("bth.opcode", "bth.destqp", "bth.padcnt", "deth.srcqp", "aeth.syndrome",
                 "eth.type", "vlan.etype", "ip.hdr_len", "ip.proto", "ip.frag_offset",
                 "ipv6.nxt", "udp.dstport", "lrh.lnh")


@dataclass(frozen=True)
class Shape:
    """What a row's output looks like apart from its values (see the module)."""

    category: int
    link: int
    kind: int
    headers: int
    opcode: int
    vlans: int
    icrc_ok: int
    vcrc_ok: int
    payload: bool
    options: bool

    @classmethod
    def of(cls, key: int) -> Shape:
        return cls(key >> 57, (key >> 44) & 7, (key >> 40) & 15, key & 0xFFFFFFFF,
                   (key >> 32) & 0xFF, (key >> 47) & 15, ((key >> 51) & 3) - 1,
                   ((key >> 53) & 3) - 1, bool(key >> 55 & 1), bool(key >> 56 & 1))

    def has(self, name: str) -> bool:
        return bool(self.headers >> SLOT[name] & 1)

    @property
    def link_name(self) -> str:
        return LINK_NAMES[LINK_OTHER if self.link == 7 else self.link]

    @property
    def encapsulation(self) -> str:
        if self.category in (IB, RAW):
            return program.PACKET_ENCAPSULATIONS[KIND_NAMES[self.kind]]
        return "other"

    @property
    def known(self) -> bool:
        return self.category == IB and self.opcode in opcodes()


# ---------------------------------------------------------------- a batch's values


class _Rows:
    """One batch's value columns, each made on first use: integer columns (8-byte numpy
    arrays) and text columns (lists of str), by the names the templates give them."""

    def __init__(self, batch: ScanBatch, cols: dict[str, np.ndarray],
                 extra: dict[str, np.ndarray], mode: str) -> None:
        self.batch, self.cols, self.extra, self.mode = batch, cols, extra, mode
        self.count = len(cols["record"])

    def ints(self, name: str) -> np.ndarray:
        """``name``: a column, a computed one, ``"offset.bth+12"`` (a column plus a
        constant), or ``"vlan#1.id"`` (a field of VLAN tag 1, read from the frames)."""
        if name in self.extra:
            values = self.extra[name]
        elif "+" in name:
            base, constant = name.rsplit("+", 1)
            values = self.cols[base].astype(np.int64) + int(constant)
        elif "#" in name:
            values = self._tag_field(name)
        else:
            values = self.cols[name]
        return values.astype(np.int64 if values.dtype.kind == "i" else np.uint64, copy=False)

    def _tag_field(self, name: str) -> np.ndarray:
        header, rest = name.split("#", 1)
        index, field_name = rest.split(".", 1)
        tag = int(index)
        spec = SLOTS[SLOT[header]]
        f = spec.by_name[field_name]
        out = np.zeros(self.count, np.uint64)
        rows = np.flatnonzero(self.cols["vlan.count"] > tag)
        if rows.size:
            data = np.frombuffer(self.batch.buffer, np.uint8)
            at = self.cols["frame.offset"][rows] + _ETHERNET_LEN + _TAG_LEN * tag
            word = np.zeros(rows.size, np.uint64)
            for i in range(spec.size):
                word = (word << np.uint64(8)) | data[at + i].astype(np.uint64)
            out[rows] = (word >> np.uint64(f.shift)) & np.uint64(f.mask)
        return out

    def strs(self, name: str) -> list[str]:
        """``name``: an address column (its text), ``"hex:KEY"`` (a bytes field in hex),
        ``"aeth:MODE"`` (the syndrome's derived keys as MODE writes them), ``ip.options``
        (in hex), or ``dissected`` (set by the caller)."""
        if name.startswith("hex:"):
            return [v.hex() for v in self.batch.values(name[4:])[:self.count]]
        if name.startswith("aeth:"):
            made: dict[int, str] = {}
            render = _SYNDROME_TEXTS[name[5:]]
            return [made[s] if s in made else made.setdefault(s, render(decode_syndrome(s)))
                    for s in self.cols["aeth.syndrome"].tolist()]
        if name == "ip.options":
            out = [""] * self.count
            net, ihl = self.cols["offset.network"], self.cols["ip.hdr_len"]
            for r in np.flatnonzero(self.extra["options"]).tolist():
                at = int(net[r])
                out[r] = bytes(self.batch.frame(r)[at + 20:at + 4 * int(ihl[r])]).hex()
            return out
        return self.batch.values(name)[:self.count]


_FIELD_NAMES = frozenset(c.name for c in columns())


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


# ---------------------------------------------------------------- classification


def _lookup(values: Callable[[int], bool]) -> np.ndarray:
    return np.array([values(op) for op in range(256)], bool)


_KNOWN = _lookup(lambda op: op in opcodes())
_NO_PAYLOAD = _lookup(lambda op: op in opcodes() and not opcodes()[op].payload)
_UD = _lookup(lambda op: op in opcodes() and opcodes()[op].transport == "UD")


@cache
def _line_slots() -> int:
    """The header bits a summary line depends on: its addresses and key fields."""
    from ibwire.cli.show import _ADDRESSES, _KEY_FIELDS

    keys = [k for pair in _ADDRESSES for k in pair]
    keys += [k if k in _FIELD_NAMES else "aeth.syndrome" for k, _label, _fmt in _KEY_FIELDS]
    return sum({1 << column(k).slot for k in keys})


@cache
def _address_bits() -> int:
    from ibwire.cli.show import _ADDRESSES

    return sum({1 << column(k).slot for pair in _ADDRESSES for k in pair})


def _relevant(mode: str) -> np.uint64:
    """The bits of the shape key that change what ``mode`` writes (fewer shapes to make)."""
    everything = (1 << 61) - 1
    if mode == "line":  # no link, VLAN count, IPv4 options, or headers it does not show
        return np.uint64(everything & ~(0xFFFFFFFF | 7 << 44 | 15 << 47 | 1 << 56)
                         | _line_slots())
    if mode == "json":  # no payload flag: the length is always written
        return np.uint64(everything & ~(1 << 55))
    return np.uint64(everything)


def _any_of(values: np.ndarray, wanted: Iterable[int]) -> np.ndarray:
    """``np.isin`` without loading numpy.ma (70 ms at start-up)."""
    out = np.zeros(values.shape, bool)
    for v in wanted:
        out |= values == v
    return out


def classify(cols: dict[str, np.ndarray], mode: str = "tree"
             ) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """The shape key of every row for output ``mode`` (0: dissect it; see :class:`Shape`)
    and the computed columns the templates read (``number``, ``offset.udp``, ...)."""
    headers = cols["headers"].astype(np.uint64)

    def has(name: str) -> np.ndarray:
        return (cols["headers"] & np.uint32(1 << SLOT[name])) != 0

    def field(name: str) -> np.ndarray:
        return cols[name].astype(np.int64)

    error, kind, link = cols["error"], cols["encapsulation"], cols["link"].astype(np.int64)
    vlans = cols["vlan.count"].astype(np.int64)
    net, frame_len = field("offset.network"), field("frame.len")
    opcode = field("bth.opcode")
    hdr_len, proto = field("ip.hdr_len"), field("ip.proto")
    ihl = hdr_len * 4
    dport, nxt = field("udp.dstport"), field("ipv6.nxt")
    category = np.zeros(len(error), np.uint64)

    # InfiniBand transport packets, known opcodes or not
    ib = (error == 0) & _any_of(kind, _IB_KINDS) & has("bth") & (vlans <= _MAX_TAGS)
    ib &= ~(has("ip") & (hdr_len < 5))
    known = _KNOWN[opcode]
    warned = known & _NO_PAYLOAD[opcode] & (cols["offset.icrc"] > cols["offset.payload"])
    warned |= (known & _UD[opcode] & ~has("mad")
               & ((field("bth.destqp") <= 1) | (field("deth.srcqp") <= 1)))
    category[ib & ~warned] = IB
    category[(error == 0) & _any_of(kind, _RAW_KINDS) & has("lrh")] = RAW

    # other traffic: why the dissector calls it other, where it would find the payload
    other = error == _NOT_IB
    category[other & (link == LINK_OTHER)] = NOT_PARSED
    ethernet = other & (link == 0) & has("eth") & (vlans <= 1)
    ethertype = np.where(vlans == 0, field("eth.type"), field("vlan.etype"))
    ethernet &= ~_any_of(ethertype, TPIDS)  # a tag cut short
    value = np.zeros(len(error), np.int64)
    payload_at = np.zeros(len(error), np.int64)
    not_ip = ethernet & ~_any_of(ethertype, (ETHERTYPE_IPV4, ETHERTYPE_IPV6,
                                                   _ROCEV1_ETHERTYPE))
    category[not_ip] = ETHERTYPE
    value[not_ip], payload_at[not_ip] = ethertype[not_ip], _ETHERNET_LEN + _TAG_LEN * vlans[not_ip]
    raw_ip = other & (link == 2)
    v4 = ((ethernet & (ethertype == ETHERTYPE_IPV4)) | raw_ip) & has("ip") & (hdr_len >= 5)

    def put(rows: np.ndarray, what: int, at: np.ndarray) -> None:
        category[rows] = what
        payload_at[rows] = at[rows]

    put(v4 & (proto != IP_PROTO_UDP), IP_PROTOCOL, net + ihl)
    value[v4 & (proto != IP_PROTO_UDP)] = proto[v4 & (proto != IP_PROTO_UDP)]
    udp4 = v4 & (proto == IP_PROTO_UDP) & (net + ihl <= frame_len)
    fragment = cols["ip.frag_offset"] != 0
    put(udp4 & fragment, FRAGMENT, net + ihl)
    put(udp4 & ~fragment & has("udp") & (dport != _ROCE_PORT), NOT_ROCE, net + ihl + 8)
    v6 = ((ethernet & (ethertype == ETHERTYPE_IPV6)) | raw_ip) & has("ipv6")
    v6 &= ~_any_of(nxt, IPV6_EXTENSIONS)
    put(v6 & (nxt != IP_PROTO_UDP), IPV6_NEXT, net + 40)
    value[v6 & (nxt != IP_PROTO_UDP)] = nxt[v6 & (nxt != IP_PROTO_UDP)]
    put(v6 & (nxt == IP_PROTO_UDP) & has("udp") & (dport != _ROCE_PORT), NOT_ROCE, net + 48)

    is_other = category >= NOT_PARSED
    options = has("ip") & (hdr_len > 5) & (proto == IP_PROTO_UDP)
    key = (headers | (opcode.astype(np.uint64) << np.uint64(32))
           | (kind.astype(np.uint64) << np.uint64(40))
           | (np.minimum(link, 7).astype(np.uint64) << np.uint64(44))
           | (np.minimum(vlans, _MAX_TAGS).astype(np.uint64) << np.uint64(47))
           | ((cols["icrc_ok"].astype(np.int64) + 1).astype(np.uint64) << np.uint64(51))
           | ((cols["vcrc_ok"].astype(np.int64) + 1).astype(np.uint64) << np.uint64(53))
           | ((cols["payload.length"] > 0).astype(np.uint64) << np.uint64(55))
           | (options.astype(np.uint64) << np.uint64(56))
           | (category << np.uint64(57)))
    key[is_other] &= ~np.uint64(0xFF << 32 | 1 << 55)  # one shape whatever the opcode bits
    key &= _relevant(mode)
    key[category == DISSECT] = 0
    extra = {"number": cols["record"] + 1, "reason": value, "options": options,
             "icrc.wire": cols["icrc"].byteswap(), "vcrc.wire": cols["vcrc"].byteswap(),
             "offset.udp": net + np.where(has("ip"), ihl, 40),
             "json.payload": np.where(is_other, np.maximum(frame_len - payload_at, 0),
                                      cols["payload.length"])}
    return key, extra


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
        t.text(str(_ETHERNET_LEN + _TAG_LEN * tag))
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
                   for k, label, fmt in _KEY_FIELDS if k not in _FIELD_NAMES and k in d)


def _syndrome_tree(d: dict[str, Any]) -> str:
    from ibwire.cli.show import derived_text

    return "".join(f"\n      {k} = {derived_text(v)}" for k, v in d.items())


_SYNDROME_TEXTS: dict[str, Callable[[dict[str, Any]], str]] = {
    "line": _syndrome_line, "tree": _syndrome_tree,
    "json": lambda d: "".join(f", {json.dumps(k)}: {json.dumps(v)}" for k, v in d.items())}


@cache
def _head(address_bits: int, when: str | None) -> Block:
    """Number, time and addresses of a line whose headers are ``address_bits``."""
    t = Template()
    t.number("number", "{:6d}")
    t.text(" ")
    if when is None:
        t.seconds("when", 11)
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
    derived = [k for k, _label, _fmt in _KEY_FIELDS if k not in _FIELD_NAMES]
    for key, label, fmt in _KEY_FIELDS:
        if key not in _FIELD_NAMES:  # derived from the AETH syndrome: all at the first
            if key == derived[0] and header_bits >> SLOT["aeth"] & 1:
                t.string("aeth:line")
        elif header_bits >> column(key).slot & 1:
            t.text(f" {label}=" if label else " ")
            t.number(key, fmt)
    return Block(t.ops)


def line(t: Template, shape: Shape, when: str | None) -> None:
    """The summary line (``show.summary``); ``when`` a fixed time text, None for the row's."""
    from ibwire.cli.show import _NAMES

    t.ops.append(_head(shape.headers & _address_bits(), when))
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
        reason = _REASONS[shape.category]
        if "{" in reason:
            t.number("reason", reason)
        else:
            t.text(reason)
        return
    op = opcodes().get(shape.opcode)
    name = op.name if op else f"{opcode_status(shape.opcode)} opcode 0x{shape.opcode:02x}"
    t.text(f"{_NAMES.get(shape.encapsulation, shape.encapsulation)} {name} ")
    t.number("bth.destqp", "QP={:#08x}")
    t.number("bth.psn", " PSN={}")
    t.ops.append(_key_fields(shape.headers & _line_slots()))
    if shape.payload:
        t.number("payload.length", " payload={}")
    t.text(f" ICRC {'ok' if shape.icrc_ok == 1 else 'BAD'}")
    if shape.vcrc_ok >= 0:
        t.text(f" VCRC {'ok' if shape.vcrc_ok == 1 else 'BAD'}")


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
    verdict = {-1: "null", 0: "false", 1: "true"}
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
        if shape.category == IB:
            t.number("icrc", ', "icrc": {}')
        if shape.vcrc_ok >= 0:
            t.number("vcrc", ', "vcrc": {}')
        if shape.known:
            t.text(f', "bth.opcode.name": {json.dumps(opcodes()[shape.opcode].name)}')
        t.number("json.payload", ', "payload.length": {}')
    t.text(f', "icrc_ok": {verdict[shape.icrc_ok]}, "vcrc_ok": {verdict[shape.vcrc_ok]}, '
           '"error": null}')


@cache
def _tree_fields(slot: int, tag: int) -> Block:
    """The tree's lines of the fields of header ``slot`` (VLAN tag ``tag``)."""
    t = Template()
    header = SLOTS[slot]
    for f in header.fields:
        key = header.key(f.name)
        t.text(f"\n      {key} = ")
        if f.fmt is None:  # show.field_text's rule for numbers, as the SMALL op writes them
            t.small(_field(key, tag))
        elif f.fmt == "bytes":
            t.string(f"hex:{key}")
        else:
            t.string(key)
    return Block(t.ops)


def header_tree(t: Template, shape: Shape) -> None:
    """The header tree of ``show -V`` (``show.tree``)."""
    line(t, shape, f"{0:11.6f}")
    places = _places(shape)
    for at, (slot, tag) in enumerate(places):
        header = SLOTS[slot]
        t.text(f"\n  {header.title} (offset ")
        _offset(t, shape, places, at)
        t.text(f", {header.size} bytes)")
        t.ops.append(_tree_fields(slot, tag))
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
        t.number("icrc.wire", "\n  ICRC {:08x}")
        t.text(f" ({'ok' if shape.icrc_ok == 1 else 'BAD'})")
    if shape.vcrc_ok >= 0:
        t.number("vcrc.wire", "\n  VCRC {:04x}")
        t.text(f" ({'ok' if shape.vcrc_ok == 1 else 'BAD'})")


_OUTPUTS: dict[str, Callable[[Template, Shape], None]] = {
    "line": lambda t, shape: line(t, shape, None), "json": json_object, "tree": header_tree}


def compile_shape(mode: str, key: int) -> list[Op | Block]:
    t = Template()
    _OUTPUTS[mode](t, Shape.of(key))
    return t.ops


# ---------------------------------------------------------------- the walk


def _when(cols: dict[str, np.ndarray], start_ns: int) -> np.ndarray:
    """Nanoseconds since ``start_ns`` (int64; the SECONDS op divides as Python would)."""
    stamps = cols["timestamp_ns"]
    limit = 1 << 62  # no int64 overflow below this
    if len(stamps) and abs(start_ns) < limit and int(np.abs(stamps).max()) < limit:
        return stamps - start_ns
    return np.array([max(min(s - start_ns, (1 << 63) - 1), -(1 << 63))
                     for s in stamps.tolist()], np.int64)


_END = {"line": "\n", "json": "\n", "tree": "\n\n"}
_DISSECTED: list[Op] = [(TEXT, "dissected", 0, 0)]


def texts(path: str, args: argparse.Namespace, mode: str) -> Iterator[bytes]:
    """What ``show`` writes for the records of ``path``, a batch at a time, in UTF-8: summary
    lines (mode "line"), JSON objects ("json") or header trees ("tree"), each with its line
    end (an empty line after a tree)."""
    from ibwire.cli.common import json_line, scanned
    from ibwire.cli.show import _COLUMNS, _record, summary, tree
    from ibwire.inspect import inspect

    keys = None if mode != "line" else tuple({*_COLUMNS, *CLASSIFY_KEYS})
    templates = Templates()
    numbered: dict[int, int] = {0: templates.add(_DISSECTED)}
    start_ns: int | None = None
    for batch, cols, _failed in scanned(path, args, fields=keys):
        count = len(cols["record"])
        if not count:
            continue
        if start_ns is None:
            readable = np.flatnonzero(cols["error"] != program.CAPTURE_ERROR)
            if readable.size:
                start_ns = int(cols["timestamp_ns"][readable[0]])
        key, extra = classify(cols, mode)
        extra["when"] = _when(cols, start_ns or 0)
        shapes, inverse = distinct_rows(key.reshape(-1, 1))
        shapes = shapes.ravel()
        for k in shapes.tolist():
            if k not in numbered:
                numbered[k] = templates.add(compile_shape(mode, k))
        of_shape = np.array([numbered[k] for k in shapes.tolist()], np.int32)
        template = of_shape[inverse.reshape(-1)]
        rows_of = _Rows(batch, cols, extra, mode)
        dissected = [""] * count
        for r in np.flatnonzero(key == 0).tolist():
            found = inspect(_record(batch, r))
            dissected[r] = (summary(found, start_ns or 0) if mode == "line"
                            else json_line(found.fields())[:-1] if mode == "json"
                            else tree(found))
        used_ints, used_strs = templates.columns_of(of_shape.tolist())
        ints = [rows_of.ints(n) if n in used_ints else None for n in templates.ints]
        strs = [(dissected if n == "dissected" else rows_of.strs(n)) if n in used_strs
                else None for n in templates.strs]
        starts, ops, pool = templates.flat()
        yield fill(template, starts, ops, pool, ints, strs, _END[mode])
