"""What the batch scanner extracts, derived from the header declarations and specs/ tables.

Both scanner twins (the C engine and the pure-Python one) take their work from here:

* the header *slots*, in a fixed order: Ethernet, the outermost VLAN tag, IPv4, IPv6, UDP, LRH,
  GRH, BTH, every extended header of ``ibwire.headers.EXTENDED``, the MAD and RMPP headers;
* one column per field of each slot, named by the same flat key as ``Packet.fields()``
  (``bth.psn``, ``reth.va``, ``immdt``); numbers are the smallest unsigned dtype that holds the
  field, 16-byte fields (GIDs, IPv6 addresses) are ``(n, 16)`` uint8 rows; for the C twin, each
  field becomes a load-shift-mask instruction computed from its bit layout;
* per opcode, the slots of its extended headers, from ``specs/opcodes.tsv``; per MAD class,
  whether an RMPP header follows, from ``specs/mad_classes.tsv``;
* after the MAD (and RMPP) header, the *views* of :mod:`ibwire.scan.views`: a few fields of
  some MAD attributes (the CM fields that pair connections), each view a slot present when
  the MAD's (MgmtClass, AttributeID) is one of its attributes and the whole attribute fits
  before the ICRC (see :func:`mad_views`).

A slot absent from a packet leaves its columns at 0; the ``headers`` column has bit ``i`` set
when slot ``i`` is present (see :func:`slot_bit`).

The slots' layouts and the tables come from ``_layout.py``, written by :mod:`ibwire.scan.declared`
from the declarations: a scan never loads Construct.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache

import numpy as np

from ibwire.crc._common import KIND_NAMES, SITES
from ibwire.headers.fields import Field, Layout
from ibwire.scan import _layout

SLOTS: tuple[Layout, ...] = tuple(
    Layout(name, title, size, tuple(Field(*f) for f in fields), full_keys)
    for name, title, size, full_keys, fields in _layout.SLOT_LAYOUTS)
"""The header slots' bit layouts, as :mod:`ibwire.scan.declared` derives them from the
declarations (``ibwire.headers``, :mod:`ibwire.scan.views`)."""
SLOT: dict[str, int] = {h.name: i for i, h in enumerate(SLOTS)}
STACKED_SLOTS = frozenset(_layout.STACKED_SLOTS)
"""Headers a frame can carry more than once; their columns hold the outermost."""
MAX_CHAIN: int = _layout.MAX_CHAIN
VIEW_SLOTS = frozenset(_layout.VIEW_SLOTS)
"""Slots of MAD body views (:mod:`ibwire.scan.views`), not headers."""
MAX_VIEWS: int = _layout.MAX_VIEWS
WELL_KNOWN_QPS: tuple[int, ...] = _layout.WELL_KNOWN_QPS
"""QPs whose UD traffic carries MADs (scan.c assumes QP0 and QP1)."""
NO_OPCODE: int = _layout.NO_OPCODE
"""``chain_len`` of a reserved or vendor opcode: its headers after the BTH are unknown."""

#: Columns that do not come from a header field: (name, dtype, meaning).
FIXED: tuple[tuple[str, str, str], ...] = (
    ("record", "i8", "row in the capture, from 0 (messages count from 1)"),
    ("timestamp_ns", "i8", "capture timestamp, ns since the epoch"),
    ("linktype", "u2", "LINKTYPE_ of the record"),
    ("link", "u1", "where the frame starts: ibwire.crc.LINK_CODES, 255 other"),
    ("frame.offset", "i8", "where the frame starts in the scanned buffer"),
    ("frame.len", "u4", "captured bytes"),
    ("frame.orig_len", "u4", "bytes on the wire"),
    ("encapsulation", "u1", "ibwire.crc.KIND_NAMES"),
    ("headers", "u4", "bit i set: header slot i present (program.SLOTS)"),
    ("vlan.count", "u1", "VLAN tags (vlan.* columns hold the outermost)"),
    ("ecn", "i1", "ECN bits of the IPv4 TOS / IPv6 or GRH traffic class, -1 none"),
    ("offset.network", "i4", "IP, GRH (RoCEv1) or LRH offset in the frame, -1 none"),
    ("offset.bth", "i4", "BTH offset, -1 none"),
    ("offset.payload", "i4", "payload offset (after ETHs, MAD, RMPP), -1 none"),
    ("payload.length", "i4", "payload bytes, pad excluded, -1 none"),
    ("offset.icrc", "i4", "ICRC offset, -1 none"),
    ("offset.vcrc", "i4", "VCRC offset, -1 none"),
    ("icrc", "u4", "ICRC as on the wire (little-endian value)"),
    ("vcrc", "u2", "VCRC as on the wire"),
    ("icrc_ok", "i1", "1 verified, 0 mismatch, -1 none (or an error leaves its place unknown)"),
    ("vcrc_ok", "i1", "1 verified, 0 mismatch, -1 none (or an error leaves its place unknown)"),
    ("cut", "u1", "CRCs placed past the bytes a snap length kept: 1 ICRC, 2 VCRC (not verifiable)"),
    ("error", "u1", "ERROR_NAMES: ok, not_ib, truncated, malformed, unsupported, capture"),
    ("error.site", "u1", "where: SITES (header, field)"),
    ("error.offset", "i4", "byte offset of the field at fault, in the frame"),
)

#: Encapsulations (the ``encapsulation`` column): the CRC walker's kinds.
SCAN_KIND_NAMES = KIND_NAMES
#: Each kind as ``ibwire.parse`` names a packet's encapsulation (``Packet.encapsulation``).
PACKET_ENCAPSULATIONS: dict[str, str] = {
    "ib_lrh": "ib_local", "ib_grh": "ib_global", "ib_raw": "ib_raw", "ib_ip": "ib_raw",
    "rocev1": "rocev1", "rocev2_ipv4": "rocev2_ipv4", "rocev2_ipv6": "rocev2_ipv6"}

#: Errors: the CRC engine's codes, then a capture-level (record) error.
ERROR_NAMES = ("ok", "not_ib", "truncated", "malformed", "unsupported", "capture")
CAPTURE_ERROR = 5

#: Fault sites: the CRC walker's, then "slot header runs past the ICRC", then PadCnt.
SITE_SLOT_BASE = len(SITES)
SITE_PADCNT = SITE_SLOT_BASE + len(SLOTS)
SCAN_SITES: tuple[tuple[str, str], ...] = (
    *SITES, *((h.title, "header") for h in SLOTS), ("BTH", "padcnt"))

# Load widths a field can be read with (see Instruction).
_LOADS = (1, 2, 4, 8)


@dataclass(frozen=True)
class Column:
    """A column filled from one header field."""

    name: str
    slot: int
    field: str
    dtype: str  # numpy dtype; "V16" for 16-byte fields
    width: int  # bytes per value in the column (1, 2, 4, 8 or 16)


@dataclass(frozen=True)
class Instruction:
    """How the C twin reads a field: load ``load`` bytes big-endian from byte ``at`` of the
    header (never past its end), shift right by ``shift``, mask; ``load`` 16 copies 16 bytes."""

    column: int
    slot: int
    at: int
    load: int
    shift: int
    mask: int
    width: int


def slot_bit(name: str) -> int:
    """The bit of header ``name`` (``"reth"``) in the ``headers`` column."""
    return 1 << SLOT[name]


def _width(bits: int) -> tuple[str, int]:
    for size, dtype in ((8, "u1"), (16, "u2"), (32, "u4"), (64, "u8")):
        if bits <= size:
            return dtype, size // 8
    if bits == 128:
        return "V16", 16
    raise ValueError(f"no column type for a {bits}-bit field")


@cache
def columns() -> tuple[Column, ...]:
    """Every header-field column, slot by slot, in declaration order."""
    out = []
    for slot, header in enumerate(SLOTS):
        for f in header.fields:
            dtype, width = _width(f.bits)
            out.append(Column(header.key(f.name), slot, f.name, dtype, width))
    return tuple(out)


@cache
def field_bits(name: str) -> int:
    """The declared width in bits of header field ``name`` (``"aeth.msn"``: 24)."""
    c = column(name)
    return next(f.bits for f in SLOTS[c.slot].fields if f.name == c.field)


@cache
def column(name: str) -> Column:
    """The header-field column called ``name`` (``"bth.psn"``)."""
    for c in columns():
        if c.name == name:
            return c
    raise KeyError(f"no scanner column {name!r}")


def _instruction(index: int, column: Column) -> Instruction:
    header = SLOTS[column.slot]
    f = header.by_name[column.field]
    first_bit = header.size * 8 - f.shift - f.bits  # from the header's first bit
    first, end = first_bit // 8, (first_bit + f.bits + 7) // 8
    if column.width == 16:
        return Instruction(index, column.slot, first, 16, 0, 0, 16)
    for load in _LOADS:
        if load < end - first:
            continue
        # the load ends with the field if it can, else starts with it; inside the header
        at = end - load if end >= load else first
        if at + load <= header.size:
            shift = (at + load) * 8 - first_bit - f.bits
            return Instruction(index, column.slot, at, load, shift, f.mask, column.width)
    raise ValueError(f"{column.name}: no load width fits")


@cache
def instructions() -> tuple[Instruction, ...]:
    return tuple(_instruction(i, c) for i, c in enumerate(columns()))


@cache
def opcode_chains() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(chain uint8[256, MAX_CHAIN] of slots, chain_len uint8[256] (NO_OPCODE: unknown),
    flags uint8[256]: bit 0 UD transport, bit 1 carries a payload), from ``specs/opcodes.tsv``
    (read-only arrays)."""
    return (np.frombuffer(_layout.CHAIN, np.uint8).reshape(256, MAX_CHAIN),
            np.frombuffer(_layout.CHAIN_LEN, np.uint8), np.frombuffer(_layout.OP_FLAGS, np.uint8))


@cache
def rmpp_classes() -> np.ndarray:
    """uint8[256]: 1 where a MAD of that management class carries an RMPP header (read-only)."""
    return np.frombuffer(_layout.RMPP, np.uint8)


def mad_views() -> tuple[tuple[int, int], ...]:
    """(MgmtClass << 16 | AttributeID, view slot) for every attribute a view reads, sorted:
    the view's slot is put at the MAD body (after the MAD and RMPP headers) when the MAD has
    that class and attribute, the view (the whole attribute) fits before the ICRC, and the
    capture kept the bytes its fields are in (``view_extents``)."""
    return _layout.MAD_VIEWS


@cache
def view_extents() -> dict[int, int]:
    """The bytes of its attribute each view slot reads (its fields as the C twin loads them):
    a capture that cut the MAD body still gives a view that ends within the bytes kept."""
    extents: dict[int, int] = {}
    for ins in instructions():
        if ins.slot in VIEW_SLOTS:
            extents[ins.slot] = max(extents.get(ins.slot, 0), ins.at + ins.load)
    return extents


def site_name(site: int) -> tuple[str, str]:
    """(header, field) of a fault site."""
    return SCAN_SITES[site] if 0 <= site < len(SCAN_SITES) else ("", "")


@cache
def _select(fields: frozenset[str] | None) -> tuple[int, ...]:
    cols = columns()
    if fields is None:
        return tuple(range(len(cols)))
    by_header = {h.name for h in SLOTS}
    names = {c.name for c in cols}
    unknown = sorted(f for f in fields if f not in names and f not in by_header)
    if unknown:
        raise ValueError(f"no scanner column {unknown[0]!r}: header-field keys such as "
                         f"'bth.psn', or header names such as 'reth'")
    return tuple(i for i, c in enumerate(cols)
                 if c.name in fields or SLOTS[c.slot].name in fields)


@dataclass(frozen=True)
class Unverified:
    """``fields`` for the scanners with the CRC verdicts left out: the CRCs are placed and
    read from the wire (``icrc``, ``vcrc``, their offsets) but not computed, and
    ``icrc_ok``/``vcrc_ok`` are -1, as where there is none. For readers that do not look at
    verdicts (``ibwire export`` without those columns): a tenth of a 1 KiB packet's scan."""

    fields: object = None


def verdicts(fields: object) -> bool:
    """Whether a scan of ``fields`` computes the CRC verdicts (not :class:`Unverified`)."""
    return not isinstance(fields, Unverified)


def select(fields: object = None) -> tuple[int, ...]:
    """Indexes into :func:`columns` of the header-field columns wanted: all for None, else
    the named keys (``"bth.psn"``) and every field of the named headers (``"reth"``); the
    same for :class:`Unverified` ones."""
    if isinstance(fields, Unverified):
        fields = fields.fields
    if fields is None:
        return _select(None)
    if isinstance(fields, str):
        fields = (fields,)
    return _select(frozenset(fields))  # type: ignore[arg-type]


COLUMN_SKEW = 3 * 64
"""Bytes between columns: three cache lines, so consecutive columns fall in different sets."""


def empty_columns(count: int, selected: tuple[int, ...]) -> dict[str, np.ndarray]:
    """Zeroed columns for ``count`` rows: the fixed ones and the ``selected`` header-field
    ones (the -1 defaults are the twins' job). One allocation holds them all, widest first
    so that every column is aligned; each column is a view of it.

    Columns are ``COLUMN_SKEW`` bytes apart: a row is written across every column at once,
    and columns of n * 2**k bytes that started back to back would all map to the same cache
    sets (the scanner wrote its 128 columns at 3.8 M rows/s packed, 5.2 M skewed)."""
    shapes: list[tuple[str, np.dtype, tuple[int, ...]]] = [
        (name, np.dtype(dtype), (count,)) for name, dtype, _ in FIXED]
    cols = columns()
    for i in selected:
        c = cols[i]
        shapes.append((c.name, np.dtype(np.uint8), (count, 16)) if c.width == 16
                      else (c.name, np.dtype(c.dtype), (count,)))
    order = sorted(shapes, key=lambda s: -s[1].itemsize)
    sizes = [s[1].itemsize * int(np.prod(s[2])) for s in order]
    block = np.zeros(sum(sizes) + COLUMN_SKEW * len(sizes) + 8, np.uint8)
    out: dict[str, np.ndarray] = {}
    at = 0
    for (name, dtype, shape), size in zip(order, sizes, strict=True):
        out[name] = block[at:at + size].view(dtype).reshape(shape)
        at += size + COLUMN_SKEW
    return {name: out[name] for name, _, _ in shapes}  # in the documented order
