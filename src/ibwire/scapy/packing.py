"""A fixed-layout header packed at once: one integer from the layer's field values.

scapy's ``Packet.self_build`` asks each field in turn for its bytes (``addfield``). When the
fields are numbers and fixed-size addresses laid end to end, the header is the numbers
shifted into one integer, the addresses' bytes in between. A :data:`Plan` says where each
field goes; :func:`pack` fills it from the values, and gives None whenever a number holds
anything but an ``int`` in its range (a name, a ``RandField``, a ``RawVal``, a bool...), or
None where its field would not write 0, or when an address does not write its size: the
caller then has scapy's generic ``self_build`` build (or raise) instead. Addresses are written
by their own field's ``addfield``, as scapy does.

Plans come from the Construct bit layout of an :class:`ibwire.headers.Header` for ibwire's
layers (:func:`header_plan`), and from ``fields_desc`` for scapy's IP, IPv6 and UDP, whose
headers the RoCEv2 ICRC covers (:func:`fields_plan`, used by :func:`packed`). Property tests
(tests/scapy/test_fast_paths.py) prove that ``pack`` gives the generic bytes for arbitrary
values, out-of-range and explicit-length ones included.
"""

from __future__ import annotations

import re
from typing import Any

from scapy.fields import (
    Emph,
    Field,
    FlagsField,
    FlagValue,
    IPField,
    PacketListField,
    SourceIPField,
    _BitField,
)
from scapy.layers.inet import DestIPField
from scapy.packet import Packet
from scapy.utils import inet_aton

from ibwire.headers import Header
from ibwire.scapy.cloning import has_generic
from ibwire.scapy.fields import scapy_name

#: (name, shift, mask, None writes 0, a FlagsField) of a number field.
Number = tuple[str, int, int, bool, bool]
#: (name, shift, size in bytes, field, shortcut) of an address field; the shortcut gives the
#: bytes of the values it knows (else None), without the field's ``addfield``.
Address = tuple[str, int, int, Any, Any]
#: Bytes of the header, its numbers, its addresses.
Plan = tuple[int, tuple[Number, ...], tuple[Address, ...]]

_UNSIGNED = {"!B": 8, "!H": 16, "!I": 32, "!Q": 64}
_OCTETS = re.compile(r"!(\d+)s")
#: The ``i2m`` of the IPv4 address fields: ``inet_aton(plain_str(x))`` for any x but None.
_IPV4_I2M = (IPField.i2m, SourceIPField.i2m, DestIPField.i2m)


def _none_is_zero(field: Any) -> bool:
    return type(field).i2m is Field.i2m


def _ipv4_text(value: Any) -> bytes | None:
    """What an IPv4 address field writes for an address given as text."""
    return inet_aton(value) if isinstance(value, str) else None


def _empty_list(value: Any) -> bytes | None:
    """What a ``PacketListField`` writes for an empty list: nothing."""
    return b"" if type(value) is list and not value else None


def _address(name: str, shift: int, size: int, field: Any) -> Address:
    kind = type(field)
    shortcut = None
    if size == 4 and kind.i2m in _IPV4_I2M and kind.addfield is Field.addfield:
        shortcut = _ipv4_text
    elif size == 0 and kind.addfield is PacketListField.addfield:
        shortcut = _empty_list
    return name, shift, size, field, shortcut


def header_plan(cls: type[Packet]) -> Plan:
    """The plan of an ibwire layer, from the bit layout of its ``header`` declaration."""
    header: Header = cls.header  # type: ignore[attr-defined]
    by_name = {f.name: f for f in cls.fields_desc}
    numbers: list[Number] = []
    addresses: list[Address] = []
    for f in header.fields:
        name = scapy_name(f.name)
        field = by_name[name]
        if f.fmt is None:
            numbers.append((name, f.shift, f.mask, _none_is_zero(field), False))
        else:
            addresses.append(_address(name, f.shift, f.bits // 8, field))
    return header.size, tuple(numbers), tuple(addresses)


def _width(field: Any) -> tuple[str, int] | None:
    """("number" or "address", bits) of a field scapy writes as such, else None."""
    kind = type(field)
    if isinstance(field, _BitField):
        if kind.addfield is _BitField.addfield and not field.rev and _none_is_zero(field):
            return "number", field.size
        return None
    if kind.addfield is not Field.addfield:
        return None
    if field.fmt in _UNSIGNED and _none_is_zero(field):
        return "number", _UNSIGNED[field.fmt]
    octets = _OCTETS.fullmatch(field.fmt)
    return ("address", 8 * int(octets.group(1))) if octets else None


def fields_plan(cls: type[Packet]) -> Plan | None:
    """The plan of a scapy layer from its ``fields_desc``, or None if it has none.

    Every field must be a number (a bit field, or an unsigned big-endian struct field whose
    ``i2m`` is ``Field.i2m``) or a fixed-size string/address field, bit fields filling whole
    bytes; the last may be of any kind, and is then packed only while it writes nothing
    (IP ``options`` empty).
    """
    if not has_generic(cls, "self_build"):
        return None
    widths = []
    for index, field in enumerate(cls.fields_desc):
        inner = field.fld if isinstance(field, Emph) else field
        width = _width(inner)
        if width is None:
            if index < len(cls.fields_desc) - 1:
                return None
            width = ("address", 0)
        widths.append((inner, *width))
    total = sum(bits for _, _, bits in widths)
    numbers: list[Number] = []
    addresses: list[Address] = []
    used = 0
    for field, kind, bits in widths:
        if kind == "address" and used % 8:
            return None
        used += bits
        if kind == "number":
            numbers.append((field.name, total - used, (1 << bits) - 1, True,
                            isinstance(field, FlagsField)))
        else:
            addresses.append(_address(field.name, total - used, bits // 8, field))
    if total % 8:
        return None
    return total // 8, tuple(numbers), tuple(addresses)


def pack(layer: Packet, plan: Plan) -> bytes | None:
    """The header bytes of ``layer`` from its field values, or None (build them generically)."""
    size, numbers, addresses = plan
    values = {**layer.default_fields, **layer.overloaded_fields, **layer.fields}
    word = 0
    for name, shift, mask, none_is_zero, flags in numbers:
        value = values[name]
        if type(value) is not int:
            if value is None and none_is_zero:
                continue
            if not (flags and type(value) is FlagValue and type(value.value) is int):
                return None
            value = value.value
        if not 0 <= value <= mask:
            return None
        word |= value << shift
    for name, shift, length, field, shortcut in addresses:
        value = values[name]
        try:
            wire = None if shortcut is None else shortcut(value)
            if wire is None:
                wire = field.addfield(layer, b"", value)
        except Exception:  # scapy's path raises it again, naming the field
            return None
        if type(wire) is not bytes or len(wire) != length:
            return None
        if length:
            word |= int.from_bytes(wire, "big") << shift
    return word.to_bytes(size, "big")


_FIELDS_PLANS: dict[type[Packet], Plan | None] = {}


def packed_header(layer: Packet) -> bytes | None:
    """``Packet.self_build``'s bytes for ``layer`` if its class has a plan and its values
    allow packing them at once, else None (also when a raw packet cache may answer)."""
    cls = type(layer)
    try:
        plan = _FIELDS_PLANS[cls]
    except KeyError:
        plan = _FIELDS_PLANS[cls] = fields_plan(cls)
    if plan is None or layer.raw_packet_cache is not None:
        return None
    return pack(layer, plan)


def packed(layer: Packet) -> bytes:
    """``layer.self_build()``, packed at once when its class has a plan and its values allow."""
    header = packed_header(layer)
    return layer.self_build() if header is None else header
